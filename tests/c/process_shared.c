/*
 * process_shared: mutexes, condition variables, rwlocks, barriers and
 * semaphores made PTHREAD_PROCESS_SHARED in MAP_SHARED memory, used by a
 * parent and its forked child (both under the preload when there is one:
 * LD_PRELOAD is inherited), with several threads on each side, and by the
 * threads of one process alone.
 *
 * usage: process_shared [companion] [CHECK...]
 *   no checks runs every check in the order below; otherwise only the
 *   named ones (names as printed before the colon). With "companion", each
 *   process also runs a thread that naps until the process is done: under
 *   the preload a main thread then shares its hub with a fiber, so its
 *   waits must let the hub run rather than block in glibc.
 *
 * Children report through the shared memory and their exit status; only
 * the parent prints. A child that goes wrong exits 1 ("FAIL <check>: ..."
 * on stderr), and a child or a parent that hangs dies of alarm(20).
 *
 * stdout: one line per check, "name: result", deterministic.
 * stderr: "time_ms=<total>", and "FAIL <name>: ..." on a wrong result.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

/* ---------- the shared memory and process helpers ---------- */

struct shared {
    pthread_mutex_t m, m2;
    pthread_cond_t c, c2;
    pthread_rwlock_t rw;
    pthread_barrier_t b;
    sem_t s1, s2;
    atomic_int ready;   /* how many of the other side's threads wait now */
    int turn, go, tokens;
    long counter, handovers, woken, serials, rounds_seen;
    int codes[16];      /* a child's return codes, for the parent to print */
};

static struct shared *S;

/* Fresh zeroed MAP_SHARED memory for one check. */
static void shared_new(void)
{
    if (S)
        munmap(S, sizeof *S);
    S = mmap(NULL, sizeof *S, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED)
        fail("mmap: %s", strerror(errno));
}

static void mutex_init(pthread_mutex_t *m, int type, int robust)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_settype(&a, type);
    if (robust)
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    EXPECT_EQ("pthread_mutex_init", pthread_mutex_init(m, &a), 0);
    pthread_mutexattr_destroy(&a);
}

static void cond_init(pthread_cond_t *c, clockid_t clock)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&a, clock);
    EXPECT_EQ("pthread_cond_init", pthread_cond_init(c, &a), 0);
    pthread_condattr_destroy(&a);
}

static void rwlock_init(pthread_rwlock_t *l)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    EXPECT_EQ("pthread_rwlock_init", pthread_rwlock_init(l, &a), 0);
    pthread_rwlockattr_destroy(&a);
}

static void barrier_init(pthread_barrier_t *b, unsigned n)
{
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    EXPECT_EQ("pthread_barrier_init", pthread_barrier_init(b, &a, n), 0);
    pthread_barrierattr_destroy(&a);
}

/* The companion thread of "companion" mode. */
static int companions;
static atomic_int companion_stop;
static pthread_t companion;

static void *companion_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&companion_stop))
        msleep(2);
    return NULL;
}

static void companion_start(void)
{
    if (companions) {
        atomic_store(&companion_stop, 0);
        companion = spawn(companion_main, NULL);
    }
}

static void companion_end(void)
{
    if (companions) {
        atomic_store(&companion_stop, 1);
        join(companion);
    }
}

/* Forks a child that runs fn and exits 0 (fn fails with exit 1). */
static pid_t child(void (*fn)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0) {
        alarm(20);
        companion_start();
        fn();
        companion_end();
        _exit(0);
    }
    return pid;
}

/* Waits for a child and returns its exit code (fails on a signal). */
static int reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            fail("waitpid: %s", strerror(errno));
    if (WIFSIGNALED(st))
        fail("child killed by signal %d", WTERMSIG(st));
    return WEXITSTATUS(st);
}

static void reap_ok(pid_t pid)
{
    EXPECT_EQ("child exit status", reap(pid), 0);
}

/* Waits until `n` threads of the other side said they are about to wait. */
static void await_ready(int n)
{
    while (atomic_load(&S->ready) < n)
        msleep(1);
}

static struct timespec in_ms(long ms)
{
    return deadline(CLOCK_REALTIME, ms);
}

/* Starts `n` threads running fn(i). */
static void run_threads(int n, void *(*fn)(void *))
{
    pthread_t t[16];
    for (long i = 0; i < n; i++)
        t[i] = spawn(fn, (void *)i);
    for (int i = 0; i < n; i++)
        join(t[i]);
}

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

/* ---------- rwlock: writers and readers in two processes ---------- */

static void rwlock_child(void)
{
    struct timespec t = in_ms(100);
    S->codes[0] = pthread_rwlock_tryrdlock(&S->rw);
    S->codes[1] = pthread_rwlock_trywrlock(&S->rw);
    S->codes[2] = pthread_rwlock_timedrdlock(&S->rw, &t);
    atomic_store(&S->ready, 1);
    S->codes[3] = pthread_rwlock_rdlock(&S->rw); /* until the parent unlocks */
    atomic_store(&S->ready, 2);
    while (atomic_load(&S->ready) != 3) /* the parent read-locks too */
        msleep(1);
    S->codes[4] = pthread_rwlock_unlock(&S->rw);
    S->codes[5] = pthread_rwlock_wrlock(&S->rw); /* until the parent unlocks */
    S->codes[6] = pthread_rwlock_wrlock(&S->rw);
    S->codes[7] = pthread_rwlock_rdlock(&S->rw);
    S->counter = 7;
    S->codes[8] = pthread_rwlock_unlock(&S->rw);
}

