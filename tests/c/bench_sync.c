/*
 * bench_sync: what pthread synchronisation costs, for the interposer bench.
 *
 * usage: bench_sync MODE ITERATIONS
 *   cond-main     main and one thread hand a turn back and forth with a
 *                 mutex and a condition variable (ITERATIONS round trips)
 *   cond-threads  the same between two threads (main only joins)
 *   sem-main      main and a thread ping-pong with two semaphores
 *   sem-threads   the same between two threads
 *   cond-timed    cond-threads with pthread_cond_timedwait, and
 *   sem-timed     sem-threads with sem_timedwait, a deadline an hour off
 *   cond-mono-timed  cond-timed on a condvar whose clock is
 *                 CLOCK_MONOTONIC (as C++'s and most careful C code's)
 *   barrier       main and a thread meet at a barrier ITERATIONS times
 *   mutex         uncontended lock + unlock in a thread
 *   rwlock        uncontended read lock + unlock in a thread
 *
 * stdout: ok MODE ITERATIONS
 * stderr: ns=<nanoseconds per round trip, meeting or lock+unlock pair>
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long n;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn; /* 0: the pinger's, 1: the ponger's */
static sem_t ping, pong;
static pthread_barrier_t bar;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int timed; /* the -timed modes */
static clockid_t timed_clock = CLOCK_REALTIME; /* the condvar's clock */

/* Their deadline: an hour off on the condvar's clock, in the caller's
 * frame as most programs keep one. */
static struct timespec far_off(void)
{
    struct timespec t;
    clock_gettime(timed_clock, &t);
    t.tv_sec += 3600;
    return t;
}

static void cond_side(int me)
{
    struct timespec far = far_off();
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&m);
        while (turn != me)
            if (timed)
                pthread_cond_timedwait(&c, &m, &far);
            else
                pthread_cond_wait(&c, &m);
        turn = !me;
        pthread_cond_signal(&c);
        pthread_mutex_unlock(&m);
    }
}

static void sem_side(int me)
{
    struct timespec far = far_off();
    for (long i = 0; i < n; i++) {
        if (me == 0) {
            sem_post(&ping);
            if (timed)
                sem_timedwait(&pong, &far);
            else
                sem_wait(&pong);
        } else {
            if (timed)
                sem_timedwait(&ping, &far);
            else
                sem_wait(&ping);
            sem_post(&pong);
        }
    }
}

static void barrier_side(void)
{
    for (long i = 0; i < n; i++)
        pthread_barrier_wait(&bar);
}

static void *ponger(void *arg)
{
    const char *mode = arg;
    if (strncmp(mode, "cond", 4) == 0)
        cond_side(1);
    else if (strncmp(mode, "sem", 3) == 0)
        sem_side(1);
    else
        barrier_side();
    return NULL;
}

static void *pinger(void *arg)
{
    const char *mode = arg;
    if (strncmp(mode, "cond", 4) == 0)
        cond_side(0);
    else
        sem_side(0);
    return NULL;
}

static double lock_loop(const char *mode)
{
    double a = now_ns();
    if (strcmp(mode, "mutex") == 0) {
        for (long i = 0; i < n; i++) {
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
        }
    } else {
        for (long i = 0; i < n; i++) {
            pthread_rwlock_rdlock(&rw);
            pthread_rwlock_unlock(&rw);
        }
    }
    return now_ns() - a;
}

static double elapsed;

static void *locker(void *arg)
{
    elapsed = lock_loop(arg);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_sync MODE ITERATIONS\n");
        return 2;
    }
    char *mode = argv[1];
    n = atol(argv[2]);
    sem_init(&ping, 0, 0);
    sem_init(&pong, 0, 0);
    pthread_barrier_init(&bar, NULL, 2);
    timed = strstr(mode, "-timed") != NULL;
    if (strcmp(mode, "cond-mono-timed") == 0) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c, &ca);
        timed_clock = CLOCK_MONOTONIC;
    }
    pthread_t a, b;
    double t0 = now_ns();
    if (strcmp(mode, "mutex") == 0 || strcmp(mode, "rwlock") == 0) {
        pthread_create(&a, NULL, locker, mode);
        pthread_join(a, NULL);
    } else if (strcmp(mode, "cond-main") == 0 || strcmp(mode, "sem-main") == 0 ||
               strcmp(mode, "barrier") == 0) {
        pthread_create(&b, NULL, ponger, mode);
        if (mode[0] == 'b')
            barrier_side();
        else
            pinger(mode);
        pthread_join(b, NULL);
        elapsed = now_ns() - t0;
    } else if (strcmp(mode, "cond-threads") == 0 || strcmp(mode, "sem-threads") == 0 ||
               strcmp(mode, "cond-timed") == 0 || strcmp(mode, "sem-timed") == 0 ||
               strcmp(mode, "cond-mono-timed") == 0) {
        pthread_create(&a, NULL, pinger, mode);
        pthread_create(&b, NULL, ponger, mode);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        elapsed = now_ns() - t0;
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("ok %s %ld\n", mode, n);
    fprintf(stderr, "ns=%.1f\n", elapsed / n);
    return 0;
}
