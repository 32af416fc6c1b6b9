/*
 * x_cancel_futex: cancellation with cleanup handlers at the sync hooks'
 * cancellation points, pthread_exit through cleanup handlers, a
 * pthread_once whose init routine sleeps, and raw futex(2) through libc's
 * syscall() between threads.
 *
 * stdout: one line per check, deterministic; exit 1 with "FAIL ..." on
 * stderr on a wrong result. alarm(20) turns a hang into a SIGALRM death.
 * stderr: futex_timeout.time_ms=<n> and the ticker's report (ticker.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ticker.h"

static void fail(const char *what)
{
    fprintf(stderr, "FAIL %s\n", what);
    exit(1);
}

/* ---- cancel at pthread_cond_wait and sem_wait ---- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static sem_t sem;
static atomic_int cleanups, started, unlock_rc = -1;
static char order[8];
static atomic_int order_n;

static void cleanup_count(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cleanups, 1);
}

static void cleanup_unlock(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cleanups, 1);
    atomic_store(&unlock_rc, pthread_mutex_unlock(&m));
}

static void *cond_target(void *arg)
{
    (void)arg;
    pthread_cleanup_push(cleanup_count, NULL);
    pthread_mutex_lock(&m);
    pthread_cleanup_push(cleanup_unlock, NULL);
    atomic_store(&started, 1);
    for (;;)
        pthread_cond_wait(&cv, &m);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return NULL;
}

static void *sem_target(void *arg)
{
    (void)arg;
    pthread_cleanup_push(cleanup_count, NULL);
    atomic_store(&started, 1);
    sem_wait(&sem);
    pthread_cleanup_pop(0);
    return NULL;
}

static void run_cancel(const char *name, void *(*fn)(void *))
{
    pthread_t t;
    void *v = NULL;
    atomic_store(&cleanups, 0);
    atomic_store(&started, 0);
    pthread_create(&t, NULL, fn, NULL);
    while (!atomic_load(&started))
        usleep(1000);
    usleep(20000);
    int rc = pthread_cancel(t);
    pthread_join(t, &v);
    printf("cancel_%s: cancel=%d canceled=%s cleanups=%d\n", name, rc, v == PTHREAD_CANCELED ? "yes" : "no",
           atomic_load(&cleanups));
    if (rc != 0 || v != PTHREAD_CANCELED)
        fail(name);
}

/* ---- pthread_exit through nested cleanup handlers ---- */

static void cleanup_mark(void *arg)
{
    order[atomic_fetch_add(&order_n, 1)] = *(char *)arg;
}

static void *exit_target(void *arg)
{
    (void)arg;
    static char a = 'a', b = 'b';
    pthread_cleanup_push(cleanup_mark, &a);
    pthread_cleanup_push(cleanup_mark, &b);
    pthread_exit((void *)0x42);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return NULL;
}

/* ---- pthread_once with a slow init ---- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int init_calls, init_done, saw_done;

static void slow_init(void)
{
    atomic_fetch_add(&init_calls, 1);
    usleep(30000);
    atomic_store(&init_done, 1);
}

static void *once_thread(void *arg)
{
    (void)arg;
    pthread_once(&once, slow_init);
    if (atomic_load(&init_done))
        atomic_fetch_add(&saw_done, 1);
    return NULL;
}

/* ---- raw futex ---- */

static _Atomic uint32_t word;
static atomic_int waiter_rc = 99, waiter_errno;

static long futex(void *addr, int op, uint32_t val, const struct timespec *ts, uint32_t bitset)
{
    return syscall(SYS_futex, addr, op, val, ts, NULL, bitset);
}

static void *futex_waiter(void *arg)
{
    (void)arg;
    long r;
    do {
        r = futex(&word, FUTEX_WAIT_PRIVATE, 0, NULL, 0);
    } while (r == 0 && atomic_load(&word) == 0);
    atomic_store(&waiter_rc, (int)r);
    atomic_store(&waiter_errno, r < 0 ? errno : 0);
    return NULL;
}

static void *futex_waker(void *arg)
{
    (void)arg;
    usleep(30000);
    atomic_store(&word, 1);
    futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL, 0);
    return NULL;
}

int main(void)
{
    alarm(20);
    setvbuf(stdout, NULL, _IOLBF, 0);
    sem_init(&sem, 0, 0);
    run_cancel("cond_wait", cond_target);
    if (atomic_load(&cleanups) != 2 || atomic_load(&unlock_rc) != 0)
        fail("cond_wait cleanups");
    run_cancel("sem_wait", sem_target);
    if (atomic_load(&cleanups) != 1)
        fail("sem_wait cleanups");

    pthread_t t;
    void *v;
    pthread_create(&t, NULL, exit_target, NULL);
    pthread_join(t, &v);
    printf("exit_cleanups: value=%#lx order=%s\n", (unsigned long)(uintptr_t)v, order);
    if (v != (void *)0x42 || strcmp(order, "ba") != 0)
        fail("exit_cleanups");

    pthread_t o[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&o[i], NULL, once_thread, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(o[i], NULL);
    printf("once: init_calls=%d saw_done=%d\n", atomic_load(&init_calls), atomic_load(&saw_done));
    if (atomic_load(&init_calls) != 1 || atomic_load(&saw_done) != 4)
        fail("once");

    pthread_t w, k;
    pthread_create(&w, NULL, futex_waiter, NULL);
    pthread_create(&k, NULL, futex_waker, NULL);
    pthread_join(w, NULL);
    pthread_join(k, NULL);
    printf("futex_wake: rc=%d\n", atomic_load(&waiter_rc));
    if (atomic_load(&waiter_rc) != 0)
        fail("futex_wake");

    uint32_t other = 5;
    long r1 = futex(&other, FUTEX_WAIT_PRIVATE, 4, NULL, 0);
    int e1 = errno;
    struct timespec bad = { 0, 1000000000L };
    long r2 = futex(&other, FUTEX_WAIT_PRIVATE, 5, &bad, 0);
    int e2 = errno;
    printf("futex_errors: mismatch=%ld/%s bad_timeout=%ld/%s\n", r1, e1 == EAGAIN ? "EAGAIN" : "?", r2,
           e2 == EINVAL ? "EINVAL" : "?");
    if (r1 != -1 || e1 != EAGAIN || r2 != -1 || e2 != EINVAL)
        fail("futex_errors");

    /* a 60 ms timed futex wait in main overlaps a ticker thread */
    pthread_t tk = ticker_start();
    struct timespec rel = { 0, 60000000L };
    long long t0 = now_ms();
    long r3 = futex(&other, FUTEX_WAIT_PRIVATE, 5, &rel, 0);
    int e3 = errno;
    long long el = now_ms() - t0;
    ticker_stop(tk);
    printf("futex_timeout: rc=%ld/%s\n", r3, e3 == ETIMEDOUT ? "ETIMEDOUT" : "?");
    fprintf(stderr, "futex_timeout.time_ms=%lld\n", el);
    if (r3 != -1 || e3 != ETIMEDOUT || el < 60)
        fail("futex_timeout");
    return 0;
}