/* Another thread of the writer's process gets no EDEADLK. */
static void *rwlock_sibling(void *arg)
{
    (void)arg;
    struct timespec t = in_ms(50);
    int a = pthread_rwlock_tryrdlock(&S->rw);
    int b = pthread_rwlock_timedwrlock(&S->rw, &t);
    t = in_ms(50);
    int c = pthread_rwlock_timedrdlock(&S->rw, &t);
    result("sibling of the writer: %s %s %s", en(a), en(b), en(c));
    return NULL;
}

static void check_rwlock(void)
{
    shared_new();
    rwlock_init(&S->rw);
    EXPECT_EQ("wrlock", pthread_rwlock_wrlock(&S->rw), 0);
    int relock = pthread_rwlock_wrlock(&S->rw);
    int rd = pthread_rwlock_rdlock(&S->rw);
    join(spawn(rwlock_sibling, NULL));
    pid_t pid = child(rwlock_child);
    await_ready(1);
    msleep(50);
    EXPECT_EQ("unlock", pthread_rwlock_unlock(&S->rw), 0);
    while (atomic_load(&S->ready) != 2)
        msleep(1);
    EXPECT_EQ("rdlock beside the child", pthread_rwlock_rdlock(&S->rw), 0);
    atomic_store(&S->ready, 3);
    msleep(50); /* the child waits for its write lock now */
    EXPECT_EQ("unlock read", pthread_rwlock_unlock(&S->rw), 0);
    reap_ok(pid);
    result("owner relock %s %s; child: %s %s %s, %s %s, write %s, relock %s %s, unlock %s, saw %ld", en(relock),
           en(rd), en(S->codes[0]), en(S->codes[1]), en(S->codes[2]), en(S->codes[3]), en(S->codes[4]),
           en(S->codes[5]), en(S->codes[6]), en(S->codes[7]), en(S->codes[8]), S->counter);
}

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

/* ---------- one_process: shared objects used by one process's threads ---------- */

static void *one_turns(void *arg)
{
    take_turns((int)(long)arg);
    return NULL;
}

static void *one_pong(void *arg)
{
    (void)arg;
    sem_pong();
    return NULL;
}

static void check_one_process(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_DEFAULT, 0);
    cond_init(&S->c, CLOCK_REALTIME);
    barrier_init(&S->b, 4);
    rwlock_init(&S->rw);
    sem_init(&S->s1, 1, 0);
    sem_init(&S->s2, 1, 0);
    run_threads(COUNT_THREADS, count_worker);
    run_threads(2, one_turns);
    run_threads(4, barrier_worker);
    pthread_t t = spawn(one_pong, NULL);
    for (int i = 0; i < SEM_ROUNDS; i++) {
        sem_post(&S->s1);
        sem_wait(&S->s2);
    }
    join(t);
    EXPECT_EQ("rdlock", pthread_rwlock_rdlock(&S->rw), 0);
    EXPECT_EQ("rdlock", pthread_rwlock_rdlock(&S->rw), 0);
    int w = pthread_rwlock_trywrlock(&S->rw);
    pthread_rwlock_unlock(&S->rw);
    pthread_rwlock_unlock(&S->rw);
    result("counter %ld, handovers %ld, serials %ld, trywrlock beside readers %s", S->counter, S->handovers,
           S->serials, en(w));
}

/* ---------- cond_private_mutex: a shared condvar, a private mutex ---------- */

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

/* ---------- destroy: destroying and re-initialising ---------- */

static void check_destroy(void)
{
    shared_new();
    mutex_init(&S->m, PTHREAD_MUTEX_DEFAULT, 0);
    cond_init(&S->c, CLOCK_REALTIME);
    rwlock_init(&S->rw);
    barrier_init(&S->b, 2);
    sem_init(&S->s1, 1, 1);
    int a = pthread_mutex_destroy(&S->m);
    mutex_init(&S->m, PTHREAD_MUTEX_RECURSIVE, 0);
    pthread_mutex_lock(&S->m);
    pthread_mutex_unlock(&S->m);
    int b = pthread_mutex_destroy(&S->m);
    int c = pthread_cond_destroy(&S->c);
    int d = pthread_rwlock_destroy(&S->rw);
    int e = pthread_barrier_destroy(&S->b);
    int f = sem_destroy(&S->s1);
    result("%s %s %s %s %s %d", en(a), en(b), en(c), en(d), en(e), f);
}

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
    { "mutex", check_mutex },
    { "mutex_owner", check_mutex_owner },
    { "mutex_pi", check_mutex_pi },
    { "cond", check_cond },
    { "cond_timed", check_cond_timed },
    { "cond_private_mutex", check_cond_private_mutex },
    { "rwlock", check_rwlock },
    { "barrier", check_barrier },
    { "sem", check_sem },
    { "sem_named", check_sem_named },
    { "robust", check_robust },
    { "robust_thread", check_robust_thread },
    { "one_process", check_one_process },
    { "destroy", check_destroy },
    { "cancel", check_cancel },
};

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "companion")) {
        companions = 1;
        argv[1] = argv[0];
        argc--;
        argv++;
    }
    companion_start();
    int r = run_checks(argc, argv, checks, sizeof checks / sizeof checks[0]);
    companion_end();
    return r;
}
