/*
 * pthread_misc: thread identity, names, attributes, detaching, the join
 * family, cancellation at blocking cancellation points, per-thread signal
 * masks, and sched_yield hand-offs.
 *
 * usage: pthread_misc [CHECK...]
 *   no arguments runs every check; otherwise only the named ones.
 *
 * stdout: one line per check, "name: <facts>", deterministic (the program's
 *         own name appears in thread_name: a new thread inherits the process
 *         name, so run it as "pthread_misc").
 * stderr: "<name>.time_ms=<n>" for timed waits, "time_ms=<total>".
 * A wrong result: "FAIL <name>: ..." on stderr, exit 1. alarm(20) turns a
 * hang into a death by SIGALRM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#define CHECK_CUSTOM_SPAWN
#include "check.h"

/* ---------- helpers ---------- */

static void timing(const char *suffix, long long ms)
{
    fprintf(stderr, "%s%s%s.time_ms=%lld\n", g_check, *suffix ? "_" : "", suffix, ms);
}

static pthread_t spawn_attr(void *(*fn)(void *), void *arg, pthread_attr_t *attr)
{
    pthread_t t;
    int rc = pthread_create(&t, attr, fn, arg);
    if (rc != 0)
        fail("pthread_create: %s", strerror(rc));
    return t;
}

static pthread_t spawn(void *(*fn)(void *), void *arg)
{
    return spawn_attr(fn, arg, NULL);
}

static struct event ev_go = EVENT_INIT, ev_ready = EVENT_INIT;

/* ---------- identity ---------- */

static void *return_self(void *arg)
{
    (void)arg;
    pthread_t *p = malloc(sizeof *p);
    *p = pthread_self();
    msleep(5);
    if (!pthread_equal(*p, pthread_self()))
        fail("pthread_self changed across a sleep");
    return p;
}

static void check_self_equal(void)
{
    pthread_t me = pthread_self();
    pthread_t t = spawn(return_self, NULL);
    pthread_t *inside = join(t);
    int created_eq_inside = pthread_equal(t, *inside) != 0;
    int main_eq_thread = pthread_equal(me, t) != 0;
    int main_eq_self = pthread_equal(me, pthread_self()) != 0;
    free(inside);
    result("created==self_in_thread=%s main==thread=%s main==main=%s", created_eq_inside ? "yes" : "no",
           main_eq_thread ? "yes" : "no", main_eq_self ? "yes" : "no");
    if (!created_eq_inside || main_eq_thread || !main_eq_self)
        fail("identity mismatch");
}

/* ---------- names ---------- */

static char name_seen_inside[32], name_default_inside[32], name_own_set[32], name_inherited[32];

/* A thread starts with its creator's name. */
static void *inherit_thread(void *arg)
{
    (void)arg;
    pthread_getname_np(pthread_self(), name_inherited, sizeof name_inherited);
    return NULL;
}

static void *name_thread(void *arg)
{
    (void)arg;
    pthread_getname_np(pthread_self(), name_default_inside, sizeof name_default_inside);
    ev_set(&ev_ready);
    ev_wait(&ev_go); /* main names us meanwhile */
    pthread_getname_np(pthread_self(), name_seen_inside, sizeof name_seen_inside);
    pthread_setname_np(pthread_self(), "gh-self-named");
    msleep(5);
    pthread_getname_np(pthread_self(), name_own_set, sizeof name_own_set);
    join(spawn(inherit_thread, NULL));
    ev_reset(&ev_go);
    ev_set(&ev_ready);
    ev_wait(&ev_go);
    return NULL;
}

