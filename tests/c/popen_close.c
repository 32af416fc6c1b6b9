/*
 * popen_close: pclose(3) as programs with threads use it, compared with
 * glibc's own. Under greenhook pclose waits for the child on the hub.
 *
 *   a handler during the wait: the child waits for a file that a SIGALRM
 *   handler makes; the handler must run while pclose waits (glibc's
 *   waitpid runs it), or the two wait for each other for ever
 *   write: 200,000 bytes through fwrite, the last of them flushed by
 *   pclose, counted by the child; exit statuses; a child killed by
 *   SIGPIPE when pclose closes its pipe unread; a child another wait
 *   reaped first (-1, ECHILD); eight threads' pcloses at once
 *
 * usage: popen_close  (with a ticker that must keep ticking meanwhile)
 * stdout: one line per check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TICKER_MS 20
#include "ticker.h"

static char dir[64];
static char flag[96];

static void make_flag(int sig)
{
    (void)sig;
    int fd = open(flag, O_CREAT | O_WRONLY, 0600);
    if (fd >= 0)
        close(fd);
}

static void handler_during_wait(void)
{
    snprintf(flag, sizeof flag, "%s/flag", dir);
    struct sigaction sa = {.sa_handler = make_flag}; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "n=0; while [ ! -e %s ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n+1)); done; [ $n -lt 100 ]",
             flag);
    FILE *f = popen(cmd, "r");
    alarm(1);
    int st = pclose(f);
    printf("handler during the wait: pclose gives %d (exit %d)\n", st, WEXITSTATUS(st));
    signal(SIGALRM, SIG_DFL);
}

static void *closer(void *arg)
{
    long i = (long)arg;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "sleep 0.3; exit %ld", i);
    FILE *f = popen(cmd, "r");
    return (void *)(long)pclose(f);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(dir, sizeof dir, "/tmp/greenhook-pclose-%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) {
        perror("mkdir");
        return 1;
    }
    pthread_t tick = ticker_start();

    handler_during_wait();

    char cmd[256];
    snprintf(cmd, sizeof cmd, "wc -c > %s/count", dir);
    FILE *f = popen(cmd, "w");
    static char block[1000];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < 200; i++)
        fwrite(block, 1, sizeof block, f);
    int st = pclose(f);
    snprintf(cmd, sizeof cmd, "%s/count", dir);
    FILE *c = fopen(cmd, "r");
    long n = -1;
    if (!c || fscanf(c, "%ld", &n) != 1)
        n = -1;
    if (c)
        fclose(c);
    printf("write: pclose gives %d, the child counted %ld bytes\n", st, n);

    printf("status: exit 5 gives %d\n", pclose(popen("exit 5", "r")));
    st = pclose(popen("kill -9 $$", "r"));
    printf("status: a child killed by SIGKILL gives signalled %d, signal %d\n", WIFSIGNALED(st), WTERMSIG(st));
    f = popen("yes", "r");
    char line[16];
    fgets(line, sizeof line, f);
    st = pclose(f);
    printf("status: yes, closed unread: signalled %d, signal %d\n", WIFSIGNALED(st), WTERMSIG(st));

    f = popen("exit 2", "r");
    int any;
    pid_t reaped = wait(&any);
    errno = 0;
    st = pclose(f);
    printf("reaped elsewhere first: wait got %s, pclose gives %d, errno %s\n", reaped > 0 ? "the child" : "nothing", st,
           strerror(errno));

    pthread_t ts[8];
    for (long i = 0; i < 8; i++)
        pthread_create(&ts[i], NULL, closer, (void *)i);
    int sum = 0;
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(ts[i], &r);
        sum += WEXITSTATUS((int)(long)r);
    }
    printf("eight threads: the exit statuses add up to %d\n", sum);

    ticker_stop(tick);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
