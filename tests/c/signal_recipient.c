/*
 * signal_recipient: who takes a signal sent to the process, and what it
 * does to the wait it interrupts. The kernel gives a process-directed
 * signal to main (the thread group's leader) when main accepts it, so a
 * thread's kill(getpid(), ...) interrupts main's poll or sem_wait (how
 * CPython's Ctrl-C reaches its main thread); glibc's sem_wait fails with
 * EINTR after a handler without SA_RESTART, sem_timedwait after any
 * handler (the kernel does not restart a timed futex wait after one);
 * POSIX has a signal a thread sends its own process, which only it
 * accepts, handled before kill() returns. Each line says what a wait
 * returned and where the handler ran; the whole is the same with and
 * without greenhook.
 *
 * usage: signal_recipient [CHECK...]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_t main_thread;
static _Thread_local int handled_here;
static atomic_int handled_in_main, handled;

static void handler(int sig)
{
    (void)sig;
    handled_here = 1;
    atomic_fetch_add(&handled, 1);
    if (pthread_equal(pthread_self(), main_thread))
        atomic_store(&handled_in_main, 1);
}

static void install(int sig, int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigaction(sig, &sa, NULL);
}

static void reset(void)
{
    atomic_store(&handled_in_main, 0);
    atomic_store(&handled, 0);
}

static const char *outcome(int r, int e)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "%d %s", r, r < 0 ? strerrorname_np(e) : "");
    return buf;
}

/* What the helper thread does: after 100 ms, kill the process with `sig`,
 * then (post) post `sem` 100 ms later. */
struct job {
    int sig;
    sem_t *post;
};

static void *killer(void *arg)
{
    struct job *j = arg;
    usleep(100000);
    kill(getpid(), j->sig);
    if (j->post) {
        usleep(100000);
        sem_post(j->post);
    }
    return NULL;
}

static pthread_t start(struct job *j)
{
    pthread_t t;
    if (pthread_create(&t, NULL, killer, j))
        exit(2);
    return t;
}

static void check_poll(void)
{
    int p[2];
    if (pipe(p))
        exit(2);
    reset();
    struct job j = {SIGUSR1, NULL};
    pthread_t t = start(&j);
    struct pollfd pf = {p[0], POLLIN, 0};
    int r = poll(&pf, 1, 5000);
    int e = errno;
    pthread_join(t, NULL);
    printf("poll, kill from a thread: %s; handler in main: %d\n", outcome(r, e), atomic_load(&handled_in_main));
    close(p[0]);
    close(p[1]);
}

/* main waits on a semaphore (pshared: one the kernel's waiters share)
 * while a thread kills the process: SIGUSR1 has no SA_RESTART, SIGUSR2
 * has it. A second post follows, so a wait that goes on ends. */
static void check_sem(int pshared, int timed, int sig)
{
    sem_t s;
    sem_init(&s, pshared, 0);
    reset();
    struct job j = {sig, &s};
    pthread_t t = start(&j);
    int r;
    if (timed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        r = sem_timedwait(&s, &ts);
    } else {
        r = sem_wait(&s);
    }
    int e = errno;
    pthread_join(t, NULL);
    printf("%s%s, %s: %s; handler in main: %d\n", timed ? "sem_timedwait" : "sem_wait", pshared ? " (pshared)" : "",
           sig == SIGUSR1 ? "no SA_RESTART" : "SA_RESTART", outcome(r, e), atomic_load(&handled_in_main));
    sem_destroy(&s);
}

/* A thread waits on a semaphore; main sends it the signal alone. */
static sem_t fiber_sem;
static int fiber_r, fiber_e, fiber_handled;

static void *sem_waiter(void *arg)
{
    (void)arg;
    fiber_r = sem_wait(&fiber_sem);
    fiber_e = errno;
    fiber_handled = handled_here;
    return NULL;
}

static void check_thread_sem(int sig)
{
    sem_init(&fiber_sem, 0, 0);
    reset();
    pthread_t t;
    if (pthread_create(&t, NULL, sem_waiter, NULL))
        exit(2);
    usleep(100000);
    pthread_kill(t, sig);
    usleep(100000);
    sem_post(&fiber_sem);
    pthread_join(t, NULL);
    printf("sem_wait in a thread, pthread_kill, %s: %s; handler in it: %d\n",
           sig == SIGUSR1 ? "no SA_RESTART" : "SA_RESTART", outcome(fiber_r, fiber_e), fiber_handled);
    sem_destroy(&fiber_sem);
}

/* Main blocks SIGUSR1; a thread that accepts it kills the process: the
 * only thread to accept it, it handles it before kill() returns. */
static int before_return;

static void *self_killer(void *arg)
{
    (void)arg;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL); /* main's mask, inherited */
    kill(getpid(), SIGUSR1);
    before_return = handled_here;
    return NULL;
}

static void check_kill_returns(void)
{
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &one, &old);
    reset();
    pthread_t t;
    if (pthread_create(&t, NULL, self_killer, NULL))
        exit(2);
    pthread_join(t, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    printf("kill from the only thread accepting it: handled before kill returned: %d; in main: %d\n", before_return,
           atomic_load(&handled_in_main));
}

int main(void)
{
    main_thread = pthread_self();
    install(SIGUSR1, 0);
    install(SIGUSR2, SA_RESTART);
    alarm(30);
    check_poll();
    check_sem(0, 0, SIGUSR1);
    check_sem(0, 0, SIGUSR2);
    check_sem(0, 1, SIGUSR1);
    check_sem(0, 1, SIGUSR2);
    check_sem(1, 0, SIGUSR1);
    check_sem(1, 0, SIGUSR2);
    check_sem(1, 1, SIGUSR2);
    check_thread_sem(SIGUSR1);
    check_thread_sem(SIGUSR2);
    check_kill_returns();
    return 0;
}
