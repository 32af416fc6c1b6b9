/*
 * switch_shapes: what the shape of a stack switch costs in mispredicted
 * returns, without greenhook (docs/DESIGN.md, "Locks at the cost of a
 * switch", cites it). x86-64 Linux only; the thread-pointer variants need
 * FSGSBASE (Linux 5.9+ on a CPU that has it; they write back the value
 * they read, so nothing changes but the time).
 *
 *   gcc -O2 docs/probes/switch_shapes.c -o /tmp/switch_shapes
 *   for v in 1 2 3 4; do /tmp/switch_shapes $v 5000000; done
 *
 * Two contexts, A (on the main stack) and B (on its own), ping-pong: each
 * one's loop calls its "hook", which switches to the other; a round trip
 * is two switches. The hooks are the outermost frame below the loops, as
 * a greenhook hook is.
 *   1  call/ret, corosensei's shape (greenhook's direct hand-over): A
 *      resumes B with a `call`, B suspends with a `ret` into A. Each
 *      resumed context's return out of its hook pops the other's entry
 *      off the return stack buffer, and B's suspend then pops its own.
 *   2  jumps both ways: each hook enters one common stub (`call` its body,
 *      then back to the program by `pop`/`jmp`), and the body switches by
 *      an indirect `jmp`. A resumed body's `ret` finds the stub's own
 *      return address on top of the buffer, whoever switched to it.
 *   3, 4  1 and 2 with a thread-pointer write (`wrfsbase`) at each switch,
 *      as between fibers with TLS of their own.
 *
 * stderr: ns=<nanoseconds per round trip>
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void *a_sp, *b_sp, *parent_sp;
volatile long counter;

#define SAVE "push %rbp\n push %rbx\n push %r12\n push %r13\n push %r14\n push %r15\n"
#define RESTORE "pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbx\n pop %rbp\n"
#define TP "rdfsbase %r8\n wrfsbase %r8\n"

/* Shape 1: A's hook resumes B by `call`; B's hook suspends by `ret`. */
#define CALL_RET(n, tp)                                                       \
    ".globl hook_a" #n "\n hook_a" #n ":\n" SAVE                             \
    "mov b_sp(%rip), %rdx\n" tp "call *(%rdx)\n" RESTORE "ret\n"              \
    ".globl hook_b" #n "\n hook_b" #n ":\n" SAVE                             \
    "lea 1f(%rip), %rax\n push %rax\n mov %rsp, b_sp(%rip)\n"                 \
    "mov parent_sp(%rip), %rsp\n" tp "ret\n"                                  \
    "1: mov %rsp, parent_sp(%rip)\n mov b_sp(%rip), %rsp\n add $8, %rsp\n"    \
    RESTORE "ret\n"                                                           \
    "start_b" #n ":\n mov %rsp, parent_sp(%rip)\n mov b_sp(%rip), %rsp\n"      \
    "add $8, %rsp\n and $-16, %rsp\n call loop_b\n ud2\n"

/* Shape 2: jumps both ways, through one common stub. */
#define JUMPS(n, tp)                                                          \
    "common" #n ":\n sub $8, %rsp\n call *%rax\n add $8, %rsp\n"              \
    "pop %r11\n jmp *%r11\n"                                                  \
    ".globl hook_a" #n "\n hook_a" #n ":\n lea body_a" #n "(%rip), %rax\n"   \
    "jmp common" #n "\n"                                                      \
    ".globl hook_b" #n "\n hook_b" #n ":\n lea body_b" #n "(%rip), %rax\n"   \
    "jmp common" #n "\n"                                                      \
    "body_a" #n ":\n" SAVE "lea 1f(%rip), %rcx\n push %rcx\n"                 \
    "mov %rsp, a_sp(%rip)\n mov b_sp(%rip), %rsp\n" tp "pop %rcx\n jmp *%rcx\n"\
    "1:\n" RESTORE "ret\n"                                                    \
    "body_b" #n ":\n" SAVE "lea 1f(%rip), %rcx\n push %rcx\n"                 \
    "mov %rsp, b_sp(%rip)\n mov a_sp(%rip), %rsp\n" tp "pop %rcx\n jmp *%rcx\n"\
    "1:\n" RESTORE "ret\n"                                                    \
    "start_b" #n ":\n and $-16, %rsp\n call loop_b\n ud2\n"

__asm__(".text\n" CALL_RET(1, "") JUMPS(2, "") CALL_RET(3, TP) JUMPS(4, TP));

void hook_a1(void), hook_b1(void), hook_a2(void), hook_b2(void);
void hook_a3(void), hook_b3(void), hook_a4(void), hook_b4(void);
void start_b1(void), start_b2(void), start_b3(void), start_b4(void);
static void (*const hook_a[])(void) = {hook_a1, hook_a2, hook_a3, hook_a4};
static void (*const hook_b[])(void) = {hook_b1, hook_b2, hook_b3, hook_b4};
static void (*const start_b[])(void) = {start_b1, start_b2, start_b3, start_b4};
static int shape;

__attribute__((noinline, used)) void loop_b(void)
{
    void (*hook)(void) = hook_b[shape];
    for (;;) {
        counter++;
        hook();
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[1]) > 4) {
        fprintf(stderr, "usage: switch_shapes 1|2|3|4 ROUND_TRIPS\n");
        return 2;
    }
    shape = atoi(argv[1]) - 1;
    long n = atol(argv[2]);
    size_t size = 1 << 20;
    char *stack = aligned_alloc(4096, size);
    void **top = (void **)(stack + size - 64);
    top[0] = (void *)start_b[shape]; /* B's first resume starts its loop */
    b_sp = top;
    void (*hook)(void) = hook_a[shape];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        counter++;
        hook();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
    printf("shape %d: %ld round trips, both sides ran: %s\n", shape + 1, n,
           counter == 2 * n ? "yes" : "no");
    fprintf(stderr, "ns=%.1f\n", ns);
    return counter == 2 * n ? 0 : 1;
}
