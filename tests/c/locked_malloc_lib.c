/*
 * locked_malloc_lib: a malloc replacement for LD_PRELOAD that takes a
 * pthread mutex around every allocation, as jemalloc's arenas and
 * tcmalloc's central lists do (a bump allocator over a static arena; free
 * gives back only the last block). Its lock calls go through the preload's
 * hooks, a try first as jemalloc's (the try's hook returns holding the
 * lock: a slice ending there found greenhook's first stack walk, which
 * allocated).
 * See allocator_slices.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static _Alignas(64) unsigned char arena[512 << 20];
static size_t used;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void take_lock(void)
{
    if (pthread_mutex_trylock(&lock) != 0)
        pthread_mutex_lock(&lock);
}

/* A block: where its bump began and ended and its size, in the 24 bytes
 * below it. */
static void *bump(size_t align, size_t n)
{
    if (align < 16)
        align = 16;
    take_lock();
    size_t need = n + align + 32, start = used;
    void *out = NULL;
    if (start + need <= sizeof arena) {
        used += need;
        uintptr_t p = ((uintptr_t)arena + start + 32 + align - 1) & ~(uintptr_t)(align - 1);
        ((size_t *)p)[-3] = start;
        ((size_t *)p)[-2] = start + need;
        ((size_t *)p)[-1] = n;
        out = (void *)p;
    }
    pthread_mutex_unlock(&lock);
    if (!out)
        errno = ENOMEM;
    return out;
}

/* Gives the block back if it is the last one made (a malloc and its free
 * with nothing in between, as in allocator_slices' loop). */
static void unbump(void *p)
{
    if ((uintptr_t)p < (uintptr_t)arena + 32 || (uintptr_t)p >= (uintptr_t)arena + sizeof arena)
        return; /* not ours: the loader's own, made before we were */
    take_lock();
    if (((size_t *)p)[-2] == used)
        used = ((size_t *)p)[-3];
    pthread_mutex_unlock(&lock);
}

void *malloc(size_t n) { return bump(16, n); }
void free(void *p)
{
    if (p)
        unbump(p);
}
void *calloc(size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = bump(16, n);
    if (p)
        memset(p, 0, n); /* a block given back may be made again */
    return p;
}
void *realloc(void *p, size_t n)
{
    void *q = bump(16, n);
    if (p && q && (uintptr_t)p >= (uintptr_t)arena && (uintptr_t)p < (uintptr_t)arena + sizeof arena) {
        size_t old = ((size_t *)p)[-1];
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}
int posix_memalign(void **out, size_t align, size_t n)
{
    void *p = bump(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t n) { return bump(align, n); }
void *memalign(size_t align, size_t n) { return bump(align, n); }
size_t malloc_usable_size(void *p) { return p ? ((size_t *)p)[-1] : 0; }
