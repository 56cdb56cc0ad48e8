#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/log.h"

static const char *llm_log_levels[] = {
    "", "emerg", "alert", "crit", "error", "warn", "notice", "info", "debug"
};

static char llm_log_ident[160] = "ngx_llm engine";


void
llm_log_set_ident(const char *ident)
{
    snprintf(llm_log_ident, sizeof(llm_log_ident), "%s", ident);
}


void
llm_log(int level, const char *fmt, ...)
{
    int         n;
    char        line[2048];
    time_t      now;
    va_list     ap;
    struct tm   tm;

    if (level < LLM_LOG_EMERG || level > LLM_LOG_DEBUG) {
        level = LLM_LOG_ERR;
    }

    now = time(NULL);
    localtime_r(&now, &tm);
    n = snprintf(line, sizeof(line),
                 "%04d/%02d/%02d %02d:%02d:%02d [%s] %d#0: %s: ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, llm_log_levels[level], (int) getpid(),
                 llm_log_ident);

    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);

    if (n > (int) sizeof(line) - 2) {
        n = sizeof(line) - 2;
    }
    line[n++] = '\n';

    /* one write() per line: lines from several processes do not mix */
    if (write(STDERR_FILENO, line, n) < 0) {
        /* nowhere left to report it */
    }
}
