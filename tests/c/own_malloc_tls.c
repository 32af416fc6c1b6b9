/*
 * own_malloc_tls: a program with a malloc of its own (a bump allocator
 * over a static arena, never reusing memory) that keeps per-thread state
 * as jemalloc, tcmalloc and mimalloc do: a thread-local "cache", counted
 * in a global list when a thread first allocates and taken off it by the
 * destructor of a pthread key it sets then. Two threads each add to a
 * thread-local of the program's own.
 *
 * usage: own_malloc_tls
 *
 * Each fiber is one more thread to such an allocator: its thread-locals
 * its own, its key's destructor run at its end, once more if a malloc on
 * its way out set the cache up again, so that no fiber's cache is left on
 * the list (jemalloc's list of threads, mimalloc's heaps: left there, a
 * fiber's block reused or unmapped corrupted them or leaked its memory).
 *
 * stdout: what each thread read back (8 and 9) and how many caches are
 * left on the list once they have ended (1: main's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static _Alignas(64) unsigned char arena[256 << 20];
static size_t used;

/* A block: its size in the 8 bytes below it, aligned to `align`. */
static void *bump(size_t align, size_t n)
{
    if (align < 16)
        align = 16;
    size_t need = n + align + 8, start = __atomic_fetch_add(&used, need, __ATOMIC_RELAXED);
    if (start + need > sizeof arena) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t p = ((uintptr_t)arena + start + 8 + align - 1) & ~(uintptr_t)(align - 1);
    ((size_t *)p)[-1] = n;
    return (void *)p;
}

static pthread_key_t cache_key;
static __thread int cache_set_up;
static int caches;

static void cache_down(void *p)
{
    (void)p;
    cache_set_up = 0;
    __atomic_fetch_sub(&caches, 1, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void cache_boot(void)
{
    pthread_key_create(&cache_key, cache_down);
}

/* Every allocation goes through the calling thread's cache. */
static void cache(void)
{
    if (!cache_set_up) {
        cache_set_up = 1;
        __atomic_fetch_add(&caches, 1, __ATOMIC_RELAXED);
        pthread_setspecific(cache_key, &cache_set_up);
    }
}

void *malloc(size_t n)
{
    cache();
    return bump(16, n);
}

void free(void *p)
{
    (void)p;
}

void *calloc(size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    cache();
    return bump(16, n); /* the arena is zero and never reused */
}

void *realloc(void *p, size_t n)
{
    cache();
    void *q = bump(16, n);
    if (p && q) {
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

void *aligned_alloc(size_t align, size_t n)
{
    return bump(align, n);
}

void *memalign(size_t align, size_t n)
{
    return bump(align, n);
}

size_t malloc_usable_size(void *p)
{
    return p ? ((size_t *)p)[-1] : 0;
}

static __thread int mine = 7;

static void *add(void *arg)
{
    mine += (int)(intptr_t)arg;
    return (void *)(intptr_t)mine;
}

int main(void)
{
    void *r[2];
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        pthread_create(&t, NULL, add, (void *)(intptr_t)(i + 1));
        pthread_join(t, &r[i]);
    }
    printf("threads read %d and %d; caches left: %d\n", (int)(intptr_t)r[0], (int)(intptr_t)r[1],
           __atomic_load_n(&caches, __ATOMIC_RELAXED));
    return 0;
}
