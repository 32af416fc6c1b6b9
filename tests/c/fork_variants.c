/*
 * fork_variants: daemon() and _Fork() called from a thread while another
 * thread runs, compared with glibc. glibc makes both with its internal
 * fork, which no hook saw: the other threads' fibers went on running in
 * the child, where natively only the caller exists.
 *
 *   the other thread notes every tick it sees itself in a child
 *   the child (daemon's, or _Fork's) runs two threads of its own and a
 *   pipe round trip, then reports; daemon's child has /dev/null on fds
 *   0-2 and "/" as its directory, in a session of its own
 *
 * usage: fork_variants daemon|_Fork LOGFILE
 * stdout: what the log holds once the child is done, one line per kind.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern pid_t _Fork(void);

static int out;
static pid_t parent;
static const char *how;

static void *ticker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 30; i++) {
        usleep(10000);
        if (getpid() != parent)
            dprintf(out, "a thread of the parent ran in the child\n");
    }
    return NULL;
}

static void *child_thread(void *arg)
{
    usleep(10000);
    dprintf(out, "the child's thread %ld ran\n", (long)arg);
    return NULL;
}

static void child_work(void)
{
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, child_thread, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    int p[2];
    char c = 0;
    if (pipe(p) || write(p[1], "x", 1) != 1 || read(p[0], &c, 1) != 1)
        dprintf(out, "the child's pipe failed\n");
    if (strcmp(how, "daemon") == 0) {
        struct stat st;
        char cwd[64];
        int null = fstat(1, &st) == 0 && S_ISCHR(st.st_mode);
        dprintf(out, "daemon: fd 1 is /dev/null %d, cwd %s, session leader %d\n", null,
                getcwd(cwd, sizeof cwd) ? cwd : "?", getsid(0) == getpid());
    }
    usleep(200000); /* the parent's thread would tick meanwhile */
    dprintf(out, "child done\n");
}

static void *forker(void *arg)
{
    (void)arg;
    usleep(50000);
    if (strcmp(how, "daemon") == 0) {
        if (daemon(0, 0) == 0) {
            child_work();
            _exit(0);
        }
        dprintf(out, "daemon failed\n");
    } else {
        pid_t pid = _Fork();
        if (pid == 0) {
            child_work();
            _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        dprintf(out, "_Fork: the child exited %d\n", WEXITSTATUS(st));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    how = argv[1];
    out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    /* daemon's parent process ends in daemon(): fork first, and let that
       child be the process whose thread calls it. */
    pid_t outer = strcmp(how, "daemon") == 0 ? fork() : 0;
    if (outer == 0) {
        parent = getpid();
        pthread_t t, f;
        pthread_create(&t, NULL, ticker, NULL);
        pthread_create(&f, NULL, forker, NULL);
        pthread_join(f, NULL);
        pthread_join(t, NULL);
        if (strcmp(how, "daemon") == 0)
            _exit(1); /* daemon() returned in the parent: it failed */
    } else {
        waitpid(outer, NULL, 0);
    }
    /* Wait for the child's last line. */
    char buf[4096] = {0};
    for (int i = 0; i < 500 && !strstr(buf, "child done"); i++) {
        usleep(10000);
        int in = open(argv[2], O_RDONLY);
        ssize_t n = read(in, buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = 0;
        close(in);
    }
    usleep(50000);
    int in = open(argv[2], O_RDONLY);
    ssize_t n = read(in, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(in);
    /* One line per kind, with its count. */
    const char *kinds[] = {"a thread of the parent ran in the child", "the child's thread 0 ran",
                           "the child's thread 1 ran", "daemon: fd 1", "_Fork: the child exited",
                           "the child's pipe failed", "daemon failed", "child done"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        int count = 0;
        const char *line = NULL;
        for (char *s = buf; (s = strstr(s, kinds[k])); s++) {
            if (!line)
                line = s;
            count++;
        }
        if (count) {
            const char *end = strchr(line, '\n');
            printf("%d x %.*s\n", count, end ? (int)(end - line) : (int)strlen(line), line);
        }
    }
    unlink(argv[2]);
    return 0;
}
