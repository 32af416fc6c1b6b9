/*
 * loader_serial: four threads each dlopen a copy of the same library and
 * dlclose it, while its constructor and destructor wait (a sleep, as one
 * reading a file would); the first constructor loads a fifth copy from
 * inside itself.
 *
 * usage: loader_serial LIBRARY
 *
 * glibc holds its loader lock through the constructors a dlopen runs and
 * the destructors of a dlclose, so another thread's load waits: at most
 * two constructors are ever under way (the nested one inside the first),
 * and one destructor. Under the preload the threads are fibers of one OS
 * thread, whose id glibc's recursive lock cannot tell apart: the fibers'
 * constructors ran interleaved (five at once), and a dlclose made while
 * another fiber's ran returned at once, before its library's destructor
 * (glibc leaves the work to the dlclose under way), until greenhook held
 * their loads and unloads one at a time itself.
 *
 * stdout: the counts, the same with and without the preload.
 */
// link: -rdynamic
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ctor_inside, ctor_most, ctor_ran, dtor_inside, dtor_most, dtor_ran;
const char *nested;
int nested_done;

static char dir[64];
static char paths[5][96];
static int destructed[5];
static int early; /* dlcloses that returned before their destructor ran */

void destructor_ran(const char *path)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(path, paths[i]) == 0)
            destructed[i] = 1;
}

static void copy(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    char buf[65536];
    ssize_t n;
    if (in < 0 || out < 0) {
        printf("cannot copy %s to %s\n", from, to);
        exit(1);
    }
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, n) != n)
            exit(1);
    close(in);
    close(out);
}

static void *load(void *arg)
{
    int i = (int)(intptr_t)arg;
    const char *path = paths[i];
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        printf("dlopen failed: %s\n", dlerror());
        return NULL;
    }
    int (*loaded)(void) = (int (*)(void))dlsym(h, "loader_serial_lib_loaded");
    intptr_t ok = loaded && loaded();
    dlclose(h);
    if (!destructed[i])
        __atomic_add_fetch(&early, 1, __ATOMIC_RELAXED);
    return (void *)ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: loader_serial LIBRARY\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "/tmp/loader_serial.%d", (int)getpid());
    mkdir(dir, 0700);
    for (int i = 0; i < 5; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/lib%d.so", dir, i);
        copy(argv[1], paths[i]);
    }
    nested = paths[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, load, (void *)(intptr_t)i);
    int loaded = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        loaded += r != NULL;
    }
    printf("loaded %d of 4\n", loaded);
    printf("constructors: %d ran, at most %d at once\n", ctor_ran, ctor_most);
    printf("destructors: %d ran, at most %d at once; %d dlclose returned before its own\n", dtor_ran, dtor_most,
           early);
    for (int i = 0; i < 5; i++)
        unlink(paths[i]);
    rmdir(dir);
    return 0;
}
