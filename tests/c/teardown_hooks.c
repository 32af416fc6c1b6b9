/*
 * teardown_hooks: hooked functions called while a process or a thread is
 * being torn down (issue 11's "Teardown": node exited with status 134 when
 * libuv's destructor, run by _dl_fini at exit, joined a thread after the
 * main thread's thread-locals had been destroyed).
 *
 * Every teardown callback below does the same four things and prints what
 * they returned: pthread_join of a thread that ended unjoined (its own one),
 * pthread_mutex_lock/unlock, usleep(1000), and write(1, ...).
 *
 * usage: teardown_hooks MODE
 *   exit         main registers, in this order: atexit(last_handler),
 *                atexit(handler), a C++-style thread_local destructor
 *                (__cxa_thread_atexit_impl) and a pthread key with a value;
 *                a worker registers a thread_local destructor and a key
 *                destructor of its own and returns (those run at its exit,
 *                in that order);
 *                a second worker stays blocked in read() on a pipe; main
 *                calls exit(7). glibc then runs main's thread_local
 *                destructor, the atexit handlers (last_handler last: it also
 *                calls __libc_freeres() before its hooked calls), and, from
 *                _dl_fini, this program's destructor function. Exit status 7.
 *   pthread_exit with every other thread ended, main calls pthread_exit: its
 *                key destructor runs, then (main being the last thread) the
 *                process exits with status 0 through main's thread_local
 *                destructor, the atexit handlers and the destructor function.
 *
 * stdout (deterministic): one line per callback, in glibc's order, e.g.
 *   "worker tls dtor: join=0 lock=0 unlock=0 usleep=0 write"
 * alarm(20): a hang becomes a SIGALRM death.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern int __cxa_thread_atexit_impl(void (*dtor)(void *), void *obj, void *dso_symbol);
extern void *__dso_handle;
extern void __libc_freeres(void);

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_pipe[2];
static int g_exit_mode;

/* One ended, unjoined thread for each callback to join. */
enum { J_MAIN_TLS, J_MAIN_KEY, J_HANDLER, J_LAST, J_DESTRUCTOR, J_WORKER_TLS, J_WORKER_KEY, J_COUNT };
static pthread_t g_ended[J_COUNT];

static void line(const char *s)
{
    size_t n = strlen(s);
    /* write(2) directly: stdio may already be flushed and closed. */
    while (n > 0) {
        ssize_t w = write(1, s, n);
        if (w <= 0)
            _exit(90);
        s += w;
        n -= (size_t)w;
    }
}

/* The four hooked calls, reported on one line. */
static void hooked_calls(const char *who, int join_slot)
{
    int j = pthread_join(g_ended[join_slot], NULL);
    int l = pthread_mutex_lock(&g_mutex);
    int u = pthread_mutex_unlock(&g_mutex);
    int s = usleep(1000);
    char buf[160];
    snprintf(buf, sizeof buf, "%s: join=%d lock=%d unlock=%d usleep=%d write\n", who, j, l, u, s);
    line(buf);
}

static void *ends_at_once(void *arg)
{
    return arg;
}

static void *blocked_reader(void *arg)
{
    (void)arg;
    char c;
    if (read(g_pipe[0], &c, 1) >= 0)
        line("blocked reader: read returned\n");
    return NULL;
}

static void main_tls_dtor(void *p)
{
    (void)p;
    hooked_calls("main tls dtor", J_MAIN_TLS);
}

static void main_key_dtor(void *p)
{
    (void)p;
    hooked_calls("main key dtor", J_MAIN_KEY);
}

static void worker_tls_dtor(void *p)
{
    (void)p;
    hooked_calls("worker tls dtor", J_WORKER_TLS);
}

static void worker_key_dtor(void *p)
{
    (void)p;
    hooked_calls("worker key dtor", J_WORKER_KEY);
}

static void handler(void)
{
    hooked_calls("atexit handler", J_HANDLER);
}

static void last_handler(void)
{
    if (g_exit_mode)
        __libc_freeres();
    hooked_calls(g_exit_mode ? "last atexit handler (after __libc_freeres)" : "last atexit handler", J_LAST);
}

__attribute__((destructor)) static void destructor_function(void)
{
    /* Not on a failed start (usage error). */
    if (g_ended[J_DESTRUCTOR])
        hooked_calls("destructor function", J_DESTRUCTOR);
}

static pthread_key_t g_worker_key;
static int g_tls_obj;

static void *worker(void *arg)
{
    (void)arg;
    __cxa_thread_atexit_impl(worker_tls_dtor, &g_tls_obj, &__dso_handle);
    pthread_setspecific(g_worker_key, &g_tls_obj);
    return NULL;
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

int main(int argc, char **argv)
{
    alarm(20);
    if (argc != 2 || (strcmp(argv[1], "exit") && strcmp(argv[1], "pthread_exit"))) {
        fprintf(stderr, "usage: %s exit|pthread_exit\n", argv[0]);
        return 1;
    }
    g_exit_mode = !strcmp(argv[1], "exit");
    if (pipe(g_pipe) != 0) {
        perror("pipe");
        return 1;
    }
    for (int i = 0; i < J_COUNT; i++)
        g_ended[i] = spawn(ends_at_once, NULL);
    usleep(20000); /* they have all ended */

    atexit(last_handler);
    atexit(handler);
    __cxa_thread_atexit_impl(main_tls_dtor, &g_tls_obj, &__dso_handle);
    pthread_key_t main_key;
    pthread_key_create(&main_key, main_key_dtor);
    pthread_setspecific(main_key, &g_tls_obj);

    pthread_key_create(&g_worker_key, worker_key_dtor);
    pthread_t w = spawn(worker, NULL);
    pthread_join(w, NULL);
    line("main: worker joined\n");

    if (g_exit_mode) {
        spawn(blocked_reader, NULL);
        usleep(20000);
        line("main: exit(7)\n");
        exit(7);
    }
    /* Every other thread has ended: main is the last, so glibc's
     * pthread_exit in main ends the process with exit(0), which runs main's
     * thread_local destructors too (with another thread still running, the
     * last one's exit would, and main's would never run). */
    line("main: pthread_exit\n");
    pthread_exit(NULL);
}
