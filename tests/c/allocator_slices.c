/*
 * allocator_slices: threads that allocate in long bursts beside threads
 * that make short-lived threads, under a malloc whose lock calls go
 * through the preload's hooks (locked_malloc_lib, preloaded in front of
 * greenhook).
 *
 * usage: allocator_slices
 *
 * Each fiber is one more thread to such an allocator, and no fiber may be
 * switched away inside it: a time slice that ended at the return of its
 * mutex lock would leave a fiber suspended holding the lock, and
 * greenhook's own bookkeeping (here for each thread made) allocates where
 * it cannot wait for a fiber, so it would block the whole OS thread on
 * that lock for good. BIND's named hung so at start, arming a timer; this
 * program did not hang even without the check that prevents it (the hub's
 * allocation must meet the lock at the moment it is held): it runs the
 * paths, the compat suite's named row is the reproduction.
 *
 * stdout: the work done, the same with and without the preload.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

/* Bursts of allocations, each longer than a slice at GREENHOOK_SLICE_MS=1
 * (the coarse clock it is read by moves every 4 ms), so that slices end
 * while the allocator's lock calls return; a short
 * sleep between bursts lets the others run (N:1 has no other way). */
static void *allocate(void *arg)
{
    (void)arg;
    long bursts = 0;
    while (!stop) {
        for (int i = 0; i < 200000; i++) {
            char *p = malloc(64);
            memset(p, 1, 64);
            free(p);
        }
        bursts++;
        usleep(50);
    }
    return (void *)(long)(bursts > 0);
}

static void *nap(void *arg)
{
    (void)arg;
    usleep(100);
    return NULL;
}

/* Threads made and joined: greenhook's own bookkeeping allocates for each
 * (its task, its record), where it cannot wait for a fiber. */
static void *sleep_a_lot(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++) {
        pthread_t t;
        pthread_create(&t, NULL, nap, NULL);
        pthread_join(t, NULL);
    }
    return (void *)1;
}

int main(void)
{
    pthread_t a[2], s[4];
    for (int i = 0; i < 2; i++)
        pthread_create(&a[i], NULL, allocate, NULL);
    for (int i = 0; i < 4; i++)
        pthread_create(&s[i], NULL, sleep_a_lot, NULL);
    long slept = 0, allocated = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(s[i], &r);
        slept += (long)r;
    }
    stop = 1;
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(a[i], &r);
        allocated += (long)r;
    }
    printf("%ld sleepers done, %ld allocators allocated\n", slept, allocated);
    return 0;
}
