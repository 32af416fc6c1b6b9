/*
 * thread_handles: every function that takes a pthread_t, given the handle
 * of a live thread, of one that returned and was not joined, of one that
 * was joined, of a detached one that ended, and of one detached after it
 * ended; answers as glibc 2.36 gives them (errors or 0), never a crash.
 *
 * usage: thread_handles [CHECK...]   (no argument: every check but garbage)
 *   garbage: handles that were never threads (0, an unmapped address, a
 *            static buffer). glibc crashes on most of them, so this check
 *            runs under the preload only and must print errors, not crash.
 *
 * stdout: one line per check, "name: op=answer ...", deterministic.
 * A wrong result: "FAIL <name>: ..." on stderr, exit 1; alarm(20).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

static struct event ev_go = EVENT_INIT;

static void *wait_go(void *arg)
{
    ev_wait(&ev_go);
    return arg;
}

static void *quick(void *arg)
{
    return arg;
}

/* Waits until `t` has ended: glibc answers pthread_getschedparam with
 * ESRCH from then on (a timed sleep alone is not enough on a busy machine). */
static void wait_ended(pthread_t t)
{
    struct sched_param sp;
    int policy;
    for (int i = 0; pthread_getschedparam(t, &policy, &sp) != ESRCH; i++) {
        if (i == 5000)
            fail("the thread did not end");
        msleep(2);
    }
}

/* Every inspection that leaves the thread as it is, as "op=answer ...". */
static void inspect(char *out, size_t n, pthread_t t)
{
    char name[32];
    struct sched_param sp = { 0 };
    int policy;
    pthread_attr_t a;
    clockid_t clk;
    cpu_set_t cpus, mine;
    union sigval v = { 0 };
    sched_getaffinity(0, sizeof mine, &mine);
    int ga = pthread_getattr_np(t, &a);
    if (ga == 0)
        pthread_attr_destroy(&a);
    snprintf(out, n,
             "kill0=%s kill_usr1=%s sigqueue0=%s sigqueue=%s setname=%s getname=%s getattr=%s getsched=%s setsched=%s "
             "setprio=%s cpuclock=%s getaffinity=%s setaffinity=%s equal_self=%d",
             en(pthread_kill(t, 0)), en(pthread_kill(t, SIGUSR1)), en(pthread_sigqueue(t, 0, v)),
             en(pthread_sigqueue(t, SIGUSR1, v)),
             en(pthread_setname_np(t, "renamed")), en(pthread_getname_np(t, name, sizeof name)), en(ga),
             en(pthread_getschedparam(t, &policy, &sp)), en(pthread_setschedparam(t, SCHED_OTHER, &sp)),
             en(pthread_setschedprio(t, 0)), en(pthread_getcpuclockid(t, &clk)),
             en(pthread_getaffinity_np(t, sizeof cpus, &cpus)), en(pthread_setaffinity_np(t, sizeof mine, &mine)),
             pthread_equal(t, t) != 0);
}

/* The joins and detach, in that order, as "op=answer ...". */
static void joins(char *out, size_t n, pthread_t t)
{
    void *v;
    struct timespec rt = deadline(CLOCK_REALTIME, 10), mono = deadline(CLOCK_MONOTONIC, 10);
    int j = pthread_join(t, &v);
    int tj = pthread_tryjoin_np(t, &v);
    int tm = pthread_timedjoin_np(t, &v, &rt);
    int cj = pthread_clockjoin_np(t, &v, CLOCK_MONOTONIC, &mono);
    int d = pthread_detach(t);
    snprintf(out, n, "join=%s tryjoin=%s timedjoin=%s clockjoin=%s detach=%s", en(j), en(tj), en(tm), en(cj), en(d));
}

static void check_double_join(void)
{
    pthread_t t = spawn(quick, (void *)7);
    void *v = NULL;
    int first = pthread_join(t, &v);
    int second = pthread_join(t, &v);
    result("first=%s value=%ld second=%s", en(first), (long)(intptr_t)v, en(second));
    EXPECT_EQ("first join", first, 0);
    EXPECT_EQ("second join", second, ESRCH);
}

