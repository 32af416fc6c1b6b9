// A thread's end by pthread_exit or cancellation unwinds its stack in
// glibc: C++ destructors of its frames run (a lock_guard lets its mutex
// go), `catch (...)` blocks see the unwinding and must rethrow it, then
// thread_local destructors run. An exception nobody catches in a thread
// reaches std::terminate; backtrace() lists the thread's frames only.
//
// Modes (each prints its log; the differential test compares it with the
// unpatched run's):
//   raii      pthread_exit three frames down, under a lock_guard and
//             objects that log their destructors; the mutex is free after
//   cancel    cancellation in read, in a condvar wait under unique_lock
//             (the wait takes the mutex back, the destructor lets it go),
//             in nanosleep; catch (abi::__forced_unwind&) and catch (...)
//             that rethrow
//   signal    pthread_exit in a signal handler run in the thread's pause
//   once      pthread_exit in a pthread_once routine: the next call runs it
//   uncaught  an exception leaves a thread's start routine: the terminate
//             handler runs (and exits 5)
//   swallow   catch (...) that does not rethrow a cancellation: glibc's
//             "FATAL: exception not rethrown" and abort
//   backtrace backtrace() in a thread: its frames, none of main's
//   main      pthread_exit in main, two frames down, beside a running
//             thread: main's destructors and catch (...) run too
// link: -rdynamic

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>

static void say(const char *what) {
    fputs(what, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

struct Log {
    const char *name;
    ~Log() {
        printf("destructor %s\n", name);
        fflush(stdout);
    }
};

static thread_local struct Tls {
    bool used = false;
    ~Tls() {
        if (used)
            say("thread_local destructor");
    }
} tls;

static void check(bool ok, const char *what) {
    if (!ok) {
        printf("FAIL: %s\n", what);
        exit(1);
    }
}

static std::mutex m;

static void __attribute__((noinline)) third() {
    Log l{"third frame"};
    pthread_exit((void *)42);
}

static void __attribute__((noinline)) second() {
    Log l{"second frame"};
    third();
}

static void *raii(void *) {
    tls.used = true;
    Log outer{"start routine"};
    std::lock_guard<std::mutex> g(m);
    second();
    return nullptr;
}

static int fds[2];
static std::mutex cm;
static std::condition_variable cv;

static void *in_read(void *) {
    Log l{"in_read"};
    try {
        char c;
        ssize_t n = read(fds[0], &c, 1);
        printf("read returned %zd\n", n);
    } catch (abi::__forced_unwind &) {
        say("in_read: forced unwind seen, rethrown");
        throw;
    }
    return nullptr;
}

static void *in_wait(void *) {
    Log l{"in_wait"};
    std::unique_lock<std::mutex> lk(cm);
    try {
        cv.wait(lk);
    } catch (...) {
        say("in_wait: catch (...) rethrows");
        check(lk.owns_lock(), "the cancelled wait holds the mutex again");
        throw;
    }
    return nullptr;
}

static void *in_sleep(void *) {
    Log l{"in_sleep"};
    struct timespec ts = {10, 0};
    nanosleep(&ts, nullptr);
    return nullptr;
}

static void cancel_one(void *(*f)(void *)) {
    pthread_t t;
    pthread_create(&t, nullptr, f, nullptr);
    usleep(50000);
    pthread_cancel(t);
    void *r;
    pthread_join(t, &r);
    check(r == PTHREAD_CANCELED, "joined with PTHREAD_CANCELED");
}

static void on_usr1(int) {
    Log l{"handler"};
    pthread_exit((void *)7);
}

static void *paused(void *) {
    Log l{"paused"};
    pause();
    say("FAIL: back from pause");
    return nullptr;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_runs;

static void init_routine() {
    Log l{"init routine"};
    if (++once_runs == 1)
        pthread_exit(nullptr);
}

static void *run_once(void *) {
    pthread_once(&once, init_routine);
    say("run_once: pthread_once returned");
    return nullptr;
}

static void on_terminate() {
    try {
        throw;
    } catch (std::exception &e) {
        printf("terminate: %s\n", e.what());
    }
    fflush(stdout);
    _exit(5);
}

static void *thrower(void *) {
    Log l{"thrower"};
    throw std::runtime_error("nobody catches this");
}

static void *swallower(void *) {
    try {
        pause();
    } catch (...) {
        say("swallower: catch (...) returns");
    }
    return nullptr;
}

static void *tracer(void *) {
    void *frames[64];
    int n = backtrace(frames, 64);
    int mains = 0;
    for (int i = 0; i < n; i++) {
        Dl_info info;
        if (dladdr(frames[i], &info) && info.dli_sname && strcmp(info.dli_sname, "main") == 0)
            mains++;
    }
    printf("frames: %s; main's among them: %d\n", n >= 2 && n < 12 ? "a few" : "unexpected", mains);
    return nullptr;
}

static void *late(void *) {
    usleep(50000);
    say("late thread: still running after main's pthread_exit");
    return nullptr;
}

static void __attribute__((noinline)) exit_main() {
    Log l{"main's callee"};
    pthread_exit(nullptr);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    pthread_t t;
    void *r;
    if (!strcmp(mode, "raii")) {
        pthread_create(&t, nullptr, raii, nullptr);
        pthread_join(t, &r);
        printf("joined: %ld\n", (long)r);
        check(m.try_lock(), "the lock_guard's mutex is free");
        m.unlock();
    } else if (!strcmp(mode, "cancel")) {
        check(pipe(fds) == 0, "pipe");
        cancel_one(in_read);
        cancel_one(in_wait);
        check(cm.try_lock(), "the condvar's mutex is free");
        cm.unlock();
        cancel_one(in_sleep);
    } else if (!strcmp(mode, "signal")) {
        signal(SIGUSR1, on_usr1);
        pthread_create(&t, nullptr, paused, nullptr);
        usleep(50000);
        pthread_kill(t, SIGUSR1);
        pthread_join(t, &r);
        printf("joined: %ld\n", (long)r);
    } else if (!strcmp(mode, "once")) {
        pthread_create(&t, nullptr, run_once, nullptr);
        pthread_join(t, nullptr);
        pthread_create(&t, nullptr, run_once, nullptr);
        pthread_join(t, nullptr);
        printf("init routine runs: %d\n", once_runs);
    } else if (!strcmp(mode, "uncaught")) {
        std::set_terminate(on_terminate);
        pthread_create(&t, nullptr, thrower, nullptr);
        pthread_join(t, nullptr);
        say("FAIL: joined");
    } else if (!strcmp(mode, "swallow")) {
        pthread_create(&t, nullptr, swallower, nullptr);
        usleep(50000);
        pthread_cancel(t);
        pthread_join(t, nullptr);
        say("FAIL: joined");
    } else if (!strcmp(mode, "backtrace")) {
        pthread_create(&t, nullptr, tracer, nullptr);
        pthread_join(t, nullptr);
    } else if (!strcmp(mode, "main")) {
        Log l{"main"};
        pthread_create(&t, nullptr, late, nullptr);
        try {
            exit_main();
        } catch (...) {
            say("main: catch (...) rethrows");
            throw;
        }
    } else {
        fprintf(stderr, "usage: exit_unwinds raii|cancel|signal|once|uncaught|swallow|backtrace|main\n");
        return 2;
    }
    say("done");
    return 0;
}
