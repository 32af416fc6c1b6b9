/*
 * cancel_async: a thread with PTHREAD_CANCEL_ASYNCHRONOUS blocked in a
 * wait is cancelled by pthread_cancel: its cleanup handlers run and
 * pthread_join gets PTHREAD_CANCELED. Also: switching to the asynchronous
 * type, or enabling cancellation, with a cancel pending acts at once.
 *
 * usage: cancel_async [WAIT...]   (no argument: the waits of the first list)
 *   sleep, pipe_read, join, sigwait, pending_type, pending_enable, yield
 *   cond_wait, mutex_self_deadlock, mutex_other   (lock waits: not in the
 *   default run; see tests/preload_threads.rs)
 *
 * stdout: "<wait>: cancel=<rc> joined=CANCELED cleanups=<n> after=<n>"
 * per wait, deterministic. A wrong result: "FAIL <wait>: ..." on stderr,
 * exit 1; alarm(20) turns a hang into SIGALRM.
 * stderr: "<wait>.time_ms=<n>": from pthread_cancel to the end of the join.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

static atomic_int cleanups, started, after;
static int fds[2];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, held = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct event ev_never = EVENT_INIT;
static pthread_t blocker;

static void *wait_forever(void *arg)
{
    (void)arg;
    ev_wait(&ev_never);
    return NULL;
}

static void cleanup(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cleanups, 1);
}

static void go_async(void)
{
    int old;
    if (pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old) != 0 || old != PTHREAD_CANCEL_DEFERRED)
        fail("setcanceltype");
}

static void *target(void *arg)
{
    const char *w = arg;
    char c;
    sigset_t set;
    int sig;
    pthread_cleanup_push(cleanup, NULL);
    pthread_cleanup_push(cleanup, NULL);
    if (!strcmp(w, "pending_type") || !strcmp(w, "pending_enable")) {
        /* Deferred or disabled while the cancel arrives; then async. */
        if (!strcmp(w, "pending_enable")) {
            pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
            go_async();
        }
        atomic_store(&started, 1);
        while (atomic_load(&started) != 2)
            sched_yield();
        if (!strcmp(w, "pending_type"))
            go_async();
        else
            pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
        atomic_fetch_add(&after, 1);
    } else {
        go_async();
        atomic_store(&started, 1);
        if (!strcmp(w, "sleep"))
            sleep(30);
        else if (!strcmp(w, "pipe_read"))
            (void)!read(fds[0], &c, 1);
        else if (!strcmp(w, "join"))
            pthread_join(blocker, NULL);
        else if (!strcmp(w, "sigwait")) {
            sigemptyset(&set);
            sigaddset(&set, SIGUSR2);
            sigwait(&set, &sig);
        } else if (!strcmp(w, "yield")) {
            for (;;)
                sched_yield();
        } else if (!strcmp(w, "cond_wait")) {
            pthread_mutex_lock(&m);
            for (;;)
                pthread_cond_wait(&cv, &m);
        } else if (!strcmp(w, "mutex_self_deadlock")) {
            pthread_mutex_lock(&m);
            pthread_mutex_lock(&m); /* a normal mutex: waits forever */
        } else if (!strcmp(w, "mutex_other")) {
            pthread_mutex_lock(&held); /* main holds it */
        } else
            fail("unknown wait %s", w);
        atomic_fetch_add(&after, 1);
    }
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return (void *)1;
}

static void run(const char *w)
{
    g_check = w;
    atomic_store(&cleanups, 0);
    atomic_store(&started, 0);
    atomic_store(&after, 0);
    if (!strcmp(w, "mutex_other"))
        pthread_mutex_lock(&held);
    pthread_t t = spawn(target, (void *)w);
    while (!atomic_load(&started))
        msleep(1);
    msleep(20); /* let it block */
    long long t0 = now_ms();
    int rc = pthread_cancel(t);
    if (!strcmp(w, "pending_type") || !strcmp(w, "pending_enable"))
        atomic_store(&started, 2);
    void *v = join(t);
    fprintf(stderr, "%s.time_ms=%lld\n", w, now_ms() - t0);
    printf("%s: cancel=%s joined=%s cleanups=%d after=%d\n", w, en(rc), v == PTHREAD_CANCELED ? "CANCELED" : "value",
           atomic_load(&cleanups), atomic_load(&after));
    fflush(stdout);
    if (v != PTHREAD_CANCELED)
        fail("not cancelled");
    if (!strcmp(w, "mutex_other"))
        pthread_mutex_unlock(&held);
    if (!strcmp(w, "cond_wait") || !strcmp(w, "mutex_self_deadlock")) {
        /* The cancelled thread held m (cond_wait reacquires it): re-init. */
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        m = fresh;
    }
}

int main(int argc, char **argv)
{
    static const char *def[] = { "sleep", "pipe_read", "join", "sigwait", "pending_type", "pending_enable", "yield" };
    alarm(20);
    if (pipe(fds) != 0)
        fail("pipe");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    blocker = spawn(wait_forever, NULL);
    long long t0 = now_ms();
    if (argc == 1)
        for (size_t i = 0; i < sizeof def / sizeof *def; i++)
            run(def[i]);
    for (int i = 1; i < argc; i++)
        run(argv[i]);
    fprintf(stderr, "time_ms=%lld\n", now_ms() - t0);
    ev_set(&ev_never);
    join(blocker);
    return 0;
}
