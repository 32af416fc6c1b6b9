/*
 * socket_to_plain_child: a thread (a fiber under greenhook) hands a
 * connected socket to a program it execs with an empty environment, so
 * without the preload (as a CGI server or inetd does). The program writes 4 MiB with blocking write()s and
 * then reads 1 MiB with blocking read()s, while the thread reads and
 * writes the other end. A socket made non-blocking underneath would reach
 * the program non-blocking (O_NONBLOCK belongs to the open file
 * description, which the program shares), and its writes would meet
 * EAGAIN. The socket goes as fd 3 and up (as systemd's LISTEN_FDS or a
 * `--fd N` option pass one), not as stdin/stdout, which greenhook hands
 * back to blocking anyway.
 *
 * usage: socket_to_plain_child unix|tcp   (the parent)
 *        socket_to_plain_child child FD    (what the parent execs)
 * stdout: the child's report (sent over the socket), then the parent's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define OUT (4 << 20) /* child → parent */
#define IN (1 << 20)  /* parent → child */
#define REPORT 96     /* the child's report, padded */

static const char *mode;

static int child(int fd)
{
    static char buf[65536];
    memset(buf, 'x', sizeof buf);
    int fl = fcntl(fd, F_GETFL);
    long wrote = 0;
    while (wrote < OUT) {
        ssize_t n = write(fd, buf, sizeof buf);
        if (n < 0) {
            fprintf(stderr, "child: write: %s after %ld bytes\n", strerror(errno), wrote);
            return 1;
        }
        wrote += n;
    }
    char report[REPORT];
    memset(report, ' ', sizeof report);
    int len = snprintf(report, sizeof report, "child: socket %s, wrote %ld bytes with blocking writes",
                       fl & O_NONBLOCK ? "O_NONBLOCK" : "blocking", wrote);
    report[len] = ' ';
    report[REPORT - 1] = '\n';
    if (write(fd, report, sizeof report) != sizeof report) {
        perror("child: report");
        return 1;
    }
    long got = 0;
    while (got < IN) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) {
            fprintf(stderr, "child: read: %s after %ld bytes\n", n ? strerror(errno) : "EOF", got);
            return 2;
        }
        got += n;
    }
    return 0;
}

/* Two connected stream sockets: a socketpair, or a loopback TCP
 * connection (the child gets the accepted end). */
static void connected(int sv[2])
{
    if (strcmp(mode, "unix") == 0) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
            perror("socketpair");
            exit(1);
        }
        return;
    }
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) < 0) {
        perror("listen");
        exit(1);
    }
    sv[1] = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(sv[1], (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        exit(1);
    }
    sv[0] = accept(l, NULL, NULL);
    if (sv[0] < 0) {
        perror("accept");
        exit(1);
    }
    close(l);
}

static void *serve(void *arg)
{
    (void)arg;
    int sv[2];
    connected(sv);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[1]);
        char num[16];
        snprintf(num, sizeof num, "%d", sv[0]);
        char *argv[] = {"socket_to_plain_child", "child", num, NULL};
        char *envp[] = {NULL};
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    close(sv[0]);
    static char buf[65536];
    long got = 0;
    char report[REPORT + 1] = "";
    while (got < OUT + REPORT) {
        ssize_t n = read(sv[1], buf, sizeof buf);
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            if (got + i >= OUT)
                report[got + i - OUT] = buf[i];
        got += n;
    }
    memset(buf, 'y', sizeof buf);
    long sent = 0;
    while (sent < IN) {
        ssize_t n = write(sv[1], buf, sizeof buf);
        if (n <= 0)
            break;
        sent += n;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int fl = fcntl(sv[1], F_GETFL);
    printf("%s", report);
    printf("parent: %s end %s, read %ld bytes, sent %ld, child exit %d\n", mode,
           fl & O_NONBLOCK ? "O_NONBLOCK" : "blocking", got - REPORT, sent,
           WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "child") == 0)
        return child(atoi(argv[2]));
    if (argc != 2 || (strcmp(argv[1], "unix") != 0 && strcmp(argv[1], "tcp") != 0)) {
        fprintf(stderr, "usage: socket_to_plain_child unix|tcp\n");
        return 2;
    }
    mode = argv[1];
    signal(SIGPIPE, SIG_IGN); /* a child that died early shows in the report */
    pthread_t t;
    pthread_create(&t, NULL, serve, NULL);
    pthread_join(t, NULL);
    return 0;
}
