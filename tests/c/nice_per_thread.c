/*
 * nice_per_thread: on Linux a nice value is per thread. A thread that
 * lowers its priority (setpriority on PRIO_PROCESS with 0 or its
 * gettid(), or nice()) lowers its own; the threads it makes inherit it;
 * the others and main keep theirs; a raise above what it had needs the
 * privilege (EACCES from setpriority, EPERM from nice) unless it has it.
 *
 * Under the preload the call reniced the OS thread, which every fiber
 * shares: after one thread lowered itself, every thread and main ran at
 * its nice value.
 *
 * stdout: the same with and without the preload (values relative to
 * main's at start; root may raise, others may not, the same both ways).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static int base;

static int mine(void)
{
    errno = 0;
    return getpriority(PRIO_PROCESS, 0) - base;
}

static void *look(void *arg)
{
    printf("  %s: %+d\n", (const char *)arg, mine());
    return NULL;
}

static void *lowers(void *arg)
{
    long how = (long)arg;
    int r;
    if (how == 0)
        r = setpriority(PRIO_PROCESS, 0, base + 5);
    else if (how == 1)
        r = setpriority(PRIO_PROCESS, gettid(), base + 5);
    else
        r = nice(5) - base;
    printf("  lowered itself by %s: %d; now %+d, by its tid %+d\n", how == 0 ? "pid 0" : how == 1 ? "its tid" : "nice",
           r, mine(), getpriority(PRIO_PROCESS, gettid()) - base);
    pthread_t t;
    pthread_create(&t, NULL, look, "its child");
    pthread_join(t, NULL);
    errno = 0;
    r = setpriority(PRIO_PROCESS, 0, base + 2);
    int e = errno;
    printf("  raised back part way: %d %s; now %+d\n", r, r ? strerror(e) : "", mine());
    errno = 0;
    r = nice(-1);
    e = errno;
    printf("  nice(-1): %s; now %+d\n", r == -1 && e ? strerror(e) : "done", mine());
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    base = getpriority(PRIO_PROCESS, 0);
    for (long how = 0; how < 3; how++) {
        printf("a thread lowers its priority:\n");
        pthread_t t;
        pthread_create(&t, NULL, lowers, (void *)how);
        pthread_join(t, NULL);
        pthread_create(&t, NULL, look, "another thread");
        pthread_join(t, NULL);
        printf("  main: %+d\n", mine());
    }
    return 0;
}
