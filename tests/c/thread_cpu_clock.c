/*
 * thread_cpu_clock: each thread's CPU-time clock (CLOCK_THREAD_CPUTIME_ID
 * in the thread, pthread_getcpuclockid from anywhere) counts that thread's
 * time only: a new thread's starts near 0, a busy loop advances it, a
 * sleep does not, main's does not count the other threads' work, and two
 * threads taking turns each count their own share; getrusage(RUSAGE_THREAD)
 * counts the same as the clock. (Whether the clock of
 * a thread just joined still reads races with the kernel's reaping of the
 * thread: stderr only.)
 *
 * usage: thread_cpu_clock [CHECK...]   (no argument: every check)
 * stdout: one line per check, facts as yes/no against generous bounds.
 * stderr: the measured values, "<name>.<what>_ms=<n>".
 * A wrong result: "FAIL <name>: ..." on stderr, exit 1; alarm(20).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

static long long clock_ms(clockid_t c)
{
    struct timespec ts;
    if (clock_gettime(c, &ts) != 0)
        fail("clock_gettime(%d): %s", (int)c, strerror(errno));
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void note(const char *what, long long ms)
{
    fprintf(stderr, "%s.%s_ms=%lld\n", g_check, what, ms);
}

/* Spins until the calling thread's own clock has advanced `ms`, yielding
 * every `yield_every` rounds (0: never); fails after 10 s of wall time. */
static void burn(long long ms, int yield_every)
{
    long long start = clock_ms(CLOCK_THREAD_CPUTIME_ID), wall = now_ms();
    unsigned n = 0;
    while (clock_ms(CLOCK_THREAD_CPUTIME_ID) - start < ms) {
        if (yield_every && ++n % yield_every == 0)
            sched_yield();
        if (now_ms() - wall > 10000)
            fail("the thread clock did not advance %lld ms in 10 s", ms);
    }
}

static struct event ev_burnt = EVENT_INIT, ev_slept = EVENT_INIT, ev_go = EVENT_INIT, ev_done = EVENT_INIT;
static long long at_start, via_id_at_start;

static void *worker(void *arg)
{
    (void)arg;
    clockid_t mine;
    pthread_getcpuclockid(pthread_self(), &mine);
    at_start = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    via_id_at_start = clock_ms(mine);
    burn(100, 0);
    ev_set(&ev_burnt);
    ev_wait(&ev_go);
    msleep(200);
    ev_set(&ev_slept);
    ev_wait(&ev_done);
    return NULL;
}

static void check_own_time(void)
{
    long long main0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    pthread_t t = spawn(worker, NULL);
    clockid_t c;
    int r = pthread_getcpuclockid(t, &c);
    if (r)
        fail("pthread_getcpuclockid: %s", en(r));
    ev_wait(&ev_burnt);
    long long main_delta = clock_ms(CLOCK_THREAD_CPUTIME_ID) - main0;
    long long after_burn = clock_ms(c);
    ev_set(&ev_go);
    ev_wait(&ev_slept);
    long long after_sleep = clock_ms(c);
    struct timespec res;
    int getres = clock_getres(c, &res);
    ev_set(&ev_done);
    join(t);
    struct timespec ts;
    int gone = clock_gettime(c, &ts) == 0 ? 0 : errno;
    note("at_start", at_start);
    note("via_id_at_start", via_id_at_start);
    note("after_burn", after_burn);
    note("sleep_added", after_sleep - after_burn);
    note("main_delta", main_delta);
    fprintf(stderr, "%s.after_join=%s\n", g_check, en(gone));
    result("starts_near_zero=%s busy_counted=%s sleep_not_counted=%s main_excludes_it=%s getres=%s",
           at_start < 50 && via_id_at_start < 50 ? "yes" : "no", after_burn >= 100 ? "yes" : "no",
           after_sleep - after_burn < 50 ? "yes" : "no", main_delta < 50 ? "yes" : "no", en(getres));
}

/* Two threads spin with sched_yield in between until each has 100 ms of
 * its own; each clock counts only its own share. */
static atomic_int done_count;
static long long wall_of[2];

static void *turn_taker(void *arg)
{
    long i = (long)arg;
    long long w = now_ms();
    burn(100, 50);
    wall_of[i] = now_ms() - w;
    atomic_fetch_add(&done_count, 1);
    return (void *)(intptr_t)clock_ms(CLOCK_THREAD_CPUTIME_ID);
}

static void check_turns(void)
{
    pthread_t a = spawn(turn_taker, (void *)0), b = spawn(turn_taker, (void *)1);
    long long ca = (long long)(intptr_t)join(a), cb = (long long)(intptr_t)join(b);
    note("a", ca);
    note("b", cb);
    note("a_wall", wall_of[0]);
    note("b_wall", wall_of[1]);
    result("each_counts_its_own=%s", ca >= 100 && cb >= 100 && ca < 1000 && cb < 1000 ? "yes" : "no");
}

/* The process clock still counts every thread: a thread spins until it
 * has advanced 100 ms, main sees the same. */
static void *burn_process(void *arg)
{
    (void)arg;
    long long p0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID), wall = now_ms();
    while (clock_ms(CLOCK_PROCESS_CPUTIME_ID) - p0 < 100)
        if (now_ms() - wall > 10000)
            fail("the process clock did not advance 100 ms in 10 s");
    return NULL;
}

static void check_process_clock(void)
{
    long long p0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    join(spawn(burn_process, NULL));
    long long d = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - p0;
    note("process_delta", d);
    result("process_counts_threads=%s", d >= 100 ? "yes" : "no");
}

/* getrusage(RUSAGE_THREAD): a thread that burns 100 ms sees them in its
 * own usage; main, which waits meanwhile, does not. (Under the preload it
 * was the OS thread's usage, every thread's together.) */
static long long rusage_ms(void)
{
    struct rusage r;
    if (getrusage(RUSAGE_THREAD, &r) != 0)
        fail("getrusage: %s", strerror(errno));
    return ((long long)r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1000;
}

static void *burn_rusage(void *arg)
{
    (void)arg;
    long long u0 = rusage_ms();
    burn(100, 0);
    return (void *)(intptr_t)(rusage_ms() - u0);
}

static void check_rusage_thread(void)
{
    long long m0 = rusage_ms();
    long long t = (long long)(intptr_t)join(spawn(burn_rusage, NULL));
    long long m = rusage_ms() - m0;
    note("thread", t);
    note("main", m);
    result("thread_counts_its_own=%s main_excludes_it=%s", t >= 80 ? "yes" : "no", m < 50 ? "yes" : "no");
}

static const struct check checks[] = {
    { "own_time", check_own_time },
    { "turns", check_turns },
    { "process_clock", check_process_clock },
    { "rusage_thread", check_rusage_thread },
};

int main(int argc, char **argv)
{
    return run_checks(argc, argv, checks, sizeof checks / sizeof *checks);
}
