/*
 * pshared_cond: process-shared condition variables: a broadcast and signals
 * from the parent reach threads of the child waiting with normal, recursive
 * and robust process-shared mutexes; timed waits on both clocks end with the
 * mutex held; a shared condvar used with a private mutex by the threads of one
 * process.
 *
 * usage and output: see pshared.h.
 */
#define _GNU_SOURCE
#include "pshared.h"

/* ---------- cond: broadcast and signal reach the other process ---------- */

#define COND_WAITERS 3

static void *cond_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&S->m);
    atomic_fetch_add(&S->ready, 1);
    while (!S->go)
        pthread_cond_wait(&S->c, &S->m);
    S->woken++;
    /* Then one token each, handed out by signals. */
    while (S->tokens == 0)
        pthread_cond_wait(&S->c2, &S->m);
    S->tokens--;
    S->woken++;
    pthread_mutex_unlock(&S->m);
    return NULL;
}

static void cond_child(void)
{
    run_threads(COND_WAITERS, cond_waiter);
}

/* With a mutex of `type`, robust or not. */
static void cond_round(int type, int robust, const char *what)
{
    shared_new();
    mutex_init(&S->m, type, robust);
    cond_init(&S->c, CLOCK_REALTIME);
    cond_init(&S->c2, CLOCK_MONOTONIC);
    pid_t pid = child(cond_child);
    await_ready(COND_WAITERS);
    pthread_mutex_lock(&S->m);
    S->go = 1;
    pthread_cond_broadcast(&S->c);
    pthread_mutex_unlock(&S->m);
    for (int i = 0; i < COND_WAITERS; i++) {
        msleep(20);
        pthread_mutex_lock(&S->m);
        S->tokens++;
        pthread_cond_signal(&S->c2);
        pthread_mutex_unlock(&S->m);
    }
    reap_ok(pid);
    result("%s: woken %ld (want %d), tokens left %d", what, S->woken, 2 * COND_WAITERS, S->tokens);
}

static void check_cond(void)
{
    cond_round(PTHREAD_MUTEX_DEFAULT, 0, "normal mutex");
    cond_round(PTHREAD_MUTEX_RECURSIVE, 0, "recursive mutex");
    cond_round(PTHREAD_MUTEX_ERRORCHECK, 1, "robust mutex");
}

/* ---------- cond_timed: timeouts on both clocks keep the mutex ---------- */

static void *cond_timed_probe(void *arg)
{
    (void)arg;
    S->codes[2] = pthread_mutex_trylock(&S->m);
    return NULL;
}

static void cond_timed_child(void)
{
    pthread_mutex_lock(&S->m);
    struct timespec t = in_ms(100);
    S->codes[0] = pthread_cond_timedwait(&S->c, &S->m, &t);
    struct timespec m = deadline(CLOCK_MONOTONIC, 100);
    S->codes[1] = pthread_cond_timedwait(&S->c2, &S->m, &m);
    join(spawn(cond_timed_probe, NULL));
    m = deadline(CLOCK_MONOTONIC, 50);
    S->codes[3] = pthread_cond_clockwait(&S->c, &S->m, CLOCK_MONOTONIC, &m);
    struct timespec bad = { 0, 1000000000L };
    S->codes[4] = pthread_cond_timedwait(&S->c, &S->m, &bad);
    pthread_mutex_unlock(&S->m);
}

static void check_cond_timed(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_ERRORCHECK, 0);
    cond_init(&S->c, CLOCK_REALTIME);
    cond_init(&S->c2, CLOCK_MONOTONIC);
    pid_t pid = child(cond_timed_child);
    reap_ok(pid);
    result("realtime %s, monotonic %s, mutex held after: %s, clockwait %s, bad time %s", en(S->codes[0]),
           en(S->codes[1]), en(S->codes[2]), en(S->codes[3]), en(S->codes[4]));
}

/* ---------- cond_private_mutex: a shared condvar, a private mutex ---------- */

#define TURNS 300

static pthread_mutex_t private_m = PTHREAD_MUTEX_INITIALIZER;

static void *private_turns(void *arg)
{
    int me = (int)(long)arg;
    for (int i = 0; i < TURNS; i++) {
        pthread_mutex_lock(&private_m);
        while (S->turn != me)
            pthread_cond_wait(&S->c, &private_m);
        S->turn = !me;
        S->handovers++;
        pthread_cond_signal(&S->c);
        pthread_mutex_unlock(&private_m);
    }
    return NULL;
}

static void check_cond_private_mutex(void)
{
    shared_new();
    cond_init(&S->c, CLOCK_MONOTONIC);
    run_threads(2, private_turns);
    pthread_mutex_lock(&private_m);
    struct timespec t = deadline(CLOCK_MONOTONIC, 50);
    int r = pthread_cond_timedwait(&S->c, &private_m, &t);
    pthread_mutex_unlock(&private_m);
    result("handovers %ld, timed wait %s", S->handovers, en(r));
}

static const struct check checks[] = {
    { "cond", check_cond },
    { "cond_timed", check_cond_timed },
    { "cond_private_mutex", check_cond_private_mutex },
};

int main(int argc, char **argv)
{
    return pshared_main(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
