/*
 * pure_loops_are_preempted: threads that compute without calling anything
 * still let the others run, and keep every register and errno.
 *
 * usage: pure_loops_are_preempted MODE
 *   flag     4 threads each set errno, run a floating-point and integer
 *            computation (~40 ms), then spin on a flag that main sets after
 *            a 400 ms sleep, with the flags register live all the while;
 *            each prints its results, its errno and whether it ever found
 *            its flags changed
 *   signals  a thread spins until a SIGUSR1 handler has counted 50
 *            signals, which another thread sends to the process
 *   fork     the child of a fork runs `flag`; the parent prints its status
 *   cancel   a spinning thread with asynchronous cancellation is cancelled
 *            (at a preemption): its cleanup handler runs
 *   urg      the program's own SIGURG (greenhook's preemption signal)
 *            reaches its handler, SIG_IGN and SIG_DFL read back, then
 *            every disposition reset and every signal blocked, `flag`
 *            with a SIGUSR2 handled by main while the others spin
 *   jit      (under greenhook only) from a thread, beside a ticker thread:
 *            a loop in code made at run time (an mmap'd page, no unwind
 *            tables: what a JIT emits) is preempted; the same code as a
 *            dl_iterate_phdr callback (libc holds the loader's lock) and
 *            as a pthread_once routine (greenhook runs it) is not; then
 *            the same three from the main thread
 *   stale    (under greenhook only) made code as in `jit`, from a frame
 *            whose slots were never written, where a handled signal's
 *            frame or preemption's ticks' frames were before (their
 *            return address, left behind), is preempted all the same: in
 *            a thread, then on the main thread
 *   qsort    (under greenhook only) a qsort comparator that computes ~150
 *            ms is never preempted (libc is below it on the stack), the
 *            same computation in a plain loop is: a ticker thread says
 *            whether it ran meanwhile
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4

static volatile int stop;

struct result {
    double x;
    unsigned long h;
    int err;
};
static struct result results[THREADS];

/* Many live values in vector and general registers across the loop. */
__attribute__((noinline)) static void compute(int id, struct result *r)
{
    double a = 1.0 + id, b = 0.5, c = 0.25, d = 0.125;
    unsigned long h = 1469598103934665603UL ^ (unsigned long)id;
    for (long i = 0; i < 30000000; i++) {
        a = a * 1.0000001 + b;
        b = b * 0.9999999 + c;
        c = c * 1.0000002 - d;
        d = d * 0.9999998 + 1e-9;
        h = (h ^ (unsigned long)i) * 1099511628211UL;
    }
    r->x = a + b + c + d;
    r->h = h;
}

/*
 * Spins until `stop` with the flags and %rax live across 64 instructions
 * that change neither (x86-64): a preemption that loses them shows.
 * Returns how many times they were found changed.
 */
static long spin_keeping_flags(void)
{
    long bad = 0;
#if defined(__x86_64__)
    __asm__ volatile("1:\n\t"
                     "xorl %%eax, %%eax\n\t" /* ZF=1, rax=0 */
                     ".rept 64\n\t"
                     "leaq 1(%%rax), %%rax\n\t"
                     ".endr\n\t"
                     "jnz 2f\n\t"
                     "cmpq $64, %%rax\n\t"
                     "jne 2f\n\t"
                     "cmpl $0, %[stop]\n\t"
                     "je 1b\n\t"
                     "jmp 3f\n"
                     "2:\n\t"
                     "incq %[bad]\n\t"
                     "cmpl $0, %[stop]\n\t"
                     "je 1b\n"
                     "3:\n"
                     : [bad] "+m"(bad)
                     : [stop] "m"(stop)
                     : "rax", "cc", "memory");
#else
    while (!stop)
        ;
#endif
    return bad;
}

static long lost[THREADS];

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    errno = 100 + id;
    compute(id, &results[id]);
    lost[id] = spin_keeping_flags();
    results[id].err = errno;
    return NULL;
}

static int raise_usr2; /* urg mode: a handler runs in main meanwhile */

static int flag(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(long)i);
    if (raise_usr2) {
        sigset_t usr2;
        sigemptyset(&usr2);
        sigaddset(&usr2, SIGUSR2);
        pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);
        raise(SIGUSR2);
    }
    usleep(400000);
    stop = 1;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++)
        printf("thread %d: %.17g %lx errno %d, flags lost %ld times\n", i, results[i].x, results[i].h,
               results[i].err, lost[i]);
    return 0;
}

static volatile int caught;

static void on_usr1(int sig)
{
    (void)sig;
    caught++;
}

