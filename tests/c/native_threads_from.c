/*
 * native_threads_from: which threads are OS threads of their own. A thread
 * started by the program's code, then one started by a library loaded
 * with dlopen (argv[1]); each reports whether the kernel runs it as a
 * thread other than main's (/proc/thread-self names the OS thread).
 *
 * usage: native_threads_from LIBRARY
 * stdout: "program: own|shared" and "library: own|shared".
 */
// link: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "thread_self.h"

/* Where the caller runs (the library calls it back). */
static void *where(void)
{
    return (void *)os_thread_kind();
}

static void *start(void *arg)
{
    (void)arg;
    return where();
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: native_threads_from LIBRARY\n");
        return 2;
    }
    pthread_t t;
    void *r;
    if (pthread_create(&t, NULL, start, NULL) || pthread_join(t, &r))
        return 1;
    printf("program: %s\n", (char *)r);
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int (*pool_run)(void *(*)(void), void **) = (int (*)(void *(*)(void), void **))dlsym(lib, "pool_run");
    if (!pool_run || pool_run(where, &r))
        return 1;
    printf("library: %s\n", (char *)r);
    return 0;
}