static void check_thread_name(void)
{
    ev_reset(&ev_go);
    ev_reset(&ev_ready);
    char main_before[32], from_main[32], after_self[32], small[4];
    pthread_getname_np(pthread_self(), main_before, sizeof main_before);
    pthread_t t = spawn(name_thread, NULL);
    ev_wait(&ev_ready);
    ev_reset(&ev_ready);
    int set = pthread_setname_np(t, "gh-worker");
    int get = pthread_getname_np(t, from_main, sizeof from_main);
    int too_long = pthread_setname_np(t, "0123456789abcdef"); /* 16 chars: no room for NUL */
    int small_buf = pthread_getname_np(t, small, sizeof small);
    ev_set(&ev_go);
    ev_wait(&ev_ready);
    pthread_getname_np(t, after_self, sizeof after_self);
    ev_set(&ev_go);
    join(t);
    char main_after[32];
    pthread_getname_np(pthread_self(), main_after, sizeof main_after);
    result("main=%s default_in_thread=%s set=%s get=%s from_main=%s seen_inside=%s too_long=%s small_buf=%s "
           "self_set=%s seen_by_main=%s main_after=%s inherited=%s",
           main_before, name_default_inside, en(set), en(get), from_main, name_seen_inside, en(too_long),
           en(small_buf), name_own_set, after_self, main_after, name_inherited);
    EXPECT_EQ("setname", set, 0);
    EXPECT_EQ("getname", get, 0);
    EXPECT_EQ("setname 16 chars", too_long, ERANGE);
    EXPECT_EQ("getname small buffer", small_buf, ERANGE);
    if (strcmp(from_main, "gh-worker") || strcmp(name_seen_inside, "gh-worker") ||
        strcmp(name_own_set, "gh-self-named") || strcmp(after_self, "gh-self-named") ||
        strcmp(name_default_inside, main_before) || strcmp(main_after, main_before) ||
        strcmp(name_inherited, "gh-self-named"))
        fail("name round trip failed");
}

/* prctl(PR_SET_NAME/PR_GET_NAME) names the calling thread only: each of two
   threads reads back its own name, main's stays; a long name is cut to 15
   bytes; a bad pointer is EFAULT. (Under greenhook it named the OS thread
   the fibers share: the last to name itself named them all, main too.) */
static pthread_barrier_t named, hold;
static char prctl_seen[2][16], prctl_long[16];
static int prctl_null_get, prctl_null_set;

static void *prctl_thread(void *arg)
{
    long i = (long)arg;
    prctl(PR_SET_NAME, i ? "p-one" : "p-zero");
    pthread_barrier_wait(&named);
    prctl(PR_GET_NAME, prctl_seen[i]);
    pthread_barrier_wait(&hold); /* main reads the names meanwhile */
    if (i == 0) {
        prctl(PR_SET_NAME, "a-name-longer-than-fifteen");
        prctl(PR_GET_NAME, prctl_long);
        errno = 0;
        prctl_null_get = prctl(PR_GET_NAME, NULL) == -1 ? errno : 0;
        errno = 0;
        prctl_null_set = prctl(PR_SET_NAME, NULL) == -1 ? errno : 0;
    }
    return NULL;
}

static void check_prctl_name(void)
{
    char main_before[16], main_after[16], via_pthread[2][32];
    prctl(PR_GET_NAME, main_before);
    pthread_barrier_init(&named, NULL, 2);
    pthread_barrier_init(&hold, NULL, 3);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        t[i] = spawn(prctl_thread, (void *)i);
    msleep(50);
    for (int i = 0; i < 2; i++)
        pthread_getname_np(t[i], via_pthread[i], sizeof via_pthread[i]);
    pthread_barrier_wait(&hold);
    for (int i = 0; i < 2; i++)
        join(t[i]);
    prctl(PR_GET_NAME, main_after);
    result("seen=%s,%s via_pthread=%s,%s long=%s null_get=%s null_set=%s main_kept=%d", prctl_seen[0],
           prctl_seen[1], via_pthread[0], via_pthread[1], prctl_long, en(prctl_null_get), en(prctl_null_set),
           strcmp(main_before, main_after) == 0);
    if (strcmp(prctl_seen[0], "p-zero") || strcmp(prctl_seen[1], "p-one") || strcmp(via_pthread[0], "p-zero") ||
        strcmp(main_before, main_after))
        fail("prctl names crossed threads");
}

/* ---------- attributes ---------- */

struct attr_report {
    size_t stacksize, guardsize;
    void *stackaddr;
    int detachstate;
    int contains_local;
};

