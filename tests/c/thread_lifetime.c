/*
 * thread_lifetime: what happens around a thread's end. Joining a detached
 * thread, pthread_once whose init routine is cancelled, exits or blocks,
 * pthread_exit from many threads at once with key destructors, and a
 * mutex of every kind relocked after the thread holding it ended.
 *
 * usage: thread_lifetime [CHECK...]   (no argument: every check below)
 *   join_main:  a thread joins main, which calls pthread_exit(0x2a): the
 *               joiner gets 0x2a (the process then ends with status 0).
 *   join_cycle: two threads join each other, then one joins main while
 *               main joins it. glibc 2.36 hangs in both; the preload
 *               answers EDEADLK, so this runs under the preload only.
 *
 * stdout: one line per check, deterministic. A wrong result: "FAIL
 * <name>: ..." on stderr, exit 1; alarm(20) turns a hang into SIGALRM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

static struct event ev_go = EVENT_INIT;

static void *wait_go(void *arg)
{
    ev_wait(&ev_go);
    return arg;
}

static void check_join_detached(void)
{
    ev_reset(&ev_go);
    pthread_t t = spawn_detached(wait_go, NULL);
    int j = pthread_join(t, NULL);
    int tj = pthread_tryjoin_np(t, NULL);
    ev_set(&ev_go);
    msleep(20);
    result("join=%s tryjoin=%s", en(j), en(tj));
    EXPECT_EQ("join detached", j, EINVAL);
}

/* ---- pthread_once ---- */

static pthread_once_t once_cancel = PTHREAD_ONCE_INIT, once_exit = PTHREAD_ONCE_INIT,
                      once_block = PTHREAD_ONCE_INIT;
static atomic_int init_runs, init_entered;
static struct event ev_init = EVENT_INIT;

static void init_cancelled(void)
{
    int n = atomic_fetch_add(&init_runs, 1);
    if (n == 0) {
        atomic_store(&init_entered, 1);
        for (;;)
            msleep(10); /* a cancellation point: the first run is cancelled here */
    }
}

static void *once_thread(void *arg)
{
    pthread_once((pthread_once_t *)arg, init_cancelled);
    return NULL;
}

static void check_once_cancelled(void)
{
    atomic_store(&init_runs, 0);
    pthread_t t = spawn(once_thread, &once_cancel);
    while (!atomic_load(&init_entered))
        msleep(1);
    int c = pthread_cancel(t);
    void *v = join(t);
    /* POSIX: as if pthread_once had never been called: the next call runs it. */
    int r = pthread_once(&once_cancel, init_cancelled);
    result("cancel=%s joined=%s once_again=%s init_runs=%d", en(c), v == PTHREAD_CANCELED ? "CANCELED" : "value", en(r),
           atomic_load(&init_runs));
    EXPECT_EQ("init runs", atomic_load(&init_runs), 2);
}

static void init_exits(void)
{
    if (atomic_fetch_add(&init_runs, 1) == 0)
        pthread_exit((void *)9);
}

static void *once_exit_thread(void *arg)
{
    (void)arg;
    pthread_once(&once_exit, init_exits);
    return NULL;
}

static void check_once_exit(void)
{
    atomic_store(&init_runs, 0);
    void *v = join(spawn(once_exit_thread, NULL));
    int r = pthread_once(&once_exit, init_exits);
    result("joined=%ld once_again=%s init_runs=%d", (long)(intptr_t)v, en(r), atomic_load(&init_runs));
}

/* The init routine blocks until another thread (which does not touch the
 * once) lets it go; two more threads wait in pthread_once meanwhile. */
static void init_blocks(void)
{
    atomic_fetch_add(&init_runs, 1);
    atomic_store(&init_entered, 1);
    ev_wait(&ev_init);
}

static atomic_int once_returned;
static void *once_block_thread(void *arg)
{
    (void)arg;
    pthread_once(&once_block, init_blocks);
    atomic_fetch_add(&once_returned, 1);
    return NULL;
}

static void *release_init(void *arg)
{
    (void)arg;
    msleep(50);
    ev_set(&ev_init);
    return NULL;
}

static void check_once_blocks(void)
{
    atomic_store(&init_runs, 0);
    atomic_store(&init_entered, 0);
    pthread_t a = spawn(once_block_thread, NULL);
    while (!atomic_load(&init_entered))
        msleep(1);
    pthread_t b = spawn(once_block_thread, NULL), c = spawn(once_block_thread, NULL);
    msleep(20);
    int waiting = 3 - atomic_load(&once_returned);
    pthread_t r = spawn(release_init, NULL);
    pthread_once(&once_block, init_blocks); /* main waits too */
    join(a);
    join(b);
    join(c);
    join(r);
    result("waiting_while_blocked=%d returned=%d init_runs=%d", waiting, atomic_load(&once_returned),
           atomic_load(&init_runs));
}

/* ---- many threads exit at once, with key destructors ---- */

#define EXITERS 64
static pthread_key_t key_a, key_b;
static atomic_int dtor_a, dtor_b, dtor_rounds, dtor_saw_wrong;
static pthread_barrier_t exit_barrier;

/* Runs first (key_a was created first): its own value already reads NULL,
 * key_b's not yet; it sleeps, so the exits interleave. */
static void destroy_a(void *v)
{
    if (pthread_getspecific(key_a) != NULL || pthread_getspecific(key_b) == NULL)
        atomic_fetch_add(&dtor_saw_wrong, 1);
    msleep(1);
    atomic_fetch_add(&dtor_a, 1);
    free(v);
}

