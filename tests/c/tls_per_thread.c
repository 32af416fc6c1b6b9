/*
 * tls_per_thread: thread-local storage is per thread (issue 10). Under the
 * preload, threads are fibers of one OS thread: each must still have its own
 * `__thread` variables, errno, glibc per-thread state and dynamic TLS.
 *
 * usage: tls_per_thread MODE [LIB]
 *   vars      8 threads: each checks `static __thread int g_init = 42`
 *             starts at 42, stores its id in `static __thread int g_mine`
 *             and in errno, sleeps 20 ms (usleep: the others run), reads
 *             both back. "vars: 8/8 kept their value, 8/8 kept errno, 8/8
 *             saw the initial value".
 *   cleared   vars, after emptying the environment with clearenv() first
 *             (as nginx's workers do before their first thread): settings
 *             given to the preload in the environment must still hold.
 *   strerror  2 threads each get strerror() and strsignal() of an unknown
 *             number (glibc formats it into a per-thread buffer), sleep
 *             20 ms, and print the strings they got.
 *   locale    thread A switches to a locale object of its own with
 *             uselocale, thread B keeps the global one; after 20 ms (B,
 *             while A still uses its own) and 40 ms (A) each says what
 *             uselocale(0) returns.
 *   cpu       sched_getcpu() in 4 threads (glibc reads it from the rseq area
 *             through the thread pointer): "cpu: 4/4 sane".
 *   dlopen    LIB (a shared library with `__thread` variables, built from
 *             tls_dlopen_lib.c, tls_static_lib.c or tls_desc_lib.c) is
 *             dlopen'ed by main after 4 threads have started and are
 *             waiting; each then sets the library's variable to its id,
 *             sleeps 20 ms and reads it back, and reads a variable with an
 *             initial value. First a library that is nowhere is dlopen'ed,
 *             and dlerror's message printed.
 *   dlerror   a thread's dlopen of a library that is nowhere fails; it
 *             takes dlerror()'s message, looks up "localhost" (under the
 *             preload the offload pool's first job: a thread is started),
 *             then prints the message.
 *   dlopen-in-thread  the same as dlopen, LIB dlopen'ed by thread 1 of the 4; a bare
 *             name is found through the program's RUNPATH ($ORIGIN: the
 *             directory the test libraries are built into).
 *   fork      a thread sets its `__thread` value and forks (while a second
 *             thread sleeps); the child checks the value, mallocs, makes a
 *             thread of its own (whose value starts at 0 and is its own),
 *             forks once more and exits 3; the parent checks the first
 *             child's status and its own value.
 *   signal    a thread sets its `__thread` value and sends itself SIGUSR1
 *             with raise(), then with pthread_kill(pthread_self()); the
 *             handler, which runs on the thread that was running, records
 *             the `__thread` value it sees. Meanwhile another thread runs.
 *   dtors     4 threads each register a destructor with
 *             __cxa_thread_atexit_impl (what C++ thread_local uses); the
 *             destructor sleeps 5 ms and records that it ran, on its own
 *             thread's `__thread` value; main checks every destructor ran
 *             before its join returned.
 * alarm(20): a hang becomes a SIGALRM death.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <locale.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
// link: -ldl -Wl,-rpath,$ORIGIN -Wl,--enable-new-dtags

static __thread int g_mine;
static __thread int g_init = 42;
static int g_kept, g_errno_kept, g_init_seen;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

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

static void count(int *c)
{
    pthread_mutex_lock(&g_lock);
    (*c)++;
    pthread_mutex_unlock(&g_lock);
}

/* ---- vars ---- */

static void *vars_thread(void *arg)
{
    int id = (int)(long)arg;
    if (g_init == 42)
        count(&g_init_seen);
    g_mine = id;
    g_init = 1000 + id;
    errno = 100 + id;
    usleep(20000);
    int e = errno;
    if (g_mine == id && g_init == 1000 + id)
        count(&g_kept);
    if (e == 100 + id)
        count(&g_errno_kept);
    return NULL;
}

static void vars(void)
{
    pthread_t t[8];
    for (long i = 0; i < 8; i++)
        t[i] = spawn(vars_thread, (void *)(i + 1));
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    printf("vars: %d/8 kept their value, %d/8 kept errno, %d/8 saw the initial value; main's is %d\n", g_kept,
           g_errno_kept, g_init_seen, g_mine);
}

/* ---- strerror, strsignal ---- */

static char g_msgs[2][2][64];

static void *strerror_thread(void *arg)
{
    int id = (int)(long)arg;
    const char *e = strerror(5000 + id);
    const char *s = strsignal(5000 + id);
    usleep(20000);
    snprintf(g_msgs[id][0], sizeof g_msgs[id][0], "%s", e);
    snprintf(g_msgs[id][1], sizeof g_msgs[id][1], "%s", s);
    return NULL;
}