static void *attr_thread(void *arg)
{
    struct attr_report *r = arg;
    pthread_attr_t a;
    int local = 0;
    if (pthread_getattr_np(pthread_self(), &a) != 0)
        fail("pthread_getattr_np");
    pthread_attr_getstack(&a, &r->stackaddr, &r->stacksize);
    pthread_attr_getguardsize(&a, &r->guardsize);
    pthread_attr_getdetachstate(&a, &r->detachstate);
    pthread_attr_destroy(&a);
    uintptr_t lo = (uintptr_t)r->stackaddr, p = (uintptr_t)&local;
    r->contains_local = p >= lo && p < lo + r->stacksize;
    return NULL;
}

static void check_stack_attrs(void)
{
    long page = sysconf(_SC_PAGESIZE);
    pthread_attr_t a;
    pthread_attr_init(&a);
    int ss = pthread_attr_setstacksize(&a, 256 * 1024);
    int ss_small = pthread_attr_setstacksize(&a, PTHREAD_STACK_MIN - 1);
    struct attr_report r;
    memset(&r, 0, sizeof r);
    join(spawn_attr(attr_thread, &r, &a));
    pthread_attr_destroy(&a);
    result("setstacksize=%s setstacksize_below_min=%s stacksize=%zu guardsize_pages=%zu detachstate=%s "
           "stack_contains_local=%s",
           en(ss), en(ss_small), r.stacksize, r.guardsize / (size_t)page,
           r.detachstate == PTHREAD_CREATE_JOINABLE ? "joinable" : "detached", r.contains_local ? "yes" : "no");
    EXPECT_EQ("setstacksize", ss, 0);
    EXPECT_EQ("setstacksize below PTHREAD_STACK_MIN", ss_small, EINVAL);
    EXPECT_EQ("stacksize", r.stacksize, 256 * 1024);
    EXPECT_EQ("guardsize", r.guardsize, page);
    if (!r.contains_local)
        fail("a local variable is outside the reported stack");

    /* default attributes: the stack size follows RLIMIT_STACK */
    memset(&r, 0, sizeof r);
    join(spawn(attr_thread, &r));
    struct rlimit rl;
    getrlimit(RLIMIT_STACK, &rl);
    pthread_attr_t def;
    pthread_getattr_default_np(&def);
    size_t defsize = 0;
    pthread_attr_getstacksize(&def, &defsize);
    pthread_attr_destroy(&def);
    int matches = rl.rlim_cur == RLIM_INFINITY || r.stacksize == rl.rlim_cur;
    printf("default_stack: stacksize_matches_rlimit=%s matches_default_attr=%s stack_contains_local=%s\n",
           matches ? "yes" : "no", r.stacksize == defsize ? "yes" : "no", r.contains_local ? "yes" : "no");
    fflush(stdout);
    if (!matches || r.stacksize != defsize || !r.contains_local)
        fail("default stack size %zu (rlimit %llu, default attr %zu)", r.stacksize,
             (unsigned long long)rl.rlim_cur, defsize);

    /* a caller-provided stack is used and reported as given */
    size_t usize = 512 * 1024;
    void *mem = mmap(NULL, usize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (mem == MAP_FAILED)
        fail("mmap: %s", strerror(errno));
    pthread_attr_init(&a);
    int st = pthread_attr_setstack(&a, mem, usize);
    memset(&r, 0, sizeof r);
    join(spawn_attr(attr_thread, &r, &a));
    pthread_attr_destroy(&a);
    printf("user_stack: setstack=%s addr_matches=%s size_matches=%s stack_contains_local=%s\n", en(st),
           r.stackaddr == mem ? "yes" : "no", r.stacksize == usize ? "yes" : "no", r.contains_local ? "yes" : "no");
    fflush(stdout);
    if (st != 0 || r.stackaddr != mem || r.stacksize != usize || !r.contains_local)
        fail("user stack not honoured");
    munmap(mem, usize);
}

/* ---------- detach ---------- */

static sem_t det_done;

static void *det_thread(void *arg)
{
    struct attr_report *r = arg;
    if (r)
        attr_thread(r);
    ev_wait(&ev_go);
    sem_post(&det_done);
    return NULL;
}

static void check_detach(void)
{
    sem_init(&det_done, 0, 0);
    ev_reset(&ev_go);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    struct attr_report r1;
    memset(&r1, 0, sizeof r1);
    spawn_attr(det_thread, &r1, &a);
    pthread_attr_destroy(&a);

    pthread_t t2 = spawn(det_thread, NULL);
    int d1 = pthread_detach(t2);
    int d2 = pthread_detach(t2); /* still alive, already detached */
    ev_set(&ev_go);
    long long t0 = now_ms();
    sem_wait(&det_done);
    sem_wait(&det_done);
    timing("", now_ms() - t0);
    sem_destroy(&det_done);
    result("attr_detached_reports=%s detach=%s detach_again=%s both_finished=yes",
           r1.detachstate == PTHREAD_CREATE_DETACHED ? "detached" : "joinable", en(d1), en(d2));
    EXPECT_EQ("detach", d1, 0);
    EXPECT_EQ("detach again", d2, EINVAL);
    if (r1.detachstate != PTHREAD_CREATE_DETACHED)
        fail("getattr_np of a detached thread says joinable");
}

/* ---------- join family ---------- */

/* pthread_exit from a few frames down */
static void exit_deep(int depth)
{
    if (depth < 0)
        return;
    if (depth > 0)
        exit_deep(depth - 1);
    pthread_exit((void *)0x1234);
}

static void *exit_with_value(void *arg)
{
    (void)arg;
    msleep(10);
    exit_deep(5);
    return NULL;
}

static void *return_value(void *arg)
{
    msleep((long)arg);
    return (void *)0x5678;
}

static void *wait_go_return(void *arg)
{
    (void)arg;
    ev_wait(&ev_go);
    return (void *)0x9abc;
}

/* A thread joining itself while another thread joins it: EDEADLK and
 * EBUSY (glibc checks itself before the other joiner). */
static int joined_self, tryjoined_self;
static void *join_self_thread(void *arg)
{
    (void)arg;
    msleep(20); /* main is joining us by now */
    joined_self = pthread_join(pthread_self(), NULL);
    tryjoined_self = pthread_tryjoin_np(pthread_self(), NULL);
    return NULL;
}

static void check_join(void)
{
    void *v1 = join(spawn(exit_with_value, NULL));
    void *v2 = join(spawn(return_value, (void *)5L));
    int self = pthread_join(pthread_self(), NULL);
    join(spawn(join_self_thread, NULL));
    result("pthread_exit_value=%#lx return_value=%#lx join_self=%s thread_join_self=%s thread_tryjoin_self=%s",
           (unsigned long)(uintptr_t)v1, (unsigned long)(uintptr_t)v2, en(self), en(joined_self),
           en(tryjoined_self));
    EXPECT_EQ("pthread_exit value", (uintptr_t)v1, 0x1234);
    EXPECT_EQ("return value", (uintptr_t)v2, 0x5678);
    EXPECT_EQ("join self", self, EDEADLK);
    EXPECT_EQ("thread join self", joined_self, EDEADLK);
    EXPECT_EQ("thread tryjoin self", tryjoined_self, EBUSY);
}

static void check_tryjoin(void)
{
    ev_reset(&ev_go);
    pthread_t t = spawn(wait_go_return, NULL);
    void *v = NULL;
    int r1 = pthread_tryjoin_np(t, &v);
    msleep(20);
    int r2 = pthread_tryjoin_np(t, &v);
    ev_set(&ev_go);
    int r3, spins = 0;
    while ((r3 = pthread_tryjoin_np(t, &v)) == EBUSY) {
        msleep(1);
        if (++spins > 5000)
            fail("tryjoin never succeeded");
    }
    result("running=%s still_running=%s finished=%s value=%#lx", en(r1), en(r2), en(r3), (unsigned long)(uintptr_t)v);
    EXPECT_EQ("tryjoin running", r1, EBUSY);
    EXPECT_EQ("tryjoin still running", r2, EBUSY);
    EXPECT_EQ("tryjoin finished", r3, 0);
    EXPECT_EQ("value", (uintptr_t)v, 0x9abc);
}

static void check_timedjoin(void)
{
    pthread_t t = spawn(return_value, (void *)400L);
    void *v = NULL;
    struct timespec d = deadline(CLOCK_REALTIME, 100);
    long long t0 = now_ms();
    int r1 = pthread_timedjoin_np(t, &v, &d);
    long long e1 = now_ms() - t0;
    timing("timeout", e1);
    d = deadline(CLOCK_MONOTONIC, 100);
    t0 = now_ms();
    int r2 = pthread_clockjoin_np(t, &v, CLOCK_MONOTONIC, &d);
    long long e2 = now_ms() - t0;
    timing("clockjoin_timeout", e2);
    d = deadline(CLOCK_REALTIME, 5000);
    t0 = now_ms();
    int r3 = pthread_timedjoin_np(t, &v, &d);
    timing("joined", now_ms() - t0);
    result("timeout=%s clockjoin_timeout=%s joined=%s value=%#lx", en(r1), en(r2), en(r3), (unsigned long)(uintptr_t)v);
    EXPECT_EQ("timedjoin timeout", r1, ETIMEDOUT);
    EXPECT_EQ("clockjoin timeout", r2, ETIMEDOUT);
    EXPECT_EQ("timedjoin", r3, 0);
    EXPECT_EQ("value", (uintptr_t)v, 0x5678);
    if (e1 < 100 || e2 < 100)
        fail("timed join returned early (%lld, %lld ms)", e1, e2);
}

/* ---------- cancellation ---------- */

enum cancel_kind { C_SLEEP, C_NANOSLEEP, C_READ, C_POLL, C_COND, C_SEM, C_COUNT };
static const char *cancel_names[] = { "sleep", "nanosleep", "read", "poll", "cond_wait", "sem_wait" };

static atomic_int cleanup_ran, cleanup_unlock_rc;
static pthread_mutex_t cancel_m;
static pthread_cond_t cancel_cv = PTHREAD_COND_INITIALIZER;
static sem_t cancel_sem;
static int cancel_pipe[2];
static atomic_int cancel_started;

static void cleanup_plain(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cleanup_ran, 1);
}

