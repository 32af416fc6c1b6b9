/*
 * close_all: a program that closes every fd from 3 up while it has
 * threads, as daemons and children before an exec do, compared with
 * glibc. Each way of closing, then threads, a sleep, a pipe read that
 * waits for another thread, and a new file's number (the lowest free).
 * Before, the hub's own epoll set and notifier were among the fds closed,
 * and the next wait aborted the process ("poller wait failed").
 *
 * usage: close_all closefrom|close_range|raw|loop|child
 *   raw: syscall(SYS_close_range); loop: close() of every number to
 *   4095; child: closefrom(3) in a forked child, which then does the same
 *   checks
 * stdout: one line per check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void *write_later(void *arg)
{
    usleep(50000);
    if (write(*(int *)arg, "x", 1) != 1)
        perror("write");
    return NULL;
}

static void *nap(void *arg)
{
    (void)arg;
    usleep(30000);
    return NULL;
}

static void check(const char *who)
{
    int q[2];
    if (pipe(q))
        return;
    pthread_t t, s;
    pthread_create(&t, NULL, write_later, &q[1]);
    pthread_create(&s, NULL, nap, NULL);
    char c;
    ssize_t n = read(q[0], &c, 1);
    pthread_join(t, NULL);
    pthread_join(s, NULL);
    int f = open("/dev/null", O_RDONLY);
    printf("%s: then a pipe read %zd byte; a new file is fd %d\n", who, n, f);
    close(q[0]);
    close(q[1]);
    close(f);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* A thread first: under greenhook, the hub and its fds exist now. */
    pthread_t s;
    pthread_create(&s, NULL, nap, NULL);
    pthread_join(s, NULL);
    int p[2];
    if (pipe(p))
        return 1;
    const char *how = argv[1];
    if (!strcmp(how, "closefrom"))
        closefrom(3);
    else if (!strcmp(how, "close_range"))
        printf("close_range: %d\n", close_range(3, ~0U, 0));
    else if (!strcmp(how, "raw"))
        printf("syscall(SYS_close_range): %ld\n", syscall(SYS_close_range, 3, ~0U, 0));
    else if (!strcmp(how, "loop")) {
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
    } else if (!strcmp(how, "child")) {
        pid_t pid = fork();
        if (pid == 0) {
            closefrom(3);
            check("the child");
            _exit(0);
        }
        waitpid(pid, NULL, 0);
    }
    errno = 0;
    printf("the program's pipe: %s\n", fcntl(p[0], F_GETFD) == -1 && errno == EBADF ? "closed" : "open");
    check(how);
    return 0;
}
