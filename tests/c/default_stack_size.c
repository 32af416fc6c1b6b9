/* pthread_setattr_default_np sets the stack size of threads made without
 * an attribute. Run under RLIMIT_STACK = 1000 KiB (the program re-execs
 * itself so that glibc starts with it), a first thread is made, the
 * default is raised to 4 MiB, and a thread recurses through ~2.5 MiB of
 * stack. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static int depth(int n) {
    volatile char frame[1024];
    memset((char *)frame, n, sizeof frame);
    return n == 0 ? frame[5] : depth(n - 1) + frame[7] - n;
}

static void *nothing(void *arg) { return arg; }

static void *deep(void *arg) {
    (void)arg;
    pthread_attr_t a;
    size_t size = 0;
    void *lo;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &lo, &size);
    pthread_attr_destroy(&a);
    printf("stack at least 4 MiB: %s\n", size >= (4u << 20) - 65536 ? "yes" : "no");
    printf("recursion: %d\n", depth(2500));
    return NULL;
}

int main(int argc, char **argv) {
    if (argc == 1) {
        struct rlimit r = {1000 * 1024, RLIM_INFINITY};
        if (setrlimit(RLIMIT_STACK, &r)) return 2;
        execl("/proc/self/exe", argv[0], "child", (char *)NULL);
        return 3;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL)) return 5;
    pthread_join(t, NULL);
    pthread_attr_t d;
    pthread_attr_init(&d);
    pthread_attr_setstacksize(&d, 4u << 20);
    if (pthread_setattr_default_np(&d)) return 4;
    pthread_attr_destroy(&d);
    pthread_attr_t q;
    size_t s = 0;
    pthread_getattr_default_np(&q);
    pthread_attr_getstacksize(&q, &s);
    printf("default stack %zu KiB\n", s / 1024);
    if (pthread_create(&t, NULL, deep, NULL)) return 5;
    pthread_join(t, NULL);
    return 0;
}