static void cleanup_unlock(void *arg)
{
    (void)arg;
    atomic_store(&cleanup_unlock_rc, pthread_mutex_unlock(&cancel_m)); /* errorcheck: 0 only if we own it */
    atomic_fetch_add(&cleanup_ran, 1);
}

static void *cancel_target(void *arg)
{
    enum cancel_kind k = (enum cancel_kind)(long)arg;
    char c;
    struct timespec ts = { 30, 0 };
    struct pollfd pf = { cancel_pipe[0], POLLIN, 0 };
    pthread_cleanup_push(cleanup_plain, NULL);
    atomic_store(&cancel_started, 1);
    switch (k) {
    case C_SLEEP:
        sleep(30);
        break;
    case C_NANOSLEEP:
        nanosleep(&ts, NULL);
        break;
    case C_READ:
        if (read(cancel_pipe[0], &c, 1) < 0)
            break;
        break;
    case C_POLL:
        poll(&pf, 1, 30000);
        break;
    case C_COND:
        pthread_mutex_lock(&cancel_m);
        pthread_cleanup_push(cleanup_unlock, NULL);
        for (;;)
            pthread_cond_wait(&cancel_cv, &cancel_m);
        pthread_cleanup_pop(0);
        break;
    case C_SEM:
        sem_wait(&cancel_sem);
        break;
    default:
        break;
    }
    pthread_cleanup_pop(0);
    return (void *)1; /* not cancelled */
}

