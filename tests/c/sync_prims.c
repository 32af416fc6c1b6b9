/*
 * sync_prims: pthread and semaphore synchronisation primitives between
 * threads that really interleave (they sleep inside critical sections, so a
 * runtime that lets one blocked waiter stall the only OS thread deadlocks;
 * alarm(20) turns such a hang into a SIGALRM death instead of a stuck test).
 *
 * usage: sync_prims [CHECK...]
 *   no arguments runs every check in the order below; otherwise only the
 *   named ones (names as printed before the colon).
 *
 * stdout: one line per check, "name: result", deterministic.
 * stderr: "<name>.time_ms=<n>" for each timed wait (ETIMEDOUT paths and waits
 *         that are satisfied by another thread), and "time_ms=<total>".
 * A wrong result: "FAIL <name>: ..." on stderr and exit 1.
 *
 * Note on spinlock: the holder calls sched_yield() inside the critical
 * section, so a cooperative runtime must make pthread_spin_lock yield while
 * it spins (otherwise the spinning fiber never lets the holder run again).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

/* ---------- helpers ---------- */

static void timing(const char *name, long long ms)
{
    fprintf(stderr, "%s.time_ms=%lld\n", name, ms);
}

/* ---------- mutex_condvar: bounded buffer ---------- */

#define PC_PRODUCERS 3
#define PC_CONSUMERS 2
#define PC_ITEMS 2000 /* per producer */
#define PC_CAP 4

static struct {
    pthread_mutex_t m;
    pthread_cond_t not_empty, not_full;
    long buf[PC_CAP];
    int head, count;
    long consumed, sum;
} pc = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0 }, 0, 0, 0, 0 };

static void *pc_producer(void *arg)
{
    long p = (long)arg;
    for (long i = 0; i < PC_ITEMS; i++) {
        pthread_mutex_lock(&pc.m);
        while (pc.count == PC_CAP)
            pthread_cond_wait(&pc.not_full, &pc.m);
        pc.buf[(pc.head + pc.count) % PC_CAP] = p * 100000 + i;
        pc.count++;
        if (i % 97 == 0)
            usleep(200); /* sleep while holding the mutex */
        pthread_cond_signal(&pc.not_empty);
        pthread_mutex_unlock(&pc.m);
    }
    return NULL;
}

static void *pc_consumer(void *arg)
{
    (void)arg;
    long total = (long)PC_PRODUCERS * PC_ITEMS;
    for (;;) {
        pthread_mutex_lock(&pc.m);
        while (pc.count == 0 && pc.consumed < total)
            pthread_cond_wait(&pc.not_empty, &pc.m);
        if (pc.count == 0 && pc.consumed == total) {
            pthread_cond_broadcast(&pc.not_empty);
            pthread_mutex_unlock(&pc.m);
            return NULL;
        }
        long v = pc.buf[pc.head];
        pc.head = (pc.head + 1) % PC_CAP;
        pc.count--;
        pc.consumed++;
        pc.sum += v;
        if (pc.consumed % 89 == 0)
            usleep(150);
        if (pc.consumed == total)
            pthread_cond_broadcast(&pc.not_empty);
        pthread_cond_signal(&pc.not_full);
        pthread_mutex_unlock(&pc.m);
    }
}

static void check_mutex_condvar(void)
{
    pthread_t p[PC_PRODUCERS], c[PC_CONSUMERS];
    for (long i = 0; i < PC_CONSUMERS; i++)
        c[i] = spawn(pc_consumer, (void *)i);
    for (long i = 0; i < PC_PRODUCERS; i++)
        p[i] = spawn(pc_producer, (void *)i);
    for (int i = 0; i < PC_PRODUCERS; i++)
        join(p[i]);
    for (int i = 0; i < PC_CONSUMERS; i++)
        join(c[i]);
    long want = 0;
    for (long pr = 0; pr < PC_PRODUCERS; pr++)
        for (long i = 0; i < PC_ITEMS; i++)
            want += pr * 100000 + i;
    EXPECT_EQ("items", pc.consumed, (long)PC_PRODUCERS * PC_ITEMS);
    EXPECT_EQ("sum", pc.sum, want);
    result("items=%ld sum=%ld", pc.consumed, pc.sum);
}

/* ---------- cond_broadcast ---------- */

static struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    int waiting, go, woke;
} bc = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };

static void *bc_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&bc.m);
    bc.waiting++;
    while (!bc.go)
        pthread_cond_wait(&bc.c, &bc.m);
    bc.woke++;
    pthread_mutex_unlock(&bc.m);
    return NULL;
}

static void check_cond_broadcast(void)
{
    enum { N = 5 };
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        t[i] = spawn(bc_waiter, NULL);
    for (;;) {
        pthread_mutex_lock(&bc.m);
        int w = bc.waiting;
        pthread_mutex_unlock(&bc.m);
        if (w == N)
            break;
        msleep(1);
    }
    msleep(20);
    pthread_mutex_lock(&bc.m);
    bc.go = 1;
    pthread_cond_broadcast(&bc.c);
    pthread_mutex_unlock(&bc.m);
    for (int i = 0; i < N; i++)
        join(t[i]);
    EXPECT_EQ("woke", bc.woke, N);
    result("woke=%d", bc.woke);
}

