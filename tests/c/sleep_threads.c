/*
 * sleep_threads: N threads each sleep once with a chosen libc sleep call;
 * main joins them all.
 *
 * usage: sleep_threads N FUNC MS [STACK_KIB]
 *   N          number of threads (>= 1)
 *   FUNC       sleep | usleep | nanosleep | clock_nanosleep | clock_nanosleep_abs
 *              (clock_nanosleep is CLOCK_MONOTONIC relative; _abs is
 *              CLOCK_MONOTONIC with TIMER_ABSTIME, deadline = thread start + MS)
 *   MS         how long each thread sleeps, in milliseconds; for FUNC=sleep it
 *              must be a multiple of 1000
 *   STACK_KIB  optional: create the threads with this stack size (e.g. 64);
 *              absent or 0 means the default attributes
 *
 * stdout (deterministic):
 *   ok N                                    on success, exit 0
 *   pthread_create failed at K: <strerror>  when the K-th create (0-based) fails,
 *                                           exit 2 right away (unpatched glibc
 *                                           runs out of mappings near 32k threads)
 * stderr: time_ms=<wall time from the first create to the last join>
 *
 * Self-checks (exit 1 with a message on stderr): every sleep call returns 0,
 * and every thread measures that it slept at least MS on CLOCK_MONOTONIC.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum kind { K_SLEEP, K_USLEEP, K_NANOSLEEP, K_CLOCK_REL, K_CLOCK_ABS };

static enum kind g_kind;
static long g_ms;
static atomic_long g_early;  /* threads that woke before MS elapsed */
static atomic_long g_failed; /* sleep calls that returned an error */

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *sleeper(void *arg)
{
    (void)arg;
    long long start = now_ns();
    int rc = 0;
    switch (g_kind) {
    case K_SLEEP:
        rc = (int)sleep((unsigned)(g_ms / 1000));
        break;
    case K_USLEEP:
        rc = usleep((useconds_t)(g_ms * 1000));
        break;
    case K_NANOSLEEP: {
        struct timespec ts = { g_ms / 1000, (g_ms % 1000) * 1000000L };
        rc = nanosleep(&ts, NULL);
        break;
    }
    case K_CLOCK_REL: {
        struct timespec ts = { g_ms / 1000, (g_ms % 1000) * 1000000L };
        rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
        break;
    }
    case K_CLOCK_ABS: {
        long long deadline = start + (long long)g_ms * 1000000LL;
        struct timespec ts = { (time_t)(deadline / 1000000000LL), (long)(deadline % 1000000000LL) };
        rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        break;
    }
    }
    if (rc != 0)
        atomic_fetch_add(&g_failed, 1);
    if (now_ns() - start < (long long)g_ms * 1000000LL)
        atomic_fetch_add(&g_early, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s N sleep|usleep|nanosleep|clock_nanosleep|clock_nanosleep_abs MS [STACK_KIB]\n",
                argv[0]);
        return 1;
    }
    long n = atol(argv[1]);
    const char *fn = argv[2];
    g_ms = atol(argv[3]);
    long stack_kib = argc > 4 ? atol(argv[4]) : 0;

    if (!strcmp(fn, "sleep"))
        g_kind = K_SLEEP;
    else if (!strcmp(fn, "usleep"))
        g_kind = K_USLEEP;
    else if (!strcmp(fn, "nanosleep"))
        g_kind = K_NANOSLEEP;
    else if (!strcmp(fn, "clock_nanosleep"))
        g_kind = K_CLOCK_REL;
    else if (!strcmp(fn, "clock_nanosleep_abs"))
        g_kind = K_CLOCK_ABS;
    else {
        fprintf(stderr, "unknown sleep function %s\n", fn);
        return 1;
    }
    if (n < 1 || g_ms < 0 || (g_kind == K_SLEEP && g_ms % 1000 != 0)) {
        fprintf(stderr, "bad N or MS (sleep needs a multiple of 1000 ms)\n");
        return 1;
    }

    pthread_attr_t attr, *attrp = NULL;
    if (stack_kib > 0) {
        pthread_attr_init(&attr);
        int rc = pthread_attr_setstacksize(&attr, (size_t)stack_kib * 1024);
        if (rc != 0) {
            fprintf(stderr, "pthread_attr_setstacksize(%ld KiB): %s\n", stack_kib, strerror(rc));
            return 1;
        }
        attrp = &attr;
    }

    pthread_t *tids = calloc((size_t)n, sizeof *tids);
    if (!tids) {
        fprintf(stderr, "calloc failed\n");
        return 1;
    }

    long long t0 = now_ns();
    for (long i = 0; i < n; i++) {
        int rc = pthread_create(&tids[i], attrp, sleeper, NULL);
        if (rc != 0) {
            printf("pthread_create failed at %ld: %s\n", i, strerror(rc));
            fflush(stdout);
            fprintf(stderr, "time_ms=%lld\n", (now_ns() - t0) / 1000000LL);
            _exit(2);
        }
    }
    for (long i = 0; i < n; i++) {
        int rc = pthread_join(tids[i], NULL);
        if (rc != 0) {
            fprintf(stderr, "pthread_join(%ld): %s\n", i, strerror(rc));
            return 1;
        }
    }
    long long elapsed_ms = (now_ns() - t0) / 1000000LL;
    fprintf(stderr, "time_ms=%lld\n", elapsed_ms);

    if (atomic_load(&g_failed) != 0) {
        fprintf(stderr, "%ld sleep calls returned nonzero\n", atomic_load(&g_failed));
        return 1;
    }
    if (atomic_load(&g_early) != 0) {
        fprintf(stderr, "%ld threads woke before %ld ms\n", atomic_load(&g_early), g_ms);
        return 1;
    }
    if (elapsed_ms < g_ms) {
        fprintf(stderr, "whole run took %lld ms < %ld ms\n", elapsed_ms, g_ms);
        return 1;
    }
    printf("ok %ld\n", n);
    return 0;
}