static void check_cancel(void)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&cancel_m, &ma);
    pthread_mutexattr_destroy(&ma);
    sem_init(&cancel_sem, 0, 0);
    if (pipe(cancel_pipe) != 0)
        fail("pipe");
    for (int k = 0; k < C_COUNT; k++) {
        atomic_store(&cleanup_ran, 0);
        atomic_store(&cleanup_unlock_rc, -1);
        atomic_store(&cancel_started, 0);
        pthread_t t = spawn(cancel_target, (void *)(long)k);
        while (!atomic_load(&cancel_started))
            msleep(1);
        msleep(50); /* let it block */
        long long t0 = now_ms();
        int rc = pthread_cancel(t);
        void *v = join(t);
        timing(cancel_names[k], now_ms() - t0);
        int cleanups = atomic_load(&cleanup_ran);
        int want_cleanups = k == C_COND ? 2 : 1;
        if (k == C_COND)
            printf("cancel_%s: cancel=%s result=%s cleanups=%d mutex_owned_in_cleanup=%s\n", cancel_names[k],
                   en(rc), v == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "not-cancelled", cleanups,
                   atomic_load(&cleanup_unlock_rc) == 0 ? "yes" : "no");
        else
            printf("cancel_%s: cancel=%s result=%s cleanups=%d\n", cancel_names[k], en(rc),
                   v == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "not-cancelled", cleanups);
        fflush(stdout);
        if (rc != 0 || v != PTHREAD_CANCELED || cleanups != want_cleanups ||
            (k == C_COND && atomic_load(&cleanup_unlock_rc) != 0))
            fail("cancel at %s", cancel_names[k]);
    }
    sem_destroy(&cancel_sem);
    close(cancel_pipe[0]);
    close(cancel_pipe[1]);
    pthread_mutex_destroy(&cancel_m);
}

