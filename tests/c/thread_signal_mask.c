/*
 * thread_signal_mask: a new thread starts with its creator's signal mask
 * (copied at pthread_create: later changes on either side stay apart) and
 * with no pending signals of its own.
 *
 * usage: thread_signal_mask [CHECK...]   (no argument: every check)
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

static struct event ev_go = EVENT_INIT, ev_ready = EVENT_INIT;

/* "U1U2" style: which of SIGUSR1/SIGUSR2/SIGTERM the mask blocks. */
static const char *blocked(char *buf)
{
    sigset_t s;
    pthread_sigmask(SIG_SETMASK, NULL, &s);
    snprintf(buf, 16, "%s%s%s", sigismember(&s, SIGUSR1) ? "U1" : "", sigismember(&s, SIGUSR2) ? "U2" : "",
             sigismember(&s, SIGTERM) ? "T" : "");
    if (!buf[0])
        strcpy(buf, "none");
    return buf;
}

static void block(int sig, int how)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(how, &s, NULL);
}

static char at_start[3][16], later[3][16];

static void *grandchild(void *arg)
{
    (void)arg;
    blocked(at_start[2]);
    block(SIGUSR1, SIG_UNBLOCK);
    blocked(later[2]);
    return NULL;
}

/* Starts with main's mask, adds SIGUSR2, starts a grandchild, then waits
 * until main has changed its own mask and looks at its own again. */
static void *child(void *arg)
{
    (void)arg;
    blocked(at_start[1]);
    block(SIGUSR2, SIG_BLOCK);
    join(spawn(grandchild, NULL));
    ev_set(&ev_ready);
    ev_wait(&ev_go);
    blocked(later[1]);
    return NULL;
}

static void check_inherit(void)
{
    block(SIGUSR1, SIG_BLOCK);
    blocked(at_start[0]);
    pthread_t t = spawn(child, NULL);
    ev_wait(&ev_ready);
    block(SIGUSR1, SIG_UNBLOCK);
    block(SIGTERM, SIG_BLOCK);
    ev_set(&ev_go);
    join(t);
    blocked(later[0]);
    block(SIGTERM, SIG_UNBLOCK);
    result("main=%s child=%s grandchild=%s | later: main=%s child=%s grandchild=%s", at_start[0], at_start[1],
           at_start[2], later[0], later[1], later[2]);
}

/* A signal sent to main while main blocks it stays main's: a new thread
 * does not see it pending, and unblocking it there does not deliver it. */
static atomic_int handled;
static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&handled, 1);
}

static int pending_in_thread = -1, handled_in_thread = -1;
static void *look(void *arg)
{
    (void)arg;
    sigset_t p;
    sigpending(&p);
    pending_in_thread = sigismember(&p, SIGUSR1);
    block(SIGUSR1, SIG_UNBLOCK);
    msleep(20);
    handled_in_thread = atomic_load(&handled);
    return NULL;
}

static void check_pending(void)
{
    signal(SIGUSR1, on_usr1);
    block(SIGUSR1, SIG_BLOCK);
    pthread_kill(pthread_self(), SIGUSR1);
    sigset_t p;
    sigpending(&p);
    int pending_in_main = sigismember(&p, SIGUSR1);
    join(spawn(look, NULL));
    block(SIGUSR1, SIG_UNBLOCK); /* delivered to main now */
    result("pending_in_main=%d pending_in_thread=%d handled_while_thread_unblocked=%d handled_at_the_end=%d",
           pending_in_main, pending_in_thread, handled_in_thread, atomic_load(&handled));
}

static const struct check checks[] = {
    { "inherit", check_inherit },
    { "pending", check_pending },
};

int main(int argc, char **argv)
{
    return run_checks(argc, argv, checks, sizeof checks / sizeof *checks);
}
