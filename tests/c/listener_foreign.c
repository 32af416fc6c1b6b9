/*
 * listener_foreign: a blocking accept() on a listening socket greenhook
 * did not see created (made here by raw system calls, as one inherited from
 * systemd's socket activation or a supervisor would be) must wait without
 * holding the other threads: a ticker thread ticks every 50 ms while the
 * accept waits for a client that connects after 300 ms. The accept runs in
 * main, then again in a thread. Afterwards the listener's flags are still
 * blocking. Then a blocking connect() on such a socket waits for room in a
 * full AF_UNIX backlog (a thread accepts one connection after 300 ms), the
 * ticker running meanwhile too.
 *
 * usage: listener_foreign
 * stdout: per accept, whether it returned a socket, whether the ticker ran
 *         meanwhile (3 ticks or more), and the listener's O_NONBLOCK; the
 *         same for the connect.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define TICKER_MS 50
#include "ticker.h"

static struct sockaddr_in addr;

static void *client(void *arg)
{
    (void)arg;
    usleep(300000);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("client: connect");
        exit(1);
    }
    usleep(100000);
    close(c);
    return NULL;
}

static int listener;

static void *accept_once(void *who)
{
    pthread_t cl;
    pthread_create(&cl, NULL, client, NULL);
    long before = atomic_load(&ticker_count);
    int s = accept(listener, NULL, NULL);
    long during = atomic_load(&ticker_count) - before;
    int fl = fcntl(listener, F_GETFL);
    printf("%s: accepted %s, ticker ran meanwhile: %s, listener %s\n", (const char *)who,
           s >= 0 ? "yes" : "no", during >= 3 ? "yes" : "no", fl & O_NONBLOCK ? "O_NONBLOCK" : "blocking");
    fflush(stdout);
    if (during < 3)
        fprintf(stderr, "%s: %ld ticks during the accept\n", (const char *)who, during);
    pthread_join(cl, NULL);
    close(s);
    return NULL;
}

static int unix_listener;

static void *accept_later(void *arg)
{
    (void)arg;
    usleep(300000);
    int s = accept(unix_listener, NULL, NULL);
    if (s < 0)
        perror("accept_later");
    return NULL;
}

/* A blocking connect to a full backlog waits until the backlog has room. */
static void connect_to_full_backlog(void)
{
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    snprintf(ua.sun_path + 1, sizeof ua.sun_path - 1, "greenhook-listener-foreign-%d", (int)getpid());
    socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(ua.sun_path + 1));
    unix_listener = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
    if (unix_listener < 0 || syscall(SYS_bind, unix_listener, &ua, ulen) < 0 ||
        syscall(SYS_listen, unix_listener, 0) < 0) {
        perror("unix listener");
        exit(1);
    }
    int queued = 0;
    for (;;) {
        int q = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (syscall(SYS_connect, q, &ua, ulen) < 0)
            break;
        queued++;
    }
    int c = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
    pthread_t a;
    pthread_create(&a, NULL, accept_later, NULL);
    long before = atomic_load(&ticker_count);
    int r = connect(c, (struct sockaddr *)&ua, ulen);
    long during = atomic_load(&ticker_count) - before;
    printf("connect: connected %s (after %s queued), ticker ran meanwhile: %s, socket %s\n", r == 0 ? "yes" : "no",
           queued > 0 ? "some" : "none", during >= 3 ? "yes" : "no",
           fcntl(c, F_GETFL) & O_NONBLOCK ? "O_NONBLOCK" : "blocking");
    if (during < 3)
        fprintf(stderr, "connect: %ld ticks during the connect\n", during);
    pthread_join(a, NULL);
}

int main(void)
{
    listener = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener < 0 || syscall(SYS_bind, listener, &addr, sizeof addr) < 0 || syscall(SYS_listen, listener, 8) < 0 ||
        getsockname(listener, (struct sockaddr *)&addr, &len) < 0) {
        perror("listener");
        return 1;
    }
    pthread_t t = ticker_start();
    accept_once("main");
    pthread_t a;
    pthread_create(&a, NULL, accept_once, "thread");
    pthread_join(a, NULL);
    connect_to_full_backlog();
    ticker_stop(t);
    return 0;
}
