/*
 * echo_epoll: a hand-written single-thread TCP echo server: non-blocking
 * sockets and one level-triggered epoll loop. Listens on 127.0.0.1 only.
 * The reference point for what one core can do without any threads.
 *
 * usage: echo_epoll PORT [reuseport]
 *   PORT       0 picks a free port
 *   reuseport  set SO_REUSEPORT
 *
 * stdout: "port=<n>" once listening, then nothing. Runs until killed.
 *
 * Each connection echoes what it reads; bytes the kernel did not take are
 * kept in a per-connection buffer, and the connection stops reading (waits
 * for EPOLLOUT only) until they are written.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 4096

struct conn {
    int fd;
    size_t off, len; /* pending output: buf[off..len) */
    char buf[BUF];
};

static int ep;

static void drop(struct conn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

/* Writes pending bytes; returns -1 on error, 0 if some remain, 1 if flushed. */
static int flush(struct conn *c)
{
    while (c->off < c->len) {
        ssize_t w = write(c->fd, c->buf + c->off, c->len - c->off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return -1;
        }
        c->off += (size_t)w;
    }
    c->off = c->len = 0;
    return 1;
}

static void on_event(struct conn *c, unsigned ev)
{
    if (c->len > 0) { /* waiting to write */
        int r = flush(c);
        if (r < 0)
            goto fail;
        if (r > 0) {
            struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
        }
        return;
    }
    if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        return;
    for (;;) {
        ssize_t n = read(c->fd, c->buf, BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0)
            goto fail;
        c->off = 0;
        c->len = (size_t)n;
        int r = flush(c);
        if (r < 0)
            goto fail;
        if (r == 0) {
            struct epoll_event e = { .events = EPOLLOUT, .data.ptr = c };
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
            return;
        }
        if (n < BUF)
            return; /* drained: level-triggered epoll tells us about more */
    }
fail:
    drop(c);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: echo_epoll PORT [reuseport]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    int reuseport = argc > 2 && !strcmp(argv[2], "reuseport");

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
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

    ep = epoll_create1(0);
    struct epoll_event e = { .events = EPOLLIN, .data.ptr = NULL };
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &e);
    printf("port=%d\n", ntohs(sa.sin_port));
    fflush(stdout);

    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c) {
                on_event(c, evs[i].events);
                continue;
            }
            for (;;) {
                int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK);
                if (fd < 0)
                    break; /* EAGAIN, or EMFILE etc.: retried on the next event */
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                struct conn *nc = malloc(sizeof *nc);
                if (!nc) {
                    close(fd);
                    continue;
                }
                nc->fd = fd;
                nc->off = nc->len = 0;
                struct epoll_event ce = { .events = EPOLLIN, .data.ptr = nc };
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
            }
        }
    }
}