/* ---------- rwlock ---------- */

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static atomic_int rw_readers_inside, rw_writers_inside, rw_max_readers;
static long rw_counter;
static pthread_barrier_t rw_barrier;

static void *rw_shared_reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&rw_barrier);
    pthread_rwlock_rdlock(&rw);
    int n = atomic_fetch_add(&rw_readers_inside, 1) + 1;
    int m = atomic_load(&rw_max_readers);
    while (n > m && !atomic_compare_exchange_weak(&rw_max_readers, &m, n))
        ;
    msleep(50);
    atomic_fetch_sub(&rw_readers_inside, 1);
    pthread_rwlock_unlock(&rw);
    return NULL;
}

static void check_rwlock_shared(void)
{
    enum { N = 4 };
    pthread_t t[N];
    pthread_barrier_init(&rw_barrier, NULL, N);
    for (int i = 0; i < N; i++)
        t[i] = spawn(rw_shared_reader, NULL);
    for (int i = 0; i < N; i++)
        join(t[i]);
    pthread_barrier_destroy(&rw_barrier);
    if (atomic_load(&rw_max_readers) < 2)
        fail("readers never overlapped (max %d inside)", atomic_load(&rw_max_readers));
    result("max_readers>=2");
}

#define RW_ITERS 40

static void *rw_writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < RW_ITERS; i++) {
        pthread_rwlock_wrlock(&rw);
        if (atomic_load(&rw_readers_inside) != 0 || atomic_load(&rw_writers_inside) != 0)
            fail("writer not exclusive");
        atomic_store(&rw_writers_inside, 1);
        long x = rw_counter;
        usleep(100);
        rw_counter = x + 1;
        atomic_store(&rw_writers_inside, 0);
        pthread_rwlock_unlock(&rw);
        usleep(50);
    }
    return NULL;
}

static void *rw_reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < RW_ITERS; i++) {
        pthread_rwlock_rdlock(&rw);
        atomic_fetch_add(&rw_readers_inside, 1);
        if (atomic_load(&rw_writers_inside) != 0)
            fail("reader inside with a writer");
        usleep(100);
        atomic_fetch_sub(&rw_readers_inside, 1);
        pthread_rwlock_unlock(&rw);
        usleep(50);
    }
    return NULL;
}

static void check_rwlock_exclusive(void)
{
    enum { W = 3, R = 3 };
    pthread_t t[W + R];
    rw_counter = 0;
    for (int i = 0; i < W; i++)
        t[i] = spawn(rw_writer, NULL);
    for (int i = 0; i < R; i++)
        t[W + i] = spawn(rw_reader, NULL);
    for (int i = 0; i < W + R; i++)
        join(t[i]);
    EXPECT_EQ("counter", rw_counter, W * RW_ITERS);
    result("counter=%ld", rw_counter);
}

static struct event rw_held = EVENT_INIT, rw_release = EVENT_INIT;

static void *rw_holder(void *arg)
{
    int write = (int)(long)arg;
    if (write)
        pthread_rwlock_wrlock(&rw);
    else
        pthread_rwlock_rdlock(&rw);
    ev_set(&rw_held);
    ev_wait(&rw_release);
    pthread_rwlock_unlock(&rw);
    return NULL;
}

static void check_rwlock_try(void)
{
    ev_reset(&rw_held);
    ev_reset(&rw_release);
    pthread_t t = spawn(rw_holder, (void *)1L);
    ev_wait(&rw_held);
    int tryrd = pthread_rwlock_tryrdlock(&rw);
    int trywr = pthread_rwlock_trywrlock(&rw);
    struct timespec d = deadline(CLOCK_REALTIME, 100);
    long long t0 = now_ms();
    int timedrd = pthread_rwlock_timedrdlock(&rw, &d);
    long long e1 = now_ms() - t0;
    d = deadline(CLOCK_REALTIME, 100);
    t0 = now_ms();
    int timedwr = pthread_rwlock_timedwrlock(&rw, &d);
    long long e2 = now_ms() - t0;
    d = deadline(CLOCK_MONOTONIC, 100);
    t0 = now_ms();
    int clockrd = pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &d);
    long long e3 = now_ms() - t0;
    timing("rwlock_timedrdlock", e1);
    timing("rwlock_timedwrlock", e2);
    timing("rwlock_clockrdlock", e3);
    ev_set(&rw_release);
    join(t);
    EXPECT_EQ("tryrdlock", tryrd, EBUSY);
    EXPECT_EQ("trywrlock", trywr, EBUSY);
    EXPECT_EQ("timedrdlock", timedrd, ETIMEDOUT);
    EXPECT_EQ("timedwrlock", timedwr, ETIMEDOUT);
    EXPECT_EQ("clockrdlock", clockrd, ETIMEDOUT);
    if (e1 < 100 || e2 < 100 || e3 < 100)
        fail("timed rwlock returned early (%lld, %lld, %lld ms)", e1, e2, e3);
    result("tryrd=%s trywr=%s timedrd=%s timedwr=%s clockrd=%s", en(tryrd), en(trywr), en(timedrd),
           en(timedwr), en(clockrd));
}

