/*
 * sem_call_shapes: a semaphore ping-pong between two threads in four call
 * shapes, to run with and without the preload (docs/DESIGN.md, "Locks at
 * the cost of a switch", cites it). `sem_wait` goes back to the program by
 * jump after a switch; whether that pays depends on where the two sides
 * call it from and on what they do next, which is what the shapes vary.
 *
 *   gcc -O2 -pthread docs/probes/sem_call_shapes.c -o /tmp/sem_call_shapes
 *   for m in direct helper helper2 timed; do
 *       LD_PRELOAD=target/release/libgreenhook.so /tmp/sem_call_shapes $m 500000
 *   done
 *
 *   direct   each side calls sem_wait from its own place in its loop (the
 *            bench's shape, tests/c/bench_sync.c)
 *   helper   both sides call one helper that posts and waits, and returns
 *   helper2  each side its own helper (two places), which returns
 *   timed    direct, with sem_timedwait and a deadline an hour off
 *
 * stderr: ns=<nanoseconds per round trip>
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static sem_t ping, pong; static long n; static const char *mode;
__attribute__((noinline)) static void step(sem_t *p, sem_t *w)
{
    sem_post(p);
    sem_wait(w);
}
__attribute__((noinline)) static void step_a(void) { sem_post(&ping); sem_wait(&pong); }
__attribute__((noinline)) static void step_b(void) { sem_post(&pong); sem_wait(&ping); }
static void *side(void *arg) {
    int me = arg != NULL;
    if (!strcmp(mode, "direct")) {
        for (long i = 0; i < n; i++) { if (me == 0) { sem_post(&ping); sem_wait(&pong); } else { sem_wait(&ping); sem_post(&pong); } }
    } else if (!strcmp(mode, "timed")) {
        struct timespec far; clock_gettime(CLOCK_REALTIME, &far); far.tv_sec += 3600;
        for (long i = 0; i < n; i++) { if (me == 0) { sem_post(&ping); sem_timedwait(&pong, &far); } else { sem_timedwait(&ping, &far); sem_post(&pong); } }
    } else if (!strcmp(mode, "helper")) {
        if (me) sem_wait(&ping);
        for (long i = 0; i < n; i++) { if (me == 0) step(&ping, &pong); else if (i < n - 1) step(&pong, &ping); else sem_post(&pong); }
    } else {
        if (me) sem_wait(&ping);
        for (long i = 0; i < n; i++) { if (me == 0) step_a(); else if (i < n - 1) step_b(); else sem_post(&pong); }
    }
    return NULL;
}
int main(int argc, char **argv) {
    mode = argv[1]; n = atol(argv[2]);
    sem_init(&ping, 0, 0); sem_init(&pong, 0, 0);
    struct timespec a, b; pthread_t t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_create(&t1, NULL, side, NULL); pthread_create(&t2, NULL, side, (void *)1);
    pthread_join(t1, NULL); pthread_join(t2, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    fprintf(stderr, "ns=%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
