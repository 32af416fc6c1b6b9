/* busy_threads MODE: threads that never wait, and what must still happen
 * beside them (natively the kernel preempts them; under greenhook a thread
 * that keeps calling hooked functions yields at the end of its slice).
 *
 *   poll      a thread polls a flag under a mutex (lock, look, unlock,
 *             again) until main sets it after a 50 ms sleep
 *   spin      main holds a spin lock and joins a thread that spins on it;
 *             a SIGALRM handler in that thread ends it with pthread_exit
 *   relock    main relocks its own normal mutex (a self-deadlock) with an
 *             alarm set: the SIGALRM handler prints and exits 0
 *
 * stdout: deterministic lines, then "ok MODE". */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int flag;

static void *poller(void *arg)
{
    (void)arg;
    long rounds = 0;
    for (;;) {
        pthread_mutex_lock(&m);
        int f = flag;
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

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "poll") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, poller, NULL);
        usleep(50000);
        pthread_mutex_lock(&m);
        flag = 1;
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
    } else {
        fprintf(stderr, "usage: busy_threads poll|spin|relock\n");
        return 2;
    }
    printf("ok %s\n", mode);
    return 0;
}
