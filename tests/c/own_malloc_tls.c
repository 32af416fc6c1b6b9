/*
 * own_malloc_tls: a program with a malloc of its own (a bump allocator
 * over a static arena, never reusing memory) and a thread-local of its
 * own, which two threads each add to.
 *
 * usage: own_malloc_tls
 *
 * With a malloc that is not glibc's, greenhook gives fibers their thread's
 * TLS (see fiber::tls::glibc_malloc), so the threads' thread-local is one
 * variable: the line greenhook writes on stderr must say so, naming the
 * program among the objects whose thread-locals every fiber shares.
 *
 * stdout: what each thread read back (natively 8 and 9; under the preload
 * the second thread starts from the first one's 8).
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

void *malloc(size_t n)
{
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
    return bump(16, n); /* the arena is zero and never reused */
}

void *realloc(void *p, size_t n)
{
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
    printf("threads read %d and %d\n", (int)(intptr_t)r[0], (int)(intptr_t)r[1]);
    return 0;
}
