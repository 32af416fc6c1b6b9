/*
 * c11_threads: C11 threads (<threads.h>), which glibc implements with its
 * pthread functions called by internal names, compared with glibc; a
 * ticker runs throughout (under greenhook: every thread a fiber of one
 * hub).
 *
 *   two pthreads taking turns 1,000 times each through a mtx_t and a cnd_t
 *   (it hung: mtx_lock and cnd_wait waited in the kernel), then two
 *   threads from thrd_create doing the same
 *   call_once from three threads, its routine sleeping 50 ms: run once,
 *   seen done by all
 *   tss: a value per thread, destructors run at each thread's end
 *   thrd_current in a thread equals what thrd_create gave, thrd_equal
 *   thrd_join of a thread returning -7, and of one ending in thrd_exit(42)
 *   mtx_trylock of a held mutex (thrd_busy), mtx_timedlock and
 *   cnd_timedwait past their deadline (thrd_timedout), a recursive mutex
 *   locked twice
 *   thrd_sleep of 100 ms (the ticker goes on), and one a signal ends (-1,
 *   time left); thrd_yield
 *
 * usage: c11_threads
 * stdout: one line per case; stderr: the ticker's report.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "ticker.h"

static mtx_t m;
static cnd_t c;
static int turn, count;

static void take_turns(long id)
{
    for (int i = 0; i < 1000; i++) {
        mtx_lock(&m);
        while (turn != id)
            cnd_wait(&c, &m);
        count++;
        turn = !id;
        cnd_broadcast(&c);
        mtx_unlock(&m);
    }
}

static void *pthread_turns(void *arg)
{
    take_turns((long)arg);
    return NULL;
}

static int thrd_turns(void *arg)
{
    take_turns((long)arg);
    return 0;
}

static once_flag once = ONCE_FLAG_INIT;
static int inits;

static void init(void)
{
    struct timespec d = {0, 50000000};
    thrd_sleep(&d, NULL);
    inits++;
}

static int once_user(void *arg)
{
    (void)arg;
    call_once(&once, init);
    return inits;
}

static tss_t key;
static int dtors;

static void dtor(void *v)
{
    (void)v;
    dtors++;
}

static int tss_user(void *arg)
{
    tss_set(key, arg);
    thrd_yield();
    return tss_get(key) == arg;
}

static thrd_t seen;

static int current(void *arg)
{
    (void)arg;
    seen = thrd_current();
    return -7;
}

static void leave(void)
{
    thrd_exit(42);
}

static int exits(void *arg)
{
    (void)arg;
    leave();
    return 0;
}

static int holder(void *arg)
{
    mtx_t *held = arg;
    mtx_lock(held);
    struct timespec d = {0, 200000000};
    thrd_sleep(&d, NULL);
    mtx_unlock(held);
    return 0;
}

static void on_usr1(int sig)
{
    (void)sig;
}

static int sleeper(void *arg)
{
    (void)arg;
    struct timespec d = {5, 0}, rem = {0, 0};
    int r = thrd_sleep(&d, &rem);
    return r == -1 && rem.tv_sec > 0 ? 1 : r;
}

static struct timespec after_ms(long ms)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    t.tv_nsec += ms * 1000000;
    t.tv_sec += t.tv_nsec / 1000000000;
    t.tv_nsec %= 1000000000;
    return t;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_t tick = ticker_start();
    mtx_init(&m, mtx_plain);
    cnd_init(&c);

    pthread_t p[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&p[i], NULL, pthread_turns, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(p[i], NULL);
    printf("pthreads through mtx_t and cnd_t: %d turns\n", count);
    count = 0;
    turn = 0;
    thrd_t t[3];
    for (long i = 0; i < 2; i++)
        printf("thrd_create: %d\n", thrd_create(&t[i], thrd_turns, (void *)i));
    for (int i = 0; i < 2; i++) {
        int r = -1;
        int e = thrd_join(t[i], &r);
        printf("thrd_join: %d, result %d\n", e, r);
    }
    printf("C11 threads through mtx_t and cnd_t: %d turns\n", count);

    for (int i = 0; i < 3; i++)
        thrd_create(&t[i], once_user, NULL);
    for (int i = 0; i < 3; i++) {
        int r = 0;
        thrd_join(t[i], &r);
        printf("call_once user %d saw %d init\n", i, r);
    }
    printf("init ran %d time\n", inits);

    printf("tss_create: %d\n", tss_create(&key, dtor));
    int marks[3];
    for (int i = 0; i < 3; i++)
        thrd_create(&t[i], tss_user, &marks[i]);
    for (int i = 0; i < 3; i++) {
        int r = 0;
        thrd_join(t[i], &r);
        printf("tss user %d read its own value: %d\n", i, r);
    }
    printf("destructors run: %d\n", dtors);
    tss_delete(key);

    thrd_t me;
    thrd_create(&me, current, NULL);
    int r = 0;
    thrd_join(me, &r);
    printf("thrd_current in the thread %s what thrd_create gave; result %d\n",
           thrd_equal(me, seen) ? "equals" : "differs from", r);
    thrd_create(&me, exits, NULL);
    thrd_join(me, &r);
    printf("thrd_exit(42): joined %d\n", r);

    mtx_t held, rec;
    mtx_init(&held, mtx_timed);
    mtx_init(&rec, mtx_plain | mtx_recursive);
    thrd_create(&me, holder, &held);
    struct timespec d = {0, 50000000};
    thrd_sleep(&d, NULL);
    printf("mtx_trylock of a held mutex: %d (thrd_busy %d)\n", mtx_trylock(&held), thrd_busy);
    struct timespec soon = after_ms(20);
    printf("mtx_timedlock past its deadline: %d (thrd_timedout %d)\n", mtx_timedlock(&held, &soon), thrd_timedout);
    thrd_join(me, NULL);
    int l1 = mtx_lock(&rec), l2 = mtx_lock(&rec), u1 = mtx_unlock(&rec), u2 = mtx_unlock(&rec);
    printf("recursive: %d %d %d %d\n", l1, l2, u1, u2);
    mtx_lock(&m);
    soon = after_ms(20);
    printf("cnd_timedwait past its deadline: %d\n", cnd_timedwait(&c, &m, &soon));
    mtx_unlock(&m);

    struct sigaction sa = {.sa_handler = on_usr1};
    sigaction(SIGUSR1, &sa, NULL);
    thrd_create(&me, sleeper, NULL);
    d.tv_nsec = 100000000;
    printf("thrd_sleep(100 ms): %d\n", thrd_sleep(&d, NULL));
    pthread_kill(me, SIGUSR1);
    thrd_join(me, &r);
    printf("thrd_sleep ended by a signal: %s\n", r == 1 ? "-1, time left" : "other");
    thrd_yield();
    printf("thrd_yield: returned\n");
    mtx_destroy(&held);
    mtx_destroy(&rec);
    mtx_destroy(&m);
    cnd_destroy(&c);
    long ticks = ticker_stop(tick);
    printf("the ticker %s\n", ticks >= 20 ? "ticked throughout" : "stood still");
    return 0;
}
