/*
 * exec_pipes: a program that execs another without forking, passing it a
 * pipe on fd 3, compared with glibc. The other end is written 300 ms
 * later by a child; a thread is alive at the exec. The new program (a
 * shell, run without the preload: an empty environment) reads a line
 * from fd 3 with a blocking read. Before, it inherited the pipe
 * non-blocking underneath, met EAGAIN and read nothing.
 *
 *   execve, execv, execvp, execvpe, execl, execlp, execle: each once
 *   failed: an exec of a missing file first (the pipe must be as it was:
 *   a thread reading it waits on the hub while another ticks), then
 *   execve
 *
 * usage: exec_pipes execve|execv|execvp|execvpe|execl|execlp|execle|failed
 * stdout: what the shell read; for "failed", the read in this process too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ticker.h"

static const char *script = "read x <&3; echo \"the new program read: $x\"";
static char *argv_sh[] = {"sh", "-c", NULL, NULL};
static char *const no_env[] = {NULL};
static int p[2];

static void *idle(void *arg)
{
    (void)arg;
    sleep(5);
    return NULL;
}

static void write_later(const char *line, int ms)
{
    if (fork() == 0) {
        close(p[0]);
        usleep(ms * 1000);
        if (write(p[1], line, strlen(line)) < 0)
            _exit(1);
        _exit(0);
    }
}

static void *reader(void *arg)
{
    char buf[32] = {0};
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    *(ssize_t *)arg = n;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe(p))
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, idle, NULL);
    const char *how = argv[1];
    char **sh = argv_sh;
    sh[2] = (char *)script;
    if (strcmp(how, "failed") == 0) {
        errno = 0;
        int r = execv("/nonexistent/program", sh);
        printf("a failed execv: %d %s\n", r, strerrorname_np(errno));
        /* The pipe is ours again, and waits on the hub. */
        write_later("first\n", 100);
        pthread_t tick = ticker_start(), rd;
        ssize_t n = 0;
        pthread_create(&rd, NULL, reader, &n);
        pthread_join(rd, NULL);
        long ticks = ticker_stop(tick);
        printf("then a thread read %zd bytes; the ticker %s\n", n, ticks >= 5 ? "ticked meanwhile" : "stood still");
        how = "execve";
    }
    write_later("late\n", 300);
    close(p[1]);
    if (dup2(p[0], 3) != 3)
        return 1;
    if (strcmp(how, "execve") == 0)
        execve("/bin/sh", sh, no_env);
    else if (strcmp(how, "execv") == 0) {
        /* No environment change possible: clear our own first. */
        clearenv();
        execv("/bin/sh", sh);
    } else if (strcmp(how, "execvp") == 0) {
        clearenv();
        setenv("PATH", "/bin:/usr/bin", 1);
        execvp("sh", sh);
    } else if (strcmp(how, "execvpe") == 0) {
        setenv("PATH", "/bin:/usr/bin", 1);
        execvpe("sh", sh, no_env);
    } else if (strcmp(how, "execl") == 0) {
        clearenv();
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
    } else if (strcmp(how, "execlp") == 0) {
        clearenv();
        setenv("PATH", "/bin:/usr/bin", 1);
        execlp("sh", "sh", "-c", script, (char *)NULL);
    } else if (strcmp(how, "execle") == 0) {
        execle("/bin/sh", "sh", "-c", script, (char *)NULL, no_env);
    }
    printf("%s failed: %s\n", how, strerror(errno));
    return 1;
}
