/*
 * libc_create.h: makes a thread with libc's own pthread_create, looked up
 * past any preloaded hook (as jemalloc makes its background thread), for
 * the tests of threads that are not fibers (foreign_thread, foreign_once).
 * Exits with a message when libc has none to give.
 */
#ifndef GREENHOOK_LIBC_CREATE_H
#define GREENHOOK_LIBC_CREATE_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static inline void libc_pthread_create(pthread_t *t, void *(*start)(void *), void *arg)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
        libc ? (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(libc, "pthread_create")
             : NULL;
    if (!create || create(t, NULL, start, arg) != 0) {
        printf("no libc pthread_create\n");
        exit(1);
    }
}

#endif
