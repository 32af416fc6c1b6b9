/*
 * cancel_after_wake: a deferred cancellation that arrives while a thread
 * is inside a cancellation point acts there, also when the wait itself
 * has just ended (its timeout fired) and the thread has not returned yet.
 *
 * For each call: a worker loops on the call (a 5 ms timeout), then takes
 * a mutex, writes to /dev/null and unlocks it, with cancellation enabled
 * throughout; its cleanup handler notes whether it ran in the call or in
 * the write under the mutex. Main sleeps 1 ms while a third thread
 * computes for 40 ms without calling anything, then cancels the worker.
 * Natively the worker is in the call (it spends all but microseconds of
 * its time there). Under greenhook the computing fiber held the OS thread
 * until its slice ended, and by then the worker's timeout had fired too:
 * the woken worker was queued behind main, which cancelled it, and the
 * call returned as if nothing had happened; the cancellation acted at the
 * next point, the write, with the mutex held and nothing to unlock it
 * (rsyslog's shutdown then waited for that mutex for good).
 *
 * stdout: per call, where the cancellation acted and whether the mutex is
 * free; the same with and without the preload.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static sem_t never;
static int null_fd;
static const char *call;
static volatile int phase; /* 1: in the call, 2: under the mutex */
static volatile int cleaned_in;

static void noted(void *arg)
{
    (void)arg;
    cleaned_in = phase;
}

static void unlock_cm(void *arg)
{
    (void)arg;
    pthread_mutex_unlock(&cm);
}

static struct timespec in_5ms(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    t.tv_nsec += 5000000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    return t;
}

static void wait_5ms(void)
{
    if (!strcmp(call, "select")) {
        struct timeval tv = {0, 5000};
        select(0, NULL, NULL, NULL, &tv);
    } else if (!strcmp(call, "poll")) {
        poll(NULL, 0, 5);
    } else if (!strcmp(call, "nanosleep")) {
        struct timespec t = {0, 5000000};
        nanosleep(&t, NULL);
    } else if (!strcmp(call, "usleep")) {
        usleep(5000);
    } else if (!strcmp(call, "sem_timedwait")) {
        struct timespec t = in_5ms(CLOCK_REALTIME);
        sem_timedwait(&never, &t);
    } else if (!strcmp(call, "pthread_cond_timedwait")) {
        struct timespec t = in_5ms(CLOCK_REALTIME);
        pthread_mutex_lock(&cm);
        pthread_cleanup_push(unlock_cm, NULL);
        pthread_cond_timedwait(&cv, &cm, &t);
        pthread_cleanup_pop(1);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_cleanup_push(noted, NULL);
    for (;;) {
        phase = 1;
        wait_5ms();
        phase = 2;
        pthread_mutex_lock(&m);
        if (write(null_fd, "x", 1) < 0)
            break;
        pthread_mutex_unlock(&m);
    }
    pthread_cleanup_pop(0);
    return NULL;
}

static void *computes(void *arg)
{
    (void)arg;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (volatile int i = 0; i < 10000; i++)
            ;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 40000000L);
    return NULL;
}

int main(void)
{
    null_fd = open("/dev/null", O_WRONLY);
    sem_init(&never, 0, 0);
    const char *calls[] = {"select", "poll", "nanosleep", "usleep", "sem_timedwait", "pthread_cond_timedwait"};
    for (unsigned k = 0; k < sizeof calls / sizeof calls[0]; k++) {
        call = calls[k];
        cleaned_in = 0;
        pthread_t w, c;
        pthread_create(&w, NULL, worker, NULL);
        usleep(20000); /* the worker is in its loop */
        pthread_create(&c, NULL, computes, NULL);
        usleep(1000);
        pthread_cancel(w);
        void *r;
        pthread_join(w, &r);
        pthread_join(c, NULL);
        int free_now = pthread_mutex_trylock(&m) == 0;
        if (free_now)
            pthread_mutex_unlock(&m);
        printf("%s: cancelled %s, %s; the mutex %s\n", call, r == PTHREAD_CANCELED ? "yes" : "no",
               cleaned_in == 1 ? "in the call" : "after it, under the mutex", free_now ? "free" : "left locked");
    }
    return 0;
}
