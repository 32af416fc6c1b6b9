/*
 * foreign_cond_quiet: once a thread that is not a fiber exists (made with
 * libc's own pthread_create, as libopenblas makes its pool from its
 * constructor) and sleeps in glibc's condvar wait, the fibers' condvar
 * waits still end only when signalled or timed out: 10 timed waits of
 * 30 ms on a condvar nobody signals all time out, and an untimed wait
 * ends at its signal, 200 ms later. Under the preload every such wait
 * used to end after 2 ms as a spurious wake-up (x265 crashed on them).
 *
 * stdout: the same with and without the preload.
 */
#define _GNU_SOURCE
#include "libc_create.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t fm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fc = PTHREAD_COND_INITIALIZER;
static int foreign_done, foreign_waiting;

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int signalled;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *foreign(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fm);
    foreign_waiting = 1;
    while (!foreign_done)
        pthread_cond_wait(&fc, &fm);
    pthread_mutex_unlock(&fm);
    return NULL;
}

static void *untimed(void *arg)
{
    double *waited = arg;
    pthread_mutex_lock(&m);
    double t0 = now_ms();
    pthread_cond_wait(&c, &m);
    *waited = now_ms() - t0;
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t f, u;
    libc_pthread_create(&f, foreign, NULL);
    while (!__atomic_load_n(&foreign_waiting, __ATOMIC_ACQUIRE))
        usleep(1000);
    usleep(20000);
    int early = 0;
    pthread_mutex_lock(&m);
    for (int i = 0; i < 10; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 30 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        if (pthread_cond_timedwait(&c, &m, &ts) != ETIMEDOUT)
            early++;
    }
    pthread_mutex_unlock(&m);
    printf("timed waits that ended before their time: %d of 10\n", early);
    double waited = 0;
    pthread_create(&u, NULL, untimed, &waited);
    usleep(200000);
    pthread_mutex_lock(&m);
    signalled = 1;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
    pthread_join(u, NULL);
    printf("the untimed wait ended at its signal: %s\n", waited > 150 ? "yes" : "no");
    pthread_mutex_lock(&fm);
    foreign_done = 1;
    pthread_cond_signal(&fc);
    pthread_mutex_unlock(&fm);
    pthread_join(f, NULL);
    return 0;
}
