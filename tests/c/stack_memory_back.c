/* Stack memory goes back when threads end: a burst of threads that each
 * touch 256 KiB of stack, all joined, then the same beside a thread that
 * stays (blocked in a read), and after a 3 s sleep. stdout must match
 * unpatched (every thread saw its own stack's bytes); the resident sizes
 * go to stderr for the test to check (unpatched, the kernel's per-thread
 * counting makes them approximate, so only the patched run's are read). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 300
#define TOUCH (256 * 1024)

static pthread_barrier_t ready, go;

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
    if (f) fclose(f);
    return v;
}

static void *toucher(void *arg) {
    unsigned char buf[TOUCH];
    unsigned char k = (unsigned char)(long)arg;
    memset(buf, k, sizeof buf);
    /* The bytes are read back below: make the compiler write them. */
    __asm__ volatile("" : : "r"(buf) : "memory");
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    long sum = 0;
    __asm__ volatile("" : : "r"(buf) : "memory");
    for (size_t i = 0; i < sizeof buf; i += 4096) sum += buf[i];
    return (void *)(long)(sum == (long)k * (TOUCH / 4096));
}

/* Runs a burst; returns the resident size while all its threads lived. */
static long burst(const char *name) {
    pthread_t t[N];
    pthread_barrier_init(&ready, NULL, N + 1);
    pthread_barrier_init(&go, NULL, N + 1);
    for (long i = 0; i < N; i++)
        if (pthread_create(&t[i], NULL, toucher, (void *)(i & 0xff))) {
            printf("%s: pthread_create failed at %ld\n", name, i);
            exit(1);
        }
    pthread_barrier_wait(&ready);
    long peak = rss_kib();
    pthread_barrier_wait(&go);
    int good = 0;
    for (int i = 0; i < N; i++) {
        void *r;
        pthread_join(t[i], &r);
        good += r != NULL;
    }
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&go);
    printf("%s: %d of %d threads saw their own stack\n", name, good, N);
    return peak;
}

static int pipefd[2];

static void *keeper(void *arg) {
    (void)arg;
    char c;
    return (void *)(long)read(pipefd[0], &c, 1);
}

int main(void) {
    long base = rss_kib();
    long peak = burst("drained");
    long drained = rss_kib();
    /* Threads made again on the stacks given back. */
    burst("again");
    long again = rss_kib();

    pthread_t k;
    if (pipe(pipefd) || pthread_create(&k, NULL, keeper, NULL)) return 1;
    burst("beside a live thread");
    long kept_now = rss_kib();
    sleep(3);
    long kept_later = rss_kib();
    if (write(pipefd[1], "x", 1) != 1) return 1;
    void *r;
    pthread_join(k, &r);
    printf("keeper read %ld\n", (long)r);
    fprintf(stderr, "rss_kib base=%ld peak=%ld drained=%ld again=%ld kept_now=%ld kept_later=%ld\n", base, peak,
            drained, again, kept_now, kept_later);
    return 0;
}
