/* Threads that sleep a microsecond in a loop (a poll for a flag with
 * `usleep(1)` between looks). The kernel fires each such sleep within the
 * thread's timer slack (`PR_GET_TIMERSLACK`, 50 µs by default), so a
 * thread wakes about once a slack when nothing else fires timers on its
 * CPU (any other timer interrupt in the slack ends the sleep sooner).
 * Reported on stderr: the wake-ups of all threads (`wakeups=<n>`) and one
 * a slack for each (`per_slack=<n>`: THREADS × (MS / slack + 1)), against
 * which the test holds the patched run. stdout says whether any sleep ended early. With
 * SLACK_NS, each thread sets its slack first (`PR_SET_TIMERSLACK`); with
 * `busy`, one more thread yields in a loop, so the
 * sleepers' timers fire between turns of a busy run queue.
 *
 * usage: tiny_sleepers THREADS MS [SLACK_NS [busy]] */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static atomic_long wakeups, early;
static unsigned long slack_ns;

static void *yielder(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        sched_yield();
    return NULL;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *sleeper(void *arg)
{
    (void)arg;
    if (slack_ns && prctl(PR_SET_TIMERSLACK, slack_ns, 0, 0, 0) != 0) {
        perror("PR_SET_TIMERSLACK");
        exit(1);
    }
    while (!atomic_load(&stop)) {
        long long t0 = now_ns();
        usleep(1);
        if (now_ns() - t0 < 1000)
            atomic_fetch_add(&early, 1);
        atomic_fetch_add(&wakeups, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tiny_sleepers THREADS MS [SLACK_NS [busy]]\n");
        return 2;
    }
    int n = atoi(argv[1]), ms = atoi(argv[2]);
    if (n < 1 || n > 64 || ms < 1)
        return 2;
    if (argc > 3)
        slack_ns = strtoul(argv[3], NULL, 10);
    long slack = slack_ns ? (long)slack_ns : prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    int busy = argc > 4 && strcmp(argv[4], "busy") == 0;
    pthread_t t[64], y;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, sleeper, NULL);
    if (busy)
        pthread_create(&y, NULL, yielder, NULL);
    usleep(ms * 1000);
    atomic_store(&stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    if (busy)
        pthread_join(y, NULL);
    long per_slack = slack > 0 ? (long)n * (ms * 1000000L / slack + 1) : 0;
    fprintf(stderr, "wakeups=%ld\nper_slack=%ld\n", atomic_load(&wakeups), per_slack);
    printf("%d threads slept; early: %ld\n", n, atomic_load(&early));
    return 0;
}
