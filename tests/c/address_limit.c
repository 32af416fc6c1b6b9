/*
 * address_limit: threads made under an address-space limit (RLIMIT_AS,
 * `ulimit -v`) that leaves 600 MiB above what the process uses: 20 with
 * the default stack, 20 with 64 KiB ones. Natively each default stack
 * takes 8 MiB of it. greenhook reserved its stacks in 1 GiB regions, one
 * per stack size, and every pthread_create failed under such a limit
 * (varnish's child waited for its threads for ever). Then, with the
 * threads joined, 300 MiB are allocated in one piece and written: the
 * region greenhook reserved was then as large as the limit allowed
 * (halving 1 GiB until it fit), and the allocation failed.
 *
 * stdout: how many of the 40 failed (deterministic: none), and whether
 * the allocation did.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The process's address space in KiB (VmSize). */
static long vm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = 0;
    if (!f)
        exit(1);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7))
            v = atol(line + 7);
    fclose(f);
    return v;
}

static void *body(void *a)
{
    usleep(10000);
    return a;
}

int main(void)
{
    struct rlimit r = {.rlim_cur = (vm_kib() + 600 * 1024) * 1024L, .rlim_max = RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &r))
        return 1;
    pthread_t t[40];
    pthread_attr_t small;
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, 64 * 1024);
    int failed = 0;
    for (int i = 0; i < 40; i++)
        if (pthread_create(&t[i], i % 2 ? &small : NULL, body, NULL)) {
            failed++;
            t[i] = 0;
        }
    for (int i = 0; i < 40; i++)
        if (t[i])
            pthread_join(t[i], NULL);
    printf("40 threads under an address-space limit: %d failed\n", failed);
    size_t big = (size_t)300 << 20;
    char *p = malloc(big);
    if (p)
        for (size_t i = 0; i < big; i += 1 << 20)
            p[i] = 1;
    printf("300 MiB allocated after them: %s\n", p ? "yes" : "no");
    free(p);
    return 0;
}
