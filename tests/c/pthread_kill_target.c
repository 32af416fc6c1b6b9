/*
 * pthread_kill_target: a thread-directed signal runs its handler in the
 * thread it was sent to (its pthread_self(), its own per-thread values),
 * whatever that thread is doing: sleeping, blocked in pthread_mutex_lock,
 * an rwlock, a barrier, a condition wait, a join or a read; the wait then
 * goes on (those calls never fail with EINTR; read restarts with
 * SA_RESTART and fails with EINTR without it). A handler may itself sleep
 * and block on a mutex. A thread that blocks the signal keeps it pending
 * (sigpending) until it unblocks it, and the handler runs then, before
 * pthread_sigmask returns. pthread_sigqueue values arrive in order with
 * SI_QUEUE; raise() runs the handler before it returns.
 *
 * A per-thread value is kept in a table keyed by pthread_self() (a
 * __thread variable is not per thread under every runtime).
 *
 * usage: pthread_kill_target [CHECK...]   (no argument: every check)
 * stdout: one line per check, deterministic. A wrong result: "FAIL
 * <name>: ..." on stderr, exit 1; alarm(20).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

/* ---------- per-thread values, keyed by pthread_self() ---------- */

#define MAXT 64
static pthread_t t_ids[MAXT];
static int t_vals[MAXT];
static atomic_int t_n;

static void register_self(int value)
{
    int i = atomic_fetch_add(&t_n, 1);
    if (i >= MAXT)
        fail("too many threads");
    t_ids[i] = pthread_self();
    t_vals[i] = value;
}

/* The newest registration wins: glibc reuses an ended thread's pthread_t. */
static int value_of_self(void)
{
    pthread_t me = pthread_self();
    for (int i = atomic_load(&t_n) - 1; i >= 0; i--)
        if (pthread_equal(t_ids[i], me))
            return t_vals[i];
    return -1;
}

/* ---------- what the handlers saw ---------- */

static atomic_int h_count;
static pthread_t h_self;
static atomic_int h_value;

static void reset(void)
{
    atomic_store(&h_count, 0);
    atomic_store(&h_value, 0);
}

static void on_sig(int sig)
{
    (void)sig;
    int e = errno;
    h_self = pthread_self();
    atomic_store(&h_value, value_of_self());
    atomic_fetch_add(&h_count, 1);
    errno = e;
}

static void install(int sig, void (*h)(int), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL))
        fail("sigaction: %s", strerror(errno));
}

/* Waits (sleeping) until *c reaches n; fails after 5 s. */
static void wait_count(atomic_int *c, int n)
{
    long long t0 = now_ms();
    while (atomic_load(c) < n) {
        if (now_ms() - t0 > 5000)
            fail("waited 5 s for %d handler runs, saw %d", n, atomic_load(c));
        msleep(1);
    }
}

/* The handler ran once, in `t`, which registered `value`. */
static int in_target(pthread_t t, int value)
{
    return atomic_load(&h_count) == 1 && pthread_equal(h_self, t) && atomic_load(&h_value) == value;
}

static void kill_or_fail(pthread_t t, int sig)
{
    int rc = pthread_kill(t, sig);
    if (rc)
        fail("pthread_kill: %s", strerror(rc));
}

/* ---------- a sleeping thread ---------- */

static atomic_int stop;

static void *sleeper(void *arg)
{
    register_self((int)(long)arg);
    while (!atomic_load(&stop))
        msleep(1);
    return NULL;
}

static void check_sleeping(void)
{
    reset();
    atomic_store(&stop, 0);
    install(SIGUSR1, on_sig, SA_RESTART);
    pthread_t a = spawn(sleeper, (void *)1L), b = spawn(sleeper, (void *)2L);
    msleep(20);
    kill_or_fail(b, SIGUSR1);
    wait_count(&h_count, 1);
    atomic_store(&stop, 1);
    join(a);
    join(b);
    result("handler_in_target=%d", in_target(b, 2));
}

/* ---------- lock waits: the handler runs, the wait goes on ---------- */

static pthread_mutex_t mx = PTHREAD_MUTEX_INITIALIZER;
static atomic_int lock_rc = -1;

