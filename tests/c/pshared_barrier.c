/*
 * pshared_barrier: process-shared barriers: two threads in a parent and two in its
 * child meet many times (exactly one serial thread a round), and four threads
 * of one process do.
 *
 * usage and output: see pshared.h.
 */
#define _GNU_SOURCE
#include "pshared.h"

/* ---------- barrier: two threads on each side, many rounds ---------- */

#define BARRIER_ROUNDS 50

static void *barrier_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < BARRIER_ROUNDS; i++) {
        int r = pthread_barrier_wait(&S->b);
        if (r == PTHREAD_BARRIER_SERIAL_THREAD)
            __atomic_fetch_add(&S->serials, 1, __ATOMIC_SEQ_CST);
        else if (r != 0)
            fail("pthread_barrier_wait: %s", en(r));
        __atomic_fetch_add(&S->rounds_seen, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static void barrier_side(void)
{
    run_threads(2, barrier_worker);
}

static void check_barrier(void)
{
    shared_new();
    barrier_init(&S->b, 4);
    pid_t pid = child(barrier_side);
    barrier_side();
    reap_ok(pid);
    EXPECT_EQ("destroy", pthread_barrier_destroy(&S->b), 0);
    result("serials %ld (want %d), passes %ld", S->serials, BARRIER_ROUNDS, S->rounds_seen);
}

/* ---------- one_process: used by the threads of one process alone ---------- */

static void check_one_process(void)
{
    shared_new();
    barrier_init(&S->b, 4);
    run_threads(4, barrier_worker);
    int d = pthread_barrier_destroy(&S->b);
    result("serials %ld (want %d), passes %ld, destroy %s", S->serials, BARRIER_ROUNDS, S->rounds_seen, en(d));
}

static const struct check checks[] = {
    { "barrier", check_barrier },
    { "one_process", check_one_process },
};

int main(int argc, char **argv)
{
    return pshared_main(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
