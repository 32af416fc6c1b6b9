/* dlopen of a library whose constructor makes the process's first thread
 * (tests/c/ctor_thread_lib.c): the load must finish. greenhook's first
 * pthread_create has glibc make a thread of its own first, which must
 * take none of the loader's locks: its creator holds them.
 * usage: ctor_thread LIB */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    int (*ran)(void) = (int (*)(void))dlsym(h, "ctor_thread_ran");
    printf("constructor's thread ran: %d\n", ran ? ran() : -1);
    return 0;
}
