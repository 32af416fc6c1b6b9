/*
 * thread_ids: every thread has a thread id of its own, and the calls that
 * take one name that thread.
 *
 * - gettid() and syscall(SYS_gettid) agree; main's is getpid(); each
 *   thread's differs from main's and from every other live thread's;
 * - tgkill(), syscall(SYS_tgkill), syscall(SYS_tkill) and
 *   syscall(SYS_rt_tgsigqueueinfo) with a thread's id run the handler in
 *   that thread (whether sent by main, by another thread or by one made
 *   with libc's own pthread_create), where
 *   gettid() is that thread's, and with main's id in main; signal 0 checks
 *   the thread;
 * - a timer_create() notification to a thread's own id (SIGEV_THREAD_ID)
 *   is made and fires;
 * - bad input: a wrong thread group, an id <= 0, a signal out of range,
 *   the id of a thread that was joined;
 * - setpriority/getpriority(PRIO_PROCESS, id) and sched_setaffinity/
 *   sched_getaffinity(id) from main act on that thread alone;
 * - kill() with a thread's id signals the process;
 * - /proc/self/task/<id>/ opens while the thread lives;
 * - a thread that forks is its child's main thread: gettid() == getpid().
 *
 * Under the preload every fiber's gettid() was its OS thread's (main's):
 * a check of `gettid() == getpid()` took every thread for main, and a
 * signal sent to a thread's id ran its handler in whatever ran.
 *
 * stdout: the same with and without the preload.
 */
#define _GNU_SOURCE
#include "libc_create.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 3

static pid_t ids[N];
static pthread_t handles[N];
static sem_t ready, go_on;
static volatile sig_atomic_t stop;
static volatile pthread_t got; /* where the last handler ran */
static volatile pid_t got_id;  /* and what gettid() said there */
static volatile sig_atomic_t handled;
static volatile int got_value;

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)sig;
    (void)ctx;
    got = pthread_self();
    got_id = gettid();
    got_value = info->si_code == SI_QUEUE ? info->si_value.sival_int : -1;
    handled++;
}

static volatile sig_atomic_t fired;

static void on_timer(int sig)
{
    (void)sig;
    fired = 1;
}

static const char *who(pthread_t t)
{
    static char buf[16];
    if (pthread_equal(t, handles[0]))
        return "thread 0";
    for (int i = 1; i < N; i++)
        if (pthread_equal(t, handles[i])) {
            snprintf(buf, sizeof buf, "thread %d", i);
            return buf;
        }
    return "main";
}

static void *body(void *arg)
{
    long i = (long)arg;
    ids[i] = gettid();
    pid_t by_syscall = (pid_t)syscall(SYS_gettid);
    printf("thread %ld: syscall agrees %d, is main %d\n", i, by_syscall == ids[i], ids[i] == getpid());
    if (i == 0) {
        /* A timer whose signal goes to this thread's id. */
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = SIGUSR2;
        ev._sigev_un._tid = ids[i];
        timer_t timer;
        int r = timer_create(CLOCK_MONOTONIC, &ev, &timer);
        struct itimerspec in = {.it_value = {0, 1000000}};
        if (r == 0)
            timer_settime(timer, 0, &in, NULL);
        for (int k = 0; k < 2000 && !fired; k++)
            usleep(1000);
        printf("thread 0: timer to its own id: %d, fired %d\n", r, (int)fired);
        if (r == 0)
            timer_delete(timer);
    }
    sem_post(&ready);
    /* Live until main says: a handler sent to this thread runs here. */
    while (!stop)
        usleep(1000);
    return NULL;
}

/* Waits (by sleeping, so every other thread runs) for the handler. */
static void settle(int before)
{
    for (int i = 0; i < 2000 && handled == before; i++)
        usleep(1000);
}

