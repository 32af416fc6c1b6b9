/*
 * signal_compat: the System V and BSD signal calls, which glibc builds on
 * its internal sigaction/sigprocmask/sigsuspend, compared with glibc. All
 * run in a thread while another thread counts 50 ms ticks (under
 * greenhook: masks are per fiber, and the ticker shares the hub).
 *
 *   sigset, sighold/sigrelse, sigset(SIG_HOLD), and what each returns; a
 *   held signal's handler runs at its release, not before (it ran at once,
 *   before: the hold reached the OS thread's mask, not the thread's)
 *   sigignore; gsignal and ssignal (glibc's aliases of raise and signal)
 *   sigblock, siggetmask, sigsetmask with BSD masks
 *   siginterrupt(SIGALRM, 1): a read on an empty pipe ends with EINTR at
 *   the alarm; siginterrupt(SIGALRM, 0) gives SA_RESTART back (the read
 *   waited for ever, before)
 *   sigpause, X/Open (with the signal unblocked) and BSD (__sigpause with
 *   a mask): each ends with EINTR at a one-second alarm, and the ticker
 *   ticked meanwhile (it stood still, before: the wait held the hub)
 *   bad signals: EINVAL from each, as glibc's sigaddset answers
 *
 * usage: signal_compat
 * stdout: one line per case.
 */
#define _GNU_SOURCE
/* The calls under test are the deprecated ones. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern int __sigpause(int sig_or_mask, int is_sig);
extern int sigblock(int mask);
extern int sigsetmask(int mask);
extern int siggetmask(void);
extern int gsignal(int sig);
extern __sighandler_t ssignal(int sig, __sighandler_t h);

/* A BSD mask bit (<signal.h>'s sigmask, which warns). */
#define MASK(sig) (1 << ((sig) - 1))

static volatile sig_atomic_t hits;
static volatile int ticks, done;

static void handler(int sig)
{
    (void)sig;
    hits++;
}

static void *ticker(void *arg)
{
    (void)arg;
    while (!done) {
        usleep(50000);
        ticks++;
    }
    return NULL;
}

static const char *disp(__sighandler_t h)
{
    return h == handler ? "handler" : h == SIG_HOLD ? "SIG_HOLD" : h == SIG_DFL ? "SIG_DFL" : h == SIG_IGN ? "SIG_IGN" : h == SIG_ERR ? "SIG_ERR" : "?";
}

static void timed_pause(const char *name, int bsd)
{
    hits = 0;
    int before = ticks;
    alarm(1);
    errno = 0;
    int r = bsd ? __sigpause(0, 0) : sigpause(SIGUSR1);
    int e = errno;
    printf("%s: %d %s, handler ran %d, the other thread ticked %s\n", name, r, strerrorname_np(e), hits,
           ticks - before >= 10 ? "meanwhile" : "not at all");
}

static void *body(void *arg)
{
    (void)arg;
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
    int p[2];
    pipe(p);

    hits = 0;
    printf("sigset(handler): previous %s\n", disp(sigset(SIGUSR1, handler)));
    raise(SIGUSR1);
    printf("raise: handler ran %d\n", hits);
    hits = 0;
    printf("sighold: %d\n", sighold(SIGUSR1));
    raise(SIGUSR1);
    printf("raise while held: handler ran %d\n", hits);
    int r = sigrelse(SIGUSR1);
    printf("sigrelse: %d, handler ran %d\n", r, hits);
    hits = 0;
    printf("sigset(SIG_HOLD): previous %s\n", disp(sigset(SIGUSR1, SIG_HOLD)));
    printf("sigset(SIG_HOLD) again: previous %s\n", disp(sigset(SIGUSR1, SIG_HOLD)));
    raise(SIGUSR1);
    printf("raise while held: handler ran %d\n", hits);
    const char *was = disp(sigset(SIGUSR1, handler));
    printf("sigset(handler): previous %s, handler ran %d\n", was, hits);
    printf("sigignore: %d\n", sigignore(SIGUSR2));
    raise(SIGUSR2);
    struct sigaction sa;
    sigaction(SIGUSR2, NULL, &sa);
    printf("after sigignore: %s, alive\n", disp(sa.sa_handler));

    hits = 0;
    printf("ssignal: previous %s\n", disp(ssignal(SIGUSR2, handler)));
    gsignal(SIGUSR2);
    printf("gsignal: handler ran %d\n", hits);

    hits = 0;
    int old = sigblock(MASK(SIGUSR1));
    raise(SIGUSR1);
    printf("sigblock: previous had SIGUSR1 %d, handler ran %d\n", !!(old & MASK(SIGUSR1)), hits);
    r = siggetmask();
    printf("siggetmask: has SIGUSR1 %d\n", !!(r & MASK(SIGUSR1)));
    old = sigsetmask(old);
    printf("sigsetmask: previous had SIGUSR1 %d, handler ran %d\n", !!(old & MASK(SIGUSR1)), hits);

    signal(SIGALRM, handler);
    printf("siginterrupt(1): %d\n", siginterrupt(SIGALRM, 1));
    sigaction(SIGALRM, NULL, &sa);
    printf("SA_RESTART: %d\n", !!(sa.sa_flags & SA_RESTART));
    hits = 0;
    alarm(1);
    char c;
    errno = 0;
    ssize_t n = read(p[0], &c, 1);
    printf("read at the alarm: %zd %s, handler ran %d\n", n, strerrorname_np(errno), hits);
    printf("siginterrupt(0): %d\n", siginterrupt(SIGALRM, 0));
    sigaction(SIGALRM, NULL, &sa);
    printf("SA_RESTART: %d\n", !!(sa.sa_flags & SA_RESTART));

    sighold(SIGUSR1);
    timed_pause("sigpause (X/Open)", 0);
    timed_pause("sigpause (BSD, __sigpause)", 1);

    /* Bad signals. */
    errno = 0;
    r = sighold(0);
    printf("sighold(0): %d %s\n", r, strerrorname_np(errno));
    errno = 0;
    r = sigrelse(65);
    printf("sigrelse(65): %d %s\n", r, strerrorname_np(errno));
    errno = 0;
    was = disp(sigset(32, handler));
    printf("sigset(32): %s %s\n", was, strerrorname_np(errno));
    errno = 0;
    r = sigignore(SIGKILL);
    printf("sigignore(SIGKILL): %d %s\n", r, strerrorname_np(errno));
    errno = 0;
    r = siginterrupt(0, 1);
    printf("siginterrupt(0, 1): %d %s\n", r, strerrorname_np(errno));
    errno = 0;
    r = sigpause(0);
    printf("sigpause(0): %d %s\n", r, strerrorname_np(errno));
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Only the body's thread takes the alarms. */
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    pthread_t t, b;
    pthread_create(&t, NULL, ticker, NULL);
    pthread_create(&b, NULL, body, NULL);
    pthread_join(b, NULL);
    done = 1;
    pthread_join(t, NULL);
    return 0;
}
