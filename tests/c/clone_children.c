/* Children made by glibc's clone() wrapper, from a thread, beside a thread
 * that waits on a pipe:
 * - without CLONE_VM (a copy of our memory, as fork makes): the child
 *   closes both ends of that pipe, sleeps, reads a pipe of its own and
 *   reports a __thread value; the waiting thread must still get its byte;
 * - with CLONE_VM | CLONE_VFORK (a spawn helper sharing our memory): the
 *   child puts a pipe on its stdout, closes fds and execs `head -c 300000`,
 *   read only after a pause (blocking writes in the child), then one whose
 *   exec fails and reports errno through our memory, then one that prints
 *   its signal mask (its thread blocked SIGTERM).
 * Output must match unpatched. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STACK (256 * 1024)

static int waitpipe[2];
static __thread int mine;

static void *waiter(void *arg) {
    (void)arg;
    char c = 0;
    ssize_t n = read(waitpipe[0], &c, 1);
    printf("waiter read %zd '%c'\n", n, c);
    return NULL;
}

static int own[2];

static int copied_child(void *arg) {
    (void)arg;
    close(waitpipe[0]);
    close(waitpipe[1]);
    usleep(20000);
    char c = 0;
    if (read(own[0], &c, 1) != 1) return 90;
    return mine + (c == 'k');
}

static int out[2];
static int exec_errno;

static int spawn_child(void *arg) {
    const char **argv = arg;
    dup2(out[1], 1);
    close(out[1]);
    close(out[0]);
    execvp(argv[0], (char *const *)argv);
    exec_errno = errno; /* our memory: the parent reads it */
    _exit(127);
}

static char *stack(void) {
    char *s = malloc(STACK);
    return s + STACK;
}

static void spawn(const char **argv, int pause_ms) {
    if (pipe(out)) exit(2);
    exec_errno = 0;
    pid_t pid = clone(spawn_child, stack(), CLONE_VM | CLONE_VFORK | SIGCHLD, argv);
    close(out[1]);
    if (pause_ms) usleep(pause_ms * 1000);
    char buf[4096];
    long total = 0, nl = 0;
    ssize_t n;
    char first[64] = {0};
    while ((n = read(out[0], buf, sizeof buf)) > 0) {
        if (total == 0) memcpy(first, buf, n < 63 ? n : 63);
        for (ssize_t i = 0; i < n; i++) nl += buf[i] == '\n';
        total += n;
    }
    close(out[0]);
    int st;
    waitpid(pid, &st, 0);
    char *e = strchr(first, '\n');
    if (e) *e = 0;
    printf("%s: %ld bytes (%s), status %d, exec errno %s\n", argv[0], total, argv[1] && !strcmp(argv[1], "-c") ? "" : first,
           WEXITSTATUS(st), exec_errno ? strerror(exec_errno) : "none");
}

static void *spawner(void *arg) {
    (void)arg;
    mine = 4;
    if (pipe(own)) exit(2);
    pid_t pid = clone(copied_child, stack(), SIGCHLD, NULL);
    if (write(own[1], "k", 1) != 1) exit(2);
    int st;
    waitpid(pid, &st, 0);
    printf("copied child: status %d\n", WEXITSTATUS(st));

    const char *head[] = {"head", "-c", "300000", "/dev/zero", NULL};
    spawn(head, 200);
    const char *none[] = {"/nonexistent/greenhook-test", NULL};
    spawn(none, 0);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    const char *grep[] = {"grep", "SigBlk", "/proc/self/status", NULL};
    spawn(grep, 0);
    return NULL;
}

int main(void) {
    if (pipe(waitpipe)) return 2;
    pthread_t w, s;
    pthread_create(&w, NULL, waiter, NULL);
    usleep(50000); /* the waiter is in its read */
    pthread_create(&s, NULL, spawner, NULL);
    pthread_join(s, NULL);
    if (write(waitpipe[1], "x", 1) != 1) return 2;
    pthread_join(w, NULL);
    return 0;
}
