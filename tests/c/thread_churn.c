/*
 * thread_churn: creates and ends N threads, W alive at a time, and prints
 * the resident set size as it goes: it must stay flat (issue 10: "no leak
 * per ended fiber"). Each thread uses what a thread's exit must clean up:
 * its `__thread` variables, malloc/free (glibc's per-thread cache),
 * strerror and strsignal of unknown numbers (glibc's per-thread buffers),
 * a C++-style thread_local destructor (__cxa_thread_atexit_impl), a
 * thread-specific value with a key destructor, and the dynamic TLS of a
 * library if one is given.
 *
 * usage: thread_churn N W [LIB]
 * stdout: "churn: N threads ended, W at a time, every destructor ran"
 * stderr: "rss_kib.<k>=<VmRSS>" after 1/10, 1/2 and all of the threads, and
 *         "time_ms=<total>"
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
// link: -ldl

extern int __cxa_thread_atexit_impl(void (*dtor)(void *), void *obj, void *dso_symbol);
extern void *__dso_handle;

static __thread long t_value;
static long g_tls_dtors, g_key_dtors;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t g_key;
static void (*g_lib_set)(int);

static void tls_dtor(void *p)
{
    (void)p;
    pthread_mutex_lock(&g_lock);
    g_tls_dtors++;
    pthread_mutex_unlock(&g_lock);
}

static void key_dtor(void *p)
{
    free(p);
    pthread_mutex_lock(&g_lock);
    g_key_dtors++;
    pthread_mutex_unlock(&g_lock);
}

static void *run(void *arg)
{
    t_value = (long)arg;
    char *p = malloc(64 + (t_value & 255));
    p[0] = 1;
    free(p);
    volatile size_t n = strlen(strerror(10000 + (int)(t_value & 7))) + strlen(strsignal(10000));
    (void)n;
    __cxa_thread_atexit_impl(tls_dtor, &t_value, &__dso_handle);
    pthread_setspecific(g_key, malloc(32));
    if (g_lib_set)
        g_lib_set((int)t_value);
    return NULL;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s N W [LIB]\n", argv[0]);
        return 1;
    }
    long n = atol(argv[1]), w = atol(argv[2]);
    if (argc > 3) {
        void *h = dlopen(argv[3], RTLD_NOW);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        g_lib_set = (void (*)(int))dlsym(h, "tls_lib_set");
    }
    pthread_key_create(&g_key, key_dtor);
    pthread_t *t = calloc((size_t)w, sizeof *t);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 * 1024);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long done = 0;
    while (done < n) {
        long batch = n - done < w ? n - done : w;
        for (long i = 0; i < batch; i++)
            if (pthread_create(&t[i], &a, run, (void *)(done + i)) != 0) {
                fprintf(stderr, "pthread_create failed at %ld\n", done + i);
                return 1;
            }
        for (long i = 0; i < batch; i++)
            pthread_join(t[i], NULL);
        long before = done;
        done += batch;
        if ((before < n / 10 && done >= n / 10) || (before < n / 2 && done >= n / 2) || done == n)
            fprintf(stderr, "rss_kib.%ld=%ld\n", done, rss_kib());
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "time_ms=%ld\n", (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    printf("churn: %ld threads ended, %ld at a time, %s\n", n, w,
           g_tls_dtors == n && g_key_dtors == n ? "every destructor ran" : "destructors missing");
    return 0;
}
