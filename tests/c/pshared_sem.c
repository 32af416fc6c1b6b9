/*
 * pshared_sem: process-shared semaphores: unnamed ones (sem_init with pshared 1)
 * between a parent and its child, one thread a side (PostgreSQL's shape) and
 * several; sem_open'd named ones; and unnamed ones between the threads of one
 * process.
 *
 * usage and output: see pshared.h.
 */
#define _GNU_SOURCE
#include "pshared.h"

/* ---------- sem: ping-pong between processes, and many takers ---------- */

#define SEM_ROUNDS 500
#define SEM_TAKERS 3
#define SEM_TAKES 100

static void sem_pong(void)
{
    for (int i = 0; i < SEM_ROUNDS; i++) {
        if (sem_wait(&S->s1) != 0)
            fail("sem_wait: %s", strerror(errno));
        sem_post(&S->s2);
    }
}

static void *sem_taker(void *arg)
{
    (void)arg;
    for (int i = 0; i < SEM_TAKES; i++) {
        if (sem_wait(&S->s1) != 0)
            fail("sem_wait: %s", strerror(errno));
        __atomic_fetch_add(&S->counter, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static void sem_takers(void)
{
    run_threads(SEM_TAKERS, sem_taker);
}

static void *sem_giver(void *arg)
{
    (void)arg;
    for (int i = 0; i < SEM_TAKERS * SEM_TAKES / 2; i++) {
        sem_post(&S->s1);
        if (i % 50 == 0)
            msleep(1);
    }
    return NULL;
}

static void check_sem(void)
{
    shared_new();
    sem_init(&S->s1, 1, 0);
    sem_init(&S->s2, 1, 0);
    /* One thread on each side (PostgreSQL's shape). */
    pid_t pid = child(sem_pong);
    for (int i = 0; i < SEM_ROUNDS; i++) {
        sem_post(&S->s1);
        if (sem_wait(&S->s2) != 0)
            fail("sem_wait: %s", strerror(errno));
    }
    reap_ok(pid);
    /* Several threads on each side. */
    pid = child(sem_takers);
    run_threads(2, sem_giver);
    reap_ok(pid);
    struct timespec t = in_ms(50);
    int r = sem_timedwait(&S->s1, &t);
    int e = errno;
    int v;
    sem_getvalue(&S->s1, &v);
    result("rounds %d, taken %ld (want %d), timed wait %d %s, value %d", SEM_ROUNDS, S->counter,
           SEM_TAKERS * SEM_TAKES, r, en(e), v);
}

/* ---------- sem_named: sem_open'd semaphores between processes ---------- */

static char sem_a[64], sem_b[64];

static void sem_named_child(void)
{
    sem_t *a = sem_open(sem_a, 0);
    sem_t *b = sem_open(sem_b, 0);
    if (a == SEM_FAILED || b == SEM_FAILED)
        fail("sem_open in the child: %s", strerror(errno));
    for (int i = 0; i < SEM_ROUNDS; i++) {
        if (sem_wait(a) != 0)
            fail("sem_wait: %s", strerror(errno));
        sem_post(b);
    }
    sem_close(a);
    sem_close(b);
}

static void check_sem_named(void)
{
    snprintf(sem_a, sizeof sem_a, "/greenhook_ps_a_%d", (int)getpid());
    snprintf(sem_b, sizeof sem_b, "/greenhook_ps_b_%d", (int)getpid());
    sem_t *a = sem_open(sem_a, O_CREAT | O_EXCL, 0600, 0);
    sem_t *b = sem_open(sem_b, O_CREAT | O_EXCL, 0600, 0);
    if (a == SEM_FAILED || b == SEM_FAILED)
        fail("sem_open: %s", strerror(errno));
    pid_t pid = child(sem_named_child);
    long rounds = 0;
    for (int i = 0; i < SEM_ROUNDS; i++) {
        sem_post(a);
        if (sem_wait(b) != 0)
            fail("sem_wait: %s", strerror(errno));
        rounds++;
    }
    reap_ok(pid);
    sem_close(a);
    sem_close(b);
    sem_unlink(sem_a);
    sem_unlink(sem_b);
    result("rounds %ld", rounds);
}

/* ---------- one_process: used by the threads of one process alone ---------- */

static void *one_pong(void *arg)
{
    (void)arg;
    sem_pong();
    return NULL;
}

static void check_one_process(void)
{
    shared_new();
    sem_init(&S->s1, 1, 0);
    sem_init(&S->s2, 1, 0);
    pthread_t t = spawn(one_pong, NULL);
    for (int i = 0; i < SEM_ROUNDS; i++) {
        sem_post(&S->s1);
        if (sem_wait(&S->s2) != 0)
            fail("sem_wait: %s", strerror(errno));
    }
    join(t);
    int d = sem_destroy(&S->s1);
    result("rounds %d, destroy %d", SEM_ROUNDS, d);
}

static const struct check checks[] = {
    { "sem", check_sem },
    { "sem_named", check_sem_named },
    { "one_process", check_one_process },
};

int main(int argc, char **argv)
{
    return pshared_main(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
