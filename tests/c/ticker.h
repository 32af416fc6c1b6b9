/*
 * ticker.h: the one ticker of the C test programs, and their clock.
 *
 * A thread sleeps TICKER_MS milliseconds at a time (usleep) until
 * ticker_stop(), counting its ticks and keeping its worst lateness: how much
 * later than asked a sleep returned. Under the preload every thread is a
 * fiber on one hub, so a call that holds the hub up shows as a late tick,
 * and a call that lets the hub run shows as ticks counted meanwhile.
 *
 *   #define TICKER_MS 20    optional, before the #include (default 10)
 *   #define TICKER_TRACE    optional: also print tick_ms=<ms since
 *                           ticker_start> on stderr at every tick
 *   #include "ticker.h"
 *
 *   pthread_t t = ticker_start();
 *   ... the calls under test ...
 *   long ticks = ticker_stop(t);
 *
 * ticker_stop joins the thread, prints "late.time_ms=<worst lateness>" and
 * "ticks=<count>" on stderr (tests/util's `ticker` reads them) and returns
 * the count. One ticker runs at a time; ticker_start begins a new count.
 */
#ifndef GREENHOOK_TICKER_H
#define GREENHOOK_TICKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifndef TICKER_MS
#define TICKER_MS 10
#endif

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Milliseconds on CLOCK_MONOTONIC. */
static inline long long now_ms(void)
{
    return now_ns() / 1000000LL;
}

/* Nanoseconds to whole milliseconds, rounded to the nearest. */
static inline long long ticker_ms(long long ns)
{
    return (ns + 500000LL) / 1000000LL;
}

static atomic_int ticker_done;
static atomic_long ticker_count;
static atomic_llong ticker_worst_ns;
static long long ticker_t0_ns;

static void *ticker_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&ticker_done)) {
        long long due = now_ns() + TICKER_MS * 1000000LL;
        usleep(TICKER_MS * 1000);
        long long now = now_ns();
        if (now - due > atomic_load(&ticker_worst_ns))
            atomic_store(&ticker_worst_ns, now - due);
        atomic_fetch_add(&ticker_count, 1);
#ifdef TICKER_TRACE
        fprintf(stderr, "tick_ms=%lld\n", ticker_ms(now - ticker_t0_ns));
#endif
    }
    return NULL;
}

/* Starts the ticker thread (a new count). */
static pthread_t ticker_start(void)
{
    atomic_store(&ticker_done, 0);
    atomic_store(&ticker_count, 0);
    atomic_store(&ticker_worst_ns, 0);
    ticker_t0_ns = now_ns();
    pthread_t t;
    if (pthread_create(&t, NULL, ticker_main, NULL) != 0) {
        fprintf(stderr, "ticker: pthread_create failed\n");
        exit(1);
    }
    return t;
}

/* Stops and joins the ticker, reports it on stderr, returns its tick count. */
static long ticker_stop(pthread_t t)
{
    atomic_store(&ticker_done, 1);
    pthread_join(t, NULL);
    long ticks = atomic_load(&ticker_count);
    fprintf(stderr, "late.time_ms=%lld\nticks=%ld\n", ticker_ms(atomic_load(&ticker_worst_ns)), ticks);
    return ticks;
}

#endif
