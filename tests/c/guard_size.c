/* pthread_attr_setguardsize: the guard is as large as asked, and
 * pthread_getattr_np reports it as glibc does (whole pages; 0 where the
 * caller gave the stack). A thread with a 64 KiB guard then writes 8 KiB
 * below its stack, past a one-page guard: that must fault in its guard
 * (a SIGSEGV handler on an alternate stack says so and ends the process),
 * not land in whatever lies below. Built without stack-clash probes. */
// cflags: -fno-stack-clash-protection
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uintptr_t guard_lo, guard_hi;

static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    const char *m = a >= guard_lo && a < guard_hi ? "fault in the guard\n" : "fault elsewhere\n";
    write(1, m, strlen(m));
    _exit(0);
}

static void *report(void *arg) {
    pthread_attr_t a;
    size_t g = 1;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getguardsize(&a, &g);
    pthread_attr_destroy(&a);
    printf("%s: guard %zu\n", (const char *)arg, g);
    return NULL;
}

static void run(const char *name, size_t guard, int own_stack) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (guard != (size_t)-1) pthread_attr_setguardsize(&a, guard);
    if (own_stack) pthread_attr_setstack(&a, malloc(1 << 20), 1 << 20);
    pthread_t t;
    pthread_create(&t, &a, report, (void *)name);
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);
}

static void __attribute__((noinline)) below(size_t n) {
    volatile char *p = __builtin_alloca(n);
    p[0] = 1; /* the lowest byte only: no probe on the way down */
}

static void *overflow(void *arg) {
    (void)arg;
    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
    sigaltstack(&ss, NULL);
    pthread_attr_t a;
    void *lo;
    size_t size, g;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &lo, &size);
    pthread_attr_getguardsize(&a, &g);
    pthread_attr_destroy(&a);
    guard_hi = (uintptr_t)lo;
    guard_lo = guard_hi - g;
    char here;
    below((uintptr_t)&here - guard_hi + 8192);
    printf("no fault\n");
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    run("default", (size_t)-1, 0);
    run("64 KiB", 64 << 10, 0);
    run("none", 0, 0);
    run("5000 bytes", 5000, 0);
    run("own stack, 64 KiB asked", 64 << 10, 1);

    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
    sigaction(SIGSEGV, &sa, NULL);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 << 10);
    pthread_attr_setguardsize(&a, 64 << 10);
    pthread_t t;
    pthread_create(&t, &a, overflow, NULL);
    pthread_join(t, NULL);
    return 1;
}
