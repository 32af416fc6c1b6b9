/*
 * check.h: the harness shared by the check-style differential test programs
 * (fd_semantics, poll_select, pthread_misc, sync_prims).
 *
 * Each program lists its checks in `static const struct check checks[]` and
 * hands them to run_checks(): no arguments runs every check in order, else
 * only the named ones; unknown names fail. A wrong result calls fail(), which
 * prints "FAIL <check>: ..." on stderr and exits 1. alarm(20) turns a hang
 * into a death by SIGALRM. The whole run's time goes to stderr as time_ms=.
 * Also here: the helpers those programs share (deadline, EXPECT_EQ, result,
 * msleep, a one-shot event, spawn/spawn_detached/join).
 */
#ifndef GREENHOOK_CHECK_H
#define GREENHOOK_CHECK_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000L;
}

static inline const char *en(int e)
{
    if (e == 0)
        return "0";
    const char *s = strerrorname_np(e);
    return s ? s : "E?";
}

static const char *g_check = "?";

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", g_check);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* An absolute deadline `ms` from now on clock `clk`. */
static inline struct timespec deadline(clockid_t clk, long ms)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* A value (a return code or an errno) must be exactly `want`. */
#define EXPECT_EQ(what, got, want)                                                              \
    do {                                                                                        \
        long _g = (long)(got), _w = (long)(want);                                               \
        if (_g != _w)                                                                           \
            fail("%s: got %ld (%s), want %ld (%s)", what, _g, en((int)_g), _w, en((int)_w));    \
    } while (0)

/* One line of deterministic output for the current check: "check: ...". */
static inline void result(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", g_check);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

static inline void msleep(long ms)
{
    usleep((useconds_t)(ms * 1000));
}

/* A one-shot event: a flag guarded by a mutex and condvar. */
struct event {
    pthread_mutex_t m;
    pthread_cond_t c;
    int set;
};
#define EVENT_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 }

static inline void ev_set(struct event *e)
{
    pthread_mutex_lock(&e->m);
    e->set = 1;
    pthread_cond_broadcast(&e->c);
    pthread_mutex_unlock(&e->m);
}

static inline void ev_wait(struct event *e)
{
    pthread_mutex_lock(&e->m);
    while (!e->set)
        pthread_cond_wait(&e->c, &e->m);
    pthread_mutex_unlock(&e->m);
}

static inline void ev_reset(struct event *e)
{
    pthread_mutex_lock(&e->m);
    e->set = 0;
    pthread_mutex_unlock(&e->m);
}

#ifndef CHECK_CUSTOM_SPAWN
static inline pthread_t spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, fn, arg);
    if (rc != 0)
        fail("pthread_create: %s", strerror(rc));
    return t;
}
#endif

/* A thread created detached. */
static inline pthread_t spawn_detached(void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &a, fn, arg);
    pthread_attr_destroy(&a);
    if (rc != 0)
        fail("pthread_create: %s", strerror(rc));
    return t;
}

static inline void *join(pthread_t t)
{
    void *ret;
    int rc = pthread_join(t, &ret);
    if (rc != 0)
        fail("pthread_join: %s", strerror(rc));
    return ret;
}

/* One named check. */
struct check {
    const char *name;
    void (*fn)(void);
};

static inline int run_checks(int argc, char **argv, const struct check *checks, size_t n_checks)
{
    alarm(20);
    size_t n = n_checks;
    for (int a = 1; a < argc; a++) {
        size_t i;
        for (i = 0; i < n; i++)
            if (!strcmp(argv[a], checks[i].name))
                break;
        if (i == n) {
            fprintf(stderr, "unknown check %s\n", argv[a]);
            return 1;
        }
    }
    long long t0 = now_ms();
    for (size_t i = 0; i < n; i++) {
        int wanted = argc == 1;
        for (int a = 1; a < argc; a++)
            if (!strcmp(argv[a], checks[i].name))
                wanted = 1;
        if (!wanted)
            continue;
        g_check = checks[i].name;
        checks[i].fn();
    }
    fprintf(stderr, "time_ms=%lld\n", now_ms() - t0);
    return 0;
}

#endif
