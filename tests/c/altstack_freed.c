/*
 * altstack_freed: threads that set an alternate signal stack of their own
 * and end: one frees it without disabling it first (natively safe: the
 * stack goes with its thread), one disables it and unmaps it (as Rust's
 * std does), one leaves it set. Then main, whose SIGUSR1 handler runs on
 * an alternate stack (SA_ONSTACK) if there is one, allocates a block of
 * the same size, fills it, and is sent SIGUSR1 by a child.
 *
 * Under the preload the OS thread went on with the first thread's freed
 * stack as its alternate stack, and the handler's frame was written into
 * the block the heap had put there (3 KiB of it overwritten).
 *
 * stdout: the same with and without the preload.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (64 * 1024)

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
    (void)sig;
    handled++;
}

static void *frees_it(void *arg)
{
    (void)arg;
    void *mem = malloc(SIZE);
    stack_t ss = {.ss_sp = mem, .ss_size = SIZE, .ss_flags = 0};
    int r = sigaltstack(&ss, NULL);
    free(mem);
    return (void *)(long)r;
}

static void *disables_it(void *arg)
{
    (void)arg;
    void *mem = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t ss = {.ss_sp = mem, .ss_size = SIZE, .ss_flags = 0};
    int r = sigaltstack(&ss, NULL);
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    r |= sigaltstack(&off, NULL);
    munmap(mem, SIZE);
    return (void *)(long)r;
}

static void *keeps_it(void *arg)
{
    (void)arg;
    static char mem[SIZE];
    stack_t ss = {.ss_sp = mem, .ss_size = SIZE, .ss_flags = 0};
    return (void *)(long)sigaltstack(&ss, NULL);
}

static void run(void *(*f)(void *), const char *what)
{
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, f, NULL);
    pthread_join(t, &r);
    printf("a thread that %s its stack: sigaltstack %ld\n", what, (long)r);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);

    run(disables_it, "disables and unmaps");
    run(keeps_it, "keeps");
    run(frees_it, "frees");

    unsigned char *block = malloc(SIZE);
    memset(block, 0xab, SIZE);
    pid_t pid = fork();
    if (pid == 0) {
        kill(getppid(), SIGUSR1);
        _exit(0);
    }
    while (!handled)
        usleep(1000);
    waitpid(pid, NULL, 0);
    int changed = 0;
    for (int i = 0; i < SIZE; i++)
        changed += block[i] != 0xab;
    printf("handler ran %d time(s); bytes of a later block overwritten: %d\n", (int)handled, changed);
    free(block);
    return 0;
}
