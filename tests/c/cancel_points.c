/*
 * cancel_points: a deferred pthread_cancel of a thread blocked in a call
 * that glibc makes a cancellation point, and in one it does not, compared
 * with glibc.
 *
 *   sendfile (no cancellation point) of 4 MiB into a full socket: the
 *   call goes on until the reader has drained it all, then the
 *   cancellation acts at pthread_testcancel
 *   write (a cancellation point) of 4 MiB into a full socket: cancelled
 *   inside the call
 *   the same sendfile, then a SIGUSR1 whose handler (SA_RESTART) calls
 *   pthread_testcancel: the cancellation acts there, in the handler, and
 *   the reader gets part of it (the handler's point did not act, before:
 *   the sendfile's "no point" mark held for the code run inside it)
 *   a thread reading, writing, or pwriting a regular file in a loop (for
 *   up to 3 s): cancelled at its next call (it never was, before: it ran
 *   its loop to the end)
 *
 * usage: cancel_points
 * stdout: one line per case.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SIZE (4 << 20)

static int sv[2], file;
static char *data;

static void *sender(void *by_sendfile)
{
    ssize_t n = by_sendfile ? sendfile(sv[0], file, NULL, SIZE) : write(sv[0], data, SIZE);
    printf("%s returned %s\n", by_sendfile ? "sendfile" : "write", n == SIZE ? "all of it" : "part of it");
    pthread_testcancel();
    printf("not cancelled at pthread_testcancel\n");
    return NULL;
}

static void testcancel_in_handler(int sig)
{
    (void)sig;
    pthread_testcancel();
}

/* how: 0 write, 1 sendfile, 2 sendfile with a SIGUSR1 whose handler calls
   pthread_testcancel after the cancel */
static void run(int how)
{
    int by_sendfile = how != 0;
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    lseek(file, 0, SEEK_SET);
    pthread_t t;
    pthread_create(&t, NULL, sender, by_sendfile ? "sendfile" : NULL);
    usleep(200000);
    pthread_cancel(t);
    if (how == 2) {
        usleep(50000);
        pthread_kill(t, SIGUSR1);
    }
    usleep(200000);
    /* The receiver takes what comes, until nothing has come for 500 ms. */
    char buf[65536];
    size_t got = 0;
    struct pollfd p = {.fd = sv[1], .events = POLLIN};
    while (got < SIZE && poll(&p, 1, 500) == 1) {
        ssize_t n = read(sv[1], buf, sizeof buf);
        if (n <= 0)
            break;
        got += n;
    }
    void *r;
    pthread_join(t, &r);
    printf("%s: %s, the reader got %s\n", how == 2 ? "sendfile with a handler's pthread_testcancel" : by_sendfile ? "sendfile" : "write",
           r == PTHREAD_CANCELED ? "cancelled" : "not cancelled", got == SIZE ? "all of it" : "part of it");
    close(sv[0]);
    close(sv[1]);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static const char *file_ops[] = {"read", "write", "pwrite"};

static void *file_loop(void *arg)
{
    int op = *(int *)arg;
    char b[64] = {0};
    double t0 = now();
    while (now() - t0 < 3) {
        if (op == 0) {
            if (read(file, b, sizeof b) == 0)
                lseek(file, 0, SEEK_SET);
        } else if (op == 1) {
            if (write(file, b, sizeof b) != sizeof b)
                lseek(file, 0, SEEK_SET);
        } else if (pwrite(file, b, sizeof b, 0) != sizeof b) {
            break;
        }
    }
    return NULL;
}

static void file_cancel(int op)
{
    lseek(file, 0, SEEK_SET);
    pthread_t t;
    pthread_create(&t, NULL, file_loop, &op);
    usleep(100000);
    double t0 = now();
    pthread_cancel(t);
    void *r;
    pthread_join(t, &r);
    printf("a thread that %ss a regular file in a loop: %s%s\n", file_ops[op],
           r == PTHREAD_CANCELED ? "cancelled" : "not cancelled", now() - t0 < 1 ? "" : ", late");
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    data = calloc(1, SIZE);
    char path[] = "/tmp/greenhook-cancel-points-XXXXXX";
    file = mkstemp(path);
    unlink(path);
    if (file < 0 || write(file, data, SIZE) != SIZE)
        return 1;
    struct sigaction sa = {.sa_handler = testcancel_in_handler, .sa_flags = SA_RESTART};
    sigaction(SIGUSR1, &sa, NULL);
    run(0);
    run(1);
    run(2);
    for (int op = 0; op < 3; op++)
        file_cancel(op);
    return 0;
}
