/*
 * loader_serial_lib: a library whose constructor and destructor each wait
 * 20 ms, counting in the program's counters (see loader_serial.c) how many
 * run at once, and the destructor tells the program it ran. The first
 * constructor to run also loads the program's `nested` library from inside
 * itself, as a constructor may.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

extern int ctor_inside, ctor_most, ctor_ran, dtor_inside, dtor_most, dtor_ran;
extern const char *nested;
extern int nested_done;
extern void destructor_ran(const char *path);

__attribute__((constructor)) static void up(void)
{
    if (++ctor_inside > ctor_most)
        ctor_most = ctor_inside;
    if (nested && !nested_done) {
        nested_done = 1;
        if (!dlopen(nested, RTLD_NOW))
            printf("nested dlopen failed: %s\n", dlerror());
    }
    usleep(20000);
    ctor_ran++;
    ctor_inside--;
}

__attribute__((destructor)) static void down(void)
{
    if (++dtor_inside > dtor_most)
        dtor_most = dtor_inside;
    usleep(20000);
    dtor_ran++;
    dtor_inside--;
    Dl_info me;
    if (dladdr((void *)down, &me))
        destructor_ran(me.dli_fname);
}

int loader_serial_lib_loaded(void)
{
    return 1;
}
