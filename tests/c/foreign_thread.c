/*
 * foreign_thread: a thread made with libc's own pthread_create (as
 * jemalloc makes its background thread, past any preloaded hook) shares a
 * mutex, a condition variable and a semaphore with ordinary threads.
 *
 * usage: foreign_thread [ROUNDS]
 *
 * The foreign thread and a normal one first lock and unlock the mutex
 * ROUNDS * 5000 times each, as fast as they can, starting together: the
 * foreign thread's first use of any pthread object meets the normal
 * thread's unlocks, which under the preload a fiber makes by plain stores
 * until it knows of such a thread (a 2 that glibc's lock wrote between a
 * fiber's look and its store would be lost, and the foreign thread would
 * sleep in the kernel for good). The window is a few instructions wide,
 * so a run catches that only now and then (2 runs in 26 under load, with
 * 20 million rounds), never falsely. Then the two hand a turn back and
 * forth ROUNDS times under the mutex and a condvar, then ping-pong through
 * two semaphores, while a third thread holds the mutex for a moment now
 * and then. Under the preload the normal threads are fibers and the
 * foreign one is a real OS thread: every hand-over between the two kinds
 * must still arrive (a lost wake-up hangs). Last, the two take a rwlock
 * ROUNDS * 500 times each, read and write locks in turn, with a check
 * that no reader ever sees a writer inside (the emulated rwlock's words
 * mean nothing to glibc's functions: the foreign thread must use ours),
 * and the foreign thread's try, relock and unlock answers are printed;
 * and they meet at a barrier ROUNDS * 5 times (glibc's wait on the
 * emulated barrier's words died of SIGFPE).
 *
 * stdout: the counts, the same with and without the preload.
 */
#define _GNU_SOURCE
#include "libc_create.h"
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static sem_t ping, pong;
static int turn, rounds, done, started;
static long handovers, contended;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long written, overlaps;
static int writing, shared_done;
static pthread_barrier_t bar;
static long serials;

static void meet(void)
{
    for (int i = 0; i < rounds * 5; i++)
        if (pthread_barrier_wait(&bar) == PTHREAD_BARRIER_SERIAL_THREAD)
            __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
}

/* Read and write locks in turn; a reader that finds a writer inside
 * counts an overlap. */
static void share_rwlock(void)
{
    for (long i = 0; i < (long)rounds * 500; i++) {
        if (i & 1) {
            pthread_rwlock_wrlock(&rw);
            __atomic_store_n(&writing, 1, __ATOMIC_RELAXED);
            written++;
            __atomic_store_n(&writing, 0, __ATOMIC_RELAXED);
        } else {
            pthread_rwlock_rdlock(&rw);
            if (__atomic_load_n(&writing, __ATOMIC_RELAXED))
                __atomic_add_fetch(&overlaps, 1, __ATOMIC_RELAXED);
        }
        pthread_rwlock_unlock(&rw);
    }
}

/* Both sides lock and unlock as fast as they can, from the same moment on
 * (the foreign thread waits for the fiber, which only runs once main
 * blocks in a join). */
static void contend(int me)
{
    if (me) {
        while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
            ;
    } else {
        __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    }
    for (long i = 0; i < (long)rounds * 5000; i++) {
        pthread_mutex_lock(&m);
        contended++;
        pthread_mutex_unlock(&m);
    }
}

static void side(int me)
{
    contend(me);
    for (int i = 0; i < rounds; i++) {
        pthread_mutex_lock(&m);
        while (turn != me)
            pthread_cond_wait(&c, &m);
        turn = !me;
        handovers++;
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
    }
    for (int i = 0; i < rounds; i++) {
        if (me) {
            sem_post(&ping);
            sem_wait(&pong);
        } else {
            sem_wait(&ping);
            sem_post(&pong);
        }
    }
}

static void *foreign(void *arg)
{
    (void)arg;
    side(1);
    share_rwlock();
    meet();
    /* Alone with the rwlock once the other side has finished. */
    while (!__atomic_load_n(&shared_done, __ATOMIC_ACQUIRE))
        ;
    int a = pthread_rwlock_tryrdlock(&rw);
    int b = pthread_rwlock_trywrlock(&rw);
    int c = pthread_rwlock_unlock(&rw);
    int d = pthread_rwlock_wrlock(&rw);
    int e = pthread_rwlock_wrlock(&rw);
    int f = pthread_rwlock_unlock(&rw);
    printf("foreign rwlock: tryrd %d trywr-while-reading %d unlock %d wrlock %d relock %d unlock %d\n",
           a, b, c, d, e, f);
    return NULL;
}

static void *normal(void *arg)
{
    (void)arg;
    side(0);
    share_rwlock();
    meet();
    __atomic_store_n(&shared_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *meddler(void *arg)
{
    (void)arg;
    struct timespec t = {0, 200000};
    while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
        pthread_mutex_lock(&m);
        nanosleep(&t, NULL);
        pthread_mutex_unlock(&m);
        nanosleep(&t, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    rounds = argc > 1 ? atoi(argv[1]) : 2000;
    sem_init(&ping, 0, 0);
    sem_init(&pong, 0, 0);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t f, n, x;
    pthread_create(&x, NULL, meddler, NULL);
    libc_pthread_create(&f, foreign, NULL);
    pthread_create(&n, NULL, normal, NULL);
    pthread_join(n, NULL);
    pthread_join(f, NULL);
    printf("rwlock: written %ld, overlaps %ld; barrier serials %ld\n", written, overlaps, serials);
    __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
    pthread_join(x, NULL);
    printf("contended %ld, handovers %ld, semaphore rounds %d\n", contended, handovers, rounds);
    return 0;
}
