/* glibc's functions alloca no more than __libc_alloca_cutoff allows: a
 * quarter of the thread's stack block, at most 64 KiB. A thread of a 64
 * KiB stack gets 17 KiB; a fiber's descriptor said no stack block at all,
 * which glibc takes for the main thread's (64 KiB whatever the stack).
 * The cutoff is asked for in threads of three sizes, and in main. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static int (*cutoff)(size_t);

static void *ask(void *arg) {
    const char *who = arg;
    printf("%s: 16 KiB %d, 20 KiB %d, 60 KiB %d, 70 KiB %d\n", who, cutoff(16 << 10), cutoff(20 << 10),
           cutoff(60 << 10), cutoff(70 << 10));
    return NULL;
}

int main(void) {
    cutoff = (int (*)(size_t))dlsym(RTLD_DEFAULT, "__libc_alloca_cutoff");
    if (!cutoff) {
        printf("no __libc_alloca_cutoff in this glibc\n");
        return 0;
    }
    size_t sizes[] = {64 << 10, 128 << 10, 1 << 20};
    const char *names[] = {"64 KiB thread", "128 KiB thread", "1 MiB thread"};
    for (int i = 0; i < 3; i++) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, sizes[i]);
        pthread_t t;
        if (pthread_create(&t, &a, ask, (void *)names[i])) return 1;
        pthread_join(t, NULL);
        pthread_attr_destroy(&a);
    }
    ask("main");
    return 0;
}
