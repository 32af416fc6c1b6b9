/*
 * tls_dlopen_lib: a shared library with `__thread` variables, dlopen'ed by
 * tls_per_thread after its threads exist (its TLS is dynamic: reached
 * through each thread's DTV, allocated on first use). Built with
 * util::compile_shared.
 */
static __thread int tls_lib_value;
/* Not static: a static one that nothing writes is read as a constant. */
__thread int tls_lib_initialised = 7;

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
