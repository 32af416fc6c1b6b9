/*
 * ticker.h: a thread that ticks every 10 ms until `done` is set and keeps
 * its worst lateness in `max_late`; programs print it to stderr as
 * late.time_ms=<n>, which the tests assert on (a hub held up by a call
 * shows as a late tick).
 */
#ifndef GREENHOOK_TICKER_H
#define GREENHOOK_TICKER_H

#include <time.h>
#include <unistd.h>

static volatile int done;
static long max_late;

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static void *ticker(void *a)
{
    (void)a;
    long next = now_ms() + 10;
    while (!done) {
        usleep(10000);
        long late = now_ms() - next;
        if (late > max_late)
            max_late = late;
        next = now_ms() + 10;
    }
    return NULL;
}

#endif