static void send_and_report(const char *how, int target, long r)
{
    printf("%s to %s: %ld", how, target < 0 ? "main" : (target == 0 ? "thread 0" : target == 1 ? "thread 1" : "thread 2"),
           r);
    printf(", ran in %s, its gettid %s\n", who(got),
           got_id == (target < 0 ? getpid() : ids[target]) ? "the target's" : "another");
}

static long send(int how, pid_t tid)
{
    int before = handled;
    long r;
    if (how == 0)
        r = tgkill(getpid(), tid, SIGUSR1);
    else if (how == 1)
        r = syscall(SYS_tgkill, getpid(), tid, SIGUSR1);
    else if (how == 2)
        r = syscall(SYS_tkill, tid, SIGUSR1);
    else {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        info.si_signo = SIGUSR1;
        info.si_code = SI_QUEUE;
        info.si_pid = getpid();
        info.si_uid = getuid();
        info.si_value.sival_int = 42;
        r = syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SIGUSR1, &info);
    }
    settle(before);
    return r;
}

static void *sender(void *arg)
{
    (void)arg;
    got = 0;
    long r = send(0, ids[2]);
    send_and_report("tgkill from thread 1", 2, r);
    got = 0;
    r = send(0, getpid());
    send_and_report("tgkill from thread 1", -1, r);
    return NULL;
}

static void *forks(void *arg)
{
    (void)arg;
    pid_t me = gettid();
    pid_t child = fork();
    if (child == 0)
        _exit(gettid() == getpid() && (pid_t)syscall(SYS_gettid) == getpid() && gettid() != me ? 0 : 1);
    int status;
    waitpid(child, &status, 0);
    printf("forked from a thread: the child's gettid is its pid: %d; the parent's is unchanged: %d\n",
           WIFEXITED(status) && WEXITSTATUS(status) == 0, gettid() == me);
    return NULL;
}

static void errno_of(const char *what, long r)
{
    printf("%s: %ld %s\n", what, r, r == -1 ? strerror(errno) : "");
}

/* A thread made with libc's own pthread_create (as a library's background
 * thread is): a fiber's id reaches that fiber from it too. */
