/*
 * system_calls: system(3) as a program with threads uses it, compared with
 * glibc's own. Under greenhook the threads are fibers of one hub and the
 * shell's wait is the calling fiber's alone.
 *
 *   pipe       a thread's pipe, inherited by the shell at fd >= 3, carries
 *              20,000 lines to a reader thread (greenhook's pipes are
 *              non-blocking underneath: the shell must get a blocking one)
 *   together   8 threads' shells wait for each other (each makes a file and
 *              waits, at most 5 s, until 8 exist): all 8 run at once
 *   signals    what the shell gets (its blocked and ignored signals, from
 *              /proc), SIGCHLD blocked in the caller alone while the call
 *              runs, SIGINT and SIGQUIT ignored in the process meanwhile
 *              and put back after, a handler without SA_RESTART during the
 *              call (the call goes on)
 *   status     exit statuses, a killed shell, system(NULL), a line that
 *              starts with '-'
 *   cancel     a thread cancelled in system("sleep 5; ..."): its shell is
 *              killed, the join returns PTHREAD_CANCELED at once, SIGINT's
 *              action is back
 *
 * usage: system_calls  (all of the above, with a ticker that must keep
 * ticking while main waits in system)
 * stdout: one line per check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TICKER_MS 20
#include "ticker.h"

static char dir[64];

/* ---------- pipe ---------- */

static int pipe_fds[2];

static void *reader(void *arg)
{
    (void)arg;
    FILE *f = fdopen(pipe_fds[0], "r");
    char line[32];
    long n = 0, sum = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        sum += atol(line);
    }
    fclose(f);
    printf("pipe: the reader got %ld lines, sum %ld\n", n, sum);
    return NULL;
}

static void *pipe_writer(void *arg)
{
    (void)arg;
    if (pipe(pipe_fds) != 0) {
        perror("pipe");
        exit(1);
    }
    /* Above stdio (one digit: sh takes no more), inheritable: the shell
     * writes to it. */
    int w = fcntl(pipe_fds[1], F_DUPFD, 7);
    close(pipe_fds[1]);
    pthread_t r;
    pthread_create(&r, NULL, reader, NULL);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "seq 1 20000 >&%d", w);
    int st = system(cmd);
    close(w);
    pthread_join(r, NULL);
    printf("pipe: system returned %d (exit %d)\n", st, WEXITSTATUS(st));
    return NULL;
}

/* ---------- together ---------- */

#define TOGETHER 8

static void *together(void *arg)
{
    long i = (long)arg;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "touch %s/t%ld; n=0; while [ $(ls %s | grep -c '^t') -lt %d ] && [ $n -lt 100 ]; do sleep 0.05; "
             "n=$((n+1)); done; [ $n -lt 100 ]",
             dir, i, dir, TOGETHER);
    return (void *)(long)system(cmd);
}

/* ---------- signals ---------- */

static volatile sig_atomic_t ints, alarms;

static void on_int(int sig)
{
    (void)sig;
    ints++;
}

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static const char *handler_name(int sig)
{
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    return sa.sa_handler == SIG_IGN ? "SIG_IGN" : sa.sa_handler == SIG_DFL ? "SIG_DFL" : "the program's handler";
}

static volatile int in_call; /* the caller's system is running */

static void *watcher(void *arg)
{
    (void)arg;
    while (!in_call)
        usleep(1000);
    usleep(100000);
    sigset_t m;
    pthread_sigmask(SIG_BLOCK, NULL, &m);
    printf("signals: during the call, another thread blocks SIGCHLD: %s; SIGINT is %s, SIGQUIT %s\n",
           sigismember(&m, SIGCHLD) ? "yes" : "no", handler_name(SIGINT), handler_name(SIGQUIT));
    fflush(stdout);
    return NULL;
}

