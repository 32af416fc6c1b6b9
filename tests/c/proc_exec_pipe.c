/*
 * proc_exec_pipe: a child exec'd with a pipe as its stdout writes more than
 * the pipe holds while the parent drains it slowly. The pipe is created by
 * the parent with pipe(); under greenhook such a pipe is non-blocking
 * underneath, and a child that inherited that as its stdout would see EAGAIN
 * from its own writes and lose output. Nothing may be lost.
 *
 * usage: proc_exec_pipe [LINES] [fork|spawn|fork-fd|spawn-fd|fork-noexec|
 *                                  fork-cloexec|scm|fork-cloexec-socket|
 *                                  scm-socket|popen-fd]
 *        (default 20000 lines, about 250 KB; fork: fork + dup2 + execlp,
 *        spawn: posix_spawnp with a dup2 action; the -fd forms leave the
 *        pipe where pipe() put it, fd 3 or above, and the child writes
 *        there: an inherited fd that is not stdin, stdout or stderr;
 *        fork-noexec: the forked child writes the lines itself with write(),
 *        beside a second thread, and never execs; fork-cloexec: fork-fd
 *        with a pipe made close-on-exec (pipe2), which the child makes
 *        inheritable between fork and exec, as Python's subprocess does
 *        with pass_fds; scm: the child, forked before the pipe exists,
 *        is sent its write end over a Unix socket (SCM_RIGHTS) and execs
 *        the shell on the fd it received; fork-cloexec-socket and
 *        scm-socket: the same with a socketpair in place of the pipe, which
 *        cannot be given a description of its own: greenhook in the exec'd
 *        shell recognises it by its mark; popen-fd: the shell of a
 *        popen(), which glibc spawns out of the posix_spawn hook's sight,
 *        writes to the pipe it inherited at fd 3 or above)
 * stdout: "lines=<n> last=<last line>" and the child's exit status.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The popen-fd mode's stream (its shell is reaped by pclose). */
static FILE *popened;

static void *idle_thread(void *arg)
{
    (void)arg;
    usleep(100000);
    return NULL;
}

/* The fork-noexec child: LINES lines written with write(2) on the inherited
 * pipe, while another thread exists (so that, patched, the writes go
 * through the hub). */
static void write_lines(int fd, long lines)
{
    pthread_t t;
    pthread_create(&t, NULL, idle_thread, NULL);
    char line[32];
    for (long i = 1; i <= lines; i++) {
        int len = snprintf(line, sizeof line, "line %ld\n", i);
        if (write(fd, line, len) != len) {
            perror("write");
            _exit(1);
        }
    }
    pthread_join(t, NULL);
}

/* The shell's script: LINES lines to stdout, or to fd `fd` if >= 0. */
static void make_script(char *script, size_t size, const char *lines, int fd)
{
    char redirect[24] = "";
    if (fd >= 0)
        snprintf(redirect, sizeof redirect, "exec >&%d; ", fd);
    snprintf(script, size, "%si=1; while [ $i -le %s ]; do echo line $i; i=$((i+1)); done", redirect, lines);
}

static int drain(int fd, pid_t pid);

/* The scm mode: the child exists before the pipe and gets its write end
 * over a Unix socket. */
/* A pipe, or with `socket` a connected pair of Unix stream sockets. */
static int channel(int p[2], int socket, int flags)
{
    if (socket)
        return socketpair(AF_UNIX, SOCK_STREAM | (flags & O_CLOEXEC ? SOCK_CLOEXEC : 0), 0, p);
    return pipe2(p, flags);
}

static int scm(const char *lines, int socket)
{
    int s[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) != 0) {
        perror("socketpair");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(s[0]);
        char byte, ctl[CMSG_SPACE(sizeof(int))];
        struct iovec iov = { &byte, 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
        if (recvmsg(s[1], &m, 0) != 1 || !CMSG_FIRSTHDR(&m)) {
            perror("recvmsg");
            _exit(1);
        }
        int fd;
        memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
        char script[160];
        make_script(script, sizeof script, lines, fd);
        execlp("sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    close(s[1]);
    int p[2];
    if (channel(p, socket, 0) != 0) {
        perror("pipe");
        return 1;
    }
    char byte = 'x', ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = { &byte, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &p[1], sizeof(int));
    if (sendmsg(s[0], &m, 0) != 1) {
        perror("sendmsg");
        return 1;
    }
    close(p[1]);
    close(s[0]);
    return drain(p[0], pid);
}

int main(int argc, char **argv)
{
    const char *lines = argc > 1 ? argv[1] : "20000";
    const char *how = argc > 2 ? argv[2] : "fork";
    if (!strncmp(how, "scm", 3))
        return scm(lines, !strcmp(how, "scm-socket"));
    int socket = !strcmp(how, "fork-cloexec-socket");
    int cloexec = !strncmp(how, "fork-cloexec", 12);
    int p[2];
    if (channel(p, socket, cloexec ? O_CLOEXEC : 0) != 0) {
        perror("pipe");
        return 1;
    }
    int at_fd = !strcmp(how, "fork-fd") || !strcmp(how, "spawn-fd") || cloexec || !strcmp(how, "popen-fd");
    char script[160];
    make_script(script, sizeof script, lines, at_fd ? p[1] : -1);
    pid_t pid;
    if (!strcmp(how, "spawn") || !strcmp(how, "spawn-fd")) {
        extern char **environ;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        if (!at_fd)
            posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&fa, p[0]);
        if (!at_fd)
            posix_spawn_file_actions_addclose(&fa, p[1]);
        char *args[] = { "sh", "-c", script, NULL };
        if (posix_spawnp(&pid, "sh", &fa, NULL, args, environ) != 0) {
            perror("posix_spawnp");
            return 1;
        }
        posix_spawn_file_actions_destroy(&fa);
    } else if (!strcmp(how, "popen-fd")) {
        popened = popen(script, "r");
        if (!popened) {
            perror("popen");
            return 1;
        }
        pid = 0;
    } else if (!strcmp(how, "fork-noexec")) {
        pid = fork();
        if (pid == 0) {
            close(p[0]);
            write_lines(p[1], atol(lines));
            _exit(0);
        }
    } else {
        pid = fork();
        if (pid == 0) {
            close(p[0]);
            if (!at_fd) {
                dup2(p[1], STDOUT_FILENO);
                close(p[1]);
            }
            if (cloexec)
                fcntl(p[1], F_SETFD, 0);
            execlp("sh", "sh", "-c", script, (char *)NULL);
            _exit(127);
        }
    }
    close(p[1]);
    return drain(p[0], pid);
}

/* Reads the child's lines from `fd` slowly (the pipe fills up), then
 * reaps it and prints what arrived. */
static int drain(int fd, pid_t pid)
{
    char buf[512], last[64] = "";
    long n = 0, len = 0;
    char cur[64];
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] == '\n') {
                cur[len] = 0;
                strcpy(last, cur);
                n++;
                len = 0;
            } else if (len < 63) {
                cur[len++] = buf[i];
            }
        }
        usleep(200); /* drain slowly so the pipe fills up */
    }
    int st = 0;
    if (popened)
        st = pclose(popened);
    else
        waitpid(pid, &st, 0);
    printf("lines=%ld last=%s status=%d\n", n, last, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}
