/*
 * deadlock: two threads take two mutexes in opposite orders (AB/BA) and
 * sleep in between, so each ends up waiting for the other's mutex; main
 * joins them. Unpatched this hangs forever (the test only runs it patched):
 * greenhook must report every fiber and what it waits on and exit 86.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;

static void *ab(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ab");
    pthread_mutex_lock(&a);
    usleep(20000);
    pthread_mutex_lock(&b);
    return NULL;
}

static void *ba(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ba");
    pthread_mutex_lock(&b);
    usleep(20000);
    pthread_mutex_lock(&a);
    return NULL;
}

int main(void)
{
    alarm(20);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, ab, NULL);
    pthread_create(&t2, NULL, ba, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    puts("no deadlock?");
    return 0;
}
