/*
 * fork_atfork_close: a library's atfork child handler closes an fd that a
 * thread of the parent is blocked reading (gRPC's closes its poller's
 * epoll fd). The child's close must not touch the parent: the thread gets
 * the byte main writes after the fork. Under greenhook the child's close
 * ran before the child had a poller of its own, took the fd out of the
 * epoll set it shared with the parent, and the reader waited for ever.
 *
 * stdout: "reader got: x" (alarm(10) ends a hang).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int p[2];

static void close_in_child(void)
{
    close(p[0]);
}

static void *reader(void *arg)
{
    (void)arg;
    static char c;
    if (read(p[0], &c, 1) != 1)
        return NULL;
    return &c;
}

int main(void)
{
    alarm(10);
    if (pipe(p))
        return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, reader, NULL))
        return 2;
    usleep(100000); /* the reader waits */
    pthread_atfork(NULL, NULL, close_in_child);
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0)
        _exit(0);
    int status;
    waitpid(pid, &status, 0);
    if (write(p[1], "x", 1) != 1)
        return 2;
    void *r;
    pthread_join(t, &r);
    printf("reader got: %c\n", r ? *(char *)r : '-');
    return 0;
}
