/* printf_body.h built the way distributions build: -D_FORTIFY_SOURCE=2,
 * so the calls go to __read_chk, __printf_chk, __fprintf_chk, ... */
#undef _FORTIFY_SOURCE
#define _FORTIFY_SOURCE 2
#include "printf_body.h"