static void signals(void)
{
    struct sigaction sa = {.sa_handler = on_int, .sa_flags = SA_RESTART};
    sigaction(SIGINT, &sa, NULL);
    signal(SIGQUIT, SIG_IGN);
    sigset_t usr2, m;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);

    /* What the shell gets: SIGUSR2 blocked (the caller's mask, without
     * SIGCHLD), SIGQUIT ignored (it was), SIGINT at its default. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "grep -E '^Sig(Blk|Ign)' /proc/$$/status | tr '\\t' ' ' > %s/shell", dir);
    system(cmd);
    snprintf(cmd, sizeof cmd, "%s/shell", dir);
    FILE *f = fopen(cmd, "r");
    char line[128];
    while (f && fgets(line, sizeof line, f))
        printf("signals: the shell's %s", line);
    if (f)
        fclose(f);

    /* SIGINT to the process while the call runs: ignored. */
    pthread_t w;
    pthread_create(&w, NULL, watcher, NULL);
    in_call = 1;
    int st = system("kill -INT $PPID; kill -QUIT $PPID; sleep 0.3");
    in_call = 0;
    pthread_join(w, NULL);
    printf("signals: SIGINT and SIGQUIT sent during the call: status %d, handler ran %d times\n", st, (int)ints);
    pthread_sigmask(SIG_BLOCK, NULL, &m);
    printf("signals: after it, SIGINT is %s, SIGQUIT %s, SIGCHLD blocked: %s, SIGUSR2 blocked: %s\n",
           handler_name(SIGINT), handler_name(SIGQUIT), sigismember(&m, SIGCHLD) ? "yes" : "no",
           sigismember(&m, SIGUSR2) ? "yes" : "no");
    raise(SIGINT);
    printf("signals: SIGINT raised after the call: handler ran %d times\n", (int)ints);

    /* A handler without SA_RESTART during the call: the wait goes on. */
    struct sigaction al = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &al, NULL);
    alarm(1);
    st = system("sleep 1.5; exit 4");
    printf("signals: SIGALRM (no SA_RESTART) during the call: status %d, exit %d, errno %s, handler ran %d times\n",
           st, WEXITSTATUS(st), st == -1 ? strerror(errno) : "-", (int)alarms);
    pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
}

/* ---------- cancel ---------- */

static void *cancelled(void *arg)
{
    (void)arg;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "echo $$ > %s/pid; sleep 5; echo late", dir);
    system(cmd);
    printf("cancel: system returned\n");
    return NULL;
}

static void cancel(void)
{
    pthread_t t;
    long long t0 = now_ns();
    pthread_create(&t, NULL, cancelled, NULL);
    usleep(300000);
    pthread_cancel(t);
    void *r;
    pthread_join(t, &r);
    long long ms = (now_ns() - t0) / 1000000;
    char path[96];
    snprintf(path, sizeof path, "%s/pid", dir);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    int gone = pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
    printf("cancel: joined %s, within 3 s: %s, the shell is gone: %s, SIGINT is %s\n",
           r == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "a value", ms < 3000 ? "yes" : "no", gone ? "yes" : "no",
           handler_name(SIGINT));
    if (ms >= 3000)
        fprintf(stderr, "cancel took %lld ms\n", ms);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(dir, sizeof dir, "/tmp/greenhook-system-%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) {
        perror("mkdir");
        return 1;
    }
    pthread_t tick = ticker_start();

    pthread_t p;
    pthread_create(&p, NULL, pipe_writer, NULL);
    pthread_join(p, NULL);

    pthread_t ts[TOGETHER];
    for (long i = 0; i < TOGETHER; i++)
        pthread_create(&ts[i], NULL, together, (void *)i);
    int met = 0;
    for (int i = 0; i < TOGETHER; i++) {
        void *r;
        pthread_join(ts[i], &r);
        met += (long)r == 0;
    }
    printf("together: %d of %d shells met the others\n", met, TOGETHER);

    signals();

    int st = system("exit 3");
    printf("status: exit 3 gives %d\n", st);
    st = system("kill -9 $$");
    printf("status: a shell killed by SIGKILL gives signalled %d, signal %d\n", WIFSIGNALED(st), WTERMSIG(st));
    printf("status: system(NULL) gives %d\n", system(NULL));
    st = system("-c");
    printf("status: a line starting with '-' gives %d\n", st);
    st = system("");
    printf("status: an empty line gives %d\n", st);

    cancel();

    ticker_stop(tick);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
