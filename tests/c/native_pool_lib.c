/*
 * native_pool_lib: a library that starts a thread from its own code, for
 * native_threads_from (GREENHOOK_NATIVE_THREADS_FROM names it).
 */
#include <pthread.h>

/* Runs `body` in a thread whose start routine is this library's. */
static void *start(void *body)
{
    return ((void *(*)(void))body)();
}

int pool_run(void *(*body)(void), void **ret)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, start, (void *)body);
    return rc ? rc : pthread_join(t, ret);
}
