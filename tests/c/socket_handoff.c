/*
 * socket_handoff: a listening socket made by a thread (a fiber under
 * greenhook) is inherited by a program it execs, which accepts on it with a
 * blocking accept() from its main thread, before any connection has come:
 * the parent connects only 200 ms later. Under greenhook the socket is
 * non-blocking underneath; the exec'd program (greenhook in it too, no
 * threads) must still see the blocking socket it was made as, not EAGAIN.
 * It also reports what F_GETFL says of the socket, once accept returned.
 *
 * usage: socket_handoff            (the parent)
 *        socket_handoff child FD   (what the parent execs)
 * stdout: the child's line, then the parent's.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int child(int fd)
{
    int c = accept(fd, NULL, NULL);
    if (c < 0) {
        perror("child: accept");
        return 1;
    }
    int fl = fcntl(fd, F_GETFL);
    char buf[16] = "";
    ssize_t n = read(c, buf, sizeof buf - 1);
    printf("child: F_GETFL %s, accepted, read %zd bytes: %s\n",
           fl & O_NONBLOCK ? "O_NONBLOCK" : "blocking", n, n > 0 ? buf : "");
    fflush(stdout);
    return 0;
}

static void *parent(void *self)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4) ||
        getsockname(l, (struct sockaddr *)&a, &len)) {
        perror("listen");
        exit(1);
    }
    pid_t pid = fork();
    if (pid == 0) {
        char num[16];
        snprintf(num, sizeof num, "%d", l);
        fcntl(l, F_SETFD, 0); /* inheritable now, as pass_fds makes it */
        execl((char *)self, (char *)self, "child", num, (char *)NULL);
        _exit(127);
    }
    close(l);
    usleep(200000);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0 || write(s, "hello", 5) != 5) {
        perror("connect");
        exit(1);
    }
    int st;
    waitpid(pid, &st, 0);
    close(s);
    printf("parent: child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "child"))
        return child(atoi(argv[2]));
    pthread_t t;
    pthread_create(&t, NULL, parent, argv[0]);
    pthread_join(t, NULL);
    return 0;
}
