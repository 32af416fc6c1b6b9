/*
 * fifo.h: what the SCHED_FIFO programs (sched_*.c) share: creating a
 * thread with an explicit SCHED_FIFO priority.
 */
#ifndef FIFO_H
#define FIFO_H
#include <pthread.h>
#include <sched.h>

/* pthread_create of f(arg) at SCHED_FIFO `prio` (PTHREAD_EXPLICIT_SCHED):
 * its answer, EPERM without CAP_SYS_NICE. */
static int spawn_fifo(pthread_t *t, int prio, void *(*f)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&a, SCHED_FIFO);
    struct sched_param p = {.sched_priority = prio};
    pthread_attr_setschedparam(&a, &p);
    int r = pthread_create(t, &a, f, arg);
    pthread_attr_destroy(&a);
    return r;
}
#endif