static void check_rwlock_try_read_held(void)
{
    ev_reset(&rw_held);
    ev_reset(&rw_release);
    pthread_t t = spawn(rw_holder, (void *)0L);
    ev_wait(&rw_held);
    int tryrd = pthread_rwlock_tryrdlock(&rw);
    if (tryrd == 0)
        pthread_rwlock_unlock(&rw);
    int trywr = pthread_rwlock_trywrlock(&rw);
    struct timespec d = deadline(CLOCK_REALTIME, 100);
    long long t0 = now_ms();
    int timedwr = pthread_rwlock_timedwrlock(&rw, &d);
    timing("rwlock_timedwrlock_read_held", now_ms() - t0);
    ev_set(&rw_release);
    join(t);
    EXPECT_EQ("tryrdlock", tryrd, 0);
    EXPECT_EQ("trywrlock", trywr, EBUSY);
    EXPECT_EQ("timedwrlock", timedwr, ETIMEDOUT);
    result("tryrd=%s trywr=%s timedwr=%s", en(tryrd), en(trywr), en(timedwr));
}

/* glibc remembers the writer's TID: a writer asking again gets EDEADLK. */
static void check_rwlock_own_write(void)
{
    pthread_rwlock_t l;
    pthread_rwlock_init(&l, NULL);
    int wr = pthread_rwlock_wrlock(&l);
    int rd2 = pthread_rwlock_rdlock(&l);
    int wr2 = pthread_rwlock_wrlock(&l);
    int tryrd = pthread_rwlock_tryrdlock(&l);
    int un = pthread_rwlock_unlock(&l);
    pthread_rwlock_destroy(&l);
    EXPECT_EQ("wrlock", wr, 0);
    EXPECT_EQ("rdlock while writer", rd2, EDEADLK);
    EXPECT_EQ("wrlock while writer", wr2, EDEADLK);
    EXPECT_EQ("tryrdlock while writer", tryrd, EBUSY);
    EXPECT_EQ("unlock", un, 0);
    result("wrlock=%s rdlock=%s wrlock_again=%s tryrdlock=%s unlock=%s", en(wr), en(rd2), en(wr2),
           en(tryrd), en(un));
}

/* ---------- semaphores ---------- */

static int sem_rc(int r)
{
    return r == 0 ? 0 : errno;
}

static void check_sem_basic(void)
{
    sem_t s;
    if (sem_init(&s, 0, 0) != 0)
        fail("sem_init: %s", strerror(errno));
    int tw = sem_rc(sem_trywait(&s));
    sem_post(&s);
    sem_post(&s);
    sem_post(&s);
    int v3 = -1;
    sem_getvalue(&s, &v3);
    int w = 0;
    for (int i = 0; i < 3; i++)
        w |= sem_rc(sem_wait(&s));
    int v0 = -1;
    sem_getvalue(&s, &v0);
    int tw2 = sem_rc(sem_trywait(&s));
    sem_destroy(&s);
    EXPECT_EQ("trywait on 0", tw, EAGAIN);
    EXPECT_EQ("value after 3 posts", v3, 3);
    EXPECT_EQ("waits", w, 0);
    EXPECT_EQ("value after 3 waits", v0, 0);
    EXPECT_EQ("trywait on 0 again", tw2, EAGAIN);
    result("trywait=%s value_after_posts=%d waits=%s value_after_waits=%d", en(tw), v3, en(w), v0);
}

static sem_t sem_a;

static void *sem_post_later(void *arg)
{
    msleep((long)arg);
    sem_post(&sem_a);
    return NULL;
}

static void check_sem_timedwait(void)
{
    sem_init(&sem_a, 0, 0);
    struct timespec d = deadline(CLOCK_REALTIME, 100);
    long long t0 = now_ms();
    int r1 = sem_rc(sem_timedwait(&sem_a, &d));
    long long e1 = now_ms() - t0;
    timing("sem_timedwait_timeout", e1);

    d = deadline(CLOCK_MONOTONIC, 100);
    t0 = now_ms();
    int r2 = sem_rc(sem_clockwait(&sem_a, CLOCK_MONOTONIC, &d));
    long long e2 = now_ms() - t0;
    timing("sem_clockwait_timeout", e2);

    pthread_t t = spawn(sem_post_later, (void *)50L);
    d = deadline(CLOCK_REALTIME, 5000);
    t0 = now_ms();
    int r3 = sem_rc(sem_timedwait(&sem_a, &d));
    timing("sem_timedwait_posted", now_ms() - t0);
    join(t);

    /* glibc validates tv_nsec before the fast path: EINVAL even if value > 0 */
    struct timespec bad = { time(NULL) + 10, 1000000000L };
    int r4 = sem_rc(sem_timedwait(&sem_a, &bad));
    sem_post(&sem_a);
    int r5 = sem_rc(sem_timedwait(&sem_a, &bad));
    int v = -1;
    sem_getvalue(&sem_a, &v);
    /* an absolute time in the past with value 0 times out at once */
    struct timespec past = { 0, 0 };
    int r6 = sem_rc(sem_trywait(&sem_a));
    int r7 = sem_rc(sem_timedwait(&sem_a, &past));
    sem_destroy(&sem_a);

    EXPECT_EQ("timedwait timeout", r1, ETIMEDOUT);
    EXPECT_EQ("clockwait timeout", r2, ETIMEDOUT);
    EXPECT_EQ("timedwait posted", r3, 0);
    EXPECT_EQ("bad nsec, value 0", r4, EINVAL);
    EXPECT_EQ("bad nsec, value 1", r5, EINVAL);
    EXPECT_EQ("value after bad nsec", v, 1);
    EXPECT_EQ("trywait", r6, 0);
    EXPECT_EQ("timedwait past", r7, ETIMEDOUT);
    if (e1 < 100 || e2 < 100)
        fail("sem timed wait returned early (%lld, %lld ms)", e1, e2);
    result("timeout=%s clock_timeout=%s posted=%s bad_nsec=%s bad_nsec_value1=%s value=%d past=%s", en(r1),
           en(r2), en(r3), en(r4), en(r5), v, en(r7));
}

