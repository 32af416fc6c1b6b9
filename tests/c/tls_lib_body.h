/*
 * tls_lib_body.h: the body of the tls_*_lib test libraries (dlopen'ed by
 * tls_per_thread): two `__thread` variables and their accessors. TLS_MODEL
 * is the variables' TLS model attribute, if the library sets one.
 */
#ifndef TLS_MODEL
#define TLS_MODEL
#endif

static TLS_MODEL __thread int tls_lib_value;
/* Not static: a static one that nothing writes is read as a constant. */
TLS_MODEL __thread int tls_lib_initialised = 7;

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
