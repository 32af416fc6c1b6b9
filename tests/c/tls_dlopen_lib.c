/*
 * tls_dlopen_lib: a shared library with `__thread` variables, dlopen'ed by
 * tls_per_thread after its threads exist (its TLS is dynamic: reached
 * through each thread's DTV, allocated on first use). Built with
 * util::compile_shared.
 */
#include "tls_lib_body.h"
