/*
 * errno_isolation: errno belongs to each thread. Threads set errno to their
 * own distinct values, then block or yield (usleep, nanosleep, sched_yield,
 * poll timeouts, a contended mutex, a condvar timed wait, a semaphore) while
 * the other threads fail calls on purpose (EBADF, EINVAL, EAGAIN) and set
 * their own errno values; afterwards each thread checks that its errno is
 * exactly what it set. Successful calls must not change errno either.
 *
 * usage: errno_isolation [THREADS] [ITERATIONS]
 *   THREADS     default 2
 *   ITERATIONS  per thread, default 300 (each one sleeps about 1 ms)
 *
 * stdout: ok threads=T iterations=I checks=<T*I*CHECKS_PER_ITER>
 * stderr: time_ms=<wall time>
 * A clobbered errno: "FAIL thread K iteration I after <call>: errno=... want ..."
 * on stderr, exit 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECKS_PER_ITER 9

static long g_iters;
static atomic_long g_checks;
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static sem_t g_sem;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000L;
}

static void check(long id, long iter, const char *after, int got, int want)
{
    if (got != want) {
        const char *g = strerrorname_np(got), *w = strerrorname_np(want);
        fprintf(stderr, "FAIL thread %ld iteration %ld after %s: errno=%d(%s) want %d(%s)\n", id, iter, after, got,
                g ? g : "-", want, w ? w : "-");
        exit(1);
    }
    atomic_fetch_add(&g_checks, 1);
}

static void *worker(void *arg)
{
    long id = (long)arg;
    int *loc = &errno;
    for (long i = 0; i < g_iters; i++) {
        /* a value no libc call produces, distinct per thread and iteration */
        int mine = 10000 + (int)id * 1000 + (int)(i % 500);
        char c;

        errno = mine;
        usleep(1000);
        check(id, i, "usleep", errno, mine);

        errno = mine;
        sched_yield();
        check(id, i, "sched_yield", errno, mine);

        errno = mine;
        struct timespec ts = { 0, 500000 };
        nanosleep(&ts, NULL);
        check(id, i, "nanosleep", errno, mine);

        errno = mine;
        poll(NULL, 0, 1);
        check(id, i, "poll timeout", errno, mine);

        /* a failing call sets errno, and a later sleep keeps that value */
        if (read(-1, &c, 1) != -1)
            check(id, i, "read(-1) return", 0, -1);
        usleep(200);
        check(id, i, "read(-1) then usleep", errno, EBADF);

        struct timespec bad = { 0, 1000000000L };
        nanosleep(&bad, NULL);
        sched_yield();
        check(id, i, "nanosleep(bad) then sched_yield", errno, EINVAL);

        errno = mine;
        pthread_mutex_lock(&g_mutex);
        usleep(100); /* hold it so the other threads contend */
        pthread_mutex_unlock(&g_mutex);
        check(id, i, "contended mutex", errno, mine);

        errno = mine;
        struct timespec d;
        clock_gettime(CLOCK_REALTIME, &d);
        d.tv_nsec += 300000;
        if (d.tv_nsec >= 1000000000L) {
            d.tv_sec++;
            d.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&g_mutex);
        int rc = pthread_cond_timedwait(&g_cond, &g_mutex, &d);
        pthread_mutex_unlock(&g_mutex);
        if (rc != ETIMEDOUT && rc != 0)
            check(id, i, "pthread_cond_timedwait return", rc, ETIMEDOUT);
        check(id, i, "pthread_cond_timedwait", errno, mine);

        errno = mine;
        sem_post(&g_sem);
        sem_wait(&g_sem);
        check(id, i, "sem_post+sem_wait", errno, mine);

        if (&errno != loc)
            check(id, i, "(errno location moved)", 1, 0);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    alarm(60);
    long threads = argc > 1 ? atol(argv[1]) : 2;
    g_iters = argc > 2 ? atol(argv[2]) : 300;
    if (threads < 1 || g_iters < 1) {
        fprintf(stderr, "bad arguments\n");
        return 1;
    }
    sem_init(&g_sem, 0, 0);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    long long t0 = now_ms();
    for (long i = 0; i < threads; i++) {
        int rc = pthread_create(&t[i], NULL, worker, (void *)i);
        if (rc != 0) {
            fprintf(stderr, "pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    /* main, too, keeps its own errno while the workers run */
    errno = 4242;
    for (long i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    if (errno != 4242) {
        fprintf(stderr, "FAIL main: errno=%d after pthread_join, want 4242\n", errno);
        return 1;
    }
    fprintf(stderr, "time_ms=%lld\n", now_ms() - t0);
    long want = threads * g_iters * CHECKS_PER_ITER;
    if (atomic_load(&g_checks) != want) {
        fprintf(stderr, "FAIL: %ld checks, want %ld\n", atomic_load(&g_checks), want);
        return 1;
    }
    printf("ok threads=%ld iterations=%ld checks=%ld\n", threads, g_iters, atomic_load(&g_checks));
    return 0;
}