static void *foreign(void *arg)
{
    (void)arg;
    pid_t me = gettid();
    printf("foreign thread: its id is its own %d\n", me != getpid() && me != ids[0] && me != ids[1] && me != ids[2]);
    errno_of("foreign thread: tgkill signal 0 to thread 1", tgkill(getpid(), ids[1], 0));
    errno_of("foreign thread: tgkill to an id never given", tgkill(getpid(), 2147483000, SIGUSR1));
    got = 0;
    long r = send(0, ids[1]);
    send_and_report("tgkill from the foreign thread", 1, r);
    got = 0;
    r = send(2, ids[2]);
    send_and_report("tkill from the foreign thread", 2, r);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGUSR2, on_timer);
    sem_init(&ready, 0, 0);
    sem_init(&go_on, 0, 0);
    printf("main: gettid is getpid %d, syscall agrees %d\n", gettid() == getpid(),
           (pid_t)syscall(SYS_gettid) == gettid());
    for (long i = 0; i < N; i++) {
        pthread_create(&handles[i], NULL, body, (void *)i);
        sem_wait(&ready);
    }
    int distinct = 1;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            if (i != j && ids[i] == ids[j])
                distinct = 0;
    printf("ids distinct: %d, none is main's: %d\n", distinct,
           ids[0] != getpid() && ids[1] != getpid() && ids[2] != getpid());

    const char *hows[] = {"tgkill", "syscall(SYS_tgkill)", "syscall(SYS_tkill)", "syscall(SYS_rt_tgsigqueueinfo)"};
    for (int how = 0; how < 4; how++)
        for (int t = 0; t < N; t++) {
            got = 0;
            long r = send(how, ids[t]);
            send_and_report(hows[how], t, r);
        }
    printf("the queued value: %d\n", got_value);
    got = 0;
    send_and_report("tgkill", -1, send(0, getpid()));
    pthread_t s;
    pthread_create(&s, NULL, sender, NULL);
    pthread_join(s, NULL);

    libc_pthread_create(&s, foreign, NULL);
    pthread_join(s, NULL);

    errno_of("tgkill signal 0 to thread 1", tgkill(getpid(), ids[1], 0));
    errno_of("tgkill to thread 1 of another group", tgkill(1, ids[1], 0));
    errno_of("tgkill to id 0", tgkill(getpid(), 0, 0));
    errno_of("tgkill to id -5", tgkill(getpid(), -5, SIGUSR1));
    errno_of("tgkill in group 0", tgkill(0, ids[1], 0));
    errno_of("tgkill signal 999 to thread 1", tgkill(getpid(), ids[1], 999));
    errno_of("tkill signal 0 to thread 1", syscall(SYS_tkill, ids[1], 0));

    /* Per-thread settings by id, from main: that thread's alone. */
    int base = getpriority(PRIO_PROCESS, 0);
    errno_of("setpriority of thread 0", setpriority(PRIO_PROCESS, ids[0], base + 3));
    printf("nice: thread 0 %+d, thread 1 %+d, main %+d\n", getpriority(PRIO_PROCESS, ids[0]) - base,
           getpriority(PRIO_PROCESS, ids[1]) - base, getpriority(PRIO_PROCESS, 0) - base);
    cpu_set_t all, one, seen;
    sched_getaffinity(0, sizeof all, &all);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    errno_of("sched_setaffinity of thread 0", sched_setaffinity(ids[0], sizeof one, &one));
    sched_getaffinity(ids[0], sizeof seen, &seen);
    int t0 = CPU_COUNT(&seen);
    sched_getaffinity(ids[1], sizeof seen, &seen);
    int t1 = CPU_COUNT(&seen);
    sched_getaffinity(0, sizeof seen, &seen);
    printf("CPUs: thread 0 %d, thread 1 %s, main %s\n", t0, t1 == CPU_COUNT(&all) ? "all" : "fewer",
           CPU_COUNT(&seen) == CPU_COUNT(&all) ? "all" : "fewer");

    /* kill() with a thread's id: the process. */
    got = 0;
    int before = handled;
    errno_of("kill signal 0 to thread 2's id", kill(ids[2], 0));
    long r = kill(ids[2], SIGUSR1);
    settle(before);
    printf("kill to thread 2's id: %ld, handled %d\n", r, handled > before);

    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", ids[1]);
    int fd = open(path, O_RDONLY);
    printf("open /proc/self/task/<thread 1>/stat: %s\n", fd >= 0 ? "ok" : strerror(errno));
    if (fd >= 0)
        close(fd);
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", getpid(), ids[1]);
    FILE *f = fopen(path, "r");
    printf("fopen /proc/<pid>/task/<thread 1>/status: %s\n", f ? "ok" : strerror(errno));
    if (f)
        fclose(f);

    stop = 1;
    for (int i = 0; i < N; i++)
        pthread_join(handles[i], NULL);
    /* A join returns once the kernel cleared the thread's id word, a
     * moment before the kernel lets the thread go: until then its id
     * still answers (natively). */
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 1000 && tgkill(getpid(), ids[i], 0) == 0; k++)
            usleep(1000);
    errno_of("tgkill signal 0 to joined thread 1", tgkill(getpid(), ids[1], 0));
    errno_of("tkill to joined thread 1", syscall(SYS_tkill, ids[1], SIGUSR1));
    errno_of("setpriority of joined thread 0", setpriority(PRIO_PROCESS, ids[0], base + 4));
    errno_of("sched_getaffinity of joined thread 0", sched_getaffinity(ids[0], sizeof seen, &seen));
    errno_of("kill signal 0 to joined thread 2's id", kill(ids[2], 0));

    /* A thread that forks: the child's only thread, so its main. */
    pthread_t forker;
    pthread_create(&forker, NULL, forks, NULL);
    pthread_join(forker, NULL);
    return 0;
}
