/*
 * wall_clock_set: absolute waits on CLOCK_REALTIME follow a set of the wall
 * clock, as POSIX asks, and a wait on CLOCK_MONOTONIC does not move.
 *
 * A child process sets the wall clock 30 s ahead 300 ms in, while every
 * thread of the parent waits, and sets it back 4 s in (so the clock is
 * put right even if the parent dies). Each CLOCK_REALTIME wait's deadline
 * is 10 s off on the wall clock, so it ends at the set, well before the
 * condvar on CLOCK_MONOTONIC ends its 3 s: a waiting process must be woken
 * by the set itself. The process-shared semaphore, mutex, rwlock and
 * condvar wait as the others do (under the preload, in the kernel, on a
 * waiter thread).
 *
 * Setting the clock takes CAP_SYS_TIME: without it the program prints
 * "skipped: ..." and exits 0.
 *
 * stdout: one line per wait, its answer and when it ended; "ok" last.
 * stderr: the times.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AHEAD 30 /* seconds the child sets the wall clock ahead */
#define WAIT 10  /* seconds off each wall-clock deadline is */

static struct timespec mono0;
static pthread_cond_t c_mono;
static pthread_mutex_t m_mono = PTHREAD_MUTEX_INITIALIZER;
static sem_t release;
static int futex_word;
static pthread_t held_thread;

/* The objects of the condvar, semaphore, mutex and rwlock waits: one set
 * process-private, one process-shared. `held` and `read_held` are held by
 * main. */
struct objects {
    const char *kind;
    int line; /* of the condvar wait; the semaphore's is next, and so on */
    pthread_mutex_t m, held;
    pthread_cond_t c;
    pthread_rwlock_t read_held;
    sem_t never;
};
static struct objects private_objects = {.kind = "", .line = 0};
static struct objects shared_objects = {.kind = "process-shared ", .line = 9};

static double since_start(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - mono0.tv_sec) + (t.tv_nsec - mono0.tv_nsec) / 1e9;
}

static struct timespec off(clockid_t clock, double s)
{
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_sec += (time_t)s;
    t.tv_nsec += (long)((s - (time_t)s) * 1e9);
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

static const char *answer(int rc)
{
    return rc == 0 ? "0" : rc == ETIMEDOUT ? "ETIMEDOUT" : strerror(rc);
}

/* Each wait's line, printed in order once all have ended. */
static char lines[13][160];

/* A wall-clock wait ended at the set, not at its deadline 10 s off. */
static void report_wall(int i, const char *name, int rc)
{
    double s = since_start();
    fprintf(stderr, "%s: %s after %.3f s\n", name, answer(rc), s);
    snprintf(lines[i], sizeof lines[i], "%s: %s, %s", name, answer(rc),
             s < 2 ? "ended at the set" : "ended later");
}

/* The wait `nth` of the objects `o`, named `name`, ended with `rc`. */
static void report_object(const struct objects *o, int nth, const char *name, int rc)
{
    char full[80];
    snprintf(full, sizeof full, "%s%s", o->kind, name);
    report_wall(o->line + nth, full, rc);
}

static void *cond_realtime(void *arg)
{
    struct objects *o = arg;
    struct timespec dl = off(CLOCK_REALTIME, WAIT);
    pthread_mutex_lock(&o->m);
    int rc;
    while ((rc = pthread_cond_timedwait(&o->c, &o->m, &dl)) == 0) {
    }
    pthread_mutex_unlock(&o->m);
    report_object(o, 0, "pthread_cond_timedwait", rc);
    return NULL;
}

static void *sem_realtime(void *arg)
{
    struct objects *o = arg;
    struct timespec dl = off(CLOCK_REALTIME, WAIT);
    int rc;
    while ((rc = sem_timedwait(&o->never, &dl)) == -1 && errno == EINTR) {
    }
    report_object(o, 1, "sem_timedwait", rc == 0 ? 0 : errno);
    return NULL;
}

static void *mutex_realtime(void *arg)
{
    struct objects *o = arg;
    struct timespec dl = off(CLOCK_REALTIME, WAIT);
    report_object(o, 2, "pthread_mutex_timedlock", pthread_mutex_timedlock(&o->held, &dl));
    return NULL;
}

static void *rwlock_realtime(void *arg)
{
    struct objects *o = arg;
    struct timespec dl = off(CLOCK_REALTIME, WAIT);
    report_object(o, 3, "pthread_rwlock_timedwrlock", pthread_rwlock_timedwrlock(&o->read_held, &dl));
    return NULL;
}

/* Makes the objects `o`, process-shared or not, and takes `held` and
 * `read_held`. */
static void init_objects(struct objects *o, int pshared)
{
    sem_init(&o->never, pshared, 0);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, pshared);
    pthread_mutex_init(&o->held, &ma);
    pthread_mutex_init(&o->m, &ma);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setpshared(&ra, pshared);
    pthread_rwlock_init(&o->read_held, &ra);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, pshared);
    pthread_cond_init(&o->c, &ca);
    pthread_mutex_lock(&o->held);
    pthread_rwlock_rdlock(&o->read_held);
}

