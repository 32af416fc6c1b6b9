/*
 * spin_waits: threads that wait for each other by reading memory in a loop
 * (no call, no system call), as OpenBLAS's workers and spinlocks do.
 *
 * usage: spin_waits MODE [ROUNDS]
 *   turns    two threads hand a turn back and forth ROUNDS times (200),
 *            each waiting in `while (turn != me) ;`
 *   pause    the same with a `pause` in the loop
 *   pointer  the same through a pointer read from the frame on every
 *            pass (what -O0 makes of `while (*p != me) ;`)
 *   lock     4 threads add to one counter ROUNDS times each under a
 *            test-and-test-and-set spinlock, spinning on a plain read
 *   backoff  the same, a loop of `pause`s (twice as many each time, up
 *            to 1024) between two reads of the lock
 *
 * stdout: what was done (the same with or without greenhook)
 * stderr: cpu_ms=<process CPU time> and waits=<spin waits begun>, a line each
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long rounds = 200;
static _Atomic int turn;
static atomic_long waits;
static int mode_pause, mode_pointer;

static void wait_for(int me)
{
    if (atomic_load_explicit(&turn, memory_order_acquire) == me)
        return;
    atomic_fetch_add_explicit(&waits, 1, memory_order_relaxed);
    if (mode_pointer) {
        _Atomic int *volatile p = &turn;
        while (atomic_load_explicit(p, memory_order_acquire) != me)
            ;
    } else if (mode_pause) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != me)
            __builtin_ia32_pause();
    } else {
        while (atomic_load_explicit(&turn, memory_order_acquire) != me)
            ;
    }
}

static long handed[2];

static void *side(void *arg)
{
    int me = (int)(long)arg;
    for (long i = 0; i < rounds; i++) {
        wait_for(me);
        handed[me]++;
        atomic_store_explicit(&turn, !me, memory_order_release);
    }
    return NULL;
}

static int turns(void)
{
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, side, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("turns: %ld and %ld, turn ends with %d\n", handed[0], handed[1], atomic_load(&turn));
    return 0;
}

#define LOCKERS 4
static _Atomic int lock;
static long counter;
static int mode_backoff;

/* Waits for the lock to look free: reading it, or pausing longer and
 * longer between reads. */
static void until_free(void)
{
    unsigned delay = 1;
    while (atomic_load_explicit(&lock, memory_order_relaxed)) {
        if (!mode_backoff)
            continue;
        for (unsigned k = 0; k < delay; k++)
            __builtin_ia32_pause();
        if (delay < 1024)
            delay *= 2;
    }
}

static void *locker(void *arg)
{
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        while (atomic_exchange_explicit(&lock, 1, memory_order_acquire)) {
            atomic_fetch_add_explicit(&waits, 1, memory_order_relaxed);
            until_free();
        }
        /* A critical section long enough for a tick to land in it now
         * and then: the holder may be preempted while it holds the lock. */
        long c = counter;
        for (volatile int k = 0; k < 100000; k++)
            ;
        counter = c + 1;
        atomic_store_explicit(&lock, 0, memory_order_release);
    }
    return NULL;
}

static int locked(void)
{
    pthread_t t[LOCKERS];
    for (int i = 0; i < LOCKERS; i++)
        pthread_create(&t[i], NULL, locker, NULL);
    for (int i = 0; i < LOCKERS; i++)
        pthread_join(t[i], NULL);
    printf("counter: %ld of %ld\n", counter, LOCKERS * rounds);
    return counter == LOCKERS * rounds ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "turns";
    if (argc > 2)
        rounds = atol(argv[2]);
    int r;
    mode_pause = !strcmp(mode, "pause");
    mode_pointer = !strcmp(mode, "pointer");
    if (!strcmp(mode, "turns") || mode_pause || mode_pointer) {
        r = turns();
    } else if (!strcmp(mode, "lock") || !strcmp(mode, "backoff")) {
        mode_backoff = !strcmp(mode, "backoff");
        r = locked();
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    fflush(stdout);
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    fprintf(stderr, "cpu_ms=%.1f\nwaits=%ld\n", cpu.tv_sec * 1e3 + cpu.tv_nsec / 1e6, atomic_load(&waits));
    return r;
}