static void *mutex_waiter(void *arg)
{
    (void)arg;
    register_self(11);
    int r = pthread_mutex_lock(&mx);
    atomic_store(&lock_rc, r);
    if (r == 0)
        pthread_mutex_unlock(&mx);
    return NULL;
}

static void check_mutex(void)
{
    reset();
    install(SIGUSR1, on_sig, 0);
    pthread_mutex_lock(&mx);
    pthread_t t = spawn(mutex_waiter, NULL);
    msleep(50);
    kill_or_fail(t, SIGUSR1);
    wait_count(&h_count, 1);
    msleep(20);
    int still_waiting = atomic_load(&lock_rc) == -1;
    pthread_mutex_unlock(&mx);
    join(t);
    result("handler_in_target=%d still_waiting=%d lock_rc=%d", in_target(t, 11), still_waiting,
           atomic_load(&lock_rc));
}

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static atomic_int rw_rc = -1;

static void *rw_waiter(void *arg)
{
    int writer = (int)(long)arg;
    register_self(writer ? 13 : 12);
    int r = writer ? pthread_rwlock_wrlock(&rw) : pthread_rwlock_rdlock(&rw);
    atomic_store(&rw_rc, r);
    if (r == 0)
        pthread_rwlock_unlock(&rw);
    return NULL;
}

static void rwlock_case(int writer, int *handled, int *waited, int *rc)
{
    reset();
    atomic_store(&rw_rc, -1);
    if (writer)
        pthread_rwlock_rdlock(&rw);
    else
        pthread_rwlock_wrlock(&rw);
    pthread_t t = spawn(rw_waiter, (void *)(long)writer);
    msleep(50);
    kill_or_fail(t, SIGUSR1);
    wait_count(&h_count, 1);
    msleep(20);
    *waited = atomic_load(&rw_rc) == -1;
    pthread_rwlock_unlock(&rw);
    join(t);
    *handled = in_target(t, writer ? 13 : 12);
    *rc = atomic_load(&rw_rc);
}

static void check_rwlock(void)
{
    install(SIGUSR1, on_sig, 0);
    int h1, w1, r1, h2, w2, r2;
    rwlock_case(0, &h1, &w1, &r1);
    rwlock_case(1, &h2, &w2, &r2);
    result("reader: handler_in_target=%d still_waiting=%d rc=%d | writer: handler_in_target=%d still_waiting=%d rc=%d",
           h1, w1, r1, h2, w2, r2);
}

static pthread_barrier_t bar;
static atomic_int bar_rc = -1;

static void *barrier_waiter(void *arg)
{
    (void)arg;
    register_self(14);
    int r = pthread_barrier_wait(&bar);
    atomic_store(&bar_rc, r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD ? 0 : r);
    return NULL;
}

static void check_barrier(void)
{
    reset();
    install(SIGUSR1, on_sig, 0);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t t = spawn(barrier_waiter, NULL);
    msleep(50);
    kill_or_fail(t, SIGUSR1);
    wait_count(&h_count, 1);
    msleep(20);
    int still_waiting = atomic_load(&bar_rc) == -1;
    int r = pthread_barrier_wait(&bar);
    join(t);
    pthread_barrier_destroy(&bar);
    result("handler_in_target=%d still_waiting=%d rc=%d main_rc=%d", in_target(t, 14), still_waiting,
           atomic_load(&bar_rc), r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD ? 0 : r);
}

static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;
static atomic_int cond_rc = -1;

static void *cond_waiter(void *arg)
{
    (void)arg;
    register_self(15);
    int r = 0;
    pthread_mutex_lock(&cm);
    while (!ready && r == 0)
        r = pthread_cond_wait(&cv, &cm);
    pthread_mutex_unlock(&cm);
    atomic_store(&cond_rc, r);
    return NULL;
}

static void check_cond(void)
{
    reset();
    install(SIGUSR1, on_sig, 0);
    pthread_t t = spawn(cond_waiter, NULL);
    msleep(50);
    kill_or_fail(t, SIGUSR1);
    wait_count(&h_count, 1);
    msleep(20);
    int still_waiting = atomic_load(&cond_rc) == -1;
    pthread_mutex_lock(&cm);
    ready = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&cm);
    join(t);
    result("handler_in_target=%d still_waiting=%d rc=%d", in_target(t, 15), still_waiting, atomic_load(&cond_rc));
}

