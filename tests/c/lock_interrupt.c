/*
 * lock_interrupt: blocking calls that wait on something epoll cannot
 * watch (file locks, System V IPC, message queues), interrupted by a
 * signal handler or a cancellation, compared with glibc. Under greenhook
 * they wait on the offload pool while a thread is alive.
 *
 *   a SIGALRM handler without SA_RESTART 300 ms into a flock, an fcntl
 *   F_SETLKW, a lockf, a semop, a msgrcv and an mq_receive: each ends
 *   with EINTR (the classic lock timeout)
 *   the same handler with SA_RESTART: the lock waits on and is taken once
 *   its holder lets go (600 ms); semop and msgrcv still end with EINTR
 *   (the kernel never restarts them)
 *   a handler that leaves a flock, fcntl F_SETLKW or lockf wait by
 *   siglongjmp (the classic lock timeout): the lock is not taken later,
 *   behind the program's back, once its holder lets go
 *   a thread cancelled in fcntl F_SETLKW (a cancellation point) ends; one
 *   cancelled in flock (no cancellation point) gets the lock, and the
 *   cancellation acts at its next pthread_testcancel
 *   the program's own use of SIGRTMAX-1 (greenhook's kick): its handler,
 *   SIG_IGN, and SIG_DFL (a child dies of it)
 *
 * usage: lock_interrupt  (a ticker runs throughout)
 * stdout: one line per case.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define TICKER_MS 20
#include "ticker.h"

static char lockpath[64];
static volatile sig_atomic_t alarms, kicks;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static void arm(int restart)
{
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {.it_value = {0, 300000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* A child that holds an exclusive flock and an fcntl lock on the file for
 * `ms` milliseconds. */
static pid_t holder(int ms)
{
    int ready[2];
    if (pipe(ready) != 0)
        exit(1);
    pid_t p = fork();
    if (p == 0) {
        int fd = open(lockpath, O_CREAT | O_RDWR, 0600);
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fd < 0 || flock(fd, LOCK_EX) != 0 || fcntl(fd, F_SETLK, &l) != 0)
            _exit(3);
        if (write(ready[1], "x", 1) != 1)
            _exit(3);
        usleep(ms * 1000);
        _exit(0);
    }
    char c;
    if (read(ready[0], &c, 1) != 1)
        exit(1);
    close(ready[0]);
    close(ready[1]);
    return p;
}

static const char *result(int r)
{
    static char b[64];
    snprintf(b, sizeof b, "%d (%s)", r, r == 0 ? "done" : strerror(errno));
    return b;
}

enum what { FLOCK, FCNTL, LOCKF };
static const char *names[] = {"flock", "fcntl F_SETLKW", "lockf F_LOCK"};

static int lock(enum what w, int fd)
{
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    switch (w) {
    case FLOCK:
        return flock(fd, LOCK_EX);
    case FCNTL:
        return fcntl(fd, F_SETLKW, &l);
    default:
        return lockf(fd, F_LOCK, 0);
    }
}

static void file_lock(enum what w, int restart)
{
    pid_t h = holder(600);
    int fd = open(lockpath, O_RDWR);
    alarms = 0;
    arm(restart);
    long long t0 = now_ns();
    errno = 0;
    int r = lock(w, fd);
    long long ms = (now_ns() - t0) / 1000000;
    printf("%s, handler %s SA_RESTART: %s, handler ran %d, %s\n", names[w], restart ? "with" : "without", result(r),
           (int)alarms, r == 0 ? "after the holder let go" : ms < 550 ? "before the holder let go" : "late");
    if (r != 0 && ms >= 550)
        fprintf(stderr, "%s: EINTR after %lld ms\n", names[w], ms);
    close(fd);
    waitpid(h, NULL, 0);
}

static sigjmp_buf jump_back;

static void on_alarm_jump(int sig)
{
    (void)sig;
    alarms++;
    siglongjmp(jump_back, 1);
}

