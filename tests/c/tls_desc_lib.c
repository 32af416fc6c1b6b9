/*
 * tls_desc_lib: tls_dlopen_lib's variables reached through TLS descriptors
 * (-mtls-dialect=gnu2): glibc puts such a library's TLS in the static
 * block's surplus when there is room, as it would an initial-exec one.
 * Built with util::compile_shared.
 */
// cflags: -mtls-dialect=gnu2
#include "tls_lib_body.h"
