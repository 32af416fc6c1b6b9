/*
 * socketpair_pingpong: two threads bounce a 4-byte counter over an AF_UNIX
 * SOCK_STREAM socketpair with blocking I/O.
 *
 * usage: socketpair_pingpong [MODE] [ROUNDS]
 *   MODE    rw (read/write, default) | sendrecv (send/recv) | pipe (two pipes,
 *           read/write)
 *   ROUNDS  round trips, default 100000
 *
 * The pinger sends i, the ponger checks it got i and answers i ^ 0x5a5a5a5a,
 * the pinger checks the answer. Both sides loop on short reads/writes.
 *
 * stdout: ok MODE ROUNDS
 * stderr: time_ms=<wall time of all round trips>
 * Any mismatch, error or early EOF: message on stderr, exit 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int g_use_send;
static long g_rounds;
/* ping side: write to fds[0] read from fds[1]; pong side: the opposite pair */
static int g_ping_w, g_ping_r, g_pong_w, g_pong_r;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000L;
}

static void die(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, strerror(errno));
    exit(1);
}

static void put_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = g_use_send ? send(fd, p, len, 0) : write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die(g_use_send ? "send" : "write");
        }
        p += n;
        len -= (size_t)n;
    }
}

static void get_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = g_use_send ? recv(fd, p, len, 0) : read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die(g_use_send ? "recv" : "read");
        }
        if (n == 0) {
            fprintf(stderr, "unexpected EOF\n");
            exit(1);
        }
        p += n;
        len -= (size_t)n;
    }
}

static void *ponger(void *arg)
{
    (void)arg;
    for (long i = 0; i < g_rounds; i++) {
        uint32_t v;
        get_all(g_pong_r, &v, sizeof v);
        if (v != (uint32_t)i) {
            fprintf(stderr, "ponger: round %ld got %u\n", i, v);
            exit(1);
        }
        v ^= 0x5a5a5a5aU;
        put_all(g_pong_w, &v, sizeof v);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "rw";
    g_rounds = argc > 2 ? atol(argv[2]) : 100000;
    if (g_rounds < 1) {
        fprintf(stderr, "bad ROUNDS\n");
        return 1;
    }

    if (!strcmp(mode, "rw") || !strcmp(mode, "sendrecv")) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            die("socketpair");
        g_use_send = !strcmp(mode, "sendrecv");
        g_ping_w = g_ping_r = sv[0];
        g_pong_w = g_pong_r = sv[1];
    } else if (!strcmp(mode, "pipe")) {
        int a[2], b[2];
        if (pipe(a) != 0 || pipe(b) != 0)
            die("pipe");
        g_ping_w = a[1];
        g_pong_r = a[0];
        g_pong_w = b[1];
        g_ping_r = b[0];
    } else {
        fprintf(stderr, "unknown MODE %s (rw|sendrecv|pipe)\n", mode);
        return 1;
    }

    pthread_t t;
    int rc = pthread_create(&t, NULL, ponger, NULL);
    if (rc != 0) {
        fprintf(stderr, "pthread_create: %s\n", strerror(rc));
        return 1;
    }

    long long t0 = now_ms();
    for (long i = 0; i < g_rounds; i++) {
        uint32_t v = (uint32_t)i;
        put_all(g_ping_w, &v, sizeof v);
        get_all(g_ping_r, &v, sizeof v);
        if (v != ((uint32_t)i ^ 0x5a5a5a5aU)) {
            fprintf(stderr, "pinger: round %ld got %u\n", i, v);
            return 1;
        }
    }
    long long elapsed = now_ms() - t0;
    rc = pthread_join(t, NULL);
    if (rc != 0) {
        fprintf(stderr, "pthread_join: %s\n", strerror(rc));
        return 1;
    }
    fprintf(stderr, "time_ms=%lld\n", elapsed);
    printf("ok %s %ld\n", mode, g_rounds);
    return 0;
}