/* Whether another process can take both locks on the file now. */
static int free_to_others(void)
{
    pid_t p = fork();
    if (p == 0) {
        int fd = open(lockpath, O_RDWR);
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        _exit(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && fcntl(fd, F_SETLK, &l) == 0 ? 0 : 1);
    }
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void jumped(enum what w)
{
    pid_t h = holder(600);
    int fd = open(lockpath, O_RDWR);
    volatile int r = -2;
    alarms = 0;
    struct sigaction sa = {.sa_handler = on_alarm_jump};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {.it_value = {0, 300000}};
    if (sigsetjmp(jump_back, 1) == 0) {
        setitimer(ITIMER_REAL, &it, NULL);
        r = lock(w, fd);
    }
    /* The stack the wait used, used again. */
    volatile char scratch[16384];
    memset((char *)scratch, 0x5a, sizeof scratch);
    waitpid(h, NULL, 0);
    usleep(100000);
    printf("%s, handler leaves by siglongjmp: %s, handler ran %d, lock %s once the holder left\n", names[w],
           r == -2 ? "jumped out" : result(r), (int)alarms, free_to_others() ? "free to others" : "held");
    close(fd);
}

static void sysv(int restart)
{
    int sem = semget(IPC_PRIVATE, 1, 0600);
    int q = msgget(IPC_PRIVATE, 0600);
    struct sembuf down = {0, -1, 0};
    alarms = 0;
    arm(restart);
    errno = 0;
    int r = semop(sem, &down, 1);
    printf("semop, handler %s SA_RESTART: %s, handler ran %d\n", restart ? "with" : "without", result(r), (int)alarms);
    struct {
        long type;
        char text[8];
    } m;
    alarms = 0;
    arm(restart);
    errno = 0;
    ssize_t n = msgrcv(q, &m, sizeof m.text, 0, 0);
    printf("msgrcv, handler %s SA_RESTART: %s, handler ran %d\n", restart ? "with" : "without", result((int)n),
           (int)alarms);
    semctl(sem, 0, IPC_RMID);
    msgctl(q, IPC_RMID, NULL);
}

static void mqueue(void)
{
    char name[64];
    snprintf(name, sizeof name, "/greenhook-lock-interrupt-%d", (int)getpid());
    struct mq_attr a = {.mq_maxmsg = 4, .mq_msgsize = 16};
    mqd_t q = mq_open(name, O_CREAT | O_RDWR, 0600, &a);
    if (q == (mqd_t)-1) {
        printf("mq_receive: no message queues here\n");
        return;
    }
    alarms = 0;
    arm(0);
    char buf[16];
    errno = 0;
    ssize_t n = mq_receive(q, buf, sizeof buf, NULL);
    printf("mq_receive, handler without SA_RESTART: %s, handler ran %d\n", result((int)n), (int)alarms);
    mq_close(q);
    mq_unlink(name);
}

static void *cancelled(void *arg)
{
    int fd = open(lockpath, O_RDWR);
    if (arg) {
        /* flock is no cancellation point: it returns, then testcancel acts. */
        int r = flock(fd, LOCK_EX);
        printf("cancel: flock returned %d\n", r);
        pthread_testcancel();
    } else {
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        fcntl(fd, F_SETLKW, &l);
    }
    printf("cancel: the lock call returned\n");
    return NULL;
}

static void cancel(int in_flock)
{
    pid_t h = holder(in_flock ? 600 : 2000);
    pthread_t t;
    pthread_create(&t, NULL, cancelled, in_flock ? "flock" : NULL);
    usleep(200000);
    long long t0 = now_ns();
    pthread_cancel(t);
    void *r;
    pthread_join(t, &r);
    long long ms = (now_ns() - t0) / 1000000;
    printf("cancel: a thread in %s is %s, %s\n", in_flock ? "flock" : "fcntl F_SETLKW",
           r == PTHREAD_CANCELED ? "cancelled" : "not cancelled",
           ms < (in_flock ? 350 : 1000) ? "before the holder let go" : "after the holder let go");
    waitpid(h, NULL, 0);
}

static void on_kick_number(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    kicks++;
}

static void kick_number(void)
{
    int sig = SIGRTMAX - 1;
    struct sigaction sa = {.sa_sigaction = on_kick_number, .sa_flags = SA_SIGINFO | SA_RESTART}, back;
    sigaction(sig, &sa, NULL);
    sigaction(sig, NULL, &back);
    kill(getpid(), sig);
    union sigval v = {.sival_int = 7};
    sigqueue(getpid(), sig, v);
    usleep(50000);
    printf("SIGRTMAX-1: handler reported back %s, flags %s, ran %d times\n",
           back.sa_sigaction == on_kick_number ? "as installed" : "changed",
           (back.sa_flags & (SA_SIGINFO | SA_RESTART)) == (SA_SIGINFO | SA_RESTART) ? "as installed" : "changed",
           (int)kicks);
    signal(sig, SIG_IGN);
    kill(getpid(), sig);
    usleep(50000);
    printf("SIGRTMAX-1 ignored: %s, ran %d times\n", signal(sig, SIG_DFL) == SIG_IGN ? "SIG_IGN reported" : "?",
           (int)kicks);
    pid_t c = fork();
    if (c == 0) {
        kill(getpid(), sig);
        usleep(500000);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    printf("SIGRTMAX-1 at SIG_DFL in a child: %s\n",
           WIFSIGNALED(st) && WTERMSIG(st) == sig ? "killed by it" : "survived");
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(lockpath, sizeof lockpath, "/tmp/greenhook-lockint-%d", (int)getpid());
    pthread_t tick = ticker_start();
    for (enum what w = FLOCK; w <= LOCKF; w++) {
        file_lock(w, 0);
        file_lock(w, 1);
        jumped(w);
    }
    sysv(0);
    sysv(1);
    mqueue();
    cancel(0);
    cancel(1);
    kick_number();
    ticker_stop(tick);
    unlink(lockpath);
    return 0;
}
