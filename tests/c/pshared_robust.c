/*
 * pshared_robust: process-shared robust mutexes whose owner dies: a child process
 * that exits holding one (the next locker, or the one waiting, gets
 * EOWNERDEAD; unlocked without pthread_mutex_consistent it becomes
 * ENOTRECOVERABLE), a condvar wait whose mutex's owner dies, and a thread that
 * ends holding one, in this process or in a child that lives on.
 *
 * usage and output: see pshared.h.
 */
#define _GNU_SOURCE
#include "pshared.h"

/* ---------- robust: the owner process dies ---------- */

static void robust_die_holding(void)
{
    pthread_mutex_lock(&S->m);
    _exit(0);
}

static void robust_die_later(void)
{
    pthread_mutex_lock(&S->m);
    atomic_store(&S->ready, 1);
    msleep(100); /* the parent waits in pthread_mutex_lock meanwhile */
    _exit(0);
}

static void robust_signal_and_die(void)
{
    await_ready(1); /* the parent waits on the condvar */
    pthread_mutex_lock(&S->m);
    S->go = 1;
    pthread_cond_signal(&S->c);
    _exit(0); /* holding the condvar's mutex */
}

static void check_robust(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_ERRORCHECK, 1);
    reap_ok(child(robust_die_holding));
    int a = pthread_mutex_lock(&S->m);
    int b = pthread_mutex_consistent(&S->m);
    int c = pthread_mutex_unlock(&S->m);
    int d = pthread_mutex_lock(&S->m);
    int e = pthread_mutex_unlock(&S->m);
    /* Waiting when the owner dies. */
    pid_t pid = child(robust_die_later);
    await_ready(1);
    int f = pthread_mutex_lock(&S->m);
    reap_ok(pid);
    /* Unlocked without pthread_mutex_consistent: unrecoverable. */
    int g = pthread_mutex_unlock(&S->m);
    int h = pthread_mutex_lock(&S->m);
    int i = pthread_mutex_trylock(&S->m);
    /* A condvar wait whose mutex's owner dies before it is relocked. */
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_NORMAL, 1);
    cond_init(&S->c, CLOCK_REALTIME);
    pthread_mutex_lock(&S->m);
    pid = child(robust_signal_and_die);
    atomic_store(&S->ready, 1);
    int j = 0;
    while (!S->go && (j = pthread_cond_wait(&S->c, &S->m)) == 0)
        ;
    int k = pthread_mutex_consistent(&S->m);
    pthread_mutex_unlock(&S->m);
    reap_ok(pid);
    result("dead owner %s, consistent %s, unlock %s, relock %s %s; waiting %s, unlock %s, then %s %s; "
           "condvar wait %s, consistent %s",
           en(a), en(b), en(c), en(d), en(e), en(f), en(g), en(h), en(i), en(j), en(k));
}

/* ---------- robust_thread: a thread of the owner dies ---------- */

static void *robust_holder(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&S->m);
    return NULL; /* ends holding it */
}

static void robust_thread_child(void)
{
    join(spawn(robust_holder, NULL));
    atomic_store(&S->ready, 1);
    while (atomic_load(&S->ready) != 2)
        msleep(1);
}

static void check_robust_thread(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_NORMAL, 1);
    /* In this process. */
    join(spawn(robust_holder, NULL));
    int a = pthread_mutex_lock(&S->m);
    int b = pthread_mutex_consistent(&S->m);
    int c = pthread_mutex_unlock(&S->m);
    /* In the other process, which lives on. */
    pid_t pid = child(robust_thread_child);
    await_ready(1);
    int d = pthread_mutex_trylock(&S->m);
    int e = pthread_mutex_consistent(&S->m);
    int f = pthread_mutex_unlock(&S->m);
    atomic_store(&S->ready, 2);
    reap_ok(pid);
    result("here %s %s %s; in the child %s %s %s", en(a), en(b), en(c), en(d), en(e), en(f));
}

static const struct check checks[] = {
    { "robust", check_robust },
    { "robust_thread", check_robust_thread },
};

int main(int argc, char **argv)
{
    return pshared_main(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
