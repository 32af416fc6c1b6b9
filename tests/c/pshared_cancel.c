/*
 * pshared_cancel: a cancelled thread leaves its wait on a process-shared object
 * cleanly: a condvar wait (its cleanup handler runs with the mutex held), a
 * semaphore wait (no token taken), an asynchronous cancel in a mutex lock
 * (the mutex stays free for the others).
 *
 * usage and output: see pshared.h.
 */
#define _GNU_SOURCE
#include "pshared.h"

/* ---------- cancel: a cancelled waiter leaves its wait cleanly ---------- */

static int cleanup_unlock = -1;

static void cancel_cleanup(void *m)
{
    cleanup_unlock = pthread_mutex_unlock(m);
}

static void *cancel_cond_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&S->m);
    pthread_cleanup_push(cancel_cleanup, &S->m);
    atomic_fetch_add(&S->ready, 1);
    for (;;)
        pthread_cond_wait(&S->c, &S->m);
    pthread_cleanup_pop(0);
    return NULL;
}

static void *cancel_sem_waiter(void *arg)
{
    (void)arg;
    atomic_fetch_add(&S->ready, 1);
    for (;;)
        sem_wait(&S->s1);
    return NULL;
}

static void *cancel_locker(void *arg)
{
    (void)arg;
    int old;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
    atomic_fetch_add(&S->ready, 1);
    pthread_mutex_lock(&S->m2);
    return NULL;
}

static void check_cancel(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_ERRORCHECK, 0);
    mutex_init(&S->m2, PTHREAD_MUTEX_NORMAL, 0);
    cond_init(&S->c, CLOCK_REALTIME);
    sem_init(&S->s1, 1, 0);
    pthread_mutex_lock(&S->m2);
    pthread_t t[3] = { spawn(cancel_cond_waiter, NULL), spawn(cancel_sem_waiter, NULL),
                       spawn(cancel_locker, NULL) };
    await_ready(3);
    msleep(50); /* all three wait now */
    const char *how[3];
    for (int i = 0; i < 3; i++) {
        pthread_cancel(t[i]);
        how[i] = join(t[i]) == PTHREAD_CANCELED ? "cancelled" : "returned";
    }
    EXPECT_EQ("unlock", pthread_mutex_unlock(&S->m2), 0);
    int locked = pthread_mutex_trylock(&S->m2);
    sem_post(&S->s1);
    int v = -1;
    sem_getvalue(&S->s1, &v);
    int took = sem_trywait(&S->s1);
    int free_m = pthread_mutex_trylock(&S->m);
    result("cond waiter %s (cleanup's unlock %s), sem waiter %s, locker %s; then trylock %s, value %d, trywait %d, "
           "condvar's mutex trylock %s",
           how[0], en(cleanup_unlock), how[1], how[2], en(locked), v, took, en(free_m));
}

static const struct check checks[] = {
    { "cancel", check_cancel },
};

int main(int argc, char **argv)
{
    return pshared_main(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
