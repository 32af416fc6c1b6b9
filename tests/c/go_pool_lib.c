/*
 * go_pool_lib: native_pool_lib with Go's build ID note, as a shared library
 * Go made (-buildmode=c-shared) carries: its threads are Go's runtime's.
 */
#include "go_note.h"
#include "native_pool_lib.c"
