/*
 * backtrace_at_preemption: a signal handler that walks the stack
 * (backtrace(), as haproxy's watchdog does before it aborts) while main
 * computes in a leaf function, which greenhook preempts by a signal of its
 * own: main's slices end because another thread wakes every 200 us.
 *
 * usage: backtrace_at_preemption SECONDS
 *
 * A SIGALRM every 50 us runs the handler. greenhook's preemption handler
 * runs with every signal blocked and ends by sending the interrupted code
 * into its trampoline; a SIGALRM that came meanwhile is delivered at the
 * trampoline's first instruction. Its unwind tables said the return
 * address was in a slot the trampoline filled ~20 instructions later, so
 * the walk read a word of the leaf's red zone (here a 4) as one, and
 * libgcc's unwinder crashed on it (SIGSEGV within half a second).
 *
 * stdout: "walked yes"; stderr: walks=<handler runs>, deepest=<frames>,
 * a line each.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile long walks, deepest;
static volatile int stop;

static void on_alarm(int sig)
{
    (void)sig;
    void *frames[64];
    int n = backtrace(frames, 64);
    walks++;
    if (n > deepest)
        deepest = n;
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!stop)
        usleep(200);
    return NULL;
}

/* A leaf whose locals fill its red zone with small numbers: what an
 * unwinder that read a return address there would take for one. */
__attribute__((noinline)) static unsigned long spin_leaf(unsigned long n)
{
    volatile long junk[15];
    for (int i = 0; i < 15; i++)
        junk[i] = 4;
    unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++)
        x += i ^ (unsigned long)junk[i % 15];
    return x;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    void *first[4];
    backtrace(first, 4); /* libgcc is loaded before the timer starts */
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    struct itimerval every = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &every, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    volatile unsigned long x = 0;
    do {
        x += spin_leaf(1000000);
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < secs);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    stop = 1;
    pthread_join(t, NULL);
    printf("walked %s\n", walks > 0 ? "yes" : "no");
    fprintf(stderr, "walks=%ld\ndeepest=%ld\n", walks, deepest);
    return 0;
}