static atomic_int joined_flag;

static void *joinee(void *arg)
{
    (void)arg;
    while (!atomic_load(&joined_flag))
        msleep(1);
    return (void *)7L;
}

static atomic_long join_result = -1;

static void *joiner(void *arg)
{
    register_self(16);
    void *r = NULL;
    int rc = pthread_join(*(pthread_t *)arg, &r);
    atomic_store(&join_result, rc ? -rc : (long)r);
    return NULL;
}

static void check_join(void)
{
    reset();
    install(SIGUSR1, on_sig, 0);
    atomic_store(&joined_flag, 0);
    pthread_t u = spawn(joinee, NULL);
    pthread_t t = spawn(joiner, &u);
    msleep(50);
    kill_or_fail(t, SIGUSR1);
    wait_count(&h_count, 1);
    int still_waiting = atomic_load(&join_result) == -1;
    atomic_store(&joined_flag, 1);
    join(t);
    result("handler_in_target=%d still_waiting=%d joined=%ld", in_target(t, 16), still_waiting,
           atomic_load(&join_result));
}

/* ---------- read: restarted with SA_RESTART, EINTR without ---------- */

static int rpipe[2];
static atomic_int read_rc = -2, read_err;

static void *reader(void *arg)
{
    (void)arg;
    register_self(17);
    char c;
    int r = (int)read(rpipe[0], &c, 1);
    atomic_store(&read_err, r < 0 ? errno : 0);
    atomic_store(&read_rc, r);
    return NULL;
}

static void read_case(int flags, int *handled, int *rc, int *err)
{
    reset();
    install(SIGUSR1, on_sig, flags);
    atomic_store(&read_rc, -2);
    if (pipe(rpipe))
        fail("pipe");
    pthread_t t = spawn(reader, NULL);
    msleep(50);
    kill_or_fail(t, SIGUSR1);
    wait_count(&h_count, 1);
    msleep(20);
    if (write(rpipe[1], "x", 1) != 1)
        fail("write");
    join(t);
    close(rpipe[0]);
    close(rpipe[1]);
    *handled = in_target(t, 17);
    *rc = atomic_load(&read_rc);
    *err = atomic_load(&read_err);
}

static void check_read(void)
{
    int h1, r1, e1, h2, r2, e2;
    read_case(SA_RESTART, &h1, &r1, &e1);
    read_case(0, &h2, &r2, &e2);
    result("SA_RESTART: handler_in_target=%d read=%d %s | no SA_RESTART: handler_in_target=%d read=%d %s", h1, r1,
           en(e1), h2, r2, en(e2));
}

/* ---------- a handler that sleeps and blocks ---------- */

static pthread_mutex_t hm = PTHREAD_MUTEX_INITIALIZER;
static atomic_int in_handler, handler_done;

static void on_blocking(int sig)
{
    (void)sig;
    atomic_store(&in_handler, 1);
    usleep(20000);
    pthread_mutex_lock(&hm);
    pthread_mutex_unlock(&hm);
    h_self = pthread_self();
    atomic_store(&h_value, value_of_self());
    atomic_fetch_add(&h_count, 1);
    atomic_store(&handler_done, 1);
}

static void check_handler_blocks(void)
{
    reset();
    atomic_store(&stop, 0);
    install(SIGUSR2, on_blocking, SA_RESTART);
    pthread_t t = spawn(sleeper, (void *)21L);
    msleep(20);
    pthread_mutex_lock(&hm);
    kill_or_fail(t, SIGUSR2);
    wait_count(&in_handler, 1);
    /* Main keeps running while the handler sleeps, then waits on hm. */
    int rounds = 0;
    for (int i = 0; i < 30; i++, rounds++)
        msleep(2);
    int done_early = atomic_load(&handler_done);
    pthread_mutex_unlock(&hm);
    wait_count(&handler_done, 1);
    atomic_store(&stop, 1);
    join(t);
    result("handler_in_target=%d main_ran_meanwhile=%d finished_only_after_unlock=%d", in_target(t, 21),
           rounds == 30, !done_early);
}

