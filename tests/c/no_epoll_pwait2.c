/*
 * no_epoll_pwait2: fine timed waits between threads on a system whose
 * kernel refuses epoll_pwait2 (Linux before 5.11, or a seccomp filter
 * like the one this program installs first, answering ENOSYS).
 *
 * usage: no_epoll_pwait2
 *
 * Under the preload the hub waits with epoll_pwait2 when a timeout has a
 * part finer than a millisecond; refused, it must go on with
 * epoll_pwait's whole milliseconds: every sleep still ends, and none
 * early. Two threads sleep 300 µs 50 times each, a third 2 ms 10 times.
 *
 * stdout: "filter: ..." then each thread's count and whether any sleep
 * ended early; the same with and without the preload.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif

static int install_filter(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_epoll_pwait2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

struct job {
    long us;
    int times;
    int done;
    int early;
};

static void *sleeper(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < j->times; i++) {
        double a = now_us();
        usleep(j->us);
        if (now_us() - a < j->us)
            j->early++;
        j->done++;
    }
    return NULL;
}

int main(void)
{
    int f = install_filter();
    /* The filter's answer, as a program would meet it. */
    long r = syscall(SYS_epoll_pwait2, -1, NULL, 0, NULL, NULL, 0);
    printf("filter: %s, epoll_pwait2 -> %ld (%s)\n", f == 0 ? "installed" : "refused", r,
           r < 0 && errno == ENOSYS ? "ENOSYS" : "other");
    struct job jobs[3] = {{300, 50, 0, 0}, {300, 50, 0, 0}, {2000, 10, 0, 0}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, sleeper, &jobs[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 3; i++)
        printf("thread %d: %d sleeps of %ld us, %d early\n", i, jobs[i].done, jobs[i].us, jobs[i].early);
    return 0;
}
