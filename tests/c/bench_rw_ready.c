/*
 * bench_rw_ready: the hot path of a hooked read/write on a ready fd.
 *
 * usage: bench_rw_ready [ITERATIONS]   (default 1000000)
 *
 * One thread writes one byte into a pipe and reads it back, ITERATIONS
 * times: every call finds its fd ready, so under the shim no call should
 * wait or make an extra system call.
 *
 * stdout: ok ITERATIONS
 * stderr: ns_per_pair=<nanoseconds per write+read pair>
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int p[2];
    if (pipe(p) != 0) {
        perror("pipe");
        return 1;
    }
    char c = 'x';
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        if (write(p[1], &c, 1) != 1 || read(p[0], &c, 1) != 1) {
            perror("rw");
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("ok %ld\n", n);
    fprintf(stderr, "ns_per_pair=%.1f\n", ns / n);
    return 0;
}
