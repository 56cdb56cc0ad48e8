/*
 * OpenAI-style request errors (api/error.h).
 */
#include "api/error.h"
#include "text/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>


/* a value quoted with %.40s may be cut inside a character, and so may a
   message at its buffer's end: the error is sent as JSON, so it must stay
   valid UTF-8 */
static void
utf8_sanitize(char *s)
{
    unsigned char  *p = (unsigned char *) s;
    size_t          len = strlen(s), i, n;

    for (i = 0; i < len; i += n) {
        n = llm_utf8_len(p + i, len - i);
        if (n == 0) {
            p[i] = '?';
            n = 1;
        }
    }
}


int
llm_api_fail(llm_api_error *err, int status, const char *code,
    const char *param, const char *fmt, ...)
{
    va_list  ap;

    err->status = status;
    snprintf(err->code, sizeof(err->code), "%s", code);
    snprintf(err->param, sizeof(err->param), "%s", param);
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    utf8_sanitize(err->message);
    utf8_sanitize(err->param);
    return -1;
}


int
llm_api_fail_oom(llm_api_error *err)
{
    return llm_api_fail(err, 500, "internal_error", "",
                        "The server ran out of memory while reading the "
                        "request.");
}


int
llm_api_fail_missing(llm_api_error *err, const char *param)
{
    return llm_api_fail(err, 400, "missing_required_parameter", param,
                        "Missing required parameter: '%s'.", param);
}


cJSON *
llm_api_field(const cJSON *obj, const char *name)
{
    cJSON  *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsNull(v) ? NULL : v;
}