#define SEMC_PRODUCERS 2
#define SEMC_CONSUMERS 4
#define SEMC_POSTS 1000 /* per producer */
static sem_t semc;
static atomic_long semc_waits;

static void *semc_producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < SEMC_POSTS; i++) {
        sem_post(&semc);
        if (i % 50 == 0)
            usleep(500);
    }
    return NULL;
}

static void *semc_consumer(void *arg)
{
    (void)arg;
    for (int i = 0; i < SEMC_PRODUCERS * SEMC_POSTS / SEMC_CONSUMERS; i++) {
        while (sem_wait(&semc) != 0)
            if (errno != EINTR)
                fail("sem_wait: %s", strerror(errno));
        atomic_fetch_add(&semc_waits, 1);
    }
    return NULL;
}

static void check_sem_counting(void)
{
    pthread_t t[SEMC_PRODUCERS + SEMC_CONSUMERS];
    sem_init(&semc, 0, 0);
    for (int i = 0; i < SEMC_CONSUMERS; i++)
        t[i] = spawn(semc_consumer, NULL);
    for (int i = 0; i < SEMC_PRODUCERS; i++)
        t[SEMC_CONSUMERS + i] = spawn(semc_producer, NULL);
    for (int i = 0; i < SEMC_PRODUCERS + SEMC_CONSUMERS; i++)
        join(t[i]);
    int v = -1;
    sem_getvalue(&semc, &v);
    sem_destroy(&semc);
    EXPECT_EQ("waits", atomic_load(&semc_waits), SEMC_PRODUCERS * SEMC_POSTS);
    EXPECT_EQ("value", v, 0);
    result("waits=%ld value=%d", atomic_load(&semc_waits), v);
}

static sem_t semw;
static atomic_int semw_inside;

static void *semw_waiter(void *arg)
{
    (void)arg;
    atomic_fetch_add(&semw_inside, 1);
    sem_wait(&semw);
    return NULL;
}

/* Linux glibc reports 0, not minus the number of waiters. */
static void check_sem_getvalue_with_waiters(void)
{
    sem_init(&semw, 0, 0);
    pthread_t a = spawn(semw_waiter, NULL), b = spawn(semw_waiter, NULL);
    while (atomic_load(&semw_inside) < 2)
        msleep(1);
    msleep(50);
    int v = 99;
    sem_getvalue(&semw, &v);
    sem_post(&semw);
    sem_post(&semw);
    join(a);
    join(b);
    int v2 = 99;
    sem_getvalue(&semw, &v2);
    sem_destroy(&semw);
    EXPECT_EQ("value with 2 waiters", v, 0);
    EXPECT_EQ("value after", v2, 0);
    result("value=%d value_after=%d", v, v2);
}

static sem_t *named;

static void *named_waiter(void *arg)
{
    (void)arg;
    if (sem_wait(named) != 0)
        fail("sem_wait(named): %s", strerror(errno));
    return NULL;
}

static void check_sem_named(void)
{
    char name[64];
    snprintf(name, sizeof name, "/greenhook-sync-%d", (int)getpid());
    sem_unlink(name);
    named = sem_open(name, O_CREAT | O_EXCL, 0600, 0);
    if (named == SEM_FAILED)
        fail("sem_open: %s", strerror(errno));
    sem_t *again = sem_open(name, O_CREAT | O_EXCL, 0600, 0);
    int excl = again == SEM_FAILED ? errno : 0;
    pthread_t t = spawn(named_waiter, NULL);
    msleep(50);
    long long t0 = now_ms();
    sem_post(named);
    join(t);
    timing("sem_named_wake", now_ms() - t0);
    int v = -1;
    sem_getvalue(named, &v);
    int cl = sem_rc(sem_close(named));
    int ul = sem_rc(sem_unlink(name));
    sem_t *re = sem_open(name, 0);
    int reopen = re == SEM_FAILED ? errno : 0;
    int ul2 = sem_rc(sem_unlink(name));
    EXPECT_EQ("second O_EXCL open", excl, EEXIST);
    EXPECT_EQ("value", v, 0);
    EXPECT_EQ("close", cl, 0);
    EXPECT_EQ("unlink", ul, 0);
    EXPECT_EQ("reopen", reopen, ENOENT);
    EXPECT_EQ("unlink again", ul2, ENOENT);
    result("excl=%s woken=1 value=%d close=%s unlink=%s reopen=%s unlink_again=%s", en(excl), v, en(cl),
           en(ul), en(reopen), en(ul2));
}

