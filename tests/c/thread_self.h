/*
 * thread_self.h: whether the caller runs on an OS thread of its own (one
 * other than main's), as the kernel says: /proc/thread-self names it. For
 * the tests of threads that stay OS threads under greenhook.
 */
#ifndef GREENHOOK_THREAD_SELF_H
#define GREENHOOK_THREAD_SELF_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "own" when the caller runs on an OS thread other than main's, else
 * "shared". */
static const char *os_thread_kind(void)
{
    char link[PATH_MAX];
    ssize_t n = readlink("/proc/thread-self", link, sizeof link - 1);
    if (n < 0) {
        perror("readlink /proc/thread-self");
        exit(1);
    }
    link[n] = 0;
    return atol(strrchr(link, '/') + 1) == getpid() ? "shared" : "own";
}

#endif
