/*
 * proc_children: child processes from threads.
 *
 * usage: proc_children MODE
 *   system       3 threads each run system("sleep 1"); time_ms= on stderr
 *   popen        popen of a slow writer while a ticker thread ticks every
 *                20 ms
 *   popen_fd     the same, reading with read(2) on fileno() (no stdio)
 *   waitpid      a forked child sleeps 300 ms; a thread waits for it with
 *                waitpid while a ticker ticks; also wait4 and waitid(P_PID)
 *   waitany      wait(&st) / waitpid(-1) for a child that sleeps 200 ms,
 *                while a ticker ticks
 *   fork_exec    a thread forks; the child execs /bin/echo
 *   fork_threads a thread forks; the child starts 3 threads that sleep
 *                50 ms each and exits with their count as status
 *   fork_returns a thread forks; in the child that thread starts and joins
 *                a thread, then returns (the child's last thread: exit 0)
 *   fork_root    main forks while a ticker runs; the child starts threads,
 *                runs system("exit 5") and pause()s until alarm(1)
 *   spawn        posix_spawn of /bin/echo, then waitpid
 *   vfork        vfork + execl /bin/true, then waitpid
 *
 * stdout: deterministic facts only; exit 0 on success, 1 on a failed check.
 * stderr: the ticker's report (ticker.h) in the modes that run it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define TICKER_MS 20
#include "ticker.h"

extern char **environ;

static void fail(const char *what)
{
    fprintf(stderr, "FAIL: %s\n", what);
    exit(1);
}

/* ---------- modes ---------- */

static void *run_system(void *arg)
{
    (void)arg;
    return (void *)(long)system("sleep 1");
}

static void mode_system(void)
{
    pthread_t t[3];
    long long t0 = now_ms();
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, run_system, NULL);
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        int st = (int)(long)r;
        printf("system %d: exited=%d status=%d\n", i, WIFEXITED(st), WEXITSTATUS(st));
    }
    fprintf(stderr, "time_ms=%lld\n", now_ms() - t0);
}

static void mode_popen(void)
{
    pthread_t tk = ticker_start();
    FILE *f = popen("sh -c 'for i in 1 2 3; do echo line $i; sleep 0.2; done'", "r");
    if (!f)
        fail("popen");
    char buf[64];
    while (fgets(buf, sizeof buf, f))
        printf("read: %s", buf);
    int st = pclose(f);
    printf("pclose: exited=%d status=%d\n", WIFEXITED(st), WEXITSTATUS(st));
    ticker_stop(tk);
}

/* The same through read(2) on the pipe's fd (no stdio). */
static void mode_popen_fd(void)
{
    pthread_t tk = ticker_start();
    FILE *f = popen("sh -c 'for i in 1 2 3; do echo line $i; sleep 0.2; done'", "r");
    if (!f)
        fail("popen");
    char buf[256];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fileno(f), buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = 0;
    printf("read: %s", buf);
    int st = pclose(f);
    printf("pclose: exited=%d status=%d\n", WIFEXITED(st), WEXITSTATUS(st));
    ticker_stop(tk);
}

static pid_t sleeper_child(int ms, int code)
{
    pid_t p = fork();
    if (p < 0)
        fail("fork");
    if (p == 0) {
        usleep(ms * 1000);
        _exit(code);
    }
    return p;
}

static void mode_waitpid(void)
{
    pthread_t tk = ticker_start();
    int st = 0;
    long long t0 = now_ms();
    pid_t p = sleeper_child(300, 7);
    pid_t r = waitpid(p, &st, 0);
    long long el = now_ms() - t0;
    printf("waitpid: same_pid=%d exited=%d status=%d waited_enough=%d\n", r == p, WIFEXITED(st), WEXITSTATUS(st),
           el >= 290);
    p = sleeper_child(100, 3);
    struct rusage ru;
    r = wait4(p, &st, 0, &ru);
    printf("wait4: same_pid=%d status=%d\n", r == p, WEXITSTATUS(st));
    p = sleeper_child(100, 4);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int w = waitid(P_PID, (id_t)p, &si, WEXITED);
    printf("waitid: rc=%d same_pid=%d code=%d status=%d\n", w, si.si_pid == p, si.si_code == CLD_EXITED, si.si_status);
    r = waitpid(p, &st, WNOHANG);
    printf("waitpid again: rc=%d errno=%s\n", (int)r, r < 0 && errno == ECHILD ? "ECHILD" : "?");
    if (ticker_stop(tk) < 10)
        fail("ticker did not tick while waiting");
}

static void mode_waitany(void)
{
    pthread_t tk = ticker_start();
    int st = 0;
    pid_t p = sleeper_child(200, 5);
    pid_t none = waitpid(-1, &st, WNOHANG);
    printf("wnohang: rc=%d\n", (int)none);
    pid_t r = wait(&st);
    printf("wait: same_pid=%d status=%d\n", r == p, WEXITSTATUS(st));
    p = sleeper_child(100, 6);
    r = waitpid(0, &st, 0);
    printf("waitpid(0): same_pid=%d status=%d\n", r == p, WEXITSTATUS(st));
    if (ticker_stop(tk) < 8)
        fail("ticker did not tick while waiting");
}

