/*
 * tls_static_lib: tls_dlopen_lib's variables in static TLS. Initial-exec
 * accesses make glibc place the library's TLS in the static block's
 * surplus (DF_STATIC_TLS) and copy its image into every thread it knows
 * of when it is dlopen'ed. Built with util::compile_shared.
 */
#define TLS_MODEL __attribute__((tls_model("initial-exec")))
#include "tls_lib_body.h"
