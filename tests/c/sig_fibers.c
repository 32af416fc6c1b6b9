/*
 * sig_fibers: signals with threads blocked in calls.
 *
 * usage: sig_fibers MODE
 *   restart    SIGALRM handler with SA_RESTART; main blocks SIGALRM, thread A
 *              unblocks it and blocks in read(2) on a pipe, thread B keeps
 *              it blocked and reads another pipe; setitimer fires after
 *              100 ms, data arrives at 300 ms: both reads return the byte
 *   norestart  the same without SA_RESTART: A's read fails with EINTR (the
 *              kernel gives the signal to the one thread that accepts it),
 *              B's read returns the byte
 *   pause      main blocks SIGUSR1; thread P unblocks it and calls pause();
 *              a ticker ticks; main sends SIGUSR1 to the process at 200 ms
 *   sigsuspend the same with sigsuspend(empty mask) in P
 *   sigwait    main blocks SIGUSR2 (inherited by all); thread W sigwait()s;
 *              a ticker ticks; main sends SIGUSR2 at 200 ms; also
 *              sigtimedwait with a 100 ms timeout that expires (EAGAIN)
 *   pthread_kill  pthread_kill(SIGUSR1, no SA_RESTART) to a thread blocked
 *              in read: EINTR; pthread_kill(SIGUSR2, SA_RESTART) to each of
 *              two threads in pause(): each returns EINTR in turn
 *   masks      thread A blocks SIGUSR1, B blocks SIGUSR2; each reads its
 *              mask after both have switched several times
 *   waitmask   main blocks SIGUSR1 and waits in pselect, ppoll and
 *              epoll_pwait with an empty mask while a thread sends SIGUSR1
 *              to the process: each call fails with EINTR after the
 *              handler ran (in main, under the call's mask)
 *
 * stdout: deterministic facts only; stderr: the ticker's report (ticker.h)
 * in the modes that run it.
 * exit 0 on success, 1 on a failed check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define TICKER_MS 20
#include "ticker.h"

static void fail(const char *what)
{
    fprintf(stderr, "FAIL: %s\n", what);
    exit(1);
}

static const char *en(int e)
{
    switch (e) {
    case 0: return "0";
    case EINTR: return "EINTR";
    case EAGAIN: return "EAGAIN";
    default: return "other";
    }
}

static atomic_int handled;
static void on_sig(int sig)
{
    (void)sig;
    atomic_fetch_add(&handled, 1);
}

static void install(int sig, int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL))
        fail("sigaction");
}

static void block(int how, int sig)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(how, &s, NULL);
}

/* ---------- read + alarm ---------- */

struct reader {
    int fd;
    int unblock;
    int r;
    int err;
};

static void *reader(void *arg)
{
    struct reader *rd = arg;
    if (rd->unblock)
        block(SIG_UNBLOCK, SIGALRM);
    char c;
    errno = 0;
    rd->r = (int)read(rd->fd, &c, 1);
    rd->err = rd->r < 0 ? errno : 0;
    return NULL;
}

static void mode_read_alarm(int flags)
{
    install(SIGALRM, flags);
    block(SIG_BLOCK, SIGALRM);
    int pa[2], pb[2];
    if (pipe(pa) || pipe(pb))
        fail("pipe");
    struct reader a = { pa[0], 1, 0, 0 }, b = { pb[0], 0, 0, 0 };
    pthread_t ta, tb;
    pthread_create(&ta, NULL, reader, &a);
    pthread_create(&tb, NULL, reader, &b);
    struct itimerval it = { { 0, 0 }, { 0, 100000 } };
    setitimer(ITIMER_REAL, &it, NULL);
    usleep(300000);
    if (write(pa[1], "x", 1) != 1 || write(pb[1], "y", 1) != 1)
        fail("write");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    printf("handler ran: %s\n", atomic_load(&handled) == 1 ? "once" : "not once");
    printf("A (accepts SIGALRM): r=%d errno=%s\n", a.r, en(a.err));
    printf("B (blocks SIGALRM): r=%d errno=%s\n", b.r, en(b.err));
}

/* ---------- pause / sigsuspend ---------- */

static int use_sigsuspend;
static void *pauser(void *arg)
{
    (void)arg;
    int r, e;
    if (use_sigsuspend) {
        sigset_t empty;
        sigemptyset(&empty);
        r = sigsuspend(&empty);
        e = errno;
        sigset_t cur;
        pthread_sigmask(SIG_SETMASK, NULL, &cur);
        printf("sigsuspend: r=%d errno=%s mask_restored=%d\n", r, en(e), sigismember(&cur, SIGUSR1));
    } else {
        block(SIG_UNBLOCK, SIGUSR1);
        r = pause();
        e = errno;
        printf("pause: r=%d errno=%s\n", r, en(e));
    }
    return NULL;
}

static void mode_pause(int sus)
{
    use_sigsuspend = sus;
    install(SIGUSR1, SA_RESTART);
    block(SIG_BLOCK, SIGUSR1);
    pthread_t tk = ticker_start(), tp;
    pthread_create(&tp, NULL, pauser, NULL);
    usleep(200000);
    kill(getpid(), SIGUSR1);
    pthread_join(tp, NULL);
    long ticks = ticker_stop(tk);
    printf("handler ran: %s\n", atomic_load(&handled) == 1 ? "once" : "not once");
    if (ticks < 5)
        fail("ticker did not tick while a thread waited for a signal");
}

/* ---------- sigwait ---------- */

static void *waiter(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    struct timespec ts = { 0, 100000000 };
    long long t0 = now_ms();
    int r = sigtimedwait(&s, NULL, &ts);
    int e = errno;
    printf("sigtimedwait: r=%d errno=%s waited_enough=%d\n", r, en(e), now_ms() - t0 >= 99);
    int sig = 0;
    r = sigwait(&s, &sig);
    printf("sigwait: r=%d sig_is_usr2=%d\n", r, sig == SIGUSR2);
    return NULL;
}

