/*
 * printf_body.h: the body of fortified.c (built with _FORTIFY_SOURCE=2, so
 * gcc calls __read_chk, __printf_chk, ...) and formatted.c (the plain
 * functions). MODE picks what one thread does while a ticker ticks every
 * 10 ms; another thread is the peer. stdout: deterministic results.
 * stderr: the ticker's report (ticker.h).
 *
 *   read recv recvfrom poll   a thread waits for data on a socketpair
 *                              (sent after 100 ms), through the call named
 *   fgets fread                the same through stdio on a pipe
 *   printf                     many mixed arguments (ints, strings, 12
 *                              doubles: past the vector registers) and %m
 *   fprintf                    300 KB of formatted lines into a pipe whose
 *                              reader thread starts after 100 ms
 *   dprintf                    the same with dprintf on a socketpair
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ticker.h"

static int sv[2];
static const char *mode;
/* Sizes the compiler cannot see through: calls stay fortified. */
static volatile size_t want = 64;
static volatile int want_int = 64;
static volatile nfds_t want_nfds = 1;
/* Results of the two writing threads, printed by main in a fixed order. */
static char wrote[128], drained[128];

static void *sender(void *a)
{
    (void)a;
    usleep(100000);
    if (write(sv[1], "hello fortify", 13) != 13)
        perror("write");
    close(sv[1]);
    return NULL;
}

/* Reads everything from sv[0] slowly after 100 ms; prints the total. */
static void *drainer(void *a)
{
    (void)a;
    usleep(100000);
    char buf[4096];
    size_t total = 0;
    unsigned long sum = 0;
    ssize_t n;
    while ((n = read(sv[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            sum = sum * 31 + (unsigned char)buf[i];
        total += n;
    }
    snprintf(drained, sizeof drained, "drained %zu bytes, checksum %lu", total, sum);
    return NULL;
}

static void *actor(void *a)
{
    (void)a;
    char buf[64];
    if (!strcmp(mode, "read")) {
        ssize_t n = read(sv[0], buf, want);
        printf("read %zd [%.*s]\n", n, (int)(n > 0 ? n : 0), buf);
    } else if (!strcmp(mode, "recv")) {
        ssize_t n = recv(sv[0], buf, want, 0);
        printf("recv %zd [%.*s]\n", n, (int)(n > 0 ? n : 0), buf);
    } else if (!strcmp(mode, "recvfrom")) {
        ssize_t n = recvfrom(sv[0], buf, want, 0, NULL, NULL);
        printf("recvfrom %zd [%.*s]\n", n, (int)(n > 0 ? n : 0), buf);
    } else if (!strcmp(mode, "poll")) {
        struct pollfd p[1] = {{.fd = sv[0], .events = POLLIN}};
        int r = poll(p, want_nfds, 5000);
        /* POLLHUP may join POLLIN: the sender closes right after writing. */
        printf("poll %d pollin=%d\n", r, !!(p[0].revents & POLLIN));
    } else if (!strcmp(mode, "fgets") || !strcmp(mode, "fread")) {
        FILE *in = fdopen(sv[0], "r");
        if (!strcmp(mode, "fgets")) {
            char *s = fgets(buf, want_int, in);
            printf("fgets [%s]\n", s ? s : "(null)");
        } else {
            size_t n = fread(buf, 1, want, in);
            printf("fread %zu [%.*s] eof=%d\n", n, (int)n, buf, feof(in));
        }
        fclose(in);
    } else if (!strcmp(mode, "printf")) {
        errno = ENOENT;
        int r = printf("%d %s %ld %c %.3f %g %e %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %d %s [%m]\n",
                       -7, "str", 1234567890123L, 'q', 3.14159, 2.5e-3, 6.02e23, 1.1, 2.2, 3.3, 4.4, 5.5,
                       6.6, 7.7, 8.8, 9.9, 10.5, 42, "end");
        printf("printf returned %d, errno %s\n", r, strerrorname_np(errno));
        int d = dprintf(1, "dprintf to stdout %d %.2f\n", 5, 0.25);
        printf("dprintf returned %d\n", d);
        fflush(stdout);
    } else if (!strcmp(mode, "fprintf")) {
        FILE *out = fdopen(sv[1], "w");
        long total = 0;
        for (int i = 0; i < 10000; i++) {
            int r = fprintf(out, "line %05d value %.4f %s\n", i, i / 7.0, "padding-padding");
            if (r < 0) {
                snprintf(wrote, sizeof wrote, "fprintf failed at %d: %s", i, strerror(errno));
                break;
            }
            total += r;
        }
        fclose(out);
        if (!wrote[0])
            snprintf(wrote, sizeof wrote, "fprintf wrote %ld", total);
    } else if (!strcmp(mode, "dprintf")) {
        long total = 0;
        for (int i = 0; i < 10000; i++) {
            int r = dprintf(sv[1], "line %05d value %.4f %s\n", i, i / 7.0, "padding-padding");
            if (r < 0) {
                snprintf(wrote, sizeof wrote, "dprintf failed at %d: %s", i, strerror(errno));
                break;
            }
            total += r;
        }
        close(sv[1]);
        if (!wrote[0])
            snprintf(wrote, sizeof wrote, "dprintf wrote %ld", total);
    } else {
        printf("unknown mode %s\n", mode);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "read";
    int writes = !strcmp(mode, "fprintf") || !strcmp(mode, "dprintf");
    int piped = !strcmp(mode, "fgets") || !strcmp(mode, "fread") || !strcmp(mode, "fprintf");
    if (piped ? pipe(sv) : socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return 1;
    pthread_t t = ticker_start(), a, p;
    pthread_create(&a, NULL, actor, NULL);
    pthread_create(&p, NULL, writes ? drainer : sender, NULL);
    pthread_join(a, NULL);
    pthread_join(p, NULL);
    if (writes)
        printf("%s\n%s\n", wrote, drained);
    ticker_stop(t);
    return 0;
}
