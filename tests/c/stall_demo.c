/*
 * stall_demo: what stalls a single-threaded hub, and what does not.
 *
 * usage: stall_demo MODE [MS [BOUNCES]]
 *   cpu     a thread named "spin" computes for MS ms (default 1000) in
 *           busy_loop() without any call that could yield
 *   raw     a thread sleeps MS ms with a raw syscall(SYS_nanosleep), which
 *           no symbol hook can see
 *   hooked  a thread sleeps MS ms with nanosleep(), which greenhook hooks
 *   handed  "spin" and a thread named "partner" (created in that order,
 *           after the ticker) bounce sched_yield() between them BOUNCES
 *           times (default 100001), then "spin" sleeps as in raw mode
 * Meanwhile a ticker thread wakes every 100 ms, for the whole run.
 *
 * stdout: "ok MODE" (deterministic)
 * stderr: "tick_ms=<t>" for each tick (time since start), then
 *         "max_late_ms=<n>": how late the latest tick was.
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

static double t0;
static volatile int done;
static int ms = 1000;
static int bounces = 100001;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *ticker(void *arg)
{
    (void)arg;
    double max_late = 0;
    double next = now_ms() + 100;
    while (!done) {
        usleep(100000);
        double t = now_ms();
        if (t - next > max_late)
            max_late = t - next;
        fprintf(stderr, "tick_ms=%.0f\n", t - t0);
        next = t + 100;
    }
    fprintf(stderr, "max_late_ms=%.0f\n", max_late);
    return NULL;
}

__attribute__((noinline)) static unsigned long busy_loop(double until)
{
    unsigned long x = 1;
    while (now_ms() < until)
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
    done = 1;
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
    t0 = now_ms();
    pthread_t a, b;
    pthread_create(&a, NULL, ticker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(b, NULL);
    pthread_join(a, NULL);
    printf("ok %s\n", mode);
    return 0;
}
