/*
 * "<path>: <fault>" messages (fail.h).
 *
 * defines: llm_fail, llm_vfail
 */
#include <stdio.h>

#include "format/fail.h"


int
llm_vfail(char *err, size_t size, const char *path, const char *anon,
    const char *fmt, va_list ap)
{
    int  n;

    n = snprintf(err, size, "%s: ", path ? path : anon);
    if (n >= 0 && (size_t) n < size) {
        vsnprintf(err + n, size - n, fmt, ap);
    }
    return -1;
}


int
llm_fail(char *err, size_t size, const char *path, const char *anon,
    const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    llm_vfail(err, size, path, anon, fmt, ap);
    va_end(ap);
    return -1;
}
