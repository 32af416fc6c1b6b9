/*
 * segv_sent: a SIGSEGV that is sent (raise, kill, pthread_kill,
 * sigqueue, another process's kill) rather than caused by a fault, and
 * what sigaction says of SIGSEGV, once a thread has run. Each case runs
 * in a child of its own, which makes a thread first; the parent prints
 * how the child ended.
 *
 * Under the preload the first thread installs greenhook's stack overflow
 * reporter as the SIGSEGV handler. It used to take a sent SIGSEGV for a
 * fault it did not recognise, set the default action back and return, so
 * the signal was lost: `raise(SIGSEGV)` in a thread returned and the
 * program went on (exit 0 instead of death by SIGSEGV). And `sigaction`
 * reported that handler, not the program's SIG_DFL.
 *
 * stdout: the same with and without the preload.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *how;

static void send_segv(void)
{
    if (strcmp(how, "raise") == 0) {
        raise(SIGSEGV);
    } else if (strcmp(how, "kill") == 0) {
        kill(getpid(), SIGSEGV);
    } else if (strcmp(how, "pthread_kill") == 0) {
        pthread_kill(pthread_self(), SIGSEGV);
    } else if (strcmp(how, "sigqueue") == 0) {
        union sigval v = {.sival_int = 7};
        sigqueue(getpid(), SIGSEGV, v);
    } else if (strcmp(how, "fault") == 0) {
        volatile int *p = NULL;
        *p = 1;
    }
    /* A signal sent to the process may be taken a little later. */
    usleep(100 * 1000);
}

static void *sender(void *arg)
{
    (void)arg;
    send_segv();
    return NULL;
}

static void *nothing(void *arg)
{
    return arg;
}

static void one_thread(void *(*f)(void *))
{
    pthread_t t;
    pthread_create(&t, NULL, f, NULL);
    pthread_join(t, NULL);
}

static const char *name(void (*h)(int))
{
    return h == SIG_DFL ? "SIG_DFL" : h == SIG_IGN ? "SIG_IGN" : "a handler";
}

static volatile sig_atomic_t handled;

static void on_segv(int sig)
{
    (void)sig;
    handled++;
}

/* One case, in the child. */
static void child(const char *c)
{
    if (strcmp(c, "ignored_before") == 0) {
        signal(SIGSEGV, SIG_IGN);
        one_thread(sender);
    } else if (strcmp(c, "ignored_after") == 0) {
        one_thread(nothing);
        signal(SIGSEGV, SIG_IGN);
        one_thread(sender);
    } else if (strcmp(c, "handler_after") == 0) {
        one_thread(nothing);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_segv;
        sigaction(SIGSEGV, &sa, NULL);
        one_thread(sender);
        printf("  handler ran %d time(s)\n", (int)handled);
    } else if (strcmp(c, "main") == 0) {
        one_thread(nothing);
        send_segv();
    } else if (strcmp(c, "query") == 0) {
        one_thread(nothing);
        struct sigaction now, old, sa;
        sigaction(SIGSEGV, NULL, &now);
        printf("  after a thread: %s, flags %#x\n", name(now.sa_handler), now.sa_flags & ~0x04000000);
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_segv;
        sigaction(SIGSEGV, &sa, &old);
        printf("  replaced by a handler: it was %s\n", name(old.sa_handler));
        signal(SIGSEGV, SIG_IGN);
        one_thread(nothing);
        printf("  set to SIG_IGN, then a thread: %s\n", name(signal(SIGSEGV, SIG_DFL)));
        one_thread(nothing);
        sigaction(SIGSEGV, NULL, &now);
        printf("  set back to SIG_DFL, then a thread: %s\n", name(now.sa_handler));
    } else if (strcmp(c, "query_ignored_before") == 0) {
        signal(SIGSEGV, SIG_IGN);
        one_thread(nothing);
        printf("  set to SIG_IGN before a thread: %s\n", name(signal(SIGSEGV, SIG_IGN)));
    } else {
        one_thread(sender);
    }
    printf("  went on\n");
}

static void report(int status)
{
    if (WIFSIGNALED(status))
        printf("  killed by signal %d\n", WTERMSIG(status));
    else
        printf("  exited %d\n", WEXITSTATUS(status));
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    static const char *sends[] = {"raise", "kill", "pthread_kill", "sigqueue", "fault"};
    static const char *cases[] = {
        "thread", "main", "ignored_before", "ignored_after", "handler_after", "query", "query_ignored_before",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (size_t j = 0; j < sizeof sends / sizeof *sends; j++) {
            const char *c = cases[i];
            int queries = strncmp(c, "query", 5) == 0;
            if (queries && j > 0)
                break;
            /* A handled fault would run again for good (an ignored one
             * kills: the kernel puts the default action back). */
            if (strcmp(sends[j], "fault") == 0 && strstr(c, "handler"))
                continue;
            how = sends[j];
            if (queries)
                printf("%s:\n", c);
            else
                printf("%s, %s:\n", c, how);
            pid_t pid = fork();
            if (pid == 0) {
                struct rlimit no_core = {0, 0};
                setrlimit(RLIMIT_CORE, &no_core);
                child(c);
                exit(0);
            }
            int status;
            waitpid(pid, &status, 0);
            report(status);
        }
    }

    /* From another process: a child with a thread waits; we kill it. */
    printf("from outside:\n");
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        one_thread(nothing);
        if (write(p[1], "r", 1) != 1)
            exit(2);
        for (int i = 0; i < 50; i++)
            usleep(100 * 1000);
        printf("  went on\n");
        exit(0);
    }
    char r;
    if (read(p[0], &r, 1) != 1)
        return 1;
    kill(pid, SIGSEGV);
    int status;
    waitpid(pid, &status, 0);
    report(status);
    return 0;
}
