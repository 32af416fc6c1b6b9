/*
 * pshared_mutex: process-shared mutexes (PTHREAD_PROCESS_SHARED, in MAP_SHARED
 * memory) between a parent and its forked child, several threads on each
 * side: a counter and a turn taken under one; who owns an errorcheck or a
 * recursive one (another thread of the owner's process is no owner); a
 * priority-inheritance one; and one used by the threads of one process.
 *
 * usage and output: see pshared.h.
 */
#define _GNU_SOURCE
#include "pshared.h"

/* ---------- mutex: a counter and a turn shared by two processes ---------- */

#define COUNT_THREADS 3
#define COUNT_ITERS 3000

static void *count_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < COUNT_ITERS; i++) {
        EXPECT_EQ("lock", pthread_mutex_lock(&S->m), 0);
        long v = S->counter;
        if (i % 500 == 0)
            usleep(300); /* hold it across a sleep */
        S->counter = v + 1;
        EXPECT_EQ("unlock", pthread_mutex_unlock(&S->m), 0);
    }
    return NULL;
}

static void count_side(void)
{
    run_threads(COUNT_THREADS, count_worker);
}

#define TURNS 300

/* Takes turns with the other process: `me` waits for its turn and gives it
 * back, under the shared mutex and condvar. */
static void take_turns(int me)
{
    for (int i = 0; i < TURNS; i++) {
        pthread_mutex_lock(&S->m);
        while (S->turn != me)
            pthread_cond_wait(&S->c, &S->m);
        S->turn = !me;
        S->handovers++;
        pthread_cond_signal(&S->c);
        pthread_mutex_unlock(&S->m);
    }
}

static void turns_child(void)
{
    take_turns(1);
}

static void check_mutex(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_DEFAULT, 0);
    cond_init(&S->c, CLOCK_REALTIME);
    pid_t pid = child(count_side);
    count_side();
    reap_ok(pid);
    pid = child(turns_child);
    take_turns(0);
    reap_ok(pid);
    result("counter %ld (want %d), handovers %ld", S->counter, 2 * COUNT_THREADS * COUNT_ITERS, S->handovers);
}

/* ---------- mutex_owner: errorcheck and recursive across processes ---------- */

static void owner_child(void)
{
    struct timespec t = in_ms(100);
    S->codes[0] = pthread_mutex_trylock(&S->m);
    S->codes[1] = pthread_mutex_timedlock(&S->m, &t);
    S->codes[2] = pthread_mutex_unlock(&S->m);
    t = in_ms(100);
    S->codes[3] = pthread_mutex_trylock(&S->m2);
    S->codes[4] = pthread_mutex_timedlock(&S->m2, &t);
    S->codes[5] = pthread_mutex_unlock(&S->m2);
    atomic_store(&S->ready, 1);
    /* The parent unlocks both now: these wait for it. */
    S->codes[6] = pthread_mutex_lock(&S->m);
    S->codes[7] = pthread_mutex_lock(&S->m2);
    S->codes[8] = pthread_mutex_lock(&S->m2);
    S->codes[9] = pthread_mutex_unlock(&S->m2);
    S->codes[10] = pthread_mutex_unlock(&S->m2);
    S->codes[11] = pthread_mutex_unlock(&S->m);
}

/* Another thread of the owner's process is no owner either. */
static void *owner_sibling(void *arg)
{
    (void)arg;
    struct timespec t = in_ms(50);
    int a = pthread_mutex_trylock(&S->m);
    int b = pthread_mutex_timedlock(&S->m, &t);
    int c = pthread_mutex_unlock(&S->m);
    t = in_ms(50);
    int d = pthread_mutex_trylock(&S->m2);
    int e = pthread_mutex_timedlock(&S->m2, &t);
    int f = pthread_mutex_unlock(&S->m2);
    result("sibling: errorcheck %s %s %s, recursive %s %s %s", en(a), en(b), en(c), en(d), en(e), en(f));
    return NULL;
}

