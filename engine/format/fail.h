/*
 * The one way the file readers and the model loaders fail: a message of
 * the form "<path>: <what is wrong>" in the object's err buffer, and -1
 * to return (gguf.c, safetensors.c; model/own.c's llm_model_fail).
 *
 * defines: llm_fail, llm_vfail
 */
#ifndef NGX_LLM_FAIL_H
#define NGX_LLM_FAIL_H

#include <stdarg.h>
#include <stddef.h>

/* err (size bytes) = "<path, or anon where NULL>: <fmt's text>"; -1 */
int llm_fail(char *err, size_t size, const char *path, const char *anon,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int llm_vfail(char *err, size_t size, const char *path, const char *anon,
    const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

#endif /* NGX_LLM_FAIL_H */
