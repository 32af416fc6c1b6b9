/*
 * spawn_mask: a program started from a thread starts with that thread's
 * signal mask: the thread blocks SIGUSR1 and SIGTERM, then starts `grep
 * SigBlk /proc/self/status` by posix_spawn, posix_spawnp, posix_spawn
 * with an attribute that sets an empty mask, and fork + execv; main, whose
 * mask is empty, does the same by posix_spawnp.
 *
 * Under the preload a spawned child got the OS thread's mask, which is
 * what every thread blocks (nothing here): the thread's SIGTERM was not
 * blocked in its child.
 *
 * stdout: the same with and without the preload.
 */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char *argv_grep[] = {"grep", "SigBlk", "/proc/self/status", NULL};

static void wait_for(pid_t pid, int r)
{
    if (r != 0) {
        printf("  spawn failed: %s\n", strerror(r));
        return;
    }
    waitpid(pid, NULL, 0);
}

static void start_all(const char *who)
{
    pid_t pid;
    printf("%s, posix_spawnp:\n", who);
    wait_for(pid, posix_spawnp(&pid, "grep", NULL, NULL, argv_grep, environ));
    printf("%s, posix_spawn:\n", who);
    wait_for(pid, posix_spawn(&pid, "/usr/bin/grep", NULL, NULL, argv_grep, environ));
    printf("%s, posix_spawnp with an empty mask set:\n", who);
    posix_spawnattr_t a;
    posix_spawnattr_init(&a);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&a, &none);
    posix_spawnattr_setflags(&a, POSIX_SPAWN_SETSIGMASK);
    wait_for(pid, posix_spawnp(&pid, "grep", NULL, &a, argv_grep, environ));
    posix_spawnattr_destroy(&a);
    printf("%s, fork + execvp:\n", who);
    pid = fork();
    if (pid == 0) {
        execvp("grep", argv_grep);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
}

static void *thread(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    start_all("a thread that blocks SIGUSR1 and SIGTERM");
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    pthread_t t;
    pthread_create(&t, NULL, thread, NULL);
    pthread_join(t, NULL);
    start_all("main");
    return 0;
}
