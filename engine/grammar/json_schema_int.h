/*
 * The JSON Schema compiler's insides, shared by its files only (nothing
 * outside engine/grammar/json_schema*.c includes this). The files, each
 * calling only the ones below it (docs/architecture.md: no two files call
 * each other):
 *
 *   json_schema.c          the recursive part: a subschema by its types,
 *                          objects, arrays, enum and const, $ref rules,
 *                          allOf and anyOf, the shared rules, the entry
 *   json_schema_keys.c     object keys: additional keys (any name but the
 *                          declared ones), patternProperties, propertyNames
 *   json_schema_merge.c    $ref targets, and allOf merged into one schema
 *   json_schema_string.c   strings: pattern (ECMA-262 -> GBNF), format,
 *                          lengths
 *   json_schema_number.c   integers and numbers between bounds
 *   json_schema_keyword.c  reading a schema: JSON pointers for messages,
 *                          the keywords refused and enforced, counts, types
 *   json_schema_buf.c      writing the grammar: capped buffers, the first
 *                          error, literals, repetitions, rules, alternatives
 *
 * defines: js_ctx (one compile), js_ref, js_alts, re_class, js_re,
 *          js_prop, js_branches, the caps and result codes (JS_*), the
 *          type bits (T_*), the shared rules (N_*), and each file's
 *          functions that the files above it call
 */
#ifndef NGX_LLM_JSON_SCHEMA_INT_H
#define NGX_LLM_JSON_SCHEMA_INT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar_impl.h"
#include "grammar/json_schema.h"

#define JS_MAX_DEPTH        64      /* nested subschemas, and allOf merges */
#define JS_MAX_REFS         1024    /* distinct $ref targets */
#define JS_MAX_REPEAT       LLM_GRAMMAR_MAX_REPEAT  /* maxLength, {n,m}... */
#define JS_INT_DIGITS       16      /* integer part of a number */
#define JS_FRAC_DIGITS      16      /* fraction of a number */
#define JS_MAX_SAFE         9007199254740992.0     /* 2^53: bounds, enum */
#define JS_MAX_ROOT         64      /* the root rule's name */
#define JS_MAX_KEYS         256     /* additional-key rules shared */

#define JS_OK               0
#define JS_EMPTY            1       /* the subschema accepts nothing */
#define JS_NOKEYS           2       /* propertyNames allows no key */
#define JS_ERR              (-1)

/* the JSON types; "number" is T_INT | T_FRAC */
#define T_NULL              0x01
#define T_BOOL              0x02
#define T_OBJ               0x04
#define T_ARR               0x08
#define T_STR               0x10
#define T_INT               0x20
#define T_FRAC              0x40
#define T_ALL               0x7f

/* the shared rules, written once at the end when used */
#define N_WS                0x001
#define N_CHAR              0x002
#define N_STRING            0x004
#define N_INT               0x008
#define N_NUMBER            0x010
#define N_VALUE             0x020
#define N_KCHAR             0x040
#define N_DATE              0x080
#define N_TIME              0x100
#define N_UUID              0x200
#define N_EMAIL             0x400
#define N_HOSTNAME          0x800
#define N_IPV4              0x1000
#define N_IPV6              0x2000
#define N_URI               0x4000


typedef struct {
    const cJSON    *target;
    int             id;
    int             busy;       /* being written: a $ref to it recurses */
    int             cdepth;     /* containers open when it began */
    int             empty;
    int             recursed;
} js_ref;

typedef struct {
    const cJSON    *doc;
    cJSON          *owned;      /* the schemas allOf merges make */
    const char     *root;
    int             max_ws;
    size_t          max;        /* out->max, for every buffer */
    llm_strbuf      rules;      /* the helper rules */
    char           *err;
    size_t          err_len;
    int             failed;     /* err is set */
    int             n_ids;
    unsigned        need;
    js_ref         *refs;
    int             n_refs;
    int             depth;
    int             cdepth;     /* objects and arrays open */
    char           *key_text[JS_MAX_KEYS];  /* additional-key rules made */
    int             key_id[JS_MAX_KEYS];
    int             n_keys;
    int             strict;
    llm_strbuf     *relaxed;    /* the report, or NULL */
    uint32_t        mod_made;   /* bit k: the multipleOf k rules written */
    /* set with the error when it is one relaxing can lift: the keywords
       to drop ("a/b": both) and the name to report them by */
    char            drop[64];
    char            report[96];
} js_ctx;

/* the alternatives of one expression, " | " between them */
typedef struct {
    llm_strbuf  b;
    int         n;
} js_alts;

/* a class of code points being built (patterns, keys) */
#define RE_MAX_RANGES  128

typedef struct {
    uint32_t    lo[RE_MAX_RANGES], hi[RE_MAX_RANGES];
    int         n;
    int         over;       /* more were added than fit */
} re_class;

/* a pattern being read */
typedef struct {
    js_ctx      *c;
    const char  *p, *end;
    const char  *ptr;
    int          depth;
    const char  *start;
} js_re;

/* a property of an object being written */
typedef struct {
    const char    *name;
    const cJSON   *schema;     /* NULL: the additionalProperties schema */
    int            required;
    char           kv[96];     /* its rule */
} js_prop;

/* the schemas allOf (and $ref beside other keywords) merges */
#define JS_MAX_BRANCHES  64

typedef struct {
    const cJSON    *b[JS_MAX_BRANCHES];
    int             n;
    int             empty;
} js_branches;


/* --- writing the grammar (json_schema_buf.c) --------------------------- */

