/* lock_fast_signals: the uncontended lock paths, and the wake-ups made
 * without entering a hook (sem_post, pthread_cond_signal and _broadcast),
 * with signal handlers that wait. Four threads lock, bump and unlock a
 * mutex, and read- or write-lock an rwlock; two more hand a turn back and
 * forth through two semaphores, and two through a condvar (signal one
 * way, broadcast the other); meanwhile a SIGALRM every 200 us runs a
 * handler that sleeps (under greenhook the sleep lets the other threads
 * run inside the handler, wherever it interrupted the lock, unlock, post
 * and signal calls). A lock whose state a handler's wait let another
 * thread change unseen would lose a count, a waiter's wake-up (a hang) or
 * a reader; a lost post or signal would hang a ping-pong.
 *
 * stdout: the counts, then "ok". */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
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

static sem_t ping, pong;
static long sem_turns;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;
static long cond_turns;

static void *sem_side(void *arg)
{
    int pinger = arg != NULL;
    for (long i = 0; i < ROUNDS / 4; i++) {
        if (pinger) {
            sem_post(&ping);
            sem_wait(&pong);
            sem_turns++;
        } else {
            sem_wait(&ping);
            sem_post(&pong);
        }
    }
    return NULL;
}

static void *cond_side(void *arg)
{
    int me = arg != NULL;
    for (long i = 0; i < ROUNDS / 4; i++) {
        pthread_mutex_lock(&cm);
        while (turn != me)
            pthread_cond_wait(&cv, &cm);
        turn = !me;
        cond_turns += me;
        if (me)
            pthread_cond_signal(&cv);
        else
            pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&cm);
    }
    return NULL;
}

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
    sem_init(&ping, 0, 0);
    sem_init(&pong, 0, 0);
    pthread_t t[THREADS], pair[4];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_create(&pair[0], NULL, sem_side, NULL);
    pthread_create(&pair[1], NULL, sem_side, "pinger");
    pthread_create(&pair[2], NULL, cond_side, NULL);
    pthread_create(&pair[3], NULL, cond_side, "one");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(pair[i], NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    long writes = 0;
    for (long me = 0; me < THREADS; me++)
        for (long i = 0; i < ROUNDS; i++)
            writes += (i + me) % 8 == 0;
    printf("mutex count %ld of %d\n", counted, THREADS * ROUNDS);
    printf("rwlock writes %ld of %ld, torn reads %ld\n", written, writes, torn);
    printf("semaphore round trips %ld, condvar turns %ld, of %d each\n", sem_turns, cond_turns, ROUNDS / 4);
    int v1, v2;
    sem_getvalue(&ping, &v1);
    sem_getvalue(&pong, &v2);
    printf("semaphores at 0 at the end: %s\n", v1 == 0 && v2 == 0 ? "yes" : "no");
    int trylocked = pthread_mutex_trylock(&m) == 0 && pthread_rwlock_trywrlock(&rw) == 0;
    printf("both free at the end: %s\n", trylocked ? "yes" : "no");
    printf("ok\n");
    return 0;
}
