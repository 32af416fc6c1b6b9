/*
 * tls_static_lib: tls_dlopen_lib's variables in static TLS. Initial-exec
 * accesses make glibc place the library's TLS in the static block's
 * surplus (DF_STATIC_TLS) and copy its image into every thread it knows
 * of when it is dlopen'ed. Built with util::compile_shared.
 */
#define TLS __attribute__((tls_model("initial-exec")))
static TLS __thread int tls_lib_value;
/* Not static: a static one that nothing writes is read as a constant. */
TLS __thread int tls_lib_initialised = 7;

void tls_lib_set(int v)
{
    tls_lib_value = v;
}

int tls_lib_get(void)
{
    return tls_lib_value;
}

int tls_lib_get_initialised(void)
{
    return tls_lib_initialised;
}
