/*
 * lock_waiters: waiters of private mutexes, condvars, rwlocks, semaphores
 * and barriers, in the situations where a wait list kept inside the object
 * could go wrong.
 *
 * usage: lock_waiters MODE
 *   fork      a thread that holds a mutex another thread waits on forks;
 *             the child (only the forking thread exists there) unlocks and
 *             relocks it, signals a condvar the other waited on, and exits
 *   handoff   a mutex unlocked with waiters goes to one of them (FIFO), and
 *             a condvar signal with no waiter is lost, as in glibc
 *   timeouts  timed waits that expire leave the object usable: the next
 *             unlock, post or signal still reaches the remaining waiter
 *   heap      objects in malloc'd memory that held garbage before init
 *   posts     posts to a semaphore with waiters (a fiber's are handed to
 *             it, not added to glibc's value): every post reaches exactly
 *             one wait, on a semaphore whose bytes were garbage before
 *             sem_init
 *   storm     4 threads post 3,000 times each while 4 take 3,000 each by
 *             sem_wait, sem_trywait or a 1 ms sem_timedwait at random:
 *             every post is taken once, nothing is left
 *   handed    (under the preload only, where it is deterministic) a post
 *             handed to a fiber that has not run yet still counts in
 *             sem_getvalue and can be taken by sem_trywait
 *
 * stdout: one line per check; the same with and without the preload.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int order[8], norder;

static void ms_sleep(int ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static struct timespec in_ms(int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += (ms % 1000) * 1000000L;
    t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

/* ---------- fork ---------- */

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m); /* blocks: the forker holds it */
    order[norder++] = 1;
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *forker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    ms_sleep(50); /* the waiter is parked on m now */
    pid_t pid = fork();
    if (pid == 0) {
        pthread_mutex_unlock(&m);
        int r = pthread_mutex_trylock(&m);
        pthread_cond_signal(&c);
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
        printf("child: relock %d, waiter ran %d\n", r, norder);
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("parent: child exited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void mode_fork(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, forker, NULL);
    ms_sleep(10);
    pthread_create(&b, NULL, waiter, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("parent: waiter ran %d\n", norder);
}

/* ---------- handoff ---------- */

static void *queue_up(void *arg)
{
    int id = (int)(long)arg;
    pthread_mutex_lock(&m);
    order[norder++] = id;
    pthread_mutex_unlock(&m);
    return NULL;
}

static void mode_handoff(void)
{
    pthread_t t[3];
    pthread_mutex_lock(&m);
    for (long i = 0; i < 3; i++) {
        pthread_create(&t[i], NULL, queue_up, (void *)(i + 1));
        ms_sleep(20); /* each is parked before the next starts */
    }
    pthread_mutex_unlock(&m);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("all three got the mutex: %d\n", norder);
    /* A signal with nobody waiting is not remembered. */
    pthread_cond_signal(&c);
    pthread_mutex_lock(&m);
    struct timespec t0 = in_ms(30);
    int r = pthread_cond_timedwait(&c, &m, &t0);
    pthread_mutex_unlock(&m);
    printf("timedwait after a lost signal: %s\n", r == ETIMEDOUT ? "ETIMEDOUT" : "woken");
}

/* ---------- timeouts ---------- */

static sem_t s;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int flag;

static void *patient(void *arg)
{
    const char *what = arg;
    int r = -1;
    if (strcmp(what, "mutex") == 0) {
        r = pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
    } else if (strcmp(what, "sem") == 0) {
        r = sem_wait(&s);
    } else if (strcmp(what, "cond") == 0) {
        pthread_mutex_lock(&m);
        while (!flag)
            r = pthread_cond_wait(&c, &m);
        pthread_mutex_unlock(&m);
    } else {
        r = pthread_rwlock_wrlock(&rw);
        pthread_rwlock_unlock(&rw);
    }
    printf("patient %s: %d\n", what, r);
    return NULL;
}

static void *impatient(void *arg)
{
    const char *what = arg;
    struct timespec t = in_ms(20);
    int r;
    if (strcmp(what, "mutex") == 0) {
        r = pthread_mutex_timedlock(&m, &t);
    } else if (strcmp(what, "sem") == 0) {
        r = sem_timedwait(&s, &t) == 0 ? 0 : errno;
    } else if (strcmp(what, "cond") == 0) {
        pthread_mutex_lock(&m);
        r = pthread_cond_timedwait(&c, &m, &t);
        pthread_mutex_unlock(&m);
    } else {
        r = pthread_rwlock_timedwrlock(&rw, &t);
    }
    printf("impatient %s: %s\n", what, r == ETIMEDOUT ? "ETIMEDOUT" : "other");
    return NULL;
}

static void mode_timeouts(void)
{
    const char *what[] = {"mutex", "sem", "cond", "rwlock"};
    sem_init(&s, 0, 0);
    for (int i = 0; i < 4; i++) {
        pthread_t a, b;
        if (i == 0)
            pthread_mutex_lock(&m);
        if (i == 3)
            pthread_rwlock_rdlock(&rw);
        pthread_create(&a, NULL, patient, (void *)what[i]);
        ms_sleep(5);
        pthread_create(&b, NULL, impatient, (void *)what[i]);
        pthread_join(b, NULL); /* timed out, after the patient one queued */
        if (i == 0)
            pthread_mutex_unlock(&m);
        if (i == 1)
            sem_post(&s);
        if (i == 2) {
            pthread_mutex_lock(&m);
            flag = 1;
            pthread_cond_signal(&c);
            pthread_mutex_unlock(&m);
        }
        if (i == 3)
            pthread_rwlock_unlock(&rw);
        pthread_join(a, NULL);
    }
}

/* ---------- heap ---------- */

struct objects {
    pthread_mutex_t m;
    pthread_cond_t c;
    sem_t s;
    pthread_barrier_t b;
    pthread_rwlock_t rw;
};

static struct objects *o;

static void *heap_peer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&o->m);
    pthread_cond_signal(&o->c);
    pthread_mutex_unlock(&o->m);
    sem_post(&o->s);
    pthread_rwlock_wrlock(&o->rw);
    pthread_rwlock_unlock(&o->rw);
    pthread_barrier_wait(&o->b);
    return NULL;
}