static void check_live(void)
{
    char buf[512];
    ev_reset(&ev_go);
    pthread_t t = spawn(wait_go, NULL);
    msleep(10);
    inspect(buf, sizeof buf, t);
    void *v;
    struct timespec past = deadline(CLOCK_REALTIME, 0);
    int tj = pthread_tryjoin_np(t, &v);
    int tm = pthread_timedjoin_np(t, &v, &past);
    int d = pthread_detach(t);
    result("%s tryjoin=%s timedjoin=%s detach=%s", buf, en(tj), en(tm), en(d));
    ev_set(&ev_go);
    msleep(10);
}

/* Returned, not joined: inspected, then joined. */
static void check_exited(void)
{
    char buf[512];
    pthread_t t = spawn(quick, (void *)3);
    wait_ended(t);
    inspect(buf, sizeof buf, t);
    void *v = NULL;
    int tj = pthread_tryjoin_np(t, &v);
    result("%s tryjoin=%s value=%ld", buf, en(tj), (long)(intptr_t)v);
    EXPECT_EQ("tryjoin", tj, 0);
}

/* The whole line for a thread that is gone: inspections, then joins. */
static void gone(pthread_t t)
{
    char a[512], b[256];
    inspect(a, sizeof a, t);
    joins(b, sizeof b, t);
    result("%s %s cancel=%s", a, b, en(pthread_cancel(t)));
}

static void check_joined(void)
{
    pthread_t t = spawn(quick, NULL);
    join(t);
    gone(t);
}

static void check_detached_ended(void)
{
    pthread_t t = spawn_detached(quick, NULL);
    wait_ended(t);
    gone(t);
}

/* Detached while running, ended later. */
static void check_detached_live_then_ended(void)
{
    char b[256];
    ev_reset(&ev_go);
    pthread_t t = spawn(wait_go, NULL);
    int d = pthread_detach(t);
    int j = pthread_join(t, NULL);
    ev_set(&ev_go);
    wait_ended(t);
    joins(b, sizeof b, t);
    result("detach=%s join_while_running=%s then %s kill0=%s", en(d), en(j), b, en(pthread_kill(t, 0)));
}

/* Returned, then detached: glibc frees it then. */
static void check_detached_after_exit(void)
{
    char b[256];
    pthread_t t = spawn(quick, NULL);
    wait_ended(t);
    int d = pthread_detach(t);
    joins(b, sizeof b, t);
    result("detach=%s then %s kill0=%s", en(d), b, en(pthread_kill(t, 0)));
}

/* pthread_equal compares values: an ended thread's handle equals itself
 * and no live thread's. */
static void check_equal(void)
{
    pthread_t a = spawn(quick, NULL), b = spawn(quick, NULL);
    join(a);
    join(b);
    result("ended_self=%d ended_other=%d ended_main=%d", pthread_equal(a, a) != 0, pthread_equal(a, b) != 0,
           pthread_equal(a, pthread_self()) != 0);
}

static char not_a_thread[4096];

static void check_garbage(void)
{
    pthread_t bad[] = { 0, (pthread_t)0xdeadbeef0UL, (pthread_t)(uintptr_t)(not_a_thread + 2048) };
    const char *names[] = { "zero", "unmapped", "static_buffer" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char a[512], b[256];
        inspect(a, sizeof a, bad[i]);
        joins(b, sizeof b, bad[i]);
        printf("garbage_%s: %s %s cancel=%s\n", names[i], a, b, en(pthread_cancel(bad[i])));
        fflush(stdout);
    }
}

static const struct check checks[] = {
    { "double_join", check_double_join },
    { "live", check_live },
    { "exited", check_exited },
    { "joined", check_joined },
    { "detached_ended", check_detached_ended },
    { "detached_live_then_ended", check_detached_live_then_ended },
    { "detached_after_exit", check_detached_after_exit },
    { "equal", check_equal },
};

int main(int argc, char **argv)
{
    signal(SIGUSR1, SIG_IGN);
    if (argc == 2 && !strcmp(argv[1], "garbage")) {
        alarm(20);
        g_check = "garbage";
        check_garbage();
        return 0;
    }
    return run_checks(argc, argv, checks, sizeof checks / sizeof *checks);
}