static atomic_int survived_sleep;

static void *cancel_disabled(void *arg)
{
    (void)arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    atomic_store(&cancel_started, 1);
    msleep(150); /* the cancel request arrives during this sleep and waits */
    atomic_store(&survived_sleep, 1);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    pthread_testcancel();
    return (void *)1;
}

static void check_cancel_disabled(void)
{
    atomic_store(&cancel_started, 0);
    pthread_t t = spawn(cancel_disabled, NULL);
    while (!atomic_load(&cancel_started))
        msleep(1);
    msleep(20);
    int rc = pthread_cancel(t);
    void *v = join(t);
    result("cancel=%s survived_sleep=%s result=%s", en(rc), atomic_load(&survived_sleep) ? "yes" : "no",
           v == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "not-cancelled");
    if (rc != 0 || !atomic_load(&survived_sleep) || v != PTHREAD_CANCELED)
        fail("deferred cancel with cancellation disabled");
}

/* ---------- signal masks are per thread ---------- */

static void *mask_thread(void *arg)
{
    (void)arg;
    sigset_t s, cur;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    ev_set(&ev_ready);
    ev_wait(&ev_go);
    msleep(10);
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    return (void *)(long)sigismember(&cur, SIGUSR1);
}

static void check_sigmask(void)
{
    ev_reset(&ev_ready);
    ev_reset(&ev_go);
    pthread_t t = spawn(mask_thread, NULL);
    ev_wait(&ev_ready);
    sigset_t cur;
    msleep(10);
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    int main_has = sigismember(&cur, SIGUSR1);
    ev_set(&ev_go);
    int thread_has = (int)(long)join(t);
    int k = pthread_kill(pthread_self(), 0);
    result("thread_blocked_usr1=%s main_blocked_usr1=%s pthread_kill_0=%s", thread_has ? "yes" : "no",
           main_has ? "yes" : "no", en(k));
    if (!thread_has || main_has || k != 0)
        fail("signal masks leaked between threads");
}

/* ---------- sched_yield hand-off ---------- */

#define HANDOFFS 200
static atomic_int turn;

static void *yield_partner(void *arg)
{
    (void)arg;
    for (int i = 0; i < HANDOFFS; i++) {
        while (atomic_load(&turn) != 1)
            sched_yield();
        atomic_store(&turn, 0);
    }
    return NULL;
}

static void check_sched_yield(void)
{
    int r = sched_yield();
    atomic_store(&turn, 0);
    pthread_t t = spawn(yield_partner, NULL);
    long long t0 = now_ms();
    for (int i = 0; i < HANDOFFS; i++) {
        atomic_store(&turn, 1);
        while (atomic_load(&turn) != 0)
            sched_yield();
    }
    join(t);
    timing("", now_ms() - t0);
    result("ret=%s handoffs=%d", en(r), HANDOFFS);
    EXPECT_EQ("sched_yield", r, 0);
}

/* ---------- driver ---------- */

static const struct check checks[] = {
    { "self_equal", check_self_equal },
    { "thread_name", check_thread_name },
    { "prctl_name", check_prctl_name },
    { "stack_attrs", check_stack_attrs },
    { "detach", check_detach },
    { "join", check_join },
    { "tryjoin", check_tryjoin },
    { "timedjoin", check_timedjoin },
    { "cancel", check_cancel },
    { "cancel_disabled", check_cancel_disabled },
    { "sigmask", check_sigmask },
    { "sched_yield", check_sched_yield },
};

int main(int argc, char **argv)
{
    return run_checks(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