static void mode_heap(void)
{
    o = malloc(sizeof *o);
    memset(o, 0xa5, sizeof *o); /* garbage, as reused heap memory holds */
    pthread_mutex_init(&o->m, NULL);
    pthread_cond_init(&o->c, NULL);
    sem_init(&o->s, 0, 0);
    pthread_barrier_init(&o->b, NULL, 2);
    pthread_rwlock_init(&o->rw, NULL);
    pthread_t t;
    pthread_mutex_lock(&o->m);
    pthread_create(&t, NULL, heap_peer, NULL);
    pthread_cond_wait(&o->c, &o->m);
    pthread_mutex_unlock(&o->m);
    sem_wait(&o->s);
    pthread_barrier_wait(&o->b);
    pthread_join(t, NULL);
    printf("heap objects: ok\n");
    free(o);
}

/* ---------- posts to waiters ---------- */

static sem_t *ps;

static void *take_one(void *arg)
{
    (void)arg;
    int r = sem_wait(ps);
    return (void *)(long)r;
}

static void mode_posts(void)
{
    /* On the stack, every byte garbage before sem_init. */
    sem_t mem;
    memset(&mem, 0xa5, sizeof mem);
    ps = &mem;
    if (sem_init(ps, 0, 0) != 0) {
        perror("sem_init");
        exit(1);
    }
    /* One waiter, three posts in a row: it takes one, two stay. */
    pthread_t t[2];
    pthread_create(&t[0], NULL, take_one, NULL);
    ms_sleep(20);
    for (int i = 0; i < 3; i++)
        sem_post(ps);
    void *r0;
    pthread_join(t[0], &r0);
    int v = -1;
    sem_getvalue(ps, &v);
    printf("one waiter, three posts: wait %ld, value %d\n", (long)r0, v);
    while (sem_trywait(ps) == 0)
        ;
    /* Two waiters, two posts: both return, nothing stays. */
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, take_one, NULL);
    ms_sleep(20);
    sem_post(ps);
    sem_post(ps);
    void *r1, *r2;
    pthread_join(t[0], &r1);
    pthread_join(t[1], &r2);
    sem_getvalue(ps, &v);
    printf("two waiters, two posts: waits %ld %ld, value %d, trywait %d\n", (long)r1, (long)r2, v,
           sem_trywait(ps) == 0 ? 0 : errno);
    sem_destroy(ps);
}

