/*
 * tcp_echo: a thread-per-connection TCP echo server on 127.0.0.1 (port 0,
 * found with getsockname) and CLIENTS client threads in the same process.
 *
 * usage: tcp_echo [CLIENTS] [BYTES] [CHUNK]
 *   CLIENTS  client threads, default 200
 *   BYTES    bytes each client sends, default 65536
 *   CHUNK    bytes per write, default 4096
 *
 * Each client connects, then in lockstep writes one chunk of content that is
 * distinct per client and per offset and reads the echo of that chunk back
 * (looping on short reads), checks it, and at the end half-closes with
 * shutdown(SHUT_WR) and expects EOF (read returns 0). The acceptor thread
 * accepts exactly CLIENTS connections and starts one echo thread per
 * connection; an echo thread echoes until EOF, then closes.
 *
 * stdout: ok CLIENTS
 *         bytes <CLIENTS*BYTES>
 * stderr: time_ms=<wall time from the first client start to the last join>
 * Any error or data mismatch: message on stderr, exit 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long g_clients, g_bytes, g_chunk;
static int g_listen_fd;
static struct sockaddr_in g_addr;
static atomic_long g_echoed;

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

static unsigned char pattern(long client, long off)
{
    return (unsigned char)(client * 131 + off * 7 + (off >> 8) * 13 + 1);
}

static void write_all(int fd, const unsigned char *p, size_t len, const char *who)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die(who);
        }
        p += n;
        len -= (size_t)n;
    }
}

static void *echo_conn(void *arg)
{
    int fd = (int)(long)arg;
    unsigned char buf[8192];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("server read");
        }
        if (n == 0)
            break;
        write_all(fd, buf, (size_t)n, "server write");
        atomic_fetch_add(&g_echoed, n);
    }
    if (close(fd) != 0)
        die("server close");
    return NULL;
}

static void *acceptor(void *arg)
{
    pthread_t *handlers = arg;
    for (long i = 0; i < g_clients; i++) {
        int fd = accept(g_listen_fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR) {
                i--;
                continue;
            }
            die("accept");
        }
        int rc = pthread_create(&handlers[i], NULL, echo_conn, (void *)(long)fd);
        if (rc != 0) {
            fprintf(stderr, "pthread_create(echo): %s\n", strerror(rc));
            exit(1);
        }
    }
    return NULL;
}

static void *client(void *arg)
{
    long id = (long)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("client socket");
    while (connect(fd, (struct sockaddr *)&g_addr, sizeof g_addr) != 0) {
        if (errno != EINTR)
            die("connect");
    }
    unsigned char *out = malloc((size_t)g_chunk), *in = malloc((size_t)g_chunk);
    if (!out || !in)
        die("malloc");
    for (long off = 0; off < g_bytes; off += g_chunk) {
        size_t len = (size_t)(g_bytes - off < g_chunk ? g_bytes - off : g_chunk);
        for (size_t k = 0; k < len; k++)
            out[k] = pattern(id, off + (long)k);
        write_all(fd, out, len, "client write");
        size_t got = 0;
        while (got < len) {
            ssize_t n = read(fd, in + got, len - got);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                die("client read");
            }
            if (n == 0) {
                fprintf(stderr, "client %ld: EOF at offset %ld\n", id, off + (long)got);
                exit(1);
            }
            got += (size_t)n;
        }
        if (memcmp(in, out, len) != 0) {
            fprintf(stderr, "client %ld: echo mismatch in chunk at offset %ld\n", id, off);
            exit(1);
        }
    }
    if (shutdown(fd, SHUT_WR) != 0)
        die("shutdown");
    char c;
    ssize_t n;
    while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
        ;
    if (n != 0) {
        fprintf(stderr, "client %ld: expected EOF, read returned %zd (%s)\n", id, n,
                n < 0 ? strerror(errno) : "data");
        exit(1);
    }
    close(fd);
    free(out);
    free(in);
    return NULL;
}

int main(int argc, char **argv)
{
    g_clients = argc > 1 ? atol(argv[1]) : 200;
    g_bytes = argc > 2 ? atol(argv[2]) : 65536;
    g_chunk = argc > 3 ? atol(argv[3]) : 4096;
    if (g_clients < 1 || g_bytes < 0 || g_chunk < 1) {
        fprintf(stderr, "bad arguments\n");
        return 1;
    }

    g_listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (g_listen_fd < 0)
        die("socket");
    int one = 1;
    setsockopt(g_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&g_addr, 0, sizeof g_addr);
    g_addr.sin_family = AF_INET;
    g_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_addr.sin_port = 0;
    if (bind(g_listen_fd, (struct sockaddr *)&g_addr, sizeof g_addr) != 0)
        die("bind");
    socklen_t alen = sizeof g_addr;
    if (getsockname(g_listen_fd, (struct sockaddr *)&g_addr, &alen) != 0)
        die("getsockname");
    if (listen(g_listen_fd, 1024) != 0)
        die("listen");

    pthread_t *handlers = calloc((size_t)g_clients, sizeof *handlers);
    pthread_t *clients = calloc((size_t)g_clients, sizeof *clients);
    if (!handlers || !clients)
        die("calloc");

    long long t0 = now_ms();
    pthread_t acc;
    int rc = pthread_create(&acc, NULL, acceptor, handlers);
    if (rc != 0) {
        fprintf(stderr, "pthread_create(acceptor): %s\n", strerror(rc));
        return 1;
    }
    for (long i = 0; i < g_clients; i++) {
        rc = pthread_create(&clients[i], NULL, client, (void *)i);
        if (rc != 0) {
            fprintf(stderr, "pthread_create(client %ld): %s\n", i, strerror(rc));
            return 1;
        }
    }
    for (long i = 0; i < g_clients; i++)
        pthread_join(clients[i], NULL);
    pthread_join(acc, NULL);
    for (long i = 0; i < g_clients; i++)
        pthread_join(handlers[i], NULL);
    long long elapsed = now_ms() - t0;
    close(g_listen_fd);

    fprintf(stderr, "time_ms=%lld\n", elapsed);
    if (atomic_load(&g_echoed) != g_clients * g_bytes) {
        fprintf(stderr, "server echoed %ld bytes, expected %ld\n", atomic_load(&g_echoed),
                g_clients * g_bytes);
        return 1;
    }
    printf("ok %ld\n", g_clients);
    printf("bytes %ld\n", atomic_load(&g_echoed));
    return 0;
}