/* ---------- barrier ---------- */

#define BAR_N 5
#define BAR_ROUNDS 20
static pthread_barrier_t bar;
static atomic_int bar_arrived[BAR_ROUNDS], bar_serial[BAR_ROUNDS];

static void *bar_thread(void *arg)
{
    long id = (long)arg;
    for (int r = 0; r < BAR_ROUNDS; r++) {
        usleep((useconds_t)(((id * 7 + r * 3) % 5) * 300));
        atomic_fetch_add(&bar_arrived[r], 1);
        int rc = pthread_barrier_wait(&bar);
        if (rc == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&bar_serial[r], 1);
        else if (rc != 0)
            fail("pthread_barrier_wait: %s", en(rc));
        if (atomic_load(&bar_arrived[r]) != BAR_N)
            fail("round %d: passed the barrier with %d arrived", r, atomic_load(&bar_arrived[r]));
    }
    return NULL;
}

static void check_barrier(void)
{
    pthread_t t[BAR_N];
    pthread_barrier_init(&bar, NULL, BAR_N);
    for (long i = 0; i < BAR_N; i++)
        t[i] = spawn(bar_thread, (void *)i);
    for (int i = 0; i < BAR_N; i++)
        join(t[i]);
    int destroy = pthread_barrier_destroy(&bar);
    for (int r = 0; r < BAR_ROUNDS; r++)
        if (atomic_load(&bar_serial[r]) != 1)
            fail("round %d: %d serial threads", r, atomic_load(&bar_serial[r]));
    EXPECT_EQ("destroy", destroy, 0);
    pthread_barrier_t b1;
    int init0 = pthread_barrier_init(&b1, NULL, 0);
    result("threads=%d rounds=%d serial_per_round=1 init_count0=%s", BAR_N, BAR_ROUNDS, en(init0));
    EXPECT_EQ("init with count 0", init0, EINVAL);
}

/* ---------- pthread_once ---------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int once_calls, once_done, once_saw_done;

static void once_init(void)
{
    atomic_fetch_add(&once_calls, 1);
    msleep(50); /* others must wait here, not skip ahead */
    atomic_store(&once_done, 1);
}

static void *once_thread(void *arg)
{
    (void)arg;
    pthread_once(&once, once_init);
    if (atomic_load(&once_done))
        atomic_fetch_add(&once_saw_done, 1);
    return NULL;
}

static void check_once(void)
{
    enum { N = 8 };
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        t[i] = spawn(once_thread, NULL);
    for (int i = 0; i < N; i++)
        join(t[i]);
    pthread_once(&once, once_init);
    EXPECT_EQ("init calls", once_calls, 1);
    EXPECT_EQ("threads that saw init done", once_saw_done, N);
    result("init_calls=%d saw_done=%d", atomic_load(&once_calls), atomic_load(&once_saw_done));
}

/* ---------- thread-specific data ---------- */

static pthread_key_t key, key_again;
static atomic_int dtor_calls, dtor_sum, dtor_again_calls, key_initial_nonnull;

static void dtor(void *p)
{
    atomic_fetch_add(&dtor_calls, 1);
    atomic_fetch_add(&dtor_sum, *(int *)p);
    free(p);
}

/* sets its value again the first time, so it runs a second round */
static void dtor_again(void *p)
{
    int n = atomic_fetch_add(&dtor_again_calls, 1) + 1;
    if (n == 1)
        pthread_setspecific(key_again, p);
}

static void *key_thread(void *arg)
{
    long mode = (long)arg; /* 1..5: set id; 6: set nothing; 7: set then clear */
    if (pthread_getspecific(key) != NULL)
        atomic_fetch_add(&key_initial_nonnull, 1);
    if (mode <= 5) {
        int *v = malloc(sizeof *v);
        *v = (int)mode;
        pthread_setspecific(key, v);
        msleep(2);
        if (pthread_getspecific(key) != v)
            fail("getspecific after a sleep returned another value");
    } else if (mode == 7) {
        int *v = malloc(sizeof *v);
        *v = 1000;
        pthread_setspecific(key, v);
        msleep(2);
        pthread_setspecific(key, NULL);
        free(v);
    }
    return NULL;
}

static void *key_again_thread(void *arg)
{
    (void)arg;
    static int dummy;
    pthread_setspecific(key_again, &dummy);
    return NULL;
}

