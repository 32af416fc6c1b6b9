/*
 * lock_handler: a signal handler runs while its thread waits for a file
 * lock, and what it does is what the lock's holder waits for.
 *
 * A child process takes the lock (flock, or an fcntl F_SETLKW record
 * lock) and keeps it until a flag file exists (giving up after 5 s:
 * exit 1). The parent, with a thread alive (under greenhook the wait goes
 * to the offload pool), waits for the lock with a SIGALRM handler
 * (SA_RESTART) armed to make the flag file 300 ms in. Natively the handler
 * runs inside the wait, the child lets go, the restarted wait takes the
 * lock; a handler that ran only after the wait would leave the two
 * waiting for each other until the child gives up.
 *
 * usage: lock_handler flock|fcntl
 * stdout: the lock's result, and whether the child saw the flag.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define TICKER_MS 20
#include "ticker.h"

static char lockpath[64], flagpath[64];
static int use_fcntl;

static int take(int fd)
{
    if (!use_fcntl)
        return flock(fd, LOCK_EX);
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    return fcntl(fd, F_SETLKW, &l);
}

static void make_flag(int sig)
{
    (void)sig;
    int fd = open(flagpath, O_CREAT | O_WRONLY, 0600);
    if (fd >= 0)
        close(fd);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "flock") && strcmp(argv[1], "fcntl"))) {
        fprintf(stderr, "usage: lock_handler flock|fcntl\n");
        return 2;
    }
    use_fcntl = !strcmp(argv[1], "fcntl");
    snprintf(lockpath, sizeof lockpath, "/tmp/greenhook-lock-%d", (int)getpid());
    snprintf(flagpath, sizeof flagpath, "/tmp/greenhook-lockflag-%d", (int)getpid());
    int ready[2];
    if (pipe(ready) != 0)
        return 1;
    pid_t child = fork();
    if (child == 0) {
        int fd = open(lockpath, O_CREAT | O_RDWR, 0600);
        if (fd < 0 || take(fd) != 0)
            _exit(3);
        if (write(ready[1], "x", 1) != 1)
            _exit(3);
        for (int i = 0; i < 500; i++) {
            if (access(flagpath, F_OK) == 0)
                _exit(0);
            usleep(10000);
        }
        _exit(1);
    }
    char c;
    if (read(ready[0], &c, 1) != 1)
        return 1;

    pthread_t tick = ticker_start();
    struct sigaction sa = {.sa_handler = make_flag, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {.it_value = {0, 300000}};
    setitimer(ITIMER_REAL, &it, NULL);
    int fd = open(lockpath, O_RDWR);
    errno = 0;
    int r = take(fd);
    printf("%s: the wait gives %d (%s)\n", argv[1], r, r ? strerror(errno) : "locked");
    int st;
    waitpid(child, &st, 0);
    printf("the holder %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "saw the flag and let go" : "gave up waiting");
    ticker_stop(tick);
    unlink(lockpath);
    unlink(flagpath);
    return 0;
}
