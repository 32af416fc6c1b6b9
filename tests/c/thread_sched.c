/*
 * thread_sched: a thread's scheduling policy and priority, per thread:
 * pthread_getschedparam / pthread_setschedparam / pthread_setschedprio on
 * another thread and on itself, their errors, and what pthread_create
 * gives a new thread (inherited from its creator, or explicit from the
 * attributes). Real-time policies need privilege (or RLIMIT_RTPRIO):
 * the program prints whether they were allowed, so its output is the same
 * run as root or not, as long as both runs have the same rights.
 *
 * usage: thread_sched [CHECK...]   (no argument: every check)
 * stdout: one line per check, deterministic. A wrong result: "FAIL
 * <name>: ..." on stderr, exit 1; alarm(20).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static struct event ev_go = EVENT_INIT;

static void *wait_go(void *arg)
{
    ev_wait(&ev_go);
    return arg;
}

static const char *pol(int p)
{
    switch (p) {
    case SCHED_OTHER:
        return "OTHER";
    case SCHED_FIFO:
        return "FIFO";
    case SCHED_RR:
        return "RR";
    case SCHED_BATCH:
        return "BATCH";
    case SCHED_IDLE:
        return "IDLE";
    }
    return "?";
}

static void sched_of(pthread_t t, char *out, size_t n)
{
    int p = -1;
    struct sched_param sp = { -1 };
    int r = pthread_getschedparam(t, &p, &sp);
    if (r)
        snprintf(out, n, "%s", en(r));
    else
        snprintf(out, n, "%s/%d", pol(p), sp.sched_priority);
}

static int set(pthread_t t, int policy, int prio)
{
    struct sched_param sp = { prio };
    return pthread_setschedparam(t, policy, &sp);
}

/* Another thread's policy and priority, set and read back. */
static void check_other(void)
{
    char a[32], b[32], c[32], d[32], e[32];
    ev_reset(&ev_go);
    pthread_t t = spawn(wait_go, NULL);
    sched_of(t, a, sizeof a);
    int fifo = set(t, SCHED_FIFO, 10);
    sched_of(t, b, sizeof b);
    int prio = fifo ? -1 : pthread_setschedprio(t, 20);
    sched_of(t, c, sizeof c);
    int rr = set(t, SCHED_RR, 5);
    int batch = set(t, SCHED_BATCH, 0);
    sched_of(t, d, sizeof d);
    int idle = set(t, SCHED_IDLE, 0);
    int idle_prio0 = pthread_setschedprio(t, 0);
    sched_of(t, e, sizeof e);
    int other = set(t, SCHED_OTHER, 0);
    result("initial=%s fifo10=%s -> %s setprio20=%s -> %s rr5=%s batch=%s -> %s idle=%s setprio0=%s -> %s other=%s",
           a, en(fifo), b, prio < 0 ? "-" : en(prio), c, en(rr), en(batch), d, en(idle), en(idle_prio0), e,
           en(other));
    ev_set(&ev_go);
    join(t);
}

/* Invalid policies and priorities: EINVAL, the thread unchanged. */
static void check_errors(void)
{
    char a[32];
    ev_reset(&ev_go);
    pthread_t t = spawn(wait_go, NULL);
    int bad_policy = set(t, 99, 0);
    int other5 = set(t, SCHED_OTHER, 5);
    int fifo0 = set(t, SCHED_FIFO, 0);
    int fifo100 = set(t, SCHED_FIFO, 100);
    int prio1 = pthread_setschedprio(t, 1);
    int prio_neg = pthread_setschedprio(t, -1);
    sched_of(t, a, sizeof a);
    result("bad_policy=%s other5=%s fifo0=%s fifo100=%s setprio1_other=%s setprio-1=%s -> %s", en(bad_policy),
           en(other5), en(fifo0), en(fifo100), en(prio1), en(prio_neg), a);
    ev_set(&ev_go);
    join(t);
}

/* A thread setting its own, and what its children inherit. */
static char child_sched[32], grandchild_sched[32];
static void *report(void *arg)
{
    sched_of(pthread_self(), arg, 32);
    return NULL;
}