static void check_keys(void)
{
    enum { N = 7 };
    pthread_key_create(&key, dtor);
    pthread_key_create(&key_again, dtor_again);
    int *mine = malloc(sizeof *mine);
    *mine = 500;
    pthread_setspecific(key, mine); /* main never exits: no destructor */
    pthread_t t[N];
    for (long i = 0; i < N; i++)
        t[i] = spawn(key_thread, (void *)(i + 1));
    for (int i = 0; i < N; i++)
        join(t[i]);
    join(spawn(key_again_thread, NULL));
    if (pthread_getspecific(key) != mine)
        fail("main's value changed");
    pthread_setspecific(key, NULL);
    free(mine);
    int del = pthread_key_delete(key);
    EXPECT_EQ("initial non-NULL values", key_initial_nonnull, 0);
    EXPECT_EQ("destructor calls", dtor_calls, 5);
    EXPECT_EQ("destructor value sum", dtor_sum, 15);
    EXPECT_EQ("re-set destructor calls", dtor_again_calls, 2);
    EXPECT_EQ("key_delete", del, 0);
    result("initial_null=yes destructor_calls=%d value_sum=%d reset_in_destructor_calls=%d delete=%s",
           atomic_load(&dtor_calls), atomic_load(&dtor_sum), atomic_load(&dtor_again_calls), en(del));
}

/* ---------- mutex kinds ---------- */

static pthread_mutex_t km;
static struct event km_held = EVENT_INIT, km_release = EVENT_INIT;
static int km_other_try, km_other_unlock;

static void *km_other(void *arg)
{
    (void)arg;
    km_other_try = pthread_mutex_trylock(&km);
    if (km_other_try == 0)
        pthread_mutex_unlock(&km);
    km_other_unlock = pthread_mutex_unlock(&km);
    return NULL;
}

static void make_mutex(pthread_mutex_t *m, int type)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, type);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

static void check_mutex_recursive(void)
{
    make_mutex(&km, PTHREAD_MUTEX_RECURSIVE);
    int l1 = pthread_mutex_lock(&km);
    int l2 = pthread_mutex_lock(&km);
    int tl = pthread_mutex_trylock(&km);
    join(spawn(km_other, NULL));
    int u1 = pthread_mutex_unlock(&km);
    int u2 = pthread_mutex_unlock(&km);
    int u3 = pthread_mutex_unlock(&km);
    int u4 = pthread_mutex_unlock(&km);
    pthread_mutex_destroy(&km);
    EXPECT_EQ("lock", l1, 0);
    EXPECT_EQ("lock again", l2, 0);
    EXPECT_EQ("trylock by owner", tl, 0);
    EXPECT_EQ("trylock by other", km_other_try, EBUSY);
    EXPECT_EQ("unlock by other", km_other_unlock, EPERM);
    EXPECT_EQ("unlock 1", u1, 0);
    EXPECT_EQ("unlock 2", u2, 0);
    EXPECT_EQ("unlock 3", u3, 0);
    EXPECT_EQ("unlock 4", u4, EPERM);
    result("lock=%s lock=%s trylock=%s other_trylock=%s other_unlock=%s unlock=%s unlock=%s unlock=%s "
           "unlock=%s",
           en(l1), en(l2), en(tl), en(km_other_try), en(km_other_unlock), en(u1), en(u2), en(u3), en(u4));
}

static void check_mutex_errorcheck(void)
{
    make_mutex(&km, PTHREAD_MUTEX_ERRORCHECK);
    int l1 = pthread_mutex_lock(&km);
    int l2 = pthread_mutex_lock(&km);
    int tl = pthread_mutex_trylock(&km);
    join(spawn(km_other, NULL));
    int u1 = pthread_mutex_unlock(&km);
    int u2 = pthread_mutex_unlock(&km);
    pthread_mutex_destroy(&km);
    EXPECT_EQ("lock", l1, 0);
    EXPECT_EQ("relock", l2, EDEADLK);
    EXPECT_EQ("trylock by owner", tl, EBUSY);
    EXPECT_EQ("trylock by other", km_other_try, EBUSY);
    EXPECT_EQ("unlock by other", km_other_unlock, EPERM);
    EXPECT_EQ("unlock", u1, 0);
    EXPECT_EQ("unlock again", u2, EPERM);
    result("lock=%s relock=%s trylock=%s other_trylock=%s other_unlock=%s unlock=%s unlock_again=%s", en(l1),
           en(l2), en(tl), en(km_other_try), en(km_other_unlock), en(u1), en(u2));
}

static void *km_holder(void *arg)
{
    long ms = (long)arg;
    pthread_mutex_lock(&km);
    ev_set(&km_held);
    if (ms > 0)
        msleep(ms);
    else
        ev_wait(&km_release);
    pthread_mutex_unlock(&km);
    return NULL;
}

static void check_mutex_trylock(void)
{
    pthread_mutex_init(&km, NULL);
    ev_reset(&km_held);
    ev_reset(&km_release);
    pthread_t t = spawn(km_holder, (void *)0L);
    ev_wait(&km_held);
    int other = pthread_mutex_trylock(&km);
    ev_set(&km_release);
    join(t);
    int free_ = pthread_mutex_trylock(&km);
    int self = pthread_mutex_trylock(&km);
    pthread_mutex_unlock(&km);
    pthread_mutex_destroy(&km);
    EXPECT_EQ("trylock held by other", other, EBUSY);
    EXPECT_EQ("trylock free", free_, 0);
    EXPECT_EQ("trylock held by self", self, EBUSY);
    result("held_by_other=%s free=%s held_by_self=%s", en(other), en(free_), en(self));
}

