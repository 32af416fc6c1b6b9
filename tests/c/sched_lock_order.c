/*
 * sched_lock_order: waiters of a mutex, a condvar and an rwlock with
 * SCHED_FIFO priorities are served highest priority first. A real-time
 * reader still takes a read-held rwlock while a writer of higher priority
 * waits: POSIX would have it queue, glibc's default (reader-preferring)
 * rwlock lets it in, and glibc is the oracle.
 *
 * usage: sched_lock_order   (needs CAP_SYS_NICE, e.g. root; prints
 *                            "skipped" otherwise, with and without the
 *                            preload alike)
 *
 * stdout: the order each object's waiters got through, one line each.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fifo.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int go;
static char order[64];
static int n;

static void ms_sleep(int ms)
{
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

static void note(int prio)
{
    n += sprintf(order + n, " %d", prio);
}

static void *mutex_waiter(void *arg)
{
    pthread_mutex_lock(&m);
    note((int)(long)arg);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *cond_waiter(void *arg)
{
    pthread_mutex_lock(&m);
    while (!go)
        pthread_cond_wait(&c, &m);
    go--;
    note((int)(long)arg);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *writer(void *arg)
{
    pthread_rwlock_wrlock(&rw);
    note((int)(long)arg);
    pthread_rwlock_unlock(&rw);
    return NULL;
}

static void *reader(void *arg)
{
    pthread_rwlock_rdlock(&rw);
    note(-(int)(long)arg);
    pthread_rwlock_unlock(&rw);
    return NULL;
}

static int spawn(pthread_t *t, void *(*f)(void *), int prio)
{
    return spawn_fifo(t, prio, f, (void *)(long)prio);
}

static void run(const char *what, void *(*f)(void *), const int *prios, int k, void (*release)(void))
{
    pthread_t t[8];
    n = 0;
    order[0] = 0;
    for (int i = 0; i < k; i++) {
        spawn(&t[i], f, prios[i]);
        ms_sleep(20); /* each one is waiting before the next comes */
    }
    release();
    for (int i = 0; i < k; i++)
        pthread_join(t[i], NULL);
    printf("%s:%s\n", what, order);
}

static void unlock_m(void)
{
    pthread_mutex_unlock(&m);
}

static void broadcast(void)
{
    pthread_mutex_lock(&m);
    go = 3;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
}

static void unlock_rw(void)
{
    pthread_rwlock_unlock(&rw);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* One CPU: with two, a woken SCHED_FIFO thread of lower priority runs
     * on the other CPU beside a higher one, and the order is a race. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    sched_setaffinity(0, sizeof one, &one);
    struct sched_param p = {.sched_priority = 50};
    /* The main thread outranks the waiters, so it runs when it must. */
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0) {
        printf("skipped\n");
        return 0;
    }
    static const int three[] = {10, 30, 20};
    pthread_mutex_lock(&m);
    run("mutex", mutex_waiter, three, 3, unlock_m);
    run("condvar", cond_waiter, three, 3, broadcast);
    pthread_rwlock_wrlock(&rw);
    run("rwlock writers", writer, three, 3, unlock_rw);
    /* A reader of priority 20 arrives while a writer of 30 waits on a
     * read-held lock: glibc lets it in. */
    pthread_t w, r;
    pthread_rwlock_rdlock(&rw);
    n = 0;
    spawn(&w, writer, 30);
    ms_sleep(20);
    spawn(&r, reader, 20);
    ms_sleep(20);
    note(0); /* main, still holding its read lock */
    pthread_rwlock_unlock(&rw);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("rwlock reader beside a waiting writer:%s\n", order);
    return 0;
}
