/* alloc_storm THREADS ITERS [TIMER_US]: many threads doing malloc/calloc/realloc/free
 * and mutex work while a 100 µs interval timer fires a SIGALRM handler that
 * allocates, checks its memory and writes a byte to a self-pipe.
 *
 * Run with a malloc replacement preloaded (jemalloc, tcmalloc, mimalloc),
 * with and without libgreenhook.so: stdout must be the same. Every thread
 * but one "signal thread" blocks SIGALRM, so the handler only ever
 * interrupts a thread that is waiting in pause(): the program is correct
 * under POSIX even though its handler is not async-signal-safe (the usual
 * pattern of programs that do real work in a handler). Timings and the
 * number of signals go to stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NLOCKS 16
#define KEEP 8

static pthread_mutex_t locks[NLOCKS];
static long counters[NLOCKS];
static int self_pipe[2];
static atomic_long handler_calls, handler_bad, worker_bad;
static atomic_int stop_signal_thread;
static int iters;

static void die(const char *what) {
    fprintf(stderr, "alloc_storm: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void on_alarm(int sig) {
    (void)sig;
    int saved = errno;
    long n = atomic_fetch_add(&handler_calls, 1);
    size_t size = 32 + (size_t)(n % 480);
    unsigned char *p = malloc(size);
    if (!p) {
        atomic_fetch_add(&handler_bad, 1);
    } else {
        memset(p, 0xA5, size);
        for (size_t i = 0; i < size; i++)
            if (p[i] != 0xA5) {
                atomic_fetch_add(&handler_bad, 1);
                break;
            }
        free(p);
    }
    char byte = 'x';
    if (write(self_pipe[1], &byte, 1) != 1) atomic_fetch_add(&handler_bad, 1);
    errno = saved;
}

/* The only thread that accepts SIGALRM: it waits in pause(). */
static void *signal_thread(void *arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    while (!atomic_load(&stop_signal_thread)) pause();
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    return NULL;
}

/* Reads the self-pipe until EOF; returns the number of bytes read. */
static void *drain_thread(void *arg) {
    (void)arg;
    long total = 0;
    char buf[4096];
    for (;;) {
        ssize_t r = read(self_pipe[0], buf, sizeof buf);
        if (r > 0) total += r;
        else if (r == 0) break;
        else if (errno != EINTR) die("read self-pipe");
    }
    return (void *)total;
}

static int check(const unsigned char *p, size_t size, unsigned char pattern) {
    for (size_t i = 0; i < size; i += 61)
        if (p[i] != pattern) return 0;
    return size == 0 || p[size - 1] == pattern;
}

static void *worker(void *arg) {
    long id = (long)arg;
    unsigned seed = (unsigned)id * 2654435761u;
    unsigned char *keep[KEEP] = {0};
    size_t keep_size[KEEP] = {0};
    unsigned char keep_pattern[KEEP] = {0};
    long bad = 0;
    for (int i = 0; i < iters; i++) {
        int slot = i % KEEP;
        if (keep[slot]) {
            if (!check(keep[slot], keep_size[slot], keep_pattern[slot])) bad++;
            if (i % 3 == 0) {
                /* realloc keeps the prefix */
                size_t grown = keep_size[slot] * 2 + 1;
                unsigned char *q = realloc(keep[slot], grown);
                if (!q) { bad++; continue; }
                if (!check(q, keep_size[slot], keep_pattern[slot])) bad++;
                free(q);
            } else {
                free(keep[slot]);
            }
            keep[slot] = NULL;
        }
        size_t size = 1 + rand_r(&seed) % (i % 8 == 7 ? 65536 : 512);
        unsigned char pattern = (unsigned char)(id + i);
        unsigned char *p;
        if (i % 5 == 0) {
            p = calloc(1, size);
            if (p && !check(p, size, 0)) bad++;
        } else {
            p = malloc(size);
        }
        if (!p) { bad++; continue; }
        memset(p, pattern, size);
        keep[slot] = p;
        keep_size[slot] = size;
        keep_pattern[slot] = pattern;

        int l = (int)((id + i) % NLOCKS);
        pthread_mutex_lock(&locks[l]);
        counters[l]++;
        pthread_mutex_unlock(&locks[l]);
        if (i % 16 == 15) sched_yield();
    }
    for (int s = 0; s < KEEP; s++) {
        if (keep[s] && !check(keep[s], keep_size[s], keep_pattern[s])) bad++;
        free(keep[s]);
    }
    atomic_fetch_add(&worker_bad, bad);
    return NULL;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 10000;
    iters = argc > 2 ? atoi(argv[2]) : 50;
    /* 0: no timer at all (to tell the allocator's trouble from the handler's) */
    long timer_us = argc > 3 ? atol(argv[3]) : 100;
    double t0 = now_ms();
    for (int i = 0; i < NLOCKS; i++) pthread_mutex_init(&locks[i], NULL);
    if (pipe(self_pipe) != 0) die("pipe");

    /* Every thread created from here on inherits the blocked SIGALRM. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) die("pthread_sigmask");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) != 0) die("sigaction");

    pthread_t sig_t, drain_t;
    if (pthread_create(&drain_t, NULL, drain_thread, NULL) != 0) die("pthread_create drain");
    if (pthread_create(&sig_t, NULL, signal_thread, NULL) != 0) die("pthread_create signal");
    struct itimerval every = {{0, timer_us}, {0, timer_us}};
    if (timer_us > 0 && setitimer(ITIMER_REAL, &every, NULL) != 0) die("setitimer");

    pthread_t *ts = malloc(sizeof(pthread_t) * (size_t)threads);
    if (!ts) die("malloc");
    for (long i = 0; i < threads; i++) {
        int err = pthread_create(&ts[i], NULL, worker, (void *)i);
        if (err) {
            errno = err;
            fprintf(stderr, "alloc_storm: thread %ld: ", i);
            die("pthread_create");
        }
    }
    for (int i = 0; i < threads; i++) pthread_join(ts[i], NULL);
    free(ts);
    double t_work = now_ms();

    /* The signal thread leaves pause() at the next tick and blocks SIGALRM
     * again; only then is the timer stopped and the pipe closed. */
    atomic_store(&stop_signal_thread, 1);
    if (timer_us == 0) pthread_kill(sig_t, SIGALRM); /* wakes it from pause() */
    pthread_join(sig_t, NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    close(self_pipe[1]);
    void *read_bytes;
    pthread_join(drain_t, &read_bytes);

    long total = 0;
    for (int i = 0; i < NLOCKS; i++) total += counters[i];
    long calls = atomic_load(&handler_calls);
    printf("workers %d x %d iterations: %s\n", threads, iters,
           atomic_load(&worker_bad) == 0 ? "every allocation intact" : "CORRUPTED allocations");
    printf("mutex-protected counters: %s\n",
           total == (long)threads * iters ? "sum as expected" : "WRONG sum");
    printf("signal handler: %s, %s, %s\n", calls > 0 || timer_us == 0 ? "ran" : "NEVER RAN",
           atomic_load(&handler_bad) == 0 ? "its allocations intact" : "its allocations FAILED",
           (long)read_bytes == calls ? "every byte it wrote was read" : "bytes LOST");
    fprintf(stderr, "alloc_storm: %.0f ms of work, %ld signals (%ld bytes read), %.0f ms in all\n",
            t_work - t0, calls, (long)read_bytes, now_ms() - t0);
    int ok = atomic_load(&worker_bad) == 0 && total == (long)threads * iters && (calls > 0 || timer_us == 0) &&
             atomic_load(&handler_bad) == 0 && (long)read_bytes == calls;
    printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