static void *fork_exec_thread(void *arg)
{
    (void)arg;
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        execl("/bin/echo", "echo", "hello from the child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    pid_t r = waitpid(p, &st, 0);
    printf("fork_exec: same_pid=%d status=%d\n", r == p, WEXITSTATUS(st));
    return NULL;
}

static void *child_sleeper(void *arg)
{
    usleep(50000);
    return arg;
}

static void *fork_threads_thread(void *arg)
{
    (void)arg;
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        pthread_t t[3];
        long sum = 0;
        long long t0 = now_ms();
        for (long i = 0; i < 3; i++)
            if (pthread_create(&t[i], NULL, child_sleeper, (void *)1))
                _exit(100);
        for (int i = 0; i < 3; i++) {
            void *r;
            pthread_join(t[i], &r);
            sum += (long)r;
        }
        long long el = now_ms() - t0;
        _exit(el < 1000 ? (int)sum : 99);
    }
    int st = 0;
    pid_t r = waitpid(p, &st, 0);
    printf("fork_threads: same_pid=%d exited=%d status=%d\n", r == p, WIFEXITED(st), WEXITSTATUS(st));
    return NULL;
}

/* The child's only thread (a thread of the parent) returns: exit(0). */
static void *fork_returns_thread(void *arg)
{
    (void)arg;
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        pthread_t t;
        pthread_create(&t, NULL, child_sleeper, NULL);
        pthread_join(t, NULL);
        return NULL;
    }
    int st = 0;
    pid_t r = waitpid(p, &st, 0);
    printf("fork_returns: same_pid=%d exited=%d status=%d\n", r == p, WIFEXITED(st), WEXITSTATUS(st));
    return NULL;
}

static void child_alarm(int sig)
{
    (void)sig;
}

/* main forks while a ticker thread runs; the child starts threads, runs
 * system() and pause()s until alarm(1). */
static void mode_fork_root(void)
{
    pthread_t tk = ticker_start();
    usleep(50000);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        pthread_t a, b;
        void *ra, *rb;
        pthread_create(&a, NULL, child_sleeper, (void *)1);
        pthread_create(&b, NULL, child_sleeper, (void *)2);
        pthread_join(a, &ra);
        pthread_join(b, &rb);
        int rc = system("exit 5");
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = child_alarm;
        sigaction(SIGALRM, &sa, NULL);
        alarm(1);
        int r = pause();
        int intr = r == -1 && errno == EINTR;
        _exit((int)(long)ra + (int)(long)rb + WEXITSTATUS(rc) + (intr ? 10 : 0));
    }
    int st = 0;
    pid_t r = waitpid(p, &st, 0);
    ticker_stop(tk);
    printf("fork_root: same_pid=%d exited=%d status=%d\n", r == p, WIFEXITED(st), WEXITSTATUS(st));
}

static void in_thread(void *(*f)(void *))
{
    pthread_t tk = ticker_start();
    pthread_t t;
    pthread_create(&t, NULL, f, NULL);
    pthread_join(t, NULL);
    ticker_stop(tk);
}

static void mode_spawn(void)
{
    pid_t p;
    char *argv[] = { "echo", "spawned", NULL };
    fflush(stdout);
    int rc = posix_spawn(&p, "/bin/echo", NULL, NULL, argv, environ);
    int st = 0;
    pid_t r = waitpid(p, &st, 0);
    printf("posix_spawn: rc=%d same_pid=%d status=%d\n", rc, r == p, WEXITSTATUS(st));
}

static void *vfork_thread(void *arg)
{
    (void)arg;
    pid_t p = vfork();
    if (p == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    pid_t r = waitpid(p, &st, 0);
    printf("vfork: same_pid=%d status=%d\n", r == p, WEXITSTATUS(st));
    return NULL;
}

int main(int argc, char **argv)
{
    alarm(30);
    if (argc != 2)
        fail("usage: proc_children MODE");
    const char *m = argv[1];
    if (!strcmp(m, "system"))
        mode_system();
    else if (!strcmp(m, "popen"))
        mode_popen();
    else if (!strcmp(m, "popen_fd"))
        mode_popen_fd();
    else if (!strcmp(m, "waitpid"))
        mode_waitpid();
    else if (!strcmp(m, "waitany"))
        mode_waitany();
    else if (!strcmp(m, "fork_exec"))
        in_thread(fork_exec_thread);
    else if (!strcmp(m, "fork_threads"))
        in_thread(fork_threads_thread);
    else if (!strcmp(m, "fork_returns"))
        in_thread(fork_returns_thread);
    else if (!strcmp(m, "fork_root"))
        mode_fork_root();
    else if (!strcmp(m, "spawn"))
        mode_spawn();
    else if (!strcmp(m, "vfork"))
        in_thread(vfork_thread);
    else
        fail("unknown mode");
    fflush(stdout);
    return 0;
}