/* Each signal once the last was caught: a standard signal sent while one
 * is pending merges with it, and a native spinner on a loaded machine may
 * not run for longer than any fixed gap. Not caught in 10 s (the spinner
 * left its loop early), the next is sent anyway and the count tells. */
static void *sender(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        kill(getpid(), SIGUSR1);
        for (int waited = 0; caught <= i && waited < 50000; waited++)
            usleep(200);
    }
    return NULL;
}

static void *spinner(void *arg)
{
    (void)arg;
    while (caught < 50)
        ;
    return NULL;
}

static int signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    /* Only the spinner takes the signal: the count is then exact. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    pthread_t s, p;
    pthread_create(&s, NULL, sender, NULL);
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    pthread_create(&p, NULL, spinner, NULL);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    pthread_join(s, NULL);
    pthread_join(p, NULL);
    printf("signals: %d\n", caught);
    return 0;
}

static int forked(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        flag();
        fflush(stdout);
        _exit(7);
    }
    int status;
    waitpid(pid, &status, 0);
    printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

static volatile int cleaned, never;

static void cleanup(void *arg)
{
    (void)arg;
    cleaned = 1;
}

static void *cancellable(void *arg)
{
    (void)arg;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
    pthread_cleanup_push(cleanup, NULL);
    while (!never)
        ;
    pthread_cleanup_pop(0);
    return NULL;
}

static int cancel(void)
{
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, cancellable, NULL);
    usleep(50000);
    pthread_cancel(t);
    pthread_join(t, &r);
    printf("cancelled: %s, cleanup ran: %s\n", r == PTHREAD_CANCELED ? "yes" : "no", cleaned ? "yes" : "no");
    return 0;
}

static volatile int urgs;

static void on_urg(int sig)
{
    (void)sig;
    urgs++;
}

static int urg(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_urg;
    sigaction(SIGURG, &sa, &old);
    printf("was default: %s\n", old.sa_handler == SIG_DFL ? "yes" : "no");
    raise(SIGURG);
    kill(getpid(), SIGURG);
    printf("handled: %d\n", urgs);
    sigaction(SIGURG, NULL, &old);
    printf("reads back: %s\n", old.sa_handler == on_urg ? "yes" : "no");
    signal(SIGURG, SIG_IGN);
    raise(SIGURG);
    sigaction(SIGURG, NULL, &old);
    printf("ignored: %d, reads back: %s\n", urgs, old.sa_handler == SIG_IGN ? "yes" : "no");
    /* A daemon's reset, then every signal blocked in every thread. */
    for (int i = 1; i < NSIG; i++)
        signal(i, SIG_DFL);
    sigaction(SIGURG, NULL, &old);
    printf("default again: %s\n", old.sa_handler == SIG_DFL ? "yes" : "no");
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    /* Every thread blocks every signal; main then takes a SIGUSR2 while
     * the others spin, and the mask its handler returns to must still let
     * preemption's signal through. */
    signal(SIGUSR2, on_urg);
    raise_usr2 = 1;
    flag();
    printf("handled in all: %d\n", urgs);
    return 0;
}

static volatile long ticks;
static volatile int done;

static void *ticker(void *arg)
{
    (void)arg;
    while (!done) {
        ticks++;
        usleep(1000);
    }
    return NULL;
}

static volatile unsigned long sink;

__attribute__((noinline)) static void burn(void)
{
    for (unsigned long i = 0; i < 150000000; i++)
        sink = sink + i;
}

static int by_burning(const void *a, const void *b)
{
    burn();
    return *(const int *)a - *(const int *)b;
}

static int in_qsort(void)
{
    pthread_t t;
    pthread_create(&t, NULL, ticker, NULL);
    usleep(20000);
    int v[2] = { 2, 1 };
    long before = ticks;
    qsort(v, 2, sizeof v[0], by_burning);
    long during = ticks - before;
    before = ticks;
    burn();
    long plain = ticks - before;
    done = 1;
    pthread_join(t, NULL);
    printf("comparator: ticker ran %s; plain loop: ticker ran %s\n", during ? "yes" : "no", plain ? "yes" : "no");
    return 0;
}

/* Made at run time: `mov $N, %ecx; 1: dec %rcx; jnz 1b; mov $1, %eax; ret`
 * (~300M turns), callable as any of the three below. */
static int (*made)(void);

static void make_code(void)
{
    static const unsigned char code[] = {0xb9, 0x00, 0xa3, 0xe1, 0x11, /* mov $300000000, %ecx */
                                         0x48, 0xff, 0xc9,             /* dec %rcx */
                                         0x75, 0xfb,                   /* jnz -5 */
                                         0xb8, 0x01, 0x00, 0x00, 0x00, /* mov $1, %eax */
                                         0xc3};
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        exit(1);
    memcpy(p, code, sizeof code);
    if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
        exit(1);
    made = (int (*)(void))p;
}

