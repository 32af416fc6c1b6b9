/*
 * sched_fifo_order: SCHED_FIFO threads on one CPU run highest priority
 * first. Each line is the order in which things happened:
 *   create   a thread that creates a higher-priority thread is preempted
 *            at once (the new one runs before pthread_create returns to
 *            the program); a lower-priority one waits for the creator to
 *            block; main (SCHED_OTHER) is preempted by the FIFO thread it
 *            creates
 *   yield    sched_yield lets only threads of equal or higher priority
 *            run: a creator at 20 with runnable threads at 10 and 5 goes
 *            on at once; two at 10 take turns; the one at 5 runs last
 *   wake     a waiter at 30 woken by a sem_post or a mutex unlock from a
 *            thread at 20 runs before the waker goes on
 *   fork     a thread at 10 that preempted main forks; in the child it is
 *            the only thread, and its pthread_exit ends the child with 0
 *
 * usage: sched_fifo_order   (needs CAP_SYS_NICE, e.g. root; prints
 *                            "skipped" otherwise, with and without the
 *                            preload alike)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fifo.h"

static char order[256];
static int n;

static void note(const char *what)
{
    n += snprintf(order + n, sizeof order - n, " %s", what);
}

static void done(const char *what)
{
    printf("%s:%s\n", what, order);
    n = 0;
    order[0] = 0;
}

static void *say(void *arg)
{
    note(arg);
    return NULL;
}

static void *creator(void *arg)
{
    (void)arg;
    pthread_t hi, lo;
    note("creator");
    spawn_fifo(&hi, 11, say, "high");
    note("creator-after-high");
    spawn_fifo(&lo, 9, say, "low");
    note("creator-after-low");
    pthread_join(hi, NULL);
    pthread_join(lo, NULL);
    return NULL;
}

static void *turns(void *arg)
{
    char a[8], b[8];
    snprintf(a, sizeof a, "%s1", (char *)arg);
    snprintf(b, sizeof b, "%s2", (char *)arg);
    note(a);
    sched_yield();
    note(b);
    return NULL;
}

static void *yielder(void *arg)
{
    (void)arg;
    pthread_t a, b, c;
    spawn_fifo(&a, 10, turns, "A");
    spawn_fifo(&b, 10, turns, "B");
    spawn_fifo(&c, 5, turns, "C");
    sched_yield();
    note("yield-returned");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    return NULL;
}

static sem_t sem;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *sem_waiter(void *arg)
{
    (void)arg;
    note("waiting");
    sem_wait(&sem);
    note("woken");
    return NULL;
}

static void *sem_waker(void *arg)
{
    (void)arg;
    note("posting");
    sem_post(&sem);
    note("posted");
    return NULL;
}

static void *mutex_waiter(void *arg)
{
    (void)arg;
    note("locking");
    pthread_mutex_lock(&m);
    note("locked");
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *mutex_holder(void *arg)
{
    (void)arg;
    pthread_t w;
    pthread_mutex_lock(&m);
    spawn_fifo(&w, 30, mutex_waiter, NULL);
    note("unlocking");
    pthread_mutex_unlock(&m);
    note("unlocked");
    pthread_join(w, NULL);
    return NULL;
}

static void *waking(void *arg)
{
    (void)arg;
    pthread_t w, k;
    spawn_fifo(&w, 30, sem_waiter, NULL);
    spawn_fifo(&k, 20, sem_waker, NULL);
    pthread_join(w, NULL);
    pthread_join(k, NULL);
    done("wake sem");
    spawn_fifo(&k, 20, mutex_holder, NULL);
    pthread_join(k, NULL);
    done("wake mutex");
    return NULL;
}

static void *forker(void *arg)
{
    (void)arg;
    note("forking");
    pid_t pid = fork();
    if (pid == 0)
        pthread_exit(NULL); /* the child's last thread: it exits 0 */
    int status;
    waitpid(pid, &status, 0);
    note(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "child-exited-0" : "child-failed");
    return NULL;
}

int main(void)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    sched_setaffinity(0, sizeof one, &one);
    pthread_t t;
    note("main");
    int r = spawn_fifo(&t, 10, creator, NULL);
    if (r == EPERM) {
        printf("skipped\n");
        return 0;
    }
    if (r != 0) {
        printf("pthread_create: %s\n", strerror(r));
        return 1;
    }
    note("main-after-create");
    pthread_join(t, NULL);
    done("create");
    spawn_fifo(&t, 20, yielder, NULL);
    pthread_join(t, NULL);
    done("yield");
    sem_init(&sem, 0, 0);
    spawn_fifo(&t, 40, waking, NULL);
    pthread_join(t, NULL);
    fflush(stdout);
    /* Nothing from main between: natively the child (a process at 10)
     * runs before main, here it is a process at main's priority. */
    spawn_fifo(&t, 10, forker, NULL);
    pthread_join(t, NULL);
    done("fork");
    return 0;
}