static void strerrors(void)
{
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        t[i] = spawn(strerror_thread, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        printf("strerror: thread %d got \"%s\" and \"%s\"\n", i, g_msgs[i][0], g_msgs[i][1]);
}

/* ---- uselocale ---- */

static locale_t g_own;
static const char *g_locale_says[2];

static void *locale_thread(void *arg)
{
    int id = (int)(long)arg;
    if (id == 0)
        uselocale(g_own);
    /* B looks while A still has its own locale in use. */
    usleep(id == 0 ? 40000 : 20000);
    locale_t now = uselocale((locale_t)0);
    g_locale_says[id] = now == g_own ? "its own" : now == LC_GLOBAL_LOCALE ? "the global one" : "another thread's";
    if (id == 0)
        uselocale(LC_GLOBAL_LOCALE);
    return NULL;
}

static void locales(void)
{
    g_own = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (g_own == (locale_t)0) {
        perror("newlocale");
        exit(1);
    }
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        t[i] = spawn(locale_thread, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("locale: thread A uses %s, thread B uses %s, main uses %s\n", g_locale_says[0], g_locale_says[1],
           uselocale((locale_t)0) == LC_GLOBAL_LOCALE ? "the global one" : "another");
    freelocale(g_own);
}

/* ---- sched_getcpu ---- */

static int g_sane;

static void *cpu_thread(void *arg)
{
    (void)arg;
    long n = sysconf(_SC_NPROCESSORS_CONF);
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        int c = sched_getcpu();
        if (c < 0 || c >= n)
            ok = 0;
        usleep(1000);
    }
    if (ok)
        count(&g_sane);
    return NULL;
}

static void cpus(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        t[i] = spawn(cpu_thread, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("cpu: %d/4 sane\n", g_sane);
}

/* ---- dlerror ---- */

static void *dlerror_thread(void *arg)
{
    (void)arg;
    if (dlopen("libno_such_library_here.so", RTLD_NOW) != NULL)
        return NULL;
    const char *e = dlerror();
    /* A name lookup (under the preload, the first job of its offload pool,
       which starts a thread) between dlerror() and the use of its message. */
    struct addrinfo *res = NULL;
    int rc = getaddrinfo("localhost", "80", NULL, &res);
    if (rc == 0)
        freeaddrinfo(res);
    printf("dlerror: lookup %s, message \"%s\"\n", rc == 0 ? "ok" : "failed", e);
    return NULL;
}

static void dlerrors(void)
{
    pthread_join(spawn(dlerror_thread, NULL), NULL);
}

/* ---- dlopen ---- */

static pthread_barrier_t g_loaded;
static void (*g_set)(int);
static int (*g_get)(void);
static int (*g_get_init)(void);
static int g_dl_kept, g_dl_init;
static const char *g_lib;
static int g_loader; /* the thread id that loads the library, 0: main */

static void load(void)
{
    /* A name that is nowhere: dlerror's message is the same either way. */
    if (dlopen("libno_such_library_here.so", RTLD_NOW) == NULL)
        printf("dlopen: %s\n", dlerror());
    void *h = dlopen(g_lib, RTLD_NOW);
    if (h == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(1);
    }
    g_set = (void (*)(int))dlsym(h, "tls_lib_set");
    g_get = (int (*)(void))dlsym(h, "tls_lib_get");
    g_get_init = (int (*)(void))dlsym(h, "tls_lib_get_initialised");
}

static void *dlopen_thread(void *arg)
{
    int id = (int)(long)arg;
    if (id == g_loader) {
        usleep(10000);
        load();
    }
    pthread_barrier_wait(&g_loaded); /* the library is loaded after we started */
    if (g_get_init() == 7)
        count(&g_dl_init);
    g_set(id);
    usleep(20000);
    if (g_get() == id)
        count(&g_dl_kept);
    return NULL;
}

/* LIB is loaded by main (`loader` 0) or by thread 1, after 4 threads have
   started. */
static void dlopens(const char *lib, int loader)
{
    pthread_t t[4];
    g_lib = lib;
    g_loader = loader;
    pthread_barrier_init(&g_loaded, NULL, 5);
    for (long i = 0; i < 4; i++)
        t[i] = spawn(dlopen_thread, (void *)(i + 1));
    if (loader == 0) {
        usleep(10000);
        load();
    }
    pthread_barrier_wait(&g_loaded);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("dlopen: %d/4 kept the library's __thread value, %d/4 saw its initial value\n", g_dl_kept, g_dl_init);
}

/* ---- fork ---- */

static void *sleeper(void *arg)
{
    (void)arg;
    usleep(50000);
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    int was = g_mine;
    g_mine = 77;
    usleep(1000);
    return (void *)(long)(was == 0 && g_mine == 77);
}

static void *fork_thread(void *arg)
{
    (void)arg;
    g_mine = 5;
    pid_t pid = fork();
    if (pid == 0) {
        int ok = g_mine == 5;
        char *p = malloc(100);
        ok &= p != NULL;
        free(p);
        pthread_t t;
        void *r = NULL;
        ok &= pthread_create(&t, NULL, child_thread, NULL) == 0 && pthread_join(t, &r) == 0 && r == (void *)1;
        ok &= g_mine == 5;
        pid_t grandchild = fork();
        if (grandchild == 0)
            _exit(g_mine == 5 ? 4 : 5);
        int st = 0;
        ok &= waitpid(grandchild, &st, 0) == grandchild && WIFEXITED(st) && WEXITSTATUS(st) == 4;
        printf("fork: child sees its value, mallocs, runs a thread, forks again: %s\n", ok ? "yes" : "no");
        fflush(stdout);
        _exit(3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("fork: child exit status %d, parent thread keeps its value: %s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
           g_mine == 5 ? "yes" : "no");
    return NULL;
}

static void forks(void)
{
    pthread_t s = spawn(sleeper, NULL);
    pthread_t t = spawn(fork_thread, NULL);
    pthread_join(t, NULL);
    pthread_join(s, NULL);
}

/* ---- signal ---- */

static volatile sig_atomic_t g_seen[2];
static volatile sig_atomic_t g_hits;

static void on_usr1(int sig)
{
    (void)sig;
    if (g_hits < 2)
        g_seen[g_hits] = g_mine;
    g_hits++;
}

static void *signal_thread(void *arg)
{
    (void)arg;
    g_mine = 9;
    raise(SIGUSR1);
    pthread_kill(pthread_self(), SIGUSR1);
    return NULL;
}

static void *busy_thread(void *arg)
{
    (void)arg;
    g_mine = 8;
    for (int i = 0; i < 5; i++)
        usleep(1000);
    return NULL;
}

static void signals(void)
{
    signal(SIGUSR1, on_usr1);
    pthread_t b = spawn(busy_thread, NULL);
    pthread_t t = spawn(signal_thread, NULL);
    pthread_join(t, NULL);
    pthread_join(b, NULL);
    printf("signal: %d handled, the handler saw the value %d (raise) and %d (pthread_kill)\n", (int)g_hits,
           (int)g_seen[0], (int)g_seen[1]);
}

/* ---- destructors ---- */

extern int __cxa_thread_atexit_impl(void (*dtor)(void *), void *obj, void *dso_symbol);
extern void *__dso_handle;
static int g_dtor_ran[4];

static void tls_dtor(void *p)
{
    int id = *(int *)p;
    usleep(5000);
    /* Runs on its own thread: its own __thread value is still there. */
    g_dtor_ran[id - 1] = g_mine == id ? 1 : 2;
}

static void *dtor_thread(void *arg)
{
    g_mine = (int)(long)arg;
    __cxa_thread_atexit_impl(tls_dtor, &g_mine, &__dso_handle);
    usleep(10000);
    return NULL;
}

static void dtors(void)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        t[i] = spawn(dtor_thread, (void *)(i + 1));
    int before_join = 0, own = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        before_join += g_dtor_ran[i] != 0;
        own += g_dtor_ran[i] == 1;
    }
    printf("dtors: %d/4 ran before the join returned, %d/4 on their own thread's TLS\n", before_join, own);
}

int main(int argc, char **argv)
{
    alarm(20);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "vars"))
        vars();
    else if (!strcmp(mode, "cleared")) {
        clearenv();
        vars();
    }
    else if (!strcmp(mode, "strerror"))
        strerrors();
    else if (!strcmp(mode, "locale"))
        locales();
    else if (!strcmp(mode, "cpu"))
        cpus();
    else if (!strcmp(mode, "dlerror"))
        dlerrors();
    else if (!strcmp(mode, "dlopen") && argc == 3)
        dlopens(argv[2], 0);
    else if (!strcmp(mode, "dlopen-in-thread") && argc == 3)
        dlopens(argv[2], 1);
    else if (!strcmp(mode, "dtors"))
        dtors();
    else if (!strcmp(mode, "fork"))
        forks();
    else if (!strcmp(mode, "signal"))
        signals();
    else {
        fprintf(stderr, "usage: %s vars|cleared|strerror|locale|cpu|dlerror|dlopen LIB|dlopen-in-thread LIB|fork|signal|dtors\n", argv[0]);
        return 1;
    }
    return 0;
}