static void mode_sigwait(void)
{
    block(SIG_BLOCK, SIGUSR2);
    pthread_t tk = ticker_start(), tw;
    pthread_create(&tw, NULL, waiter, NULL);
    usleep(200000);
    kill(getpid(), SIGUSR2);
    pthread_join(tw, NULL);
    if (ticker_stop(tk) < 5)
        fail("ticker did not tick while a thread waited for a signal");
}

/* ---------- pthread_kill ---------- */

static int kill_pipe[2];
static void *kill_reader(void *arg)
{
    (void)arg;
    char c;
    errno = 0;
    int r = (int)read(kill_pipe[0], &c, 1);
    int e = r < 0 ? errno : 0;
    printf("pthread_kill reader: r=%d errno=%s\n", r, en(e));
    return NULL;
}

static void *kill_pauser(void *arg)
{
    (void)arg;
    int r = pause();
    int e = errno;
    printf("pthread_kill pauser: r=%d errno=%s\n", r, en(e));
    return NULL;
}

static void mode_pthread_kill(void)
{
    install(SIGUSR1, 0);
    install(SIGUSR2, SA_RESTART);
    if (pipe(kill_pipe))
        fail("pipe");
    pthread_t r, p, other;
    pthread_create(&r, NULL, kill_reader, NULL);
    pthread_create(&p, NULL, kill_pauser, NULL);
    pthread_create(&other, NULL, kill_pauser, NULL);
    usleep(100000);
    pthread_kill(r, SIGUSR1);
    pthread_join(r, NULL);
    fflush(stdout);
    pthread_kill(p, SIGUSR2);
    pthread_join(p, NULL);
    fflush(stdout);
    pthread_kill(other, SIGUSR2);
    pthread_join(other, NULL);
    printf("handlers ran: %d\n", atomic_load(&handled));
}

/* ---------- masks ---------- */

static void *masker(void *arg)
{
    int sig = (int)(long)arg;
    block(SIG_BLOCK, sig);
    for (int i = 0; i < 5; i++)
        usleep(5000);
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    return (void *)(long)(sigismember(&cur, SIGUSR1) * 1 + sigismember(&cur, SIGUSR2) * 2);
}

static void mode_masks(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, masker, (void *)(long)SIGUSR1);
    pthread_create(&b, NULL, masker, (void *)(long)SIGUSR2);
    void *ra, *rb;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    sigset_t cur;
    sigprocmask(SIG_SETMASK, NULL, &cur);
    printf("A blocks: usr1=%ld usr2=%ld\n", (long)ra & 1, ((long)ra >> 1) & 1);
    printf("B blocks: usr1=%ld usr2=%ld\n", (long)rb & 1, ((long)rb >> 1) & 1);
    printf("main blocks: usr1=%d usr2=%d\n", sigismember(&cur, SIGUSR1), sigismember(&cur, SIGUSR2));
}

/* ---------- temporary masks of pselect, ppoll, epoll_pwait ---------- */

static pthread_t waitmask_main;
static atomic_int in_main;
static void on_usr1_where(int sig)
{
    (void)sig;
    atomic_fetch_add(&handled, 1);
    if (pthread_equal(pthread_self(), waitmask_main))
        atomic_fetch_add(&in_main, 1);
}

static void *process_killer(void *arg)
{
    (void)arg;
    usleep(50000);
    kill(getpid(), SIGUSR1);
    return NULL;
}

static void mode_waitmask(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1_where;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    waitmask_main = pthread_self();
    block(SIG_BLOCK, SIGUSR1);
    sigset_t empty;
    sigemptyset(&empty);
    int p[2];
    if (pipe(p))
        fail("pipe");
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN };
    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
    for (int k = 0; k < 3; k++) {
        pthread_t t;
        pthread_create(&t, NULL, process_killer, NULL);
        struct timespec ts = { 2, 0 };
        int r;
        const char *what;
        if (k == 0) {
            fd_set rs;
            FD_ZERO(&rs);
            FD_SET(p[0], &rs);
            r = pselect(p[0] + 1, &rs, NULL, NULL, &ts, &empty);
            what = "pselect";
        } else if (k == 1) {
            struct pollfd pf = { p[0], POLLIN, 0 };
            r = ppoll(&pf, 1, &ts, &empty);
            what = "ppoll";
        } else {
            struct epoll_event out;
            r = epoll_pwait(ep, &out, 1, 2000, &empty);
            what = "epoll_pwait";
        }
        int e = errno;
        printf("%s: r=%d errno=%s handled=%d in_main=%d\n", what, r, r < 0 ? en(e) : "0", atomic_load(&handled),
               atomic_load(&in_main));
        pthread_join(t, NULL);
    }
}

int main(int argc, char **argv)
{
    alarm(30);
    if (argc != 2)
        fail("usage: sig_fibers MODE");
    const char *m = argv[1];
    if (!strcmp(m, "restart"))
        mode_read_alarm(SA_RESTART);
    else if (!strcmp(m, "norestart"))
        mode_read_alarm(0);
    else if (!strcmp(m, "pause"))
        mode_pause(0);
    else if (!strcmp(m, "sigsuspend"))
        mode_pause(1);
    else if (!strcmp(m, "sigwait"))
        mode_sigwait();
    else if (!strcmp(m, "pthread_kill"))
        mode_pthread_kill();
    else if (!strcmp(m, "masks"))
        mode_masks();
    else if (!strcmp(m, "waitmask"))
        mode_waitmask();
    else
        fail("unknown mode");
    fflush(stdout);
    return 0;
}
