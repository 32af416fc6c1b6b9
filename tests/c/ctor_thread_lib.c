/* A library whose constructor makes the process's first thread and joins
 * it, as OpenBLAS's does, while dlopen holds the loader's lock. */
#include <pthread.h>
#include <stdio.h>

static int ran;

static void *work(void *arg) {
    ran = *(int *)arg;
    return NULL;
}

__attribute__((constructor)) static void start(void) {
    int v = 42;
    pthread_t t;
    if (pthread_create(&t, NULL, work, &v) == 0) pthread_join(t, NULL);
}

int ctor_thread_ran(void) { return ran; }
