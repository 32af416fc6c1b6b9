/*
 * jump_masks: leaving a signal handler by siglongjmp, compared with glibc.
 * A thread stays alive throughout (under greenhook: masks are per fiber).
 *
 *   three times: a SIGALRM handler 100 ms into a sleep(1) jumps back to
 *   sigsetjmp(env, 1): each sleep ends at the alarm, and SIGALRM is
 *   unblocked again after the jump (it stayed blocked for good, and the
 *   second alarm never ran its handler, before)
 *   the same from a thread, with siglongjmp, longjmp and __longjmp_chk
 *   (what the fortified headers call)
 *   the same while the thread computes (the handler runs at once, from
 *   the signal's own frame), three times
 *   a SIGSEGV handler (a fault's: the kernel runs it) jumping back out of
 *   a bad write, three times in a thread and three in main (the second
 *   fault killed the process: SIGSEGV stayed blocked in the kernel)
 *   _setjmp/longjmp: no mask saved, so SIGALRM stays blocked after the jump
 *   sigsetjmp saves the caller's own mask: SIGUSR1 blocked by main alone
 *   (another thread accepts it) before sigsetjmp, unblocked after it, is
 *   blocked again after the jump
 *
 *   __sigsetjmp(buf, 0) on the small buffer pthread_cleanup_push passes:
 *   nothing past it is written
 *
 * usage: jump_masks
 * stdout: one line per case.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

extern void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));

static sigjmp_buf senv;
static jmp_buf env;
static volatile sig_atomic_t ran;
static int how; /* 0: siglongjmp, 1: longjmp, 2: __longjmp_chk */

static void jump_back(int sig)
{
    (void)sig;
    ran++;
    if (how == 0)
        siglongjmp(senv, 1);
    if (how == 1)
        longjmp(senv, 1);
    __longjmp_chk(senv, 1);
}

static void jump_back_unsaved(int sig)
{
    (void)sig;
    ran++;
    longjmp(env, 1);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int blocked(int sig)
{
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, sig);
}

static void alarm_in_100ms(void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {.it_value = {0, 100000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static void report(const char *what, double t0)
{
    double s = now() - t0;
    printf("%s: %s, handler ran %d, SIGALRM %s after the jump\n", what,
           s < 0.6 ? "the sleep ended at the alarm" : "slept on", (int)ran, blocked(SIGALRM) ? "blocked" : "unblocked");
}

static const char *names[] = {"siglongjmp", "longjmp", "__longjmp_chk"};

/* Sleeps until the alarm, whose handler jumps back by `how`. */
static void saved_jump(const char *who, int kind)
{
    char what[80];
    snprintf(what, sizeof what, "%s, %s to sigsetjmp(env, 1)", who, names[kind]);
    how = kind;
    ran = 0;
    double t0 = now();
    if (sigsetjmp(senv, 1) == 0) {
        alarm_in_100ms(jump_back);
        sleep(1);
    }
    report(what, t0);
}

/* Computes until the alarm, whose handler jumps back. */
static void computing_jump(const char *who)
{
    char what[80];
    snprintf(what, sizeof what, "%s computing, siglongjmp to sigsetjmp(env, 1)", who);
    how = 0;
    ran = 0;
    double t0 = now();
    if (sigsetjmp(senv, 1) == 0) {
        alarm_in_100ms(jump_back);
        volatile unsigned long x = 0;
        while (now() - t0 < 1.5)
            x++;
        printf("%s: the loop ran on\n", what);
        return;
    }
    double s = now() - t0;
    printf("%s: %s, handler ran %d, SIGALRM %s after the jump\n", what, s < 0.6 ? "ended at the alarm" : "late",
           (int)ran, blocked(SIGALRM) ? "blocked" : "unblocked");
}

static void on_segv(int sig)
{
    (void)sig;
    ran++;
    siglongjmp(senv, 1);
}

/* Writes where nothing is mapped; the SIGSEGV handler jumps back. */
static void fault_jump(const char *who)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    ran = 0;
    if (sigsetjmp(senv, 1) == 0) {
        volatile int *p = (int *)16;
        *p = 1;
        printf("%s: no fault\n", who);
        return;
    }
    printf("%s: a fault's handler jumped back, handler ran %d, SIGSEGV %s\n", who, (int)ran,
           blocked(SIGSEGV) ? "blocked" : "unblocked");
}

static void *in_thread(void *arg)
{
    (void)arg;
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &m, NULL);
    for (int k = 0; k < 3; k++)
        saved_jump("a thread", k);
    for (int k = 0; k < 3; k++)
        computing_jump("a thread");
    for (int k = 0; k < 3; k++)
        fault_jump("a thread");
    pthread_sigmask(SIG_BLOCK, &m, NULL);
    return NULL;
}

static void *idle(void *arg)
{
    (void)arg;
    sleep(100);
    return NULL;
}

/* What pthread_cleanup_push hands __sigsetjmp (with savemask 0): glibc's
   104-byte __pthread_unwind_buf_t, not a whole sigjmp_buf, with the
   caller's frame after it (here a guard of 256 bytes). Nothing past it
   may change. (greenhook's __sigsetjmp wrote a word 80 bytes past it:
   Boehm GC's threads crashed on the return address it hit.) */
static void small_buffer(void)
{
    struct {
        struct {
            long jb[8];
            int mask_was_saved;
        } cancel;
        void *pad[4];
        unsigned char guard[256];
    } b;
    memset(&b, 0x5a, sizeof b);
    if (__sigsetjmp((struct __jmp_buf_tag *)(void *)&b, 0) == 0) { /* &b.cancel: the same address */
        int changed = 0;
        for (size_t i = 0; i < sizeof b.guard; i++)
            changed += b.guard[i] != 0x5a;
        printf("sigsetjmp(buf, 0) on a cleanup buffer: %d bytes past it changed\n", changed);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t alrm, usr1;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    /* The idle thread accepts SIGUSR1 and never SIGALRM. */
    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    pthread_t t;
    pthread_create(&t, NULL, idle, NULL);
    pthread_detach(t);
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);

    small_buffer();
    for (int i = 0; i < 3; i++)
        saved_jump("main", 0);

    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    pthread_create(&t, NULL, in_thread, NULL);
    pthread_join(t, NULL);
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);

    for (int k = 0; k < 3; k++)
        fault_jump("main");

    ran = 0;
    double t0 = now();
    if (_setjmp(env) == 0) {
        alarm_in_100ms(jump_back_unsaved);
        sleep(1);
    }
    report("main, longjmp to _setjmp (no mask saved)", t0);
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);

    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    if (sigsetjmp(senv, 1) == 0) {
        pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
        printf("SIGUSR1 blocked by main alone, sigsetjmp, unblocked: %s\n", blocked(SIGUSR1) ? "blocked" : "unblocked");
        siglongjmp(senv, 1);
    }
    printf("after siglongjmp: SIGUSR1 %s, as at sigsetjmp\n", blocked(SIGUSR1) ? "blocked" : "unblocked");
    return 0;
}
