/* cancel_cleanup: pthread_exit with cleanup handlers, deferred cancellation
 * (of a thread blocked in read() on a pipe, in pthread_cond_wait, in
 * nanosleep, and at pthread_testcancel after re-enabling), thread-specific
 * data destructors, and finally pthread_exit from main while another thread
 * finishes the program. Every thread records what happened in its own log;
 * main prints the logs in a fixed order, so stdout is deterministic. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NLOG 8
struct log {
    const char *name;
    char lines[NLOG][64];
    int n;
};

static void note(struct log *log, const char *what) {
    if (log->n < NLOG) snprintf(log->lines[log->n++], sizeof log->lines[0], "%s", what);
}

static void cleanup_a(void *arg) { note(arg, "cleanup a"); }
static void cleanup_b(void *arg) { note(arg, "cleanup b"); }

static void die(const char *what, int err) {
    fprintf(stderr, "cancel_cleanup: %s: %s\n", what, strerror(err));
    exit(2);
}

/* pthread_exit from a nested call: both handlers run, innermost first. */
static void exit_deep(struct log *log) {
    note(log, "exiting");
    pthread_exit((void *)42);
}
static void *exits_with_handlers(void *arg) {
    pthread_cleanup_push(cleanup_a, arg);
    pthread_cleanup_push(cleanup_b, arg);
    exit_deep(arg);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return NULL;
}

/* Cancelled while blocked in read() on a pipe nobody writes to. */
static int pipe_fds[2];
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;
static void mark_ready(void) {
    pthread_mutex_lock(&ready_lock);
    ready++;
    pthread_cond_broadcast(&ready_cond);
    pthread_mutex_unlock(&ready_lock);
}
static void wait_ready(int n) {
    pthread_mutex_lock(&ready_lock);
    while (ready < n) pthread_cond_wait(&ready_cond, &ready_lock);
    pthread_mutex_unlock(&ready_lock);
}
static void *blocked_in_read(void *arg) {
    char c;
    pthread_cleanup_push(cleanup_a, arg);
    note(arg, "reading");
    mark_ready();
    ssize_t r = read(pipe_fds[0], &c, 1);
    note(arg, r == 1 ? "read returned data" : "read returned");
    pthread_cleanup_pop(0);
    return NULL;
}

/* Cancelled in pthread_cond_wait: the handler unlocks the re-acquired mutex. */
static pthread_mutex_t cv_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct log *cv_log;
static void unlock_cv(void *arg) {
    note(cv_log, "cleanup unlocks the mutex");
    pthread_mutex_unlock(arg);
}
static void *blocked_in_cond_wait(void *arg) {
    cv_log = arg;
    pthread_mutex_lock(&cv_lock);
    pthread_cleanup_push(unlock_cv, &cv_lock);
    note(arg, "waiting");
    mark_ready();
    for (;;) pthread_cond_wait(&cv, &cv_lock);
    pthread_cleanup_pop(1);
    return NULL;
}

/* Cancelled in nanosleep. */
static void *blocked_in_sleep(void *arg) {
    pthread_cleanup_push(cleanup_b, arg);
    note(arg, "sleeping");
    mark_ready();
    struct timespec ts = {30, 0};
    nanosleep(&ts, NULL);
    note(arg, "slept");
    pthread_cleanup_pop(0);
    return NULL;
}

/* Cancellation disabled while cancelled; acted on at pthread_testcancel. */
static void *disabled_then_testcancel(void *arg) {
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    pthread_cleanup_push(cleanup_a, arg);
    note(arg, "cancel disabled");
    mark_ready();
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL); /* not a cancellation point while disabled */
    note(arg, "still running");
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    pthread_testcancel();
    note(arg, "after testcancel");
    pthread_cleanup_pop(0);
    return NULL;
}

/* pthread_cleanup_pop(1) runs a handler; pop(0) does not; a normal return. */
static void *pops(void *arg) {
    pthread_cleanup_push(cleanup_a, arg);
    pthread_cleanup_push(cleanup_b, arg);
    note(arg, "popping");
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(0);
    return (void *)7;
}

/* Thread-specific data destructors run after pthread_exit's handlers. */
static pthread_key_t key;
static void key_destructor(void *value) { note(value, "key destructor"); }
static void *exits_with_key(void *arg) {
    pthread_setspecific(key, arg);
    pthread_cleanup_push(cleanup_b, arg);
    pthread_exit(NULL);
    pthread_cleanup_pop(0);
    return NULL;
}

/* Outlives main's pthread_exit and ends the program. */
static pthread_t main_thread;
static void *last_thread(void *arg) {
    (void)arg;
    void *ret;
    int err = pthread_join(main_thread, &ret);
    if (err)
        printf("main joined: %s\n", strerror(err));
    else
        printf("main joined: ok, value %ld\n", (long)ret);
    printf("ok\n");
    fflush(stdout);
    return NULL; /* the last thread: the process exits with status 0 */
}

static void report(struct log *log, void *ret) {
    printf("%s:", log->name);
    for (int i = 0; i < log->n; i++) printf(" [%s]", log->lines[i]);
    if (ret == PTHREAD_CANCELED) printf(" -> PTHREAD_CANCELED\n");
    else printf(" -> %ld\n", (long)ret);
}

int main(void) {
    if (pipe(pipe_fds) != 0) die("pipe", errno);
    if (pthread_key_create(&key, key_destructor) != 0) die("pthread_key_create", errno);

    struct log logs[] = {{.name = "pthread_exit"},        {.name = "cancel in read"},
                         {.name = "cancel in cond_wait"}, {.name = "cancel in nanosleep"},
                         {.name = "cancel disabled"},     {.name = "cleanup_pop"},
                         {.name = "pthread_exit with key"}};
    void *(*fns[])(void *) = {exits_with_handlers, blocked_in_read, blocked_in_cond_wait,
                               blocked_in_sleep, disabled_then_testcancel, pops, exits_with_key};
    enum { N = sizeof fns / sizeof fns[0] };
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        int err = pthread_create(&t[i], NULL, fns[i], &logs[i]);
        if (err) die("pthread_create", err);
    }
    /* threads 1-4 mark themselves ready before blocking; a cancel that comes
     * before they block is acted on at the blocking call all the same */
    wait_ready(4);
    for (int i = 1; i <= 4; i++) {
        int err = pthread_cancel(t[i]);
        if (err) die("pthread_cancel", err);
    }
    for (int i = 0; i < N; i++) {
        void *ret;
        int err = pthread_join(t[i], &ret);
        if (err) die("pthread_join", err);
        report(&logs[i], ret);
    }
    /* The pipe is still usable after a reader was cancelled. */
    char c = 'z', d = 0;
    if (write(pipe_fds[1], &c, 1) != 1 || read(pipe_fds[0], &d, 1) != 1 || d != 'z')
        printf("pipe after cancel: BROKEN\n");
    else
        printf("pipe after cancel: ok\n");
    fflush(stdout);

    main_thread = pthread_self();
    pthread_t last;
    if (pthread_create(&last, NULL, last_thread, NULL) != 0) die("pthread_create", errno);
    pthread_exit((void *)5);
}
