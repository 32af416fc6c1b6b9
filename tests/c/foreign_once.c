/*
 * foreign_once: pthread_once between a fiber and a thread made with libc's
 * own pthread_create (past any preloaded hook), each way round.
 *
 * usage: foreign_once
 *
 * On `first_fiber` the normal thread runs the init routine (which sleeps
 * 100 ms) and the foreign thread arrives 20 ms in; then on
 * `first_foreign` the foreign thread runs it and the normal one arrives
 * 20 ms in. Whoever arrives second must wait for the routine and
 * then go on: under the preload the foreign thread waits in glibc's
 * pthread_once, in the kernel, for a routine a fiber runs (it slept for
 * good when only fibers were woken), and a fiber waits on the hub for
 * one glibc runs (whose end wakes only the kernel's sleepers: reported as
 * a deadlock).
 *
 * stdout: what each side saw, the same with and without the preload.
 */
#define _GNU_SOURCE
#include "libc_create.h"
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_once_t first_fiber = PTHREAD_ONCE_INIT, first_foreign = PTHREAD_ONCE_INIT;
static int inits_a, inits_b;
static int seen[2][2];

static void init_a(void)
{
    usleep(100000);
    inits_a++;
}

static void init_b(void)
{
    usleep(100000);
    inits_b++;
}

static void *foreign(void *arg)
{
    (void)arg;
    usleep(20000);
    pthread_once(&first_fiber, init_a); /* the fiber runs it: waits */
    seen[1][0] = inits_a;
    pthread_once(&first_foreign, init_b); /* runs it */
    seen[1][1] = inits_b;
    return NULL;
}

static void *normal(void *arg)
{
    (void)arg;
    pthread_once(&first_fiber, init_a); /* runs it */
    seen[0][0] = inits_a;
    usleep(20000);
    pthread_once(&first_foreign, init_b); /* the foreign thread runs it: waits */
    seen[0][1] = inits_b;
    return NULL;
}

int main(void)
{
    alarm(20);
    pthread_t f, n;
    libc_pthread_create(&f, foreign, NULL);
    pthread_create(&n, NULL, normal, NULL);
    pthread_join(n, NULL);
    pthread_join(f, NULL);
    printf("routines run %d and %d; fiber saw %d and %d, foreign thread %d and %d\n", inits_a, inits_b,
           seen[0][0], seen[0][1], seen[1][0], seen[1][1]);
    return 0;
}
