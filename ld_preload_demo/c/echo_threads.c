/*
 * echo_threads: a thread-per-connection TCP echo server, written the plain
 * blocking way (accept loop, one detached pthread per connection, blocking
 * read/write). Listens on 127.0.0.1 only.
 *
 * usage: echo_threads PORT [reuseport]
 *   PORT       0 picks a free port
 *   reuseport  set SO_REUSEPORT, so several processes can share PORT
 *
 * stdout: "port=<n>" once listening (the readiness signal), then nothing.
 * Runs until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void *serve(void *arg)
{
    int fd = (int)(long)arg;
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ssize_t off = 0;
        while (off < n) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                goto out;
            off += w;
        }
    }
out:
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: echo_threads PORT [reuseport]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    int reuseport = argc > 2 && !strcmp(argv[2], "reuseport");

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) {
        perror("socket");
        return 1;
    }
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && setsockopt(ls, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
        perror("SO_REUSEPORT");
        return 1;
    }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 4096) != 0) {
        perror("bind/listen");
        return 1;
    }
    socklen_t len = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &len);
    printf("port=%d\n", ntohs(sa.sin_port));
    fflush(stdout);

    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                usleep(1000);
                continue;
            }
            perror("accept");
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        int rc = pthread_create(&t, NULL, serve, (void *)(long)fd);
        if (rc != 0) {
            fprintf(stderr, "pthread_create: %s\n", strerror(rc));
            close(fd);
            continue;
        }
        pthread_detach(t);
    }
}
