/*
 * socket_foreign: blocking calls on a connected socket pair greenhook did
 * not see created (made here by raw system calls, as one inherited from a
 * parent without the preload would be). A writer thread sends 1 MiB with
 * each of write, writev, send, sendto, sendmsg and sendmmsg (records of
 * 64 KiB) while a reader thread takes it all with read, readv, recv,
 * recvfrom, recvmsg and recvmmsg: each call blocks for room or for data,
 * and must let the other thread run meanwhile. A ticker counts the turns
 * it got. Afterwards both sockets are still blocking.
 *
 * usage: socket_foreign
 * stdout: per call, the bytes and records through (SOCK_SEQPACKET keeps
 *         each send a record); the final flags.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define TOTAL (1 << 20)
#define CHUNK (64 << 10)

static int sv[2];
static char out[CHUNK], in[CHUNK];

static ssize_t put(int how, const char *p, size_t n)
{
    struct iovec v[2] = {{(void *)p, n / 2}, {(void *)(p + n / 2), n - n / 2}};
    struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
    struct mmsghdr mm = {.msg_hdr = m};
    switch (how) {
    case 0: return write(sv[0], p, n);
    case 1: return writev(sv[0], v, 2);
    case 2: return send(sv[0], p, n, 0);
    case 3: return sendto(sv[0], p, n, 0, NULL, 0);
    case 4: return sendmsg(sv[0], &m, 0);
    default: {
        int r = sendmmsg(sv[0], &mm, 1, 0);
        return r == 1 ? (ssize_t)mm.msg_len : -1;
    }
    }
}

static ssize_t take(int how, char *p, size_t n)
{
    struct iovec v[2] = {{p, n / 2}, {p + n / 2, n - n / 2}};
    struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
    struct mmsghdr mm = {.msg_hdr = m};
    switch (how) {
    case 0: return read(sv[1], p, n);
    case 1: return readv(sv[1], v, 2);
    case 2: return recv(sv[1], p, n, 0);
    case 3: return recvfrom(sv[1], p, n, 0, NULL, NULL);
    case 4: return recvmsg(sv[1], &m, 0);
    default: {
        int r = recvmmsg(sv[1], &mm, 1, 0, NULL);
        return r == 1 ? (ssize_t)mm.msg_len : -1;
    }
    }
}

static const char *names[] = {"write/read", "writev/readv", "send/recv", "sendto/recvfrom", "sendmsg/recvmsg",
                              "sendmmsg/recvmmsg"};

static void *writer(void *arg)
{
    (void)arg;
    for (int how = 0; how < 6; how++) {
        long sent = 0;
        while (sent < TOTAL) {
            ssize_t r = put(how, out, CHUNK);
            if (r <= 0) {
                perror(names[how]);
                exit(1);
            }
            sent += r;
        }
    }
    return NULL;
}

int main(void)
{
    if (syscall(SYS_socketpair, AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }
    memset(out, 'x', sizeof out);
    pthread_t w;
    pthread_create(&w, NULL, writer, NULL);
    for (int how = 0; how < 6; how++) {
        long got = 0, records = 0;
        while (got < TOTAL) {
            ssize_t r = take(how, in, sizeof in);
            if (r <= 0) {
                perror(names[how]);
                return 1;
            }
            got += r;
            records++;
        }
        printf("%s: %ld bytes in %ld records\n", names[how], got, records);
    }
    pthread_join(w, NULL);
    printf("flags: %s, %s\n", fcntl(sv[0], F_GETFL) & O_NONBLOCK ? "O_NONBLOCK" : "blocking",
           fcntl(sv[1], F_GETFL) & O_NONBLOCK ? "O_NONBLOCK" : "blocking");
    return 0;
}
