/*
 * Strict JSON (RFC 8259) and UTF-8 (RFC 3629) checks on raw bytes.
 *
 * cJSON is lenient where a server must not be: it skips every byte up to
 * 0x20 as whitespace (NUL and vertical tab included), reads 02 as 2, "2."
 * as 2 and "2.e1" as 20, and turns a bad \u escape into U+0000. A request
 * body goes through llm_json_check first, so cJSON only ever sees texts
 * the RFC accepts. The check is one pass, allocates nothing and recurses
 * nowhere (the nesting is a bit stack), so a hostile body costs time
 * linear in its length and a fixed amount of stack.
 *
 * Beyond the grammar it refuses what cJSON would turn into something else:
 * an unpaired UTF-16 surrogate escape (cJSON fails it, with a vaguer
 * error) and, on request, \u0000 (our strings are C strings).
 *
 * UTF-8's rules are text/utf8.h's.
 *
 * defines: llm_json_check
 */
#ifndef NGX_LLM_JSON_STRICT_H
#define NGX_LLM_JSON_STRICT_H

#include <stddef.h>

/* cJSON refuses deeper texts itself (CJSON_NESTING_LIMIT) */
#define LLM_JSON_MAX_DEPTH    1000

#define LLM_JSON_NO_NUL       0x01u     /* refuse \u0000 in strings */

typedef enum {
    LLM_JSON_OK = 0,
    LLM_JSON_EMPTY,         /* nothing but whitespace */
    LLM_JSON_UNFINISHED,    /* the text ends inside a value */
    LLM_JSON_SYNTAX,        /* an unexpected byte */
    LLM_JSON_CONTROL,       /* a control byte outside a string */
    LLM_JSON_STRING_CONTROL,/* a raw control byte inside a string */
    LLM_JSON_UTF8,          /* invalid UTF-8 inside a string */
    LLM_JSON_ESCAPE,        /* \x, or \u without four hex digits */
    LLM_JSON_SURROGATE,     /* \uD800-\uDFFF not in a high-low pair */
    LLM_JSON_NUL,           /* \u0000 with LLM_JSON_NO_NUL */
    LLM_JSON_NUMBER,        /* 02, 2., 2.e1, 1e, -, +1 is SYNTAX */
    LLM_JSON_TRAILING,      /* more than whitespace after the value */
    LLM_JSON_DEPTH,         /* arrays and objects nested too deep */
    LLM_JSON_VALUES         /* more values than allowed */
} llm_json_status;

typedef struct {
    llm_json_status  status;
    size_t           offset;    /* byte where the fault is (the start of a
                                   bad number or escape; len when the text
                                   ended too soon) */
    unsigned char    byte;      /* the byte at offset, when there is one */
    size_t           values;    /* values seen, keys not counted */
} llm_json_result;

/*
 * Checks text (len bytes, no NUL needed) against RFC 8259: one value with
 * optional whitespace around it. max_depth (capped at LLM_JSON_MAX_DEPTH)
 * bounds the open arrays and objects, max_values (0: no bound) the values.
 * Returns LLM_JSON_OK or the first fault in text order, also in res.
 */
llm_json_status llm_json_check(const char *text, size_t len, int max_depth,
    size_t max_values, unsigned flags, llm_json_result *res);

#endif /* NGX_LLM_JSON_STRICT_H */
