/*
 * OpenAI-style request errors, filled the same way by every request
 * reader (api/request.c, api/tools.c): status, code, param and a message that
 * stays valid UTF-8 whatever %.Ns cut.
 *
 * defines: llm_api_fail, llm_api_fail_oom, llm_api_fail_missing,
 *          llm_api_field
 */
#ifndef NGX_LLM_API_ERROR_H
#define NGX_LLM_API_ERROR_H

#include <cjson/cJSON.h>

#include "api/request.h"

/* fills err; returns -1, so a reader can "return llm_api_fail(...)" */
int llm_api_fail(llm_api_error *err, int status, const char *code,
    const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int llm_api_fail_oom(llm_api_error *err);
int llm_api_fail_missing(llm_api_error *err, const char *param);

/* obj's member name; a JSON null is an absent field (NULL) */
cJSON *llm_api_field(const cJSON *obj, const char *name);

#endif /* NGX_LLM_API_ERROR_H */