int js_fail(js_ctx *c, const char *fmt, ...);
/* before a js_fail of what is not enforced: without strict, the keywords
   drop ("a/b" for two) may be dropped to go on; report names them (NULL:
   drop). Only the first error's counts; js_relax_as overrides it */
void js_relaxable(js_ctx *c, const char *drop, const char *report);
void js_relax_as(js_ctx *c, const char *drop);
/* appends; the first failure (over out->max) sets the error, and the
   callers check c->failed where a rule ends */
void js_put(js_ctx *c, llm_strbuf *b, const char *s);
void js_putf(js_ctx *c, llm_strbuf *b, const char *fmt, ...);
/* an empty buffer with the compile's cap */
void js_buf(js_ctx *c, llm_strbuf *b);
/* a new helper rule's name: <root>-<kind><n> */
void js_name(js_ctx *c, char *name, size_t len, const char *kind);
/* a reference to a shared rule (N_*), which is then written at the end */
void js_need(js_ctx *c, llm_strbuf *e, unsigned what, const char *suffix);
/* name ::= body, into the helper rules */
int js_rule(js_ctx *c, const char *name, llm_strbuf *body);
/* a GBNF literal of n bytes */
void js_lit(js_ctx *c, llm_strbuf *b, const char *s, size_t n);
/* the JSON string text of s, in the one form the grammar accepts */
void js_json_string(js_ctx *c, llm_strbuf *b, const char *s);
/* a repetition suffix; max < 0: no upper bound */
void js_rep(js_ctx *c, llm_strbuf *b, long min, long max);
void js_alt_add(js_ctx *c, js_alts *a, const char *x);
/* writes the alternatives to e: JS_EMPTY when there are none */
int js_alt_end(js_ctx *c, js_alts *a, llm_strbuf *e);


/* --- reading the schema (json_schema_keyword.c) ------------------------ */

/* ptr/key with ~ and / escaped (RFC 6901), cut to fit */
void js_child(char *dst, size_t len, const char *ptr, const char *key);
/* ptr/key/i */
void js_index(char *dst, size_t len, const char *ptr, const char *key,
    int i);
/* ptr for a message: "the root" for "" */
const char *js_at(const char *ptr);
/* 1 when s is in the NULL-terminated list */
int js_in(const char *const *list, const char *s);
/* validation keywords we cannot enforce (refused), and the ones we do */
extern const char *const js_refused[];
extern const char *const js_supported[];
/* JS_ERR on a refused keyword (or an embedded $id) in s */
int js_check_keywords(js_ctx *c, const cJSON *s, const char *ptr);
/* 1 when s has a keyword that constrains, other than skip */
int js_constrains(const cJSON *s, const char *skip);
/* a count keyword: absent -> dflt; else a non-negative integer up to
   JS_MAX_REPEAT */
int js_count(js_ctx *c, const cJSON *s, const char *key, const char *ptr,
    long dflt, long *out);
/* the types "type" allows (all when absent) */
int js_types(js_ctx *c, const cJSON *s, const char *ptr, int *mask);
/* the types of one JSON value */
int js_value_type(const cJSON *v);
/* 1 when name is in the "required" array req */
int js_required(const cJSON *req, const char *name);


/* --- integers and numbers (json_schema_number.c) ----------------------- */

int js_gen_number(js_ctx *c, const cJSON *s, const char *ptr, int integer,
    llm_strbuf *e);


/* --- strings (json_schema_string.c) ------------------------------------ */

/* one UTF-8 code point from r->p; 0 at the end or on a bad sequence */
uint32_t re_utf8(js_re *r);
void re_add(re_class *k, uint32_t lo, uint32_t hi);
/* sorted, overlapping and adjacent ranges merged */
void re_normalize(re_class *k);
/* one code point inside a GBNF class */
void re_class_cp(js_ctx *c, llm_strbuf *b, uint32_t cp);
/* the JSON text of one character of a string, as a GBNF literal */
void re_char_lit(js_ctx *c, llm_strbuf *b, uint32_t cp);
/* the JSON strings a pattern matches (not anchored unless ^ / $ say) */
int js_pattern(js_ctx *c, const char *re, const char *ptr, llm_strbuf *e);
int js_gen_string(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e);
/* the rules of the formats hostname, ipv4, ipv6 and uri that c->need
   asks for */
void js_format_rules(js_ctx *c, llm_strbuf *out);


/* --- $ref and allOf (json_schema_merge.c) ------------------------------ */

/* the target of s's $ref, through refs to refs */
int js_ref_target(js_ctx *c, const cJSON *s, const char *ptr,
    const cJSON **t);
/* s and what its $ref and allOf bring, flattened */
int js_flatten(js_ctx *c, const cJSON *s, const char *ptr, js_branches *br,
    int depth);
/* the branches merged into one schema *out (owned by c) */
int js_merge(js_ctx *c, js_branches *br, const char *ptr, cJSON **out);


/* --- object keys (json_schema_keys.c) ---------------------------------- */

/* an additional property's key: any string but the declared names */
int js_extra_key(js_ctx *c, llm_strbuf *b, const char **names, int n);
/* the keys of additional properties under patternProperties or
   propertyNames; JS_EMPTY when no key is allowed */
int js_rule_keys(js_ctx *c, llm_strbuf *b, const cJSON *ppat, const cJSON *pn,
    const char **names, int n, const char *ptr);
/* patternProperties and propertyNames against the declared names */
int js_key_rules(js_ctx *c, const cJSON *s, const char *ptr, js_prop *list,
    int *n, const cJSON **ppat, const cJSON **pn);

#endif /* NGX_LLM_JSON_SCHEMA_INT_H */
