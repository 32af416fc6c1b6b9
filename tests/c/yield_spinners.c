/* Threads that wait for work by yielding in a loop (a short spin, then
 * sched_yield: BEAM's schedulers, crossbeam's `Backoff::snooze`, many
 * spin-then-park pools) beside a round trip through two pipes: main writes
 * a byte, an echo thread blocked in read() sends it back. The kernel runs
 * the thread it woke for the byte before the yielders' next turns; the
 * spinners' yields during the round trips are reported on stderr as
 * `yields_per_trip=<n>` (their number is the test's: natively it depends
 * on the CPUs). stdout is the same in every mode.
 *
 * usage: yield_spinners SPINNERS TRIPS */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int there[2], back[2];
static atomic_int stop;
static atomic_long yields;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        for (int i = 0; i < 100; i++)
            __asm__ volatile("pause");
        sched_yield();
        atomic_fetch_add(&yields, 1);
    }
    return NULL;
}

static void *echo(void *arg)
{
    (void)arg;
    char c;
    while (read(there[0], &c, 1) == 1)
        if (write(back[1], &c, 1) != 1)
            break;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: yield_spinners SPINNERS TRIPS\n");
        return 2;
    }
    int n = atoi(argv[1]), trips = atoi(argv[2]);
    if (n < 0 || n > 64 || trips < 1 || pipe(there) || pipe(back))
        return 2;
    pthread_t e, s[64];
    pthread_create(&e, NULL, echo, NULL);
    for (int i = 0; i < n; i++)
        pthread_create(&s[i], NULL, spinner, NULL);
    long during = 0;
    for (int r = 0; r < trips; r++) {
        char c = (char)r, got;
        long before = atomic_load(&yields);
        if (write(there[1], &c, 1) != 1 || read(back[0], &got, 1) != 1 || got != c) {
            printf("round trip %d failed\n", r);
            return 1;
        }
        during += atomic_load(&yields) - before;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(s[i], NULL);
    close(there[1]);
    pthread_join(e, NULL);
    fprintf(stderr, "yields_per_trip=%ld\n", during / trips);
    printf("spinners=%d trips=%d ok\n", n, trips);
    return 0;
}
