/* busy_threads MODE: threads that never wait, and what must still happen
 * beside them (natively the kernel preempts them; under greenhook a thread
 * that keeps calling hooked functions yields at the end of its slice).
 *
 *   poll      a thread polls a flag under a mutex (lock, look, unlock,
 *             again) until main sets it after a 50 ms sleep
 *   rwpoll    the same under an rwlock's read lock; main writes the flag
 *             under its write lock
 *   spin      main holds a spin lock and joins a thread that spins on it;
 *             a SIGALRM handler in that thread ends it with pthread_exit
 *   relock    main relocks its own normal mutex (a self-deadlock) with an
 *             alarm set: the SIGALRM handler prints and exits 0
 *   signalled a worker calls pthread_kill(self, 0) in a loop while two
 *             threads send the process SIGUSR1/SIGUSR2 as fast as its
 *             handlers (in the worker, the only thread accepting them)
 *             post their semaphores; main sleeps 200 ms, then stops all
 *   atfork    a thread calls pthread_atfork in a loop (and nothing else:
 *             glibc's takes a lock and allocates) until main, after a
 *             20 ms sleep, clears its flag: the conformance suite's
 *             pthread_atfork 3-3, which hung while it was not hooked
 *
 * stdout: deterministic lines, then "ok MODE". */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int flag;

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

/* Polls the flag under the mutex, or under the rwlock's read lock when
 * `arg` is not NULL. */
static void *poller(void *arg)
{
    long rounds = 0;
    for (;;) {
        if (arg)
            pthread_rwlock_rdlock(&rw);
        else
            pthread_mutex_lock(&m);
        int f = flag;
        if (arg)
            pthread_rwlock_unlock(&rw);
        else
            pthread_mutex_unlock(&m);
        rounds++;
        if (f)
            break;
    }
    return (void *)(long)(rounds > 0);
}

static pthread_spinlock_t spin;

static void on_alarm_exit_thread(int sig)
{
    (void)sig;
    pthread_exit((void *)7);
}

static void *spinner(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    signal(SIGALRM, on_alarm_exit_thread);
    alarm(1);
    pthread_spin_lock(&spin); /* held by main until the end: never returns */
    return NULL;
}

static void on_alarm_exit_process(int sig)
{
    (void)sig;
    printf("the alarm ended the self-deadlock\nok relock\n");
    fflush(stdout);
    _exit(0);
}

static volatile int go_on = 1;
static sem_t posted[2];
static sigset_t usr;

static void on_usr(int sig)
{
    sem_post(&posted[sig == SIGUSR2]);
}

static void *sender(void *arg)
{
    long i = (long)arg;
    pthread_sigmask(SIG_BLOCK, &usr, NULL);
    while (go_on) {
        sem_wait(&posted[i]);
        kill(getpid(), i ? SIGUSR2 : SIGUSR1);
    }
    return NULL;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_sigmask(SIG_UNBLOCK, &usr, NULL);
    while (go_on)
        if (pthread_kill(pthread_self(), 0) != 0)
            return (void *)1;
    return NULL;
}

static void signalled(void)
{
    sigemptyset(&usr);
    sigaddset(&usr, SIGUSR1);
    sigaddset(&usr, SIGUSR2);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr; /* no SA_RESTART, an empty mask */
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    pthread_sigmask(SIG_BLOCK, &usr, NULL);
    sem_init(&posted[0], 0, 1);
    sem_init(&posted[1], 0, 1);
    pthread_t w, s1, s2;
    pthread_create(&w, NULL, worker, NULL);
    pthread_create(&s1, NULL, sender, (void *)0L);
    pthread_create(&s2, NULL, sender, (void *)1L);
    usleep(200000);
    go_on = 0;
    /* Senders waiting for a post that will not come get one. */
    sem_post(&posted[0]);
    sem_post(&posted[1]);
    void *r;
    pthread_join(s1, NULL);
    pthread_join(s2, NULL);
    pthread_join(w, &r);
    printf("the worker and both senders stopped; pthread_kill(self, 0) failed: %s\n", r ? "yes" : "no");
}

static volatile int looping = 1;

static void nothing(void)
{
}

static void *registrar(void *arg)
{
    (void)arg;
    long failed = 0;
    while (looping)
        failed |= pthread_atfork(nothing, nothing, nothing) != 0;
    return (void *)failed;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "poll") == 0 || strcmp(mode, "rwpoll") == 0) {
        int under_rw = mode[0] == 'r';
        pthread_t t;
        pthread_create(&t, NULL, poller, under_rw ? &rw : NULL);
        usleep(50000);
        if (under_rw)
            pthread_rwlock_wrlock(&rw);
        else
            pthread_mutex_lock(&m);
        flag = 1;
        if (under_rw)
            pthread_rwlock_unlock(&rw);
        else
            pthread_mutex_unlock(&m);
        void *r;
        pthread_join(t, &r);
        printf("the poller saw the flag: %s\n", r ? "yes" : "no");
    } else if (strcmp(mode, "spin") == 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGALRM);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
        pthread_spin_lock(&spin);
        pthread_t t;
        pthread_create(&t, NULL, spinner, NULL);
        void *r;
        pthread_join(t, &r);
        printf("the spinning thread ran its handler and ended with %ld\n", (long)r);
    } else if (strcmp(mode, "relock") == 0) {
        signal(SIGALRM, on_alarm_exit_process);
        pthread_mutex_lock(&m);
        alarm(1);
        pthread_mutex_lock(&m);
        printf("FAIL: a normal mutex relocked\n");
        return 1;
    } else if (strcmp(mode, "signalled") == 0) {
        signalled();
    } else if (strcmp(mode, "atfork") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, registrar, NULL);
        usleep(20000);
        looping = 0;
        void *r;
        pthread_join(t, &r);
        printf("the registering thread stopped; a pthread_atfork failed: %s\n", r ? "yes" : "no");
    } else {
        fprintf(stderr, "usage: busy_threads poll|rwpoll|spin|relock|signalled|atfork\n");
        return 2;
    }
    printf("ok %s\n", mode);
    return 0;
}
