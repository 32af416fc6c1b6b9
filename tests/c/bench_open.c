/*
 * bench_open: what opening a file costs in a thread (a fiber under the
 * preload, where an open adds O_NONBLOCK and takes it off again: see
 * interpose/src/fifo.rs).
 *
 * usage: bench_open open|fopen ITERATIONS
 *
 * A thread opens and closes a small file of its own ITERATIONS times,
 * with open+close or fopen+fclose.
 *
 * stdout: ok MODE ITERATIONS
 * stderr: ns=<nanoseconds per open and close>
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char path[64];
static long n;
static int use_fopen;
static double ns;

static void *run(void *arg)
{
    (void)arg;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        if (use_fopen) {
            FILE *f = fopen(path, "r");
            if (!f) {
                perror("fopen");
                exit(1);
            }
            fclose(f);
        } else {
            int fd = open(path, O_RDONLY);
            if (fd < 0) {
                perror("open");
                exit(1);
            }
            close(fd);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)n;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "open") != 0 && strcmp(argv[1], "fopen") != 0)) {
        fprintf(stderr, "usage: bench_open open|fopen ITERATIONS\n");
        return 2;
    }
    use_fopen = strcmp(argv[1], "fopen") == 0;
    n = atol(argv[2]);
    snprintf(path, sizeof path, "/tmp/greenhook-bench-open-%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, "x\n", 2) != 2) {
        perror(path);
        return 1;
    }
    close(fd);
    pthread_t t;
    pthread_create(&t, NULL, run, NULL);
    pthread_join(t, NULL);
    unlink(path);
    fprintf(stderr, "ns=%.1f\n", ns);
    printf("ok %s %ld\n", argv[1], n);
    return 0;
}
