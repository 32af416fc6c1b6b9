/*
 * pshared_pingpong: a parent and its forked child hand a turn back and
 * forth through process-shared objects in MAP_SHARED memory while the
 * parent's ticker thread runs. Each process has a second thread besides
 * the one playing (the parent's ticker, the child's sleeper), so under the
 * preload every wait for the other process must let the hub run: the
 * ticker keeps ticking, and the time per hand-over is what a fiber's wait
 * on another process costs.
 *
 * usage: pshared_pingpong MODE ROUNDS
 *   cond   a mutex and a condition variable (turn = whose it is)
 *   sem    two semaphores
 *
 * stdout: "MODE: ROUNDS rounds", the same with and without the preload.
 * stderr: round_trip_us=<microseconds per round trip>, and the ticker's
 *         report (late.time_ms=, ticks=).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ticker.h"

static struct shared {
    pthread_mutex_t m;
    pthread_cond_t c;
    sem_t ping, pong;
    int turn;
    atomic_int done;
} *S;

static long rounds;

static void cond_side(int me)
{
    for (long i = 0; i < rounds; i++) {
        pthread_mutex_lock(&S->m);
        while (S->turn != me)
            pthread_cond_wait(&S->c, &S->m);
        S->turn = !me;
        pthread_cond_signal(&S->c);
        pthread_mutex_unlock(&S->m);
    }
}

static void sem_side(int me)
{
    for (long i = 0; i < rounds; i++) {
        if (me == 0) {
            sem_post(&S->ping);
            sem_wait(&S->pong);
        } else {
            sem_wait(&S->ping);
            sem_post(&S->pong);
        }
    }
}

static void play(const char *mode, int me)
{
    if (!strcmp(mode, "cond"))
        cond_side(me);
    else
        sem_side(me);
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&S->done))
        usleep(10000);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "cond") && strcmp(argv[1], "sem"))) {
        fprintf(stderr, "usage: pshared_pingpong cond|sem ROUNDS\n");
        return 2;
    }
    alarm(30);
    rounds = atol(argv[2]);
    S = mmap(NULL, sizeof *S, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&S->m, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_cond_init(&S->c, &ca);
    sem_init(&S->ping, 1, 0);
    sem_init(&S->pong, 1, 0);

    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        alarm(30);
        pthread_t t;
        pthread_create(&t, NULL, sleeper, NULL);
        play(argv[1], 1);
        atomic_store(&S->done, 1);
        pthread_join(t, NULL);
        _exit(0);
    }
    pthread_t tick = ticker_start();
    long long t0 = now_ns();
    play(argv[1], 0);
    long long ns = now_ns() - t0;
    int st;
    waitpid(pid, &st, 0);
    ticker_stop(tick);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child failed (status %d)\n", st);
        return 1;
    }
    fprintf(stderr, "round_trip_us=%.1f\n", ns / 1000.0 / rounds);
    printf("%s: %ld rounds\n", argv[1], rounds);
    return 0;
}
