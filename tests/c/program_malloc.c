/*
 * program_malloc: a locked malloc (locked_malloc_lib's) linked into the
 * program itself, as rustc links jemalloc: the loader then names the
 * program for `malloc`. The main thread allocates in bursts longer than a
 * time slice while other threads make and join threads.
 *
 * usage: program_malloc
 *
 * Such an allocator's code cannot be told from the program's, so no time
 * slice may end at a hook return. The previous library took the program
 * for the allocator's library and, at the first slice's end inside the
 * allocator's lock, walked the stack; the walk set libgcc's unwinder up
 * through our pthread_once, which allocated: the thread waited for good on
 * the lock it held (rustc under the preload hung so at start).
 *
 * stdout: the work done, the same with and without the preload.
 */
#include "locked_malloc_lib.c"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int stop;
/* Threads that have made one thread: main stops them only after both
 * have (on a loaded machine the bursts may all end before one has). */
static volatile int started;

static void *nap(void *arg)
{
    (void)arg;
    usleep(100);
    return NULL;
}

/* Threads made and joined until main is done: greenhook's own bookkeeping
 * allocates for each. */
static void *make_threads(void *arg)
{
    (void)arg;
    long made = 0;
    while (!stop) {
        pthread_t t;
        pthread_create(&t, NULL, nap, NULL);
        pthread_join(t, NULL);
        if (made++ == 0)
            __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
    }
    return (void *)(long)(made > 0);
}

int main(void)
{
    pthread_t s[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&s[i], NULL, make_threads, NULL);
    /* Bursts longer than a slice at GREENHOOK_SLICE_MS=1 (the coarse
     * clock moves every 4 ms), a short sleep between them. */
    for (int burst = 0; burst < 20; burst++) {
        for (int i = 0; i < 200000; i++) {
            char *p = malloc(64);
            memset(p, 1, 64);
            free(p);
        }
        usleep(50);
    }
    while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < 2)
        usleep(100);
    stop = 1;
    long made = 0;
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(s[i], &r);
        made += (long)r;
    }
    printf("20 bursts allocated, %ld threads made threads\n", made);
    return 0;
}