static void *self_setter(void *arg)
{
    (void)arg;
    int r = set(pthread_self(), SCHED_RR, 7);
    if (r) {
        set(pthread_self(), SCHED_BATCH, 0);
    }
    join(spawn(report, grandchild_sched));
    return (void *)(long)r;
}

static void check_self_and_inherit(void)
{
    char mine[32];
    sched_of(pthread_self(), mine, sizeof mine);
    join(spawn(report, child_sched));
    long r = (long)join(spawn(self_setter, NULL));
    result("main=%s child=%s self_rr7=%s grandchild=%s", mine, child_sched, en((int)r), grandchild_sched);
}

/* pthread_create with scheduling attributes, each from a fresh attribute
 * object: explicit (OTHER, BATCH, FIFO), and inherited with a policy set
 * (ignored). The attribute takes OTHER, FIFO and RR only. */
static int create_with(int inherit, int policy, int prio, char *out)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setinheritsched(&a, inherit);
    int r = pthread_attr_setschedpolicy(&a, policy);
    struct sched_param p = { prio };
    if (r == 0)
        r = pthread_attr_setschedparam(&a, &p);
    if (r) {
        snprintf(out, 32, "attr:%s", en(r));
        pthread_attr_destroy(&a);
        return r;
    }
    pthread_t t;
    r = pthread_create(&t, &a, report, out);
    pthread_attr_destroy(&a);
    if (r == 0)
        join(t);
    else
        snprintf(out, 32, "-");
    return r;
}

static void check_explicit(void)
{
    char batch[32], fifo[32], inh[32], other3[32], rr0[32], other[32];
    int c_other = create_with(PTHREAD_EXPLICIT_SCHED, SCHED_OTHER, 0, other);
    int c_batch = create_with(PTHREAD_EXPLICIT_SCHED, SCHED_BATCH, 0, batch);
    int c_fifo = create_with(PTHREAD_EXPLICIT_SCHED, SCHED_FIFO, 15, fifo);
    int c_inh = create_with(PTHREAD_INHERIT_SCHED, SCHED_RR, 3, inh);
    int c_other3 = create_with(PTHREAD_EXPLICIT_SCHED, SCHED_OTHER, 3, other3);
    int c_rr0 = create_with(PTHREAD_EXPLICIT_SCHED, SCHED_RR, 0, rr0);
    result("other=%s -> %s batch=%s -> %s fifo15=%s -> %s inherit_rr3=%s -> %s other3=%s -> %s rr0=%s -> %s", en(c_other), other, en(c_batch), batch,
           en(c_fifo), fifo, en(c_inh), inh, en(c_other3), other3, en(c_rr0), rr0);
}

/* The sched_* calls on pid 0 are the calling thread's own too. (glibc's
 * pthread_getschedparam keeps answering what it cached before, so the two
 * families are not mixed here.) */
static void *sched_calls(void *arg)
{
    char *out = arg;
    struct sched_param sp = { 5 };
    int set = sched_setscheduler(0, SCHED_RR, &sp) == 0 ? 0 : errno;
    int now = sched_getscheduler(0);
    sp.sched_priority = 7;
    int setp = sched_setparam(0, &sp) == 0 ? 0 : errno;
    struct sched_param got = { -1 };
    sched_getparam(0, &got);
    sp.sched_priority = 3;
    int bad = sched_setscheduler(0, SCHED_OTHER, &sp) == 0 ? 0 : errno;
    snprintf(out, 160, "setscheduler_rr5=%s getscheduler=%s setparam7=%s getparam=%d other3=%s", en(set),
             set ? "-" : pol(now), en(setp), set ? -1 : got.sched_priority, en(bad));
    return NULL;
}

static void check_sched_calls(void)
{
    char out[160], main_before[32], main_after[32];
    sched_of(pthread_self(), main_before, sizeof main_before);
    join(spawn(sched_calls, out));
    sched_of(pthread_self(), main_after, sizeof main_after);
    result("%s main=%s -> %s", out, main_before, main_after);
}

static const struct check checks[] = {
    { "sched_calls", check_sched_calls },
    { "other", check_other },
    { "errors", check_errors },
    { "self_and_inherit", check_self_and_inherit },
    { "explicit", check_explicit },
};

int main(int argc, char **argv)
{
    return run_checks(argc, argv, checks, sizeof checks / sizeof *checks);
}
