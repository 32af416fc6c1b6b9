/*
 * tls_desc_lib: tls_dlopen_lib's variables reached through TLS descriptors
 * (-mtls-dialect=gnu2): glibc puts such a library's TLS in the static
 * block's surplus when there is room, as it would an initial-exec one.
 * Built with util::compile_shared.
 */
// cflags: -mtls-dialect=gnu2
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
