/*
 * exit_paths: how a process with other threads ends.
 *
 * usage: exit_paths MODE
 *   pthread_exit_main  main registers an atexit handler and a TSD key with a
 *                      destructor, starts 3 workers that sleep 100/200/300 ms
 *                      and print, pushes two cleanup handlers, then calls
 *                      pthread_exit(NULL) (which runs them, inner first). POSIX: the
 *                      process goes on until the last thread ends, then
 *                      exits with status 0 (glibc: the last thread calls
 *                      exit(0), so atexit handlers run and stdio is flushed).
 *                      Exit status 0.
 *   exit_from_thread   threads are blocked in sleep(30), read() on an empty
 *                      pipe, pthread_cond_wait, pthread_mutex_lock on a mutex
 *                      main holds; main is blocked in pthread_join; after
 *                      100 ms another thread calls exit(3). The atexit handler
 *                      runs and prints. Exit status 3, promptly (not 30 s).
 *   _exit_from_thread  the same, but the thread calls _exit(4): no atexit
 *                      handler, exit status 4.
 *   main_return        the same blocked threads; main sleeps 100 ms and
 *                      returns 0 from main(). The atexit handler runs. Exit
 *                      status 0, promptly.
 *
 * stdout (deterministic, each line flushed when printed):
 *   pthread_exit_main: "main: pthread_exit", the inner then the outer
 *                      cleanup handler, "main tsd destructor: ran",
 *                      "worker 0: done", "worker 1: done", "worker 2: done",
 *                      "atexit: ran"
 *   exit_from_thread:  "main: threads blocked", "exiter: calling exit(3)",
 *                      "atexit: ran"
 *   _exit_from_thread: "main: threads blocked", "exiter: calling _exit(4)"
 *   main_return:       "main: threads blocked", "main: returning 0",
 *                      "atexit: ran"
 * stderr: time_ms=<time from start to the atexit handler, or to _exit>
 * alarm(20): a process that does not end turns into a SIGALRM death.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long g_t0;
static pthread_mutex_t g_held = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_pipe[2];
static int g_underscore;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000L;
}

static void say(const char *s)
{
    printf("%s\n", s);
    fflush(stdout);
}

static void at_exit_handler(void)
{
    fprintf(stderr, "time_ms=%lld\n", now_ms() - g_t0);
    say("atexit: ran");
}

static pthread_t spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, fn, arg);
    if (rc != 0) {
        fprintf(stderr, "pthread_create: %s\n", strerror(rc));
        exit(1);
    }
    return t;
}

/* ---- pthread_exit from main ---- */

static void *worker(void *arg)
{
    long i = (long)arg;
    usleep((useconds_t)(100000 * (i + 1)));
    char buf[32];
    snprintf(buf, sizeof buf, "worker %ld: done", i);
    say(buf);
    return NULL;
}

static void main_tsd_destructor(void *p)
{
    (void)p;
    say("main tsd destructor: ran");
}

static void main_cleanup(void *p)
{
    say(p);
}

static void pthread_exit_main(void)
{
    pthread_key_t key;
    pthread_key_create(&key, main_tsd_destructor);
    pthread_setspecific(key, (void *)1);
    for (long i = 0; i < 3; i++)
        pthread_detach(spawn(worker, (void *)i));
    pthread_cleanup_push(main_cleanup, "main cleanup handler: outer");
    pthread_cleanup_push(main_cleanup, "main cleanup handler: inner");
    say("main: pthread_exit");
    pthread_exit(NULL);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
}

/* ---- threads blocked in various calls ---- */

static void *sleeper(void *arg)
{
    (void)arg;
    sleep(30);
    fprintf(stderr, "sleeper woke up: the process should have exited\n");
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    char c;
    ssize_t n = read(g_pipe[0], &c, 1);
    fprintf(stderr, "reader returned %zd: the process should have exited\n", n);
    return NULL;
}

static void *cond_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_cm);
    for (;;)
        pthread_cond_wait(&g_cv, &g_cm);
    return NULL;
}

static void *mutex_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_held);
    fprintf(stderr, "mutex_waiter got the mutex: the process should have exited\n");
    return NULL;
}

static void *exiter(void *arg)
{
    (void)arg;
    usleep(100000);
    if (g_underscore) {
        say("exiter: calling _exit(4)");
        fprintf(stderr, "time_ms=%lld\n", now_ms() - g_t0);
        _exit(4);
    }
    say("exiter: calling exit(3)");
    exit(3);
}

static pthread_t start_blocked_threads(void)
{
    if (pipe(g_pipe) != 0) {
        perror("pipe");
        exit(1);
    }
    pthread_mutex_lock(&g_held);
    pthread_t s = spawn(sleeper, NULL);
    spawn(reader, NULL);
    spawn(cond_waiter, NULL);
    spawn(mutex_waiter, NULL);
    usleep(20000); /* let them block */
    return s;
}

int main(int argc, char **argv)
{
    alarm(20);
    g_t0 = now_ms();
    if (argc != 2) {
        fprintf(stderr, "usage: %s pthread_exit_main|exit_from_thread|_exit_from_thread|main_return\n", argv[0]);
        return 1;
    }
    atexit(at_exit_handler);
    const char *mode = argv[1];
    if (!strcmp(mode, "pthread_exit_main")) {
        pthread_exit_main();
    } else if (!strcmp(mode, "exit_from_thread") || !strcmp(mode, "_exit_from_thread")) {
        g_underscore = mode[0] == '_';
        pthread_t s = start_blocked_threads();
        say("main: threads blocked");
        spawn(exiter, NULL);
        pthread_join(s, NULL);
        fprintf(stderr, "main's join returned: the process should have exited\n");
        return 1;
    } else if (!strcmp(mode, "main_return")) {
        start_blocked_threads();
        say("main: threads blocked");
        usleep(100000);
        say("main: returning 0");
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 1;
}
