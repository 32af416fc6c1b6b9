/*
 * openmp_pool: GCC's OpenMP runtime (libgomp), whose team threads wait on
 * futexes by the `syscall` instruction itself. Under greenhook its threads
 * stay OS threads; this checks that OpenMP programs run as without it.
 *
 * usage: openmp_pool [CHECK...]   (no argument: every check)
 *   root:       parallel for with a reduction, barriers, a critical
 *               section, atomics, omp locks and tasks, from main
 *   cpus:       a team of 4 is 4 OS threads while it runs
 *   from_thread: two pthreads each run parallel regions (each its own
 *               team), while a third sleeps and counts its wake-ups
 *   mask:       a team's threads start with the signal mask of the thread
 *               that started the team
 *
 * stdout: one line per check, "name: ...", deterministic.
 * A wrong result: "FAIL <name>: ..." on stderr, exit 1; alarm(20).
 */
// cflags: -fopenmp
#define _GNU_SOURCE
#include <dirent.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "check.h"

/* One round of everything a team does, from whichever thread starts it;
 * returns a value that depends on every part. */
static long team_work(int round)
{
    long sum = 0, critical = 0, atomic = 0, locked = 0, tasks = 0;
    omp_lock_t lock;
    omp_init_lock(&lock);
#pragma omp parallel num_threads(4)
    {
#pragma omp for reduction(+ : sum) schedule(dynamic, 64)
        for (long i = 0; i < 20000; i++)
            sum += (i * (round + 1)) % 97;
#pragma omp barrier
        for (int i = 0; i < 100; i++) {
#pragma omp critical
            critical++;
#pragma omp atomic
            atomic += 2;
            omp_set_lock(&lock);
            locked += 3;
            omp_unset_lock(&lock);
        }
#pragma omp single
        for (int i = 0; i < 40; i++) {
#pragma omp task
            {
#pragma omp atomic
                tasks += i;
            }
        }
    }
    omp_destroy_lock(&lock);
    return sum + critical + atomic + locked + tasks;
}

static void check_root(void)
{
    long total = 0;
    for (int r = 0; r < 50; r++)
        total += team_work(r);
    int size = 0;
#pragma omp parallel num_threads(4)
#pragma omp single
    size = omp_get_num_threads();
    result("team of %d, total %ld", size, total);
    EXPECT_EQ("team size", size, 4);
}

/* The entries of /proc/self/task: the process's OS threads. */
static int os_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        fail("opendir /proc/self/task: %s", strerror(errno));
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void check_cpus(void)
{
    int seen = 0;
#pragma omp parallel num_threads(4)
    {
#pragma omp barrier
#pragma omp master
        seen = os_threads();
#pragma omp barrier
    }
    result("a team of 4 runs on at least 4 OS threads: %s", seen >= 4 ? "yes" : "no");
}

static long from_thread_totals[2];

static void *team_starter(void *arg)
{
    long i = (long)arg, total = 0;
    for (int r = 0; r < 30; r++)
        total += team_work(r + (int)i);
    from_thread_totals[i] = total;
    return NULL;
}

static volatile int teams_done;

static void *sleeper(void *arg)
{
    (void)arg;
    long wakes = 0;
    while (!teams_done || wakes < 5) {
        msleep(1);
        wakes++;
    }
    return (void *)wakes;
}

static void check_from_thread(void)
{
    pthread_t s = spawn(sleeper, NULL);
    pthread_t a = spawn(team_starter, (void *)0), b = spawn(team_starter, (void *)1);
    join(a);
    join(b);
    teams_done = 1;
    long wakes = (long)join(s);
    result("totals %ld %ld, the sleeper woke: %s", from_thread_totals[0], from_thread_totals[1],
           wakes >= 5 ? "yes" : "no");
}

static int worker_blocked_usr1 = -1;

static void *masked_starter(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() == 1) {
        sigset_t cur;
        pthread_sigmask(SIG_BLOCK, NULL, &cur);
        worker_blocked_usr1 = sigismember(&cur, SIGUSR1);
    }
    return NULL;
}

static void check_mask(void)
{
    join(spawn(masked_starter, NULL));
    result("a worker of a thread blocking SIGUSR1 blocks it: %d", worker_blocked_usr1);
    EXPECT_EQ("worker's mask", worker_blocked_usr1, 1);
}

static const struct check checks[] = {
    { "root", check_root },
    { "cpus", check_cpus },
    { "from_thread", check_from_thread },
    { "mask", check_mask },
};

int main(int argc, char **argv)
{
    return run_checks(argc, argv, checks, sizeof checks / sizeof *checks);
}
