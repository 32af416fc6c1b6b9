/*
 * pshared.h: what the process-shared object programs (pshared_*.c) share:
 * MAP_SHARED memory holding the objects, initialisers that make each kind
 * PTHREAD_PROCESS_SHARED, forking a child that runs a function, and the
 * "companion" mode.
 *
 * Each program lists its checks and ends with
 *     int main(int argc, char **argv) { return pshared_main(argc, argv, checks, N); }
 * usage: pshared_<kind> [companion] [CHECK...]
 *   no checks runs every check in order; otherwise only the named ones.
 *   With "companion", each process also runs a thread that naps until the
 *   process is done: under the preload a main thread then shares its hub
 *   with a fiber, so its waits must let the hub run rather than block in
 *   glibc (without it a lone main thread may block in glibc, as natively).
 *
 * Children report through the shared memory and their exit status; only
 * the parent prints. A child that goes wrong exits 1 ("FAIL <check>: ..."
 * on stderr), and a child or a parent that hangs dies of alarm(20).
 * stdout: one line per check, "name: result", deterministic.
 */
#ifndef GREENHOOK_PSHARED_H
#define GREENHOOK_PSHARED_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

struct shared {
    pthread_mutex_t m, m2;
    pthread_cond_t c, c2;
    pthread_rwlock_t rw;
    pthread_barrier_t b;
    sem_t s1, s2;
    atomic_int ready;   /* how many of the other side's threads wait now */
    int turn, go, tokens;
    long counter, handovers, woken, serials, rounds_seen;
    int codes[16];      /* a child's return codes, for the parent to print */
};

static struct shared *S;

/* Fresh zeroed MAP_SHARED memory for one check. */
static inline void shared_new(void)
{
    if (S)
        munmap(S, sizeof *S);
    S = mmap(NULL, sizeof *S, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED)
        fail("mmap: %s", strerror(errno));
}

static inline void mutex_init(pthread_mutex_t *m, int type, int robust)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_settype(&a, type);
    if (robust)
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    EXPECT_EQ("pthread_mutex_init", pthread_mutex_init(m, &a), 0);
    pthread_mutexattr_destroy(&a);
}

static inline void cond_init(pthread_cond_t *c, clockid_t clock)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&a, clock);
    EXPECT_EQ("pthread_cond_init", pthread_cond_init(c, &a), 0);
    pthread_condattr_destroy(&a);
}

static inline void rwlock_init(pthread_rwlock_t *l)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    EXPECT_EQ("pthread_rwlock_init", pthread_rwlock_init(l, &a), 0);
    pthread_rwlockattr_destroy(&a);
}

static inline void barrier_init(pthread_barrier_t *b, unsigned n)
{
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    EXPECT_EQ("pthread_barrier_init", pthread_barrier_init(b, &a, n), 0);
    pthread_barrierattr_destroy(&a);
}

/* The companion thread of "companion" mode. */
static int companions;
static atomic_int companion_stop;
static pthread_t companion;

static inline void *companion_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&companion_stop))
        msleep(2);
    return NULL;
}

static inline void companion_start(void)
{
    if (companions) {
        atomic_store(&companion_stop, 0);
        companion = spawn(companion_main, NULL);
    }
}

static inline void companion_end(void)
{
    if (companions) {
        atomic_store(&companion_stop, 1);
        join(companion);
    }
}

/* Forks a child that runs fn and exits 0 (fn fails with exit 1). */
static inline pid_t child(void (*fn)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0) {
        alarm(20);
        companion_start();
        fn();
        companion_end();
        _exit(0);
    }
    return pid;
}

/* Waits for a child and returns its exit code (fails on a signal). */
static inline int reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            fail("waitpid: %s", strerror(errno));
    if (WIFSIGNALED(st))
        fail("child killed by signal %d", WTERMSIG(st));
    return WEXITSTATUS(st);
}

static inline void reap_ok(pid_t pid)
{
    EXPECT_EQ("child exit status", reap(pid), 0);
}

/* Waits until `n` threads of the other side said they are about to wait. */
static inline void await_ready(int n)
{
    while (atomic_load(&S->ready) < n)
        msleep(1);
}

static inline struct timespec in_ms(long ms)
{
    return deadline(CLOCK_REALTIME, ms);
}

/* Starts `n` threads running fn(i). */
static inline void run_threads(int n, void *(*fn)(void *))
{
    pthread_t t[16];
    for (long i = 0; i < n; i++)
        t[i] = spawn(fn, (void *)i);
    for (int i = 0; i < n; i++)
        join(t[i]);
}

/* The programs' main: "companion" first, then check.h's run_checks. */
static inline int pshared_main(int argc, char **argv, const struct check *checks, size_t n)
{
    if (argc > 1 && !strcmp(argv[1], "companion")) {
        companions = 1;
        argv[1] = argv[0];
        argc--;
        argv++;
    }
    companion_start();
    int r = run_checks(argc, argv, checks, n);
    companion_end();
    return r;
}

#endif
