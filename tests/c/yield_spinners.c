/* Threads that wait for work by yielding in a loop (a short spin, then
 * sched_yield: BEAM's schedulers, crossbeam's `Backoff::snooze`, many
 * spin-then-park pools; or a sleep of zero, `usleep(0)`, whose timer the
 * kernel fires at once), or by asking for I/O without waiting (`poll`,
 * `select`, `epoll_wait` with a zero timeout; a read of their own
 * non-blocking pipe, or a write to a full one, `EAGAIN`; a `recv` with
 * `MSG_DONTWAIT` of an idle socket, or a `recvmmsg` of it, or a `send` with
 * `MSG_DONTWAIT` to a full one), beside a round trip through two pipes:
 * main writes a byte, an echo thread blocked in read() sends it back. The
 * kernel runs the thread it woke for the byte before the yielders' next
 * turns; the spinners' rounds during the round trips are reported on
 * stderr as `yields_per_trip=<n>` (their number is the test's: natively it
 * depends on the CPUs), and a round trip's time as `trip_ns=<n>` (the
 * interpose bench's). stdout is the same in every mode.
 *
 * usage: yield_spinners SPINNERS TRIPS [BACKOFF]
 * BACKOFF: sched_yield (default), usleep0, nanosleep0, poll0, select0,
 * epoll0, eagain, eagain_write, recv_dontwait, recvmmsg_dontwait,
 * send_dontwait */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int there[2], back[2], idle[2], full[2], quiet[2], jam[2], ep;
static atomic_int stop;
static atomic_long yields;
static const char *backoff = "sched_yield";

static void *spinner(void *arg)
{
    (void)arg;
    struct timespec zero = {0, 0};
    while (!atomic_load(&stop)) {
        for (int i = 0; i < 100; i++)
            __asm__ volatile("pause");
        if (strcmp(backoff, "usleep0") == 0)
            usleep(0);
        else if (strcmp(backoff, "nanosleep0") == 0)
            nanosleep(&zero, NULL);
        else if (strcmp(backoff, "poll0") == 0) {
            struct pollfd p = {idle[0], POLLIN, 0};
            poll(&p, 1, 0);
        } else if (strcmp(backoff, "select0") == 0) {
            fd_set r;
            FD_ZERO(&r);
            FD_SET(idle[0], &r);
            struct timeval tv = {0, 0};
            select(idle[0] + 1, &r, NULL, NULL, &tv);
        } else if (strcmp(backoff, "epoll0") == 0) {
            struct epoll_event e;
            epoll_wait(ep, &e, 1, 0);
        } else if (strcmp(backoff, "eagain") == 0) {
            char c;
            if (read(idle[0], &c, 1) != -1)
                abort();
        } else if (strcmp(backoff, "eagain_write") == 0) {
            if (write(full[1], "x", 1) != -1)
                abort();
        } else if (strcmp(backoff, "recv_dontwait") == 0) {
            char c;
            if (recv(quiet[0], &c, 1, MSG_DONTWAIT) != -1)
                abort();
        } else if (strcmp(backoff, "recvmmsg_dontwait") == 0) {
            char c;
            struct iovec io = {&c, 1};
            struct mmsghdr m = {.msg_hdr = {.msg_iov = &io, .msg_iovlen = 1}};
            if (recvmmsg(quiet[0], &m, 1, MSG_DONTWAIT, NULL) != -1)
                abort();
        } else if (strcmp(backoff, "send_dontwait") == 0) {
            if (send(jam[1], "x", 1, MSG_DONTWAIT) != -1)
                abort();
        } else
            sched_yield();
        atomic_fetch_add(&yields, 1);
    }
    return NULL;
}

static void *echo(void *arg)
{
    (void)arg;
    char c;
    while (read(there[0], &c, 1) == 1)
        if (write(back[1], &c, 1) != 1)
            break;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: yield_spinners SPINNERS TRIPS [sched_yield|usleep0|nanosleep0]\n");
        return 2;
    }
    if (argc > 3)
        backoff = argv[3];
    int n = atoi(argv[1]), trips = atoi(argv[2]);
    if (n < 0 || n > 64 || trips < 1 || pipe(there) || pipe(back) || pipe(idle) || pipe(full) ||
        socketpair(AF_UNIX, SOCK_STREAM, 0, quiet) || socketpair(AF_UNIX, SOCK_STREAM, 0, jam))
        return 2;
    /* Nothing is ever written to `idle` or `quiet`; `full` and `jam` are
     * filled and never read. */
    fcntl(idle[0], F_SETFL, O_NONBLOCK);
    fcntl(full[1], F_SETFL, O_NONBLOCK);
    while (write(full[1], "x", 1) == 1)
        ;
    while (send(jam[1], "x", 1, MSG_DONTWAIT) == 1)
        ;
    ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, idle[0], &ev);
    pthread_t e, s[64];
    pthread_create(&e, NULL, echo, NULL);
    for (int i = 0; i < n; i++)
        pthread_create(&s[i], NULL, spinner, NULL);
    long during = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < trips; r++) {
        char c = (char)r, got;
        long before = atomic_load(&yields);
        if (write(there[1], &c, 1) != 1 || read(back[0], &got, 1) != 1 || got != c) {
            printf("round trip %d failed\n", r);
            return 1;
        }
        during += atomic_load(&yields) - before;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ns = (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec);
    atomic_store(&stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(s[i], NULL);
    close(there[1]);
    pthread_join(e, NULL);
    fprintf(stderr, "yields_per_trip=%ld\ntrip_ns=%ld\n", during / trips, ns / trips);
    printf("spinners=%d trips=%d backoff=%s ok\n", n, trips, backoff);
    return 0;
}