static void destroy_b(void *v)
{
    /* Sets a value again in its first round: destructors run again. */
    long round = (long)(intptr_t)v;
    atomic_fetch_add(&dtor_b, 1);
    if (round < 2) {
        atomic_fetch_add(&dtor_rounds, 1);
        pthread_setspecific(key_b, (void *)(intptr_t)(round + 1));
    }
}

static void *exiter(void *arg)
{
    pthread_setspecific(key_a, malloc(16));
    pthread_setspecific(key_b, (void *)1);
    pthread_barrier_wait(&exit_barrier);
    pthread_exit(arg);
}

static void check_exit_many(void)
{
    pthread_key_create(&key_a, destroy_a);
    pthread_key_create(&key_b, destroy_b);
    pthread_barrier_init(&exit_barrier, NULL, EXITERS);
    pthread_t t[EXITERS];
    for (long i = 0; i < EXITERS; i++)
        t[i] = spawn(exiter, (void *)i);
    long sum = 0;
    for (int i = 0; i < EXITERS; i++)
        sum += (long)(intptr_t)join(t[i]);
    pthread_barrier_destroy(&exit_barrier);
    result("threads=%d value_sum=%ld destructor_a=%d destructor_b=%d rounds_reset=%d saw_wrong_values=%d", EXITERS,
           sum, atomic_load(&dtor_a), atomic_load(&dtor_b), atomic_load(&dtor_rounds), atomic_load(&dtor_saw_wrong));
}

/* ---- a mutex relocked after its owner ended ---- */

static pthread_mutex_t held;

static void *lock_and_end(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&held);
    return NULL;
}

static void relock(int kind, int robust, const char *name)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, kind);
    if (robust)
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&held, &a);
    pthread_mutexattr_destroy(&a);
    join(spawn(lock_and_end, NULL));
    int tl = pthread_mutex_trylock(&held);
    struct timespec d = deadline(CLOCK_REALTIME, 50);
    int tm = tl == 0 || tl == EOWNERDEAD ? -1 : pthread_mutex_timedlock(&held, &d);
    int un = tl == 0 || tl == EOWNERDEAD ? -1 : pthread_mutex_unlock(&held);
    int cons = tl == EOWNERDEAD ? pthread_mutex_consistent(&held) : -1;
    int un2 = tl == EOWNERDEAD ? pthread_mutex_unlock(&held) : -1;
    int again = tl == EOWNERDEAD ? pthread_mutex_trylock(&held) : -1;
    printf("relock_%s: trylock=%s timedlock=%s unlock=%s consistent=%s unlock_after=%s trylock_after=%s\n", name,
           en(tl), tm < 0 ? "-" : en(tm), un < 0 ? "-" : en(un), cons < 0 ? "-" : en(cons),
           un2 < 0 ? "-" : en(un2), again < 0 ? "-" : en(again));
    fflush(stdout);
}

static void check_relock(void)
{
    relock(PTHREAD_MUTEX_NORMAL, 0, "normal");
    relock(PTHREAD_MUTEX_ERRORCHECK, 0, "errorcheck");
    relock(PTHREAD_MUTEX_RECURSIVE, 0, "recursive");
    relock(PTHREAD_MUTEX_NORMAL, 1, "robust_normal");
    relock(PTHREAD_MUTEX_ERRORCHECK, 1, "robust_errorcheck");
    relock(PTHREAD_MUTEX_RECURSIVE, 1, "robust_recursive");
}

/* ---- joining main ---- */

static pthread_t main_thread;

static void *join_main(void *arg)
{
    (void)arg;
    void *v = NULL;
    int r = pthread_join(main_thread, &v);
    printf("join_main: join=%s value=%#lx\n", en(r), (unsigned long)(uintptr_t)v);
    fflush(stdout);
    return NULL;
}

/* ---- join cycles (preload only: glibc 2.36 hangs) ---- */

static pthread_t cyc_a, cyc_b;
static atomic_int cyc_rc = -1;

static void *cyc_b_fn(void *arg)
{
    (void)arg;
    msleep(50); /* a is joining us by now */
    atomic_store(&cyc_rc, pthread_join(cyc_a, NULL));
    return NULL;
}

static void *cyc_a_fn(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)pthread_join(cyc_b, NULL);
}

static void *joins_main_later(void *arg)
{
    (void)arg;
    msleep(50); /* main is joining us by now */
    return (void *)(intptr_t)pthread_join(main_thread, NULL);
}

static void join_cycle(void)
{
    cyc_b = spawn(cyc_b_fn, NULL);
    cyc_a = spawn(cyc_a_fn, NULL);
    void *a_rc = join(cyc_a);
    printf("join_cycle: second_joiner=%s first_joiner=%s\n", en(atomic_load(&cyc_rc)), en((int)(intptr_t)a_rc));
    void *m_rc = join(spawn(joins_main_later, NULL));
    printf("join_cycle_main: thread_joins_main=%s\n", en((int)(intptr_t)m_rc));
}

static const struct check checks[] = {
    { "join_detached", check_join_detached },
    { "once_cancelled", check_once_cancelled },
    { "once_exit", check_once_exit },
    { "once_blocks", check_once_blocks },
    { "exit_many", check_exit_many },
    { "relock", check_relock },
};

int main(int argc, char **argv)
{
    main_thread = pthread_self();
    if (argc == 2 && !strcmp(argv[1], "join_main")) {
        alarm(20);
        spawn(join_main, NULL);
        msleep(50);
        pthread_exit((void *)0x2a);
    }
    if (argc == 2 && !strcmp(argv[1], "join_cycle")) {
        alarm(20);
        join_cycle();
        return 0;
    }
    return run_checks(argc, argv, checks, sizeof checks / sizeof *checks);
}