static void check_mutex_timedlock(void)
{
    pthread_mutex_init(&km, NULL);
    ev_reset(&km_held);
    pthread_t t = spawn(km_holder, (void *)400L);
    ev_wait(&km_held);
    long long t0 = now_ms();
    struct timespec d = deadline(CLOCK_REALTIME, 100);
    int r1 = pthread_mutex_timedlock(&km, &d);
    long long e1 = now_ms() - t0;
    long long t1 = now_ms();
    d = deadline(CLOCK_MONOTONIC, 100);
    int r2 = pthread_mutex_clocklock(&km, CLOCK_MONOTONIC, &d);
    long long e2 = now_ms() - t1;
    struct timespec bad = { time(NULL) + 10, 1000000000L };
    int r3 = pthread_mutex_timedlock(&km, &bad); /* blocked + bad nsec */
    t1 = now_ms();
    d = deadline(CLOCK_REALTIME, 5000);
    int r4 = pthread_mutex_timedlock(&km, &d); /* holder releases ~400 ms after start */
    long long e4 = now_ms() - t0;
    if (r4 == 0)
        pthread_mutex_unlock(&km);
    join(t);
    int r5 = pthread_mutex_timedlock(&km, &bad); /* free + bad nsec: fast path wins */
    if (r5 == 0)
        pthread_mutex_unlock(&km);
    pthread_mutex_destroy(&km);
    timing("mutex_timedlock_timeout", e1);
    timing("mutex_clocklock_timeout", e2);
    timing("mutex_timedlock_acquired", e4);
    EXPECT_EQ("timedlock", r1, ETIMEDOUT);
    EXPECT_EQ("clocklock", r2, ETIMEDOUT);
    EXPECT_EQ("timedlock bad nsec while held", r3, EINVAL);
    EXPECT_EQ("timedlock acquired", r4, 0);
    EXPECT_EQ("timedlock bad nsec while free", r5, 0);
    if (e1 < 100 || e2 < 100)
        fail("timed lock returned early (%lld, %lld ms)", e1, e2);
    result("timeout=%s clock_timeout=%s bad_nsec_held=%s acquired=%s bad_nsec_free=%s", en(r1), en(r2),
           en(r3), en(r4), en(r5));
}

/* A robust mutex whose owner exits: the next locker gets EOWNERDEAD. */
static void *robust_owner(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&km);
    return NULL; /* exits holding it */
}

static void check_mutex_robust(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&km, &a);
    pthread_mutexattr_destroy(&a);
    join(spawn(robust_owner, NULL));
    int r1 = pthread_mutex_lock(&km);
    int c = pthread_mutex_consistent(&km);
    int u = pthread_mutex_unlock(&km);
    int r2 = pthread_mutex_lock(&km);
    pthread_mutex_unlock(&km);
    pthread_mutex_destroy(&km);
    EXPECT_EQ("lock after owner died", r1, EOWNERDEAD);
    EXPECT_EQ("consistent", c, 0);
    EXPECT_EQ("unlock", u, 0);
    EXPECT_EQ("lock again", r2, 0);
    result("lock=%s consistent=%s unlock=%s lock_again=%s", en(r1), en(c), en(u), en(r2));
}

/* ---------- condvar timeouts ---------- */

static pthread_mutex_t cm;
static pthread_cond_t cv;
static int cv_flag;

static void *cv_signal_later(void *arg)
{
    msleep((long)arg);
    pthread_mutex_lock(&cm);
    cv_flag = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&cm);
    return NULL;
}

/* timed wait on cv with clock clk (the condvar's clock unless use_clockwait) */
static int cv_wait_ms(clockid_t clk, long ms, int use_clockwait)
{
    struct timespec d = deadline(clk, ms);
    int rc = 0;
    while (!cv_flag && rc == 0)
        rc = use_clockwait ? pthread_cond_clockwait(&cv, &cm, clk, &d) : pthread_cond_timedwait(&cv, &cm, &d);
    return rc;
}

