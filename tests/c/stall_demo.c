/*
 * stall_demo: what stalls a single-threaded hub, and what does not.
 *
 * usage: stall_demo MODE [MS [BOUNCES]]
 *   cpu     a thread named "spin" computes for MS ms (default 1000) in
 *           busy_loop() without any call that could yield (greenhook
 *           preempts it by signal, unless GREENHOOK_PREEMPT=0)
 *   raw     a thread sleeps MS ms with a raw syscall(SYS_nanosleep), which
 *           no symbol hook can see
 *   hooked  a thread sleeps MS ms with nanosleep(), which greenhook hooks
 *   handed  "spin" and a thread named "partner" (created in that order,
 *           after the ticker) bounce sched_yield() between them BOUNCES
 *           times (default 100001), then "spin" sleeps as in raw mode
 * Meanwhile a ticker thread wakes every 100 ms, for the whole run.
 *
 * stdout: "ok MODE" (deterministic)
 * stderr: "tick_ms=<t>" for each tick (time since start), then the
 *         ticker's report (ticker.h): late.time_ms=<worst lateness>.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TICKER_MS 100
#define TICKER_TRACE
#include "ticker.h"

static int ms = 1000;
static int bounces = 100001;

/* Milliseconds on CLOCK_MONOTONIC without calling into libc: a system call
 * made with the instruction itself, which no hook sees, so that the loop
 * below calls nothing a hook could end its time slice at (a pure
 * computation, as far as greenhook can tell). */
static long long raw_now_ms(void)
{
#if defined(__x86_64__)
    struct timespec t;
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"((long)SYS_clock_gettime), "D"((long)CLOCK_MONOTONIC), "S"(&t)
                     : "rcx", "r11", "memory");
    (void)r;
    return (long long)t.tv_sec * 1000LL + t.tv_nsec / 1000000LL;
#else
    return now_ms();
#endif
}

__attribute__((noinline)) static unsigned long busy_loop(long long until)
{
    unsigned long x = 1;
    while (raw_now_ms() < until)
        for (int i = 0; i < bounces; i++)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

static const char *mode;
static volatile int spinning;

static void *partner(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "partner");
    while (!spinning)
        sched_yield();
    return NULL;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "spin");
    usleep(250000); /* let the ticker run a little first */
    if (!strcmp(mode, "cpu")) {
        volatile unsigned long r = busy_loop(now_ms() + ms);
        (void)r;
    } else {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        pthread_t p;
        if (!strcmp(mode, "handed")) {
            pthread_create(&p, NULL, partner, NULL);
            for (int i = 0; i < bounces; i++)
                sched_yield();
            spinning = 1;
        }
        if (!strcmp(mode, "raw") || !strcmp(mode, "handed"))
            syscall(SYS_nanosleep, &ts, NULL);
        else
            nanosleep(&ts, NULL);
        if (!strcmp(mode, "handed"))
            pthread_join(p, NULL);
    }
    usleep(250000);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "cpu") && strcmp(argv[1], "raw") && strcmp(argv[1], "hooked") &&
                     strcmp(argv[1], "handed"))) {
        fprintf(stderr, "usage: stall_demo cpu|raw|hooked|handed [MS [BOUNCES]]\n");
        return 2;
    }
    mode = argv[1];
    if (argc > 2)
        ms = atoi(argv[2]);
    if (argc > 3)
        bounces = atoi(argv[3]);
    pthread_t a = ticker_start(), b;
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(b, NULL);
    ticker_stop(a);
    printf("ok %s\n", mode);
    return 0;
}