static sem_t storm_sem;
static pthread_mutex_t storm_m = PTHREAD_MUTEX_INITIALIZER;
static long storm_taken, storm_timeouts;

/* Posts 3,000 times, yielding now and then so takers block in between. */
static void *storm_poster(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    for (int i = 0; i < 3000; i++) {
        sem_post(&storm_sem);
        if (rand_r(&seed) % 4 == 0)
            sched_yield();
    }
    return NULL;
}

/* Takes 3,000 units by sem_wait, sem_trywait or a 1 ms sem_timedwait at
 * random, trying again after a failed try or an expired wait. */
static void *storm_taker(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    long taken = 0, timeouts = 0;
    while (taken < 3000) {
        int r;
        switch (rand_r(&seed) % 3) {
        case 0:
            r = sem_wait(&storm_sem);
            break;
        case 1:
            r = sem_trywait(&storm_sem);
            if (r != 0)
                sched_yield();
            break;
        default: {
            struct timespec t = in_ms(1);
            r = sem_timedwait(&storm_sem, &t);
            timeouts += r != 0 && errno == ETIMEDOUT;
        }
        }
        taken += r == 0;
    }
    pthread_mutex_lock(&storm_m);
    storm_taken += taken;
    storm_timeouts += timeouts;
    pthread_mutex_unlock(&storm_m);
    return NULL;
}

static void mode_storm(void)
{
    sem_init(&storm_sem, 0, 0);
    pthread_t t[8];
    for (long i = 0; i < 4; i++) {
        pthread_create(&t[2 * i], NULL, storm_taker, (void *)(i + 1));
        pthread_create(&t[2 * i + 1], NULL, storm_poster, (void *)(i + 11));
    }
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    int left = -1;
    sem_getvalue(&storm_sem, &left);
    printf("storm: 12000 posted, %ld taken, %d left\n", storm_taken, left);
    fprintf(stderr, "storm: %ld timed waits expired\n", storm_timeouts);
}

static void mode_handed(void)
{
    static sem_t hs;
    ps = &hs;
    sem_init(ps, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, take_one, NULL);
    ms_sleep(20);
    /* Handed to the waiter, which has not run yet: it still counts. */
    sem_post(ps);
    int v = -1;
    sem_getvalue(ps, &v);
    int tw = sem_trywait(ps) == 0 ? 0 : errno;
    int v2 = -1;
    sem_getvalue(ps, &v2);
    printf("after a post to a waiter: value %d, trywait %d, value %d\n", v, tw, v2);
    /* The waiter found nothing and waits again: the next post is its. */
    ms_sleep(20);
    sem_post(ps);
    void *r;
    pthread_join(t, &r);
    sem_getvalue(ps, &v);
    printf("the next post: wait %ld, value %d\n", (long)r, v);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "fork") == 0)
        mode_fork();
    else if (strcmp(mode, "handoff") == 0)
        mode_handoff();
    else if (strcmp(mode, "timeouts") == 0)
        mode_timeouts();
    else if (strcmp(mode, "heap") == 0)
        mode_heap();
    else if (strcmp(mode, "posts") == 0)
        mode_posts();
    else if (strcmp(mode, "handed") == 0)
        mode_handed();
    else if (strcmp(mode, "storm") == 0)
        mode_storm();
    else {
        fprintf(stderr, "usage: lock_waiters fork|handoff|timeouts|heap|posts|storm|handed\n");
        return 2;
    }
    return 0;
}
