/* printf_body.h with the plain functions (no _FORTIFY_SOURCE). */
#undef _FORTIFY_SOURCE
#include "printf_body.h"
