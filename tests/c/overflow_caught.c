/*
 * overflow_caught: a thread that overflows its stack, with a SIGSEGV
 * handler installed (SA_ONSTACK) and an alternate signal stack of its
 * own, catches the fault and siglongjmps out, then goes on; twice, to
 * show the handler still works after the first. Under the preload the
 * overflow used to end in greenhook's report and an abort: the report
 * now stands only where the program has no such handler.
 *
 * stdout: the same with and without the preload.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sigjmp_buf jb;

static void on_segv(int sig)
{
    (void)sig;
    siglongjmp(jb, 1);
}

static int deeper(int n)
{
    volatile char buf[1024];
    memset((char *)buf, n, sizeof buf);
    return n == 0 ? 0 : deeper(n - 1) + buf[1];
}

static void *overflows(void *arg)
{
    (void)arg;
    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
    sigaltstack(&ss, NULL);
    for (int round = 1; round <= 2; round++) {
        if (sigsetjmp(jb, 1) == 0)
            printf("no overflow: %d\n", deeper(1 << 20));
        else
            printf("round %d: overflow caught\n", round);
    }
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_ONSTACK | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    pthread_t t;
    pthread_create(&t, NULL, overflows, NULL);
    pthread_join(t, NULL);
    printf("done\n");
    return 0;
}
