/*
 * Minimal TAP producer for the C unit tests (run by prove).
 * defines: ok, is_int, is_str, tap_done, tap_slurp (a whole file), and
 * tap_fixture / tap_model for the files `make deps` puts in place
 * (docs/testing.md)
 */
#ifndef NGX_LLM_TAP_H
#define NGX_LLM_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/file.h"          /* llm_read_file: tap_slurp */

static int tap_n, tap_failed;

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...) do {                                          \
        long long g_ = (long long) (got), w_ = (long long) (want);           \
        if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__))              \
            printf("#   got %lld, want %lld\n", g_, w_);                     \
    } while (0)
#define is_str(got, want, ...) do {                                          \
        const char *g_ = (got), *w_ = (want);                                \
        if (!tap_ok(g_ && w_ && strcmp(g_, w_) == 0, __FILE__, __LINE__,     \
                    __VA_ARGS__))                                            \
            printf("#   got \"%s\"\n#  want \"%s\"\n", g_ ? g_ : "(null)",   \
                   w_ ? w_ : "(null)");                                      \
    } while (0)

#include <stdarg.h>

static int
tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    tap_n++;
    printf("%sok %d - ", pass ? "" : "not ", tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!pass) {
        tap_failed++;
        printf("#   failed at %s:%d\n", file, line);
    }
    fflush(stdout);
    return pass;
}

/* print a reason and stop: prove reports the whole file as failed */
static inline void
tap_bail_out(const char *why)
{
    printf("Bail out! %s\n", why);
    fflush(stdout);
    exit(2);
}


/* $FIXTURES/rel: the fixtures `make deps` made (tools/fixtures.py); make
   unit sets FIXTURES, and there is no default outside the repository */
static inline const char *
tap_fixture(char *out, size_t len, const char *rel)
{
    const char *dir = getenv("FIXTURES");

    if (dir == NULL || dir[0] == '\0') {
        tap_bail_out("FIXTURES is not set: run the tests with make unit "
                     "(make deps makes the fixtures)");
    }
    snprintf(out, len, "%s/%s", dir, rel);
    return out;
}


/* $MODEL: the default model, fetched by make deps */
static inline const char *
tap_model(void)
{
    const char *m = getenv("MODEL");

    if (m == NULL || m[0] == '\0') {
        tap_bail_out("MODEL is not set: run the tests with make unit");
    }
    return m;
}


/* the whole file, NUL-terminated (its length in *len unless NULL), or
   NULL; the caller frees it */
static inline char *
tap_slurp(const char *path, size_t *len)
{
    return llm_read_file(path, 0, len);
}


static int
tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
