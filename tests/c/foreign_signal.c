/*
 * foreign_signal: pthread_kill, pthread_sigqueue and pthread_cancel aimed
 * at normal threads by a thread made with libc's own pthread_create (past
 * any preloaded hook), as a library's background thread or a
 * SIGEV_THREAD notification would.
 *
 * usage: foreign_signal
 *
 * Three normal threads block: one in read() on an empty pipe (SIGUSR1's
 * handler has no SA_RESTART, so the read ends with EINTR), one in
 * sigwaitinfo() for SIGUSR2, one in sleep(), a cancellation point. The
 * foreign thread then signals the first (after checking it with signal
 * 0 and trying a signal number glibc keeps and one out of range), queues
 * SIGUSR2 with a value to the second, and cancels the third. Under the
 * preload the three are fibers, whose handles only the fibers' OS thread
 * knows: such calls from another thread answered as for a joined thread,
 * and nothing reached the fiber, which blocked for good.
 *
 * stdout: every answer and what each thread saw, the same with and
 * without the preload.
 */
#define _GNU_SOURCE
#include "libc_create.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fds[2];
static volatile sig_atomic_t handled;
static pthread_t reader, waiter, sleeper;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int arrivals;

static ssize_t read_answer;
static int read_errno;
static int waited_sig, waited_value, waited_queued;

static void on_usr1(int sig)
{
    (void)sig;
    handled++;
}

static void arrive(void)
{
    pthread_mutex_lock(&m);
    arrivals++;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
}

static void *read_side(void *arg)
{
    (void)arg;
    char b;
    arrive();
    read_answer = read(fds[0], &b, 1);
    read_errno = errno;
    return NULL;
}

static void *wait_side(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    arrive();
    siginfo_t info;
    memset(&info, 0, sizeof info);
    waited_sig = sigwaitinfo(&s, &info);
    waited_value = info.si_value.sival_int;
    waited_queued = info.si_code == SI_QUEUE;
    return NULL;
}

static void *sleep_side(void *arg)
{
    (void)arg;
    arrive();
    sleep(30);
    return (void *)1;
}

static int answers[7];

static void *foreign(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    while (arrivals < 3)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    usleep(50000); /* into their blocking calls */
    answers[0] = pthread_kill(reader, 0);
    answers[1] = pthread_kill(reader, 32); /* glibc's own: EINVAL */
    answers[2] = pthread_kill(reader, 999);
    answers[3] = pthread_kill(reader, SIGUSR1);
    union sigval v = {.sival_int = 42};
    answers[4] = pthread_sigqueue(waiter, 0, v);
    answers[5] = pthread_sigqueue(waiter, SIGUSR2, v);
    answers[6] = pthread_cancel(sleeper);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (pipe(fds) != 0)
        return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    /* SIGUSR2 only for the waiter: blocked here, inherited by the others. */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &s, NULL);

    pthread_create(&reader, NULL, read_side, NULL);
    pthread_create(&waiter, NULL, wait_side, NULL);
    pthread_create(&sleeper, NULL, sleep_side, NULL);
    pthread_t f;
    libc_pthread_create(&f, foreign, NULL);
    pthread_join(f, NULL);

    void *slept;
    pthread_join(reader, NULL);
    pthread_join(waiter, NULL);
    pthread_join(sleeper, &slept);
    printf("foreign: kill 0 -> %d, kill 32 -> %d, kill 999 -> %d, kill SIGUSR1 -> %d\n", answers[0], answers[1],
           answers[2], answers[3]);
    printf("foreign: sigqueue 0 -> %d, sigqueue SIGUSR2 -> %d, cancel -> %d\n", answers[4], answers[5], answers[6]);
    printf("reader: read %zd (%s), handler ran %d time(s)\n", read_answer,
           read_answer < 0 ? strerror(read_errno) : "data", (int)handled);
    printf("waiter: %s, value %d, queued %d\n", waited_sig == SIGUSR2 ? "SIGUSR2" : "something else", waited_value,
           waited_queued);
    printf("sleeper: %s\n", slept == PTHREAD_CANCELED ? "cancelled" : "not cancelled");
    return 0;
}
