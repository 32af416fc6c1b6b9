/*
 * signal_masked_alloc: a signal handler never runs in a thread that blocks
 * its signal, and so never inside that thread's malloc.
 *
 * Many threads allocate, free and lock while a 200 µs interval timer fires
 * SIGALRM. Every thread but one blocks SIGALRM; that one waits in pause().
 * The handler allocates, checks and frees memory (glibc's malloc: not
 * async-signal-safe, which is why the program blocks the signal where it
 * allocates), notes which thread it runs in, and writes a byte to a pipe
 * that another thread drains. (compat/c/alloc_storm.c is the same idea at
 * 10,000 threads with other allocators.)
 *
 * usage: signal_masked_alloc [THREADS [ITERS]]   (default 300 200)
 * stdout: deterministic facts; timings and counts on stderr.
 * exit 0 on success, 1 on a failed check; alarm(30).
 */
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

#define NLOCKS 8
#define KEEP 4

static pthread_mutex_t locks[NLOCKS];
static long counters[NLOCKS];
static int self_pipe[2];
static pthread_t sig_thread;
static atomic_int sig_thread_known;
static atomic_long handler_calls, handler_bad, handler_elsewhere, worker_bad;
static atomic_int stop;
static int iters;

static void die(const char *what)
{
    fprintf(stderr, "signal_masked_alloc: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    long n = atomic_fetch_add(&handler_calls, 1);
    if (!atomic_load(&sig_thread_known) || !pthread_equal(pthread_self(), sig_thread))
        atomic_fetch_add(&handler_elsewhere, 1);
    size_t size = 32 + (size_t)(n % 480);
    unsigned char *p = malloc(size);
    if (!p) {
        atomic_fetch_add(&handler_bad, 1);
    } else {
        memset(p, 0x5A, size);
        for (size_t i = 0; i < size; i++)
            if (p[i] != 0x5A) {
                atomic_fetch_add(&handler_bad, 1);
                break;
            }
        free(p);
    }
    char byte = 'x';
    if (write(self_pipe[1], &byte, 1) != 1)
        atomic_fetch_add(&handler_bad, 1);
    errno = saved;
}

/* The only thread that accepts SIGALRM. */
static void *signal_thread(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    while (!atomic_load(&stop))
        pause();
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    return NULL;
}

static void *drain_thread(void *arg)
{
    (void)arg;
    long total = 0;
    char buf[256];
    for (;;) {
        ssize_t r = read(self_pipe[0], buf, sizeof buf);
        if (r > 0)
            total += r;
        else if (r == 0)
            break;
        else if (errno != EINTR)
            die("read");
    }
    return (void *)total;
}

static int intact(const unsigned char *p, size_t size, unsigned char pattern)
{
    for (size_t i = 0; i < size; i += 37)
        if (p[i] != pattern)
            return 0;
    return size == 0 || p[size - 1] == pattern;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    unsigned seed = (unsigned)id * 2654435761u;
    unsigned char *keep[KEEP] = { 0 };
    size_t keep_size[KEEP] = { 0 };
    unsigned char keep_pattern[KEEP] = { 0 };
    long bad = 0;
    for (int i = 0; i < iters; i++) {
        int slot = i % KEEP;
        if (keep[slot]) {
            if (!intact(keep[slot], keep_size[slot], keep_pattern[slot]))
                bad++;
            if (i % 3 == 0) {
                unsigned char *q = realloc(keep[slot], keep_size[slot] * 2 + 1);
                if (!q || !intact(q, keep_size[slot], keep_pattern[slot]))
                    bad++;
                free(q);
            } else {
                free(keep[slot]);
            }
            keep[slot] = NULL;
        }
        size_t size = 1 + rand_r(&seed) % (i % 8 == 7 ? 16384 : 512);
        unsigned char pattern = (unsigned char)(id + i);
        unsigned char *p = i % 5 == 0 ? calloc(1, size) : malloc(size);
        if (!p) {
            bad++;
            continue;
        }
        memset(p, pattern, size);
        keep[slot] = p;
        keep_size[slot] = size;
        keep_pattern[slot] = pattern;
        int l = (int)((id + i) % NLOCKS);
        pthread_mutex_lock(&locks[l]);
        counters[l]++;
        pthread_mutex_unlock(&locks[l]);
        if (i % 16 == 15)
            sched_yield();
    }
    for (int s = 0; s < KEEP; s++) {
        if (keep[s] && !intact(keep[s], keep_size[s], keep_pattern[s]))
            bad++;
        free(keep[s]);
    }
    atomic_fetch_add(&worker_bad, bad);
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    alarm(30);
    int threads = argc > 1 ? atoi(argv[1]) : 300;
    iters = argc > 2 ? atoi(argv[2]) : 200;
    double t0 = now_ms();
    for (int i = 0; i < NLOCKS; i++)
        pthread_mutex_init(&locks[i], NULL);
    if (pipe(self_pipe))
        die("pipe");
    /* Every thread made from here on starts with SIGALRM blocked. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL))
        die("sigaction");
    pthread_t drain;
    if (pthread_create(&drain, NULL, drain_thread, NULL) || pthread_create(&sig_thread, NULL, signal_thread, NULL))
        die("pthread_create");
    atomic_store(&sig_thread_known, 1);
    struct itimerval every = { { 0, 200 }, { 0, 200 } };
    if (setitimer(ITIMER_REAL, &every, NULL))
        die("setitimer");
    pthread_t *ts = calloc((size_t)threads, sizeof *ts);
    for (long i = 0; i < threads; i++)
        if (pthread_create(&ts[i], NULL, worker, (void *)i))
            die("pthread_create");
    for (int i = 0; i < threads; i++)
        pthread_join(ts[i], NULL);
    free(ts);
    double t_work = now_ms();
    /* Let a few more ticks reach the signal thread, then stop it. */
    while (atomic_load(&handler_calls) < 3 && now_ms() - t_work < 5000)
        usleep(1000);
    atomic_store(&stop, 1);
    pthread_join(sig_thread, NULL);
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    close(self_pipe[1]);
    void *read_bytes;
    pthread_join(drain, &read_bytes);

    long total = 0;
    for (int i = 0; i < NLOCKS; i++)
        total += counters[i];
    long calls = atomic_load(&handler_calls);
    int ok = 1;
#define FACT(cond, text)                                        \
    do {                                                        \
        printf("%s: %s\n", text, (cond) ? "yes" : "NO");        \
        ok &= !!(cond);                                         \
    } while (0)
    FACT(atomic_load(&worker_bad) == 0, "every allocation of the workers intact");
    FACT(total == (long)threads * iters, "mutex-protected counters add up");
    FACT(calls > 0, "the handler ran");
    FACT(atomic_load(&handler_elsewhere) == 0, "the handler ran only in the thread that accepts SIGALRM");
    FACT(atomic_load(&handler_bad) == 0, "the handler's allocations intact");
    FACT((long)read_bytes == calls, "every byte it wrote was read");
    fprintf(stderr, "signal_masked_alloc: %d threads x %d: %.0f ms of work, %ld signals, %ld elsewhere, %.0f ms in all\n",
            threads, iters, t_work - t0, calls, atomic_load(&handler_elsewhere), now_ms() - t0);
    return ok ? 0 : 1;
}