static void check_cond_timed(const char *label, clockid_t clk, int use_clockwait)
{
    make_mutex(&cm, PTHREAD_MUTEX_ERRORCHECK);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    if (!use_clockwait && clk != CLOCK_REALTIME)
        pthread_condattr_setclock(&ca, clk);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    cv_flag = 0;

    pthread_mutex_lock(&cm);
    long long t0 = now_ms();
    int r1 = cv_wait_ms(clk, 100, use_clockwait);
    long long e1 = now_ms() - t0;
    /* the mutex must be held again after a timeout: errorcheck unlock says so */
    int relock1 = pthread_mutex_unlock(&cm);

    pthread_t t = spawn(cv_signal_later, (void *)50L);
    pthread_mutex_lock(&cm);
    t0 = now_ms();
    int r2 = cv_wait_ms(clk, 5000, use_clockwait);
    long long e2 = now_ms() - t0;
    int relock2 = pthread_mutex_unlock(&cm);
    join(t);

    pthread_mutex_lock(&cm);
    struct timespec bad = { time(NULL) + 10, 1000000000L };
    int r3 = use_clockwait ? pthread_cond_clockwait(&cv, &cm, clk, &bad) : pthread_cond_timedwait(&cv, &cm, &bad);
    pthread_mutex_unlock(&cm);

    pthread_cond_destroy(&cv);
    pthread_mutex_destroy(&cm);
    char name[96];
    snprintf(name, sizeof name, "%s_timeout", label);
    timing(name, e1);
    snprintf(name, sizeof name, "%s_signalled", label);
    timing(name, e2);
    EXPECT_EQ("timed wait", r1, ETIMEDOUT);
    EXPECT_EQ("mutex held after timeout", relock1, 0);
    EXPECT_EQ("signalled wait", r2, 0);
    EXPECT_EQ("mutex held after signal", relock2, 0);
    EXPECT_EQ("bad nsec", r3, EINVAL);
    if (e1 < 100)
        fail("timed wait returned after %lld ms < 100", e1);
    result("timeout=%s held_after_timeout=%s signalled=%s bad_nsec=%s", en(r1), relock1 == 0 ? "yes" : "no",
           en(r2), en(r3));
}

static void check_cond_timedwait_realtime(void)
{
    check_cond_timed("cond_timedwait_realtime", CLOCK_REALTIME, 0);
}

static void check_cond_timedwait_monotonic(void)
{
    check_cond_timed("cond_timedwait_monotonic", CLOCK_MONOTONIC, 0);
}

static void check_cond_clockwait_monotonic(void)
{
    check_cond_timed("cond_clockwait_monotonic", CLOCK_MONOTONIC, 1);
}

/* ---------- spinlock ---------- */

#define SPIN_THREADS 2
#define SPIN_ITERS 20000
static pthread_spinlock_t spin;
static long spin_counter;

static void *spin_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < SPIN_ITERS; i++) {
        pthread_spin_lock(&spin);
        long x = spin_counter;
        if (i % 1000 == 0)
            sched_yield(); /* let the other thread run (and spin) while we hold it */
        spin_counter = x + 1;
        pthread_spin_unlock(&spin);
    }
    return NULL;
}

static void *spin_try_other(void *arg)
{
    (void)arg;
    return (void *)(long)pthread_spin_trylock(&spin);
}

static void check_spinlock(void)
{
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    pthread_t t[SPIN_THREADS];
    for (int i = 0; i < SPIN_THREADS; i++)
        t[i] = spawn(spin_thread, NULL);
    for (int i = 0; i < SPIN_THREADS; i++)
        join(t[i]);
    pthread_spin_lock(&spin);
    int self_try = pthread_spin_trylock(&spin);
    int other_try = (int)(long)join(spawn(spin_try_other, NULL));
    pthread_spin_unlock(&spin);
    int free_try = pthread_spin_trylock(&spin);
    pthread_spin_unlock(&spin);
    pthread_spin_destroy(&spin);
    EXPECT_EQ("counter", spin_counter, (long)SPIN_THREADS * SPIN_ITERS);
    EXPECT_EQ("trylock held by self", self_try, EBUSY);
    EXPECT_EQ("trylock held by other", other_try, EBUSY);
    EXPECT_EQ("trylock free", free_try, 0);
    result("counter=%ld trylock_self=%s trylock_other=%s trylock_free=%s", spin_counter, en(self_try),
           en(other_try), en(free_try));
}

/* ---------- driver ---------- */

static const struct check checks[] = {
    { "mutex_condvar", check_mutex_condvar },
    { "cond_broadcast", check_cond_broadcast },
    { "rwlock_shared", check_rwlock_shared },
    { "rwlock_exclusive", check_rwlock_exclusive },
    { "rwlock_try", check_rwlock_try },
    { "rwlock_try_read_held", check_rwlock_try_read_held },
    { "rwlock_own_write", check_rwlock_own_write },
    { "sem_basic", check_sem_basic },
    { "sem_timedwait", check_sem_timedwait },
    { "sem_counting", check_sem_counting },
    { "sem_getvalue_with_waiters", check_sem_getvalue_with_waiters },
    { "sem_named", check_sem_named },
    { "barrier", check_barrier },
    { "pthread_once", check_once },
    { "pthread_key", check_keys },
    { "mutex_recursive", check_mutex_recursive },
    { "mutex_errorcheck", check_mutex_errorcheck },
    { "mutex_trylock", check_mutex_trylock },
    { "mutex_timedlock", check_mutex_timedlock },
    { "mutex_robust", check_mutex_robust },
    { "cond_timedwait_realtime", check_cond_timedwait_realtime },
    { "cond_timedwait_monotonic", check_cond_timedwait_monotonic },
    { "cond_clockwait_monotonic", check_cond_clockwait_monotonic },
    { "spinlock", check_spinlock },
};

int main(int argc, char **argv)
{
    return run_checks(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
