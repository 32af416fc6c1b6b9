// What libstdc++ decides from glibc's state and pthread_once, with threads
// as fibers. Modes (each prints its log; the differential test compares it
// with the unpatched run's):
//   single       __libc_single_threaded before and after a pthread_create
//                (glibc clears it for good; libstdc++ reads it)
//   static_init  two threads meet in a function-local static's constructor,
//                which sleeps: the second waits for the first (with the
//                flag still set, libstdc++ threw recursive_init_error)
//   stop         a thread's std::stop_callback runs in request_stop() on
//                main, and its destructor in the thread waits for that (it
//                waited for ever)
//   call_once    a std::call_once whose callable throws: the exception
//                reaches the caller and the next call_once runs (the flag
//                was left "in progress": a deadlock)
// cflags: -std=c++20

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <thread>

static void *nothing(void *) {
    return nullptr;
}

struct Slow {
    int v;
    Slow() {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        v = 7;
    }
};

static int get() {
    static Slow s;
    return s.v;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "single")) {
        printf("before: %d\n", __libc_single_threaded);
        pthread_t t;
        pthread_create(&t, nullptr, nothing, nullptr);
        pthread_join(t, nullptr);
        printf("after: %d\n", __libc_single_threaded);
    } else if (!strcmp(mode, "static_init")) {
        int a = 0, b = 0;
        std::thread ta([&] { a = get(); });
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::thread tb([&] { b = get(); });
        ta.join();
        tb.join();
        printf("a %d, b %d\n", a, b);
    } else if (!strcmp(mode, "stop")) {
        std::stop_source ss;
        std::thread t([&] {
            std::stop_callback cb(ss.get_token(), [] { puts("callback ran"); });
            while (!ss.stop_requested())
                usleep(1000);
        });
        usleep(20000);
        ss.request_stop();
        t.join();
        puts("joined");
    } else if (!strcmp(mode, "call_once")) {
        std::once_flag f;
        try {
            std::call_once(f, [] { throw std::runtime_error("first"); });
        } catch (std::exception &e) {
            printf("caught %s\n", e.what());
        }
        std::call_once(f, [] { puts("second call ran"); });
        std::thread t([&] { std::call_once(f, [] { puts("FAIL: third call ran"); }); });
        t.join();
    } else {
        fprintf(stderr, "usage: libstdcxx_threads single|static_init|stop|call_once\n");
        return 2;
    }
    puts("done");
    return 0;
}
