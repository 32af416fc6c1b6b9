/*
 * affinity_per_thread: CPU affinity is per thread. A thread that pins
 * itself with sched_setaffinity (pid 0, or its gettid()) pins itself
 * alone; a thread inherits its creator's set, or the attribute's
 * (pthread_attr_setaffinity_np); bad sets get the kernel's EINVAL.
 *
 * Under the preload sched_setaffinity pinned the OS thread, which every
 * fiber shares: the other threads and main then saw one CPU too. And a
 * new thread neither inherited its creator's set nor took its
 * attribute's.
 *
 * stdout: the same with and without the preload (counts are printed
 * against the process's own, so the machine's size does not show).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int all;

static const char *count(int n)
{
    return n == all ? "all CPUs" : n == 1 ? "one CPU" : "some CPUs";
}

static const char *self_set(void)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) != 0)
        return strerror(errno);
    return count(CPU_COUNT(&s));
}

static const char *pthread_set(void)
{
    cpu_set_t s;
    int r = pthread_getaffinity_np(pthread_self(), sizeof s, &s);
    return r ? strerror(r) : count(CPU_COUNT(&s));
}

static int first_cpu(void)
{
    cpu_set_t s;
    sched_getaffinity(0, sizeof s, &s);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &s))
            return i;
    return 0;
}

static void *look(void *arg)
{
    printf("  %s sees %s (pthread_getaffinity_np: %s)\n", (const char *)arg, self_set(), pthread_set());
    return NULL;
}

static void *pins(void *arg)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(first_cpu(), &s);
    int r = sched_setaffinity(arg ? gettid() : 0, sizeof s, &s);
    printf("  pinned itself by %s: %d; sees %s (pthread_getaffinity_np: %s)\n", arg ? "its tid" : "pid 0", r,
           self_set(), pthread_set());
    pthread_t t;
    pthread_create(&t, NULL, look, "its child");
    pthread_join(t, NULL);
    CPU_ZERO(&s);
    errno = 0;
    r = sched_setaffinity(0, sizeof s, &s);
    printf("  an empty set: %d %s; sees %s\n", r, strerror(errno), self_set());
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    cpu_set_t s;
    sched_getaffinity(0, sizeof s, &s);
    all = CPU_COUNT(&s);
    for (long by_tid = 0; by_tid < 2; by_tid++) {
        printf("a thread pins itself:\n");
        pthread_t t;
        pthread_create(&t, NULL, pins, (void *)by_tid);
        pthread_join(t, NULL);
        pthread_create(&t, NULL, look, "another thread");
        pthread_join(t, NULL);
        printf("  main sees %s\n", self_set());
    }

    printf("an attribute's set:\n");
    pthread_attr_t a;
    pthread_attr_init(&a);
    CPU_ZERO(&s);
    CPU_SET(first_cpu(), &s);
    pthread_attr_setaffinity_np(&a, sizeof s, &s);
    pthread_t t;
    int r = pthread_create(&t, &a, look, "the thread");
    if (r == 0)
        pthread_join(t, NULL);
    printf("  pthread_create: %d\n", r);
    /* A CPU that is not there. */
    CPU_ZERO(&s);
    CPU_SET(CPU_SETSIZE - 1, &s);
    pthread_attr_setaffinity_np(&a, sizeof s, &s);
    r = pthread_create(&t, &a, look, "the thread on no CPU");
    if (r == 0)
        pthread_join(t, NULL);
    printf("  with no CPU there: %s\n", r ? strerror(r) : "made");
    pthread_attr_destroy(&a);
    return 0;
}
