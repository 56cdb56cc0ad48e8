/*
 * Engine log: one line per event, in nginx's error log format, to stderr.
 * nginx hands the engine its error log as stderr, so engine lines land
 * beside the workers' lines and the same tools (and tests) read both.
 *
 * defines: llm_log, llm_log_set_ident, LLM_LOG_*
 */
#ifndef NGX_LLM_LOG_H
#define NGX_LLM_LOG_H

enum {
    LLM_LOG_EMERG = 1,
    LLM_LOG_ALERT,
    LLM_LOG_CRIT,
    LLM_LOG_ERR,
    LLM_LOG_WARN,
    LLM_LOG_NOTICE,
    LLM_LOG_INFO,
    LLM_LOG_DEBUG,
};

void llm_log_set_ident(const char *ident);
void llm_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