/* ---------- a thread that blocks the signal ---------- */

static struct event ev_blocked = EVENT_INIT, ev_go = EVENT_INIT;
static atomic_int pending_in_target = -1, ran_at_unblock = -1;

static void *masker(void *arg)
{
    (void)arg;
    register_self(31);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    ev_set(&ev_blocked);
    ev_wait(&ev_go);
    sigset_t p;
    sigpending(&p);
    atomic_store(&pending_in_target, sigismember(&p, SIGUSR1));
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    atomic_store(&ran_at_unblock, atomic_load(&h_count));
    return NULL;
}

static void check_masked(void)
{
    reset();
    install(SIGUSR1, on_sig, 0);
    pthread_t t = spawn(masker, NULL);
    ev_wait(&ev_blocked);
    kill_or_fail(t, SIGUSR1);
    msleep(50);
    int not_while_masked = atomic_load(&h_count) == 0;
    sigset_t p;
    sigpending(&p);
    int pending_in_main = sigismember(&p, SIGUSR1);
    ev_set(&ev_go);
    join(t);
    result("not_while_masked=%d pending_in_target=%d pending_in_main=%d ran_at_unblock=%d handler_in_target=%d",
           not_while_masked, atomic_load(&pending_in_target), pending_in_main, atomic_load(&ran_at_unblock),
           in_target(t, 31));
}

/* ---------- pthread_sigqueue and raise ---------- */

static int q_vals[4];
static atomic_int q_n, q_codes_ok, q_in_target;
static pthread_t q_target;

static void on_queued(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    int i = atomic_fetch_add(&q_n, 1);
    if (i < 4)
        q_vals[i] = si->si_value.sival_int;
    if (si->si_code == SI_QUEUE && si->si_pid == getpid())
        atomic_fetch_add(&q_codes_ok, 1);
    if (pthread_equal(pthread_self(), q_target) && value_of_self() == 41)
        atomic_fetch_add(&q_in_target, 1);
}

static void *queue_target(void *arg)
{
    (void)arg;
    register_self(41);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 1);
    /* Blocked while both are queued, so that both are pending at once. */
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    ev_set(&ev_blocked);
    ev_wait(&ev_go);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    return NULL;
}

static void check_sigqueue(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_queued;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGRTMIN + 1, &sa, NULL);
    ev_reset(&ev_blocked);
    ev_reset(&ev_go);
    pthread_t t = spawn(queue_target, NULL);
    q_target = t;
    ev_wait(&ev_blocked);
    for (int v = 42; v <= 43; v++) {
        int rc = pthread_sigqueue(t, SIGRTMIN + 1, (union sigval){ .sival_int = v });
        if (rc)
            fail("pthread_sigqueue: %s", strerror(rc));
    }
    ev_set(&ev_go);
    join(t);
    result("handled=%d values=%d,%d si_code_queue=%d in_target=%d", atomic_load(&q_n), q_vals[0], q_vals[1],
           atomic_load(&q_codes_ok), atomic_load(&q_in_target));
}

static atomic_int raised_before_return = -1;

static void *raiser(void *arg)
{
    (void)arg;
    register_self(51);
    raise(SIGUSR2);
    atomic_store(&raised_before_return, atomic_load(&h_count));
    return NULL;
}

static void check_raise(void)
{
    reset();
    install(SIGUSR2, on_sig, 0);
    pthread_t t = spawn(raiser, NULL);
    join(t);
    result("ran_before_return=%d handler_in_target=%d", atomic_load(&raised_before_return), in_target(t, 51));
}

static const struct check checks[] = {
    { "sleeping", check_sleeping },
    { "mutex", check_mutex },
    { "rwlock", check_rwlock },
    { "barrier", check_barrier },
    { "cond", check_cond },
    { "join", check_join },
    { "read", check_read },
    { "handler_blocks", check_handler_blocks },
    { "masked", check_masked },
    { "sigqueue", check_sigqueue },
    { "raise", check_raise },
};

int main(int argc, char **argv)
{
    register_self(0);
    return run_checks(argc, argv, checks, sizeof checks / sizeof *checks);
}
