/* lock_fast_signals: the uncontended lock paths with signal handlers that
 * wait. Four threads lock, bump and unlock a mutex, and read- or
 * write-lock an rwlock, while a SIGALRM every 200 us runs a handler that
 * sleeps (under greenhook the sleep lets the other threads run inside the
 * handler, wherever it interrupted the lock and unlock calls). A lock
 * whose state a handler's wait let another thread change unseen would
 * lose a count, a waiter's wake-up (a hang) or a reader.
 *
 * stdout: the counts, then "ok". */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define THREADS 4
#define ROUNDS 100000

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long counted, written, torn;
static volatile long shadow;

static void on_alarm(int sig)
{
    (void)sig;
    struct timespec t = {0, 20000};
    nanosleep(&t, NULL);
}

static void *worker(void *arg)
{
    long me = (long)arg;
    for (long i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&m);
        counted++;
        pthread_mutex_unlock(&m);
        if ((i + me) % 8 == 0) {
            pthread_rwlock_wrlock(&rw);
            written++;
            shadow = written;
            pthread_rwlock_unlock(&rw);
        } else {
            pthread_rwlock_rdlock(&rw);
            if (shadow != written)
                torn++;
            pthread_rwlock_unlock(&rw);
        }
    }
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    long writes = 0;
    for (long me = 0; me < THREADS; me++)
        for (long i = 0; i < ROUNDS; i++)
            writes += (i + me) % 8 == 0;
    printf("mutex count %ld of %d\n", counted, THREADS * ROUNDS);
    printf("rwlock writes %ld of %ld, torn reads %ld\n", written, writes, torn);
    int trylocked = pthread_mutex_trylock(&m) == 0 && pthread_rwlock_trywrlock(&rw) == 0;
    printf("both free at the end: %s\n", trylocked ? "yes" : "no");
    printf("ok\n");
    return 0;
}
