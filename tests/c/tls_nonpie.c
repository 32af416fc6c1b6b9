/*
 * tls_per_thread.c built as a non-PIE executable that takes malloc's
 * address in its own code, as node does. Such a program exports an
 * undefined `malloc` whose value is its PLT entry (the function's
 * canonical address), and dlsym(RTLD_DEFAULT, "malloc") returns that:
 * the preload took it for a malloc of the program's own and gave its
 * fibers one shared TLS (node's worker_threads then crashed).
 *
 * usage: as tls_per_thread.
 */
// cflags: -no-pie -fno-pic
#include <stdlib.h>

void *(*volatile tls_nonpie_malloc)(size_t);

/* The address taken in code (a 32-bit absolute relocation against malloc,
 * which needs the canonical PLT entry), not only in data. */
__attribute__((constructor)) static void take_mallocs_address(void)
{
    tls_nonpie_malloc = malloc;
}

#include "tls_per_thread.c"