typedef int (*phdr_callback)(struct dl_phdr_info *, size_t, void *);
typedef void (*once_routine)(void);

static long ticks_during(int how, pthread_once_t *once)
{
    long before = ticks;
    if (how == 0)
        made();
    else if (how == 1)
        dl_iterate_phdr((phdr_callback)(void *)made, NULL);
    else
        pthread_once(once, (once_routine)(void *)made);
    return ticks - before;
}

/* The three ways, by the thread `who` names. */
static void *jit_run(void *who)
{
    const char *what[] = {"made code", "as a dl_iterate_phdr callback", "as a pthread_once routine"};
    pthread_once_t once = PTHREAD_ONCE_INIT;
    for (int how = 0; how < 3; how++)
        printf("%s%s: ticker ran %s\n", (char *)who, what[how], ticks_during(how, &once) ? "yes" : "no");
    return NULL;
}

/* Runs `run` in a thread, then in main, while the ticker ticks. */
static void beside_ticker(void *(*run)(void *))
{
    pthread_t t, w;
    pthread_create(&t, NULL, ticker, NULL);
    usleep(20000);
    pthread_create(&w, NULL, run, "");
    pthread_join(w, NULL);
    run("main thread, ");
    done = 1;
    pthread_join(t, NULL);
}

static int jit(void)
{
    make_code();
    beside_ticker(jit_run);
    return 0;
}

/* Bytes of stack a frame below leaves unwritten: more than a signal
 * frame and its extended state take (a few KiB, 11 with AMX). */
#define STALE_BYTES (32 * 1024)

#if defined(__has_attribute)
#if __has_attribute(uninitialized)
#define UNINITIALIZED __attribute__((uninitialized))
#endif
#endif
#ifndef UNINITIALIZED
#define UNINITIALIZED
#endif

/* Zeroes STALE_BYTES of stack below the caller's frame. */
__attribute__((noinline)) static void scrub(void)
{
    char pad[STALE_BYTES];
    memset(pad, 0, sizeof pad);
    __asm__ volatile("" : : "r"(pad) : "memory");
}

/* Runs the made code below STALE_BYTES of stack it never writes:
 * whatever the frames before left there. */
__attribute__((noinline)) static long made_below_stale_words(void)
{
    char pad[STALE_BYTES] UNINITIALIZED;
    __asm__ volatile("" : : "r"(pad) : "memory");
    long before = ticks;
    made();
    return ticks - before;
}

static volatile int usr1s;

static void on_usr1_count(int sig)
{
    (void)sig;
    usr1s++;
}

/* A SIGUSR1 to this OS thread by the system call itself (greenhook has
 * its own raise, and its gettid() is the fiber's own id): the kernel puts
 * its frame below this one. */
__attribute__((noinline)) static void leave_signal_frame(void)
{
#if defined(__x86_64__)
    long tid, r;
    __asm__ volatile("syscall" : "=a"(tid) : "0"((long)SYS_gettid) : "rcx", "r11", "memory");
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"((long)SYS_tgkill), "D"((long)getpid()), "S"(tid), "d"((long)SIGUSR1)
                     : "rcx", "r11", "memory");
#endif
}

/* Each way of leaving a signal frame's words behind, then the made code
 * over them, by the thread `who` names. */
static void *stale_run(void *who)
{
    void (*leave[])(void) = {leave_signal_frame, burn};
    const char *what[] = {"after a handled signal", "after ticks"};
    for (int i = 0; i < 2; i++) {
        scrub();
        leave[i]();
        printf("%s%s: ticker ran %s\n", (char *)who, what[i], made_below_stale_words() ? "yes" : "no");
    }
    return NULL;
}

static int stale(void)
{
    make_code();
    signal(SIGUSR1, on_usr1_count);
    beside_ticker(stale_run);
    printf("signals handled: %d\n", usr1s);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "flag"))
        return flag();
    if (!strcmp(mode, "signals"))
        return signals();
    if (!strcmp(mode, "fork"))
        return forked();
    if (!strcmp(mode, "cancel"))
        return cancel();
    if (!strcmp(mode, "urg"))
        return urg();
    if (!strcmp(mode, "qsort"))
        return in_qsort();
    if (!strcmp(mode, "jit"))
        return jit();
    if (!strcmp(mode, "stale"))
        return stale();
    fprintf(stderr, "usage: pure_loops_are_preempted flag|signals|fork|cancel|urg|qsort|jit|stale\n");
    return 2;
}