/* An absolute clock_nanosleep on `clock`, reported as line `i`. */
static void sleep_until(clockid_t clock, int i, const char *name)
{
    struct timespec dl = off(clock, WAIT);
    int rc;
    while ((rc = clock_nanosleep(clock, TIMER_ABSTIME, &dl, NULL)) == EINTR) {
    }
    report_wall(i, name, rc);
}

static void *sleep_realtime(void *arg)
{
    (void)arg;
    sleep_until(CLOCK_REALTIME, 4, "clock_nanosleep");
    return NULL;
}

/* CLOCK_TAI is the wall clock plus a constant: set with it. */
static void *sleep_tai(void *arg)
{
    (void)arg;
    sleep_until(CLOCK_TAI, 8, "clock_nanosleep on CLOCK_TAI");
    return NULL;
}

static void *futex_realtime(void *arg)
{
    (void)arg;
    struct timespec dl = off(CLOCK_REALTIME, WAIT);
    long rc;
    while ((rc = syscall(SYS_futex, &futex_word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME, 0,
                         &dl, NULL, FUTEX_BITSET_MATCH_ANY)) == -1 &&
           errno == EINTR) {
    }
    report_wall(5, "futex FUTEX_CLOCK_REALTIME", rc == 0 ? 0 : errno);
    return NULL;
}

/* Ends when main posts `release`, after the others. */
static void *held_until_released(void *arg)
{
    (void)arg;
    while (sem_wait(&release) == -1 && errno == EINTR) {
    }
    return NULL;
}

static void *join_realtime(void *arg)
{
    (void)arg;
    struct timespec dl = off(CLOCK_REALTIME, WAIT);
    report_wall(6, "pthread_timedjoin_np", pthread_timedjoin_np(held_thread, NULL, &dl));
    return NULL;
}

static void *cond_monotonic(void *arg)
{
    (void)arg;
    struct timespec dl = off(CLOCK_MONOTONIC, 3);
    pthread_mutex_lock(&m_mono);
    int rc;
    while ((rc = pthread_cond_timedwait(&c_mono, &m_mono, &dl)) == 0) {
    }
    pthread_mutex_unlock(&m_mono);
    double s = since_start();
    fprintf(stderr, "pthread_cond_timedwait on CLOCK_MONOTONIC: %s after %.3f s\n", answer(rc), s);
    snprintf(lines[7], sizeof lines[7], "pthread_cond_timedwait on CLOCK_MONOTONIC: %s, %s", answer(rc),
             s >= 2.95 && s < WAIT / 2 ? "after its 3 s" : "at another time");
    return NULL;
}

/* The child: the wall clock AHEAD s ahead at 0.3 s, back at 4 s. */
static void set_clock_and_back(void)
{
    struct timespec wall, mono, nap = {0, 300000000L};
    clock_gettime(CLOCK_REALTIME, &wall);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    nanosleep(&nap, NULL);
    struct timespec t = off(CLOCK_REALTIME, AHEAD);
    if (clock_settime(CLOCK_REALTIME, &t) != 0)
        _exit(2);
    struct timespec rest = {3, 700000000L};
    nanosleep(&rest, NULL);
    /* Back: the wall time it would be had it never been set. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ns = (wall.tv_sec + (now.tv_sec - mono.tv_sec)) * 1000000000LL + wall.tv_nsec +
                   (now.tv_nsec - mono.tv_nsec);
    t.tv_sec = ns / 1000000000LL;
    t.tv_nsec = ns % 1000000000LL;
    _exit(clock_settime(CLOCK_REALTIME, &t) == 0 ? 0 : 3);
}

int main(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (clock_settime(CLOCK_REALTIME, &now) != 0) {
        printf("skipped: cannot set the wall clock (%s)\n", strerror(errno));
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &mono0);
    sem_init(&release, 0, 0);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c_mono, &ca);
    init_objects(&private_objects, PTHREAD_PROCESS_PRIVATE);
    init_objects(&shared_objects, PTHREAD_PROCESS_SHARED);

    pid_t child = fork();
    if (child == 0)
        set_clock_and_back();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    pthread_create(&held_thread, NULL, held_until_released, NULL);
    struct {
        void *(*wait)(void *);
        void *arg;
    } waits[] = {
        {cond_realtime, &private_objects}, {sem_realtime, &private_objects}, {mutex_realtime, &private_objects},
        {rwlock_realtime, &private_objects}, {cond_realtime, &shared_objects}, {sem_realtime, &shared_objects},
        {mutex_realtime, &shared_objects}, {rwlock_realtime, &shared_objects}, {sleep_realtime, NULL},
        {futex_realtime, NULL}, {join_realtime, NULL}, {cond_monotonic, NULL}, {sleep_tai, NULL},
    };
    enum { N = sizeof waits / sizeof waits[0] };
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        pthread_create(&t[i], NULL, waits[i].wait, waits[i].arg);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    sem_post(&release);
    pthread_join(held_thread, NULL);
    for (int i = 0; i < N; i++)
        printf("%s\n", lines[i]);
    int status;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("the child did not set the clock and back: status %d\n", status);
        return 1;
    }
    printf("ok\n");
    return 0;
}
