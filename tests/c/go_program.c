/*
 * go_program: an executable with Go's build ID note (go_note.h), whose
 * threads wait for each other as Go's runtime does: by futex system calls
 * made with the `syscall` instruction, which no hook sees. Main and a
 * thread take 1,000 turns each; the thread reports whether the kernel runs
 * it as a thread other than main's. Under greenhook a Go program's threads
 * stay OS threads: as fibers, the first wait blocked the OS thread they
 * share, and the program hung.
 *
 * stdout: "turns: 2000" and "thread: own|shared".
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "go_note.h"
#include "thread_self.h"

static atomic_int turn; /* 0: main's, 1: the thread's */
static int turns;

/* futex(2) by the instruction itself (libc's syscall() is a hook). */
static long raw_futex(atomic_int *addr, int op, int val)
{
#if defined(__x86_64__)
    long r;
    register long r10 __asm__("r10") = 0;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"((long)SYS_futex), "D"(addr), "S"((long)op), "d"((long)val), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_futex;
    register long x0 __asm__("x0") = (long)addr;
    register long x1 __asm__("x1") = op;
    register long x2 __asm__("x2") = val;
    register long x3 __asm__("x3") = 0;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
#else
    return syscall(SYS_futex, addr, op, val, NULL);
#endif
}

/* Waits until it is `me`'s turn, takes it, and hands the turn over. */
static void play(int me)
{
    for (int i = 0; i < 1000; i++) {
        int t;
        while ((t = atomic_load(&turn)) != me)
            raw_futex(&turn, FUTEX_WAIT_PRIVATE, t);
        turns++;
        atomic_store(&turn, !me);
        raw_futex(&turn, FUTEX_WAKE_PRIVATE, 1);
    }
}

static void *thread(void *arg)
{
    (void)arg;
    play(1);
    return (void *)os_thread_kind();
}

int main(void)
{
    pthread_t t;
    void *where;
    if (pthread_create(&t, NULL, thread, NULL))
        return 1;
    play(0);
    if (pthread_join(t, &where))
        return 1;
    printf("turns: %d\nthread: %s\n", turns, (char *)where);
    return 0;
}