static void check_mutex_owner(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_ERRORCHECK, 0);
    mutex_init(&S->m2, PTHREAD_MUTEX_RECURSIVE, 0);
    EXPECT_EQ("lock errorcheck", pthread_mutex_lock(&S->m), 0);
    int relock = pthread_mutex_lock(&S->m);
    EXPECT_EQ("lock recursive", pthread_mutex_lock(&S->m2), 0);
    EXPECT_EQ("lock recursive again", pthread_mutex_lock(&S->m2), 0);
    join(spawn(owner_sibling, NULL));
    pid_t pid = child(owner_child);
    await_ready(1);
    msleep(50); /* the child is waiting in pthread_mutex_lock now */
    EXPECT_EQ("unlock errorcheck", pthread_mutex_unlock(&S->m), 0);
    EXPECT_EQ("unlock recursive", pthread_mutex_unlock(&S->m2), 0);
    EXPECT_EQ("unlock recursive again", pthread_mutex_unlock(&S->m2), 0);
    reap_ok(pid);
    int again = pthread_mutex_unlock(&S->m);
    result("owner relock %s; child: errorcheck %s %s %s, recursive %s %s %s; after the owner: %s %s %s %s %s %s; "
           "unlock again %s",
           en(relock), en(S->codes[0]), en(S->codes[1]), en(S->codes[2]), en(S->codes[3]), en(S->codes[4]),
           en(S->codes[5]), en(S->codes[6]), en(S->codes[7]), en(S->codes[8]), en(S->codes[9]), en(S->codes[10]),
           en(S->codes[11]), en(again));
}

/* ---------- mutex_pi: priority-inheritance mutexes between processes ---------- */

static void pi_child(void)
{
    struct timespec t = in_ms(50);
    S->codes[0] = pthread_mutex_trylock(&S->m);
    S->codes[1] = pthread_mutex_timedlock(&S->m, &t);
    atomic_store(&S->ready, 1);
    S->codes[2] = pthread_mutex_lock(&S->m); /* until the parent unlocks */
    S->counter++;
    S->codes[3] = pthread_mutex_unlock(&S->m);
}

static void check_mutex_pi(void)
{
    shared_new();
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    EXPECT_EQ("pthread_mutex_init", pthread_mutex_init(&S->m, &a), 0);
    EXPECT_EQ("lock", pthread_mutex_lock(&S->m), 0);
    pid_t pid = child(pi_child);
    await_ready(1);
    msleep(50);
    EXPECT_EQ("unlock", pthread_mutex_unlock(&S->m), 0);
    reap_ok(pid);
    int again = pthread_mutex_lock(&S->m);
    int relock = pthread_mutex_lock(&S->m);
    pthread_mutex_unlock(&S->m);
    result("child: %s %s %s %s, counter %ld; then %s %s", en(S->codes[0]), en(S->codes[1]), en(S->codes[2]),
           en(S->codes[3]), S->counter, en(again), en(relock));
}

/* ---------- one_process: used by the threads of one process alone ---------- */

static void *one_turns(void *arg)
{
    take_turns((int)(long)arg);
    return NULL;
}

static void check_one_process(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_DEFAULT, 0);
    cond_init(&S->c, CLOCK_REALTIME);
    run_threads(COUNT_THREADS, count_worker);
    run_threads(2, one_turns);
    int a = pthread_mutex_destroy(&S->m);
    mutex_init(&S->m, PTHREAD_MUTEX_RECURSIVE, 0);
    pthread_mutex_lock(&S->m);
    pthread_mutex_lock(&S->m);
    int busy = pthread_mutex_destroy(&S->m);
    pthread_mutex_unlock(&S->m);
    pthread_mutex_unlock(&S->m);
    int b = pthread_mutex_destroy(&S->m);
    result("counter %ld (want %d), handovers %ld; destroy %s, while locked %s, then %s", S->counter,
           COUNT_THREADS * COUNT_ITERS, S->handovers, en(a), en(busy), en(b));
}

static const struct check checks[] = {
    { "mutex", check_mutex },
    { "mutex_owner", check_mutex_owner },
    { "mutex_pi", check_mutex_pi },
    { "one_process", check_one_process },
};

int main(int argc, char **argv)
{
    return pshared_main(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
