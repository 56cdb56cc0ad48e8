/*
 * JSON Schema -> GBNF. One pass over the schema (cJSON), writing an
 * expression for each subschema; a subschema a $ref points to becomes a
 * rule of its own, so recursive schemas give recursive rules. allOf is
 * merged into one schema before it is written; anyOf and oneOf become
 * alternatives. docs/json_schema.md lists what is enforced, what is
 * approximated (property order, oneOf as anyOf, whitespace and number caps)
 * and what is refused.
 *
 * The grammar matches the JSON text a schema accepts in one form: tokens
 * separated by at most max_ws blanks, properties in the schema's order,
 * strings with the JSON escapes, numbers of at most 16 integer and 16
 * fraction digits. Every text it accepts is valid for the schema (the
 * property test in t/unit/test_json_schema.c checks it against python
 * jsonschema); not every valid text is accepted.
 */
#include "grammar/json_schema.h"
#include "grammar/grammar_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
} js_ctx;


static int js_gen(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e);


/* --- buffers ---------------------------------------------------------- */

int
llm_strbuf_append(llm_strbuf *b, const char *s, size_t len)
{
    size_t  cap;
    char   *p;

    if (b->max && b->len + len > b->max) {
        return -1;
    }
    if (b->data == NULL || b->len + len + 1 > b->cap) {
        cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1) {
            cap *= 2;
        }
        p = realloc(b->data, cap);
        if (p == NULL) {
            return -1;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}


void
llm_strbuf_free(llm_strbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}


static int
js_fail(js_ctx *c, const char *fmt, ...)
{
    va_list  ap;

    if (!c->failed) {
        va_start(ap, fmt);
        vsnprintf(c->err, c->err_len, fmt, ap);
        va_end(ap);
        c->failed = 1;
    }
    return JS_ERR;
}


/* appends; the first failure (over out->max) sets the error, and the
   callers check c->failed where a rule ends */
static void
js_put(js_ctx *c, llm_strbuf *b, const char *s)
{
    if (c->failed) {
        return;
    }
    if (llm_strbuf_append(b, s, strlen(s)) != 0) {
        js_fail(c, "json_schema: the grammar would be over %zu bytes",
                c->max);
    }
}


static void
js_putf(js_ctx *c, llm_strbuf *b, const char *fmt, ...)
{
    char     tmp[256];
    va_list  ap;

    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    js_put(c, b, tmp);
}


static void
js_buf(js_ctx *c, llm_strbuf *b)
{
    memset(b, 0, sizeof(*b));
    b->max = c->max;
}


static void
js_name(js_ctx *c, char *name, size_t len, const char *kind)
{
    snprintf(name, len, "%s-%s%d", c->root, kind, ++c->n_ids);
}


static void
js_need(js_ctx *c, llm_strbuf *e, unsigned what, const char *suffix)
{
    c->need |= what;
    js_putf(c, e, "%s-%s", c->root, suffix);
}


/* name ::= body, into the helper rules */
static int
js_rule(js_ctx *c, const char *name, llm_strbuf *body)
{
    js_put(c, &c->rules, name);
    js_put(c, &c->rules, " ::= ");
    js_put(c, &c->rules, body->data ? body->data : "\"\"");
    js_put(c, &c->rules, "\n");
    return c->failed ? JS_ERR : JS_OK;
}


/* a GBNF literal of n bytes */
static void
js_lit(js_ctx *c, llm_strbuf *b, const char *s, size_t n)
{
    char    esc[8];
    size_t  i;

    js_put(c, b, "\"");
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char) s[i];

        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char) ch;
            esc[2] = '\0';
        } else if (ch == '\n') {
            strcpy(esc, "\\n");
        } else if (ch == '\r') {
            strcpy(esc, "\\r");
        } else if (ch == '\t') {
            strcpy(esc, "\\t");
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof(esc), "\\x%02x", ch);
        } else {
            esc[0] = (char) ch;
            esc[1] = '\0';
        }
        js_put(c, b, esc);
    }
    js_put(c, b, "\"");
}


/* the JSON string text of s (with its quotes), in the one form the
   grammar accepts: short escapes, \u00XX for other controls, UTF-8 raw */
static void
js_json_string(js_ctx *c, llm_strbuf *b, const char *s)
{
    char  esc[8];

    js_put(c, b, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char) *s;

        switch (ch) {
        case '"':  strcpy(esc, "\\\""); break;
        case '\\': strcpy(esc, "\\\\"); break;
        case '\b': strcpy(esc, "\\b"); break;
        case '\f': strcpy(esc, "\\f"); break;
        case '\n': strcpy(esc, "\\n"); break;
        case '\r': strcpy(esc, "\\r"); break;
        case '\t': strcpy(esc, "\\t"); break;
        default:
            if (ch < 0x20) {
                snprintf(esc, sizeof(esc), "\\u%04x", ch);
            } else {
                esc[0] = (char) ch;
                esc[1] = '\0';
            }
        }
        js_put(c, b, esc);
    }
    js_put(c, b, "\"");
}


/* a repetition suffix: "", "?", "*", "+", "{n}", "{n,}", "{n,m}";
   max < 0: no upper bound */
static void
js_rep(js_ctx *c, llm_strbuf *b, long min, long max)
{
    if (min == 1 && max == 1) {
        return;
    }
    if (min == 0 && max == 1) {
        js_put(c, b, "?");
    } else if (min == 0 && max < 0) {
        js_put(c, b, "*");
    } else if (min == 1 && max < 0) {
        js_put(c, b, "+");
    } else if (max < 0) {
        js_putf(c, b, "{%ld,}", min);
    } else if (min == max) {
        js_putf(c, b, "{%ld}", min);
    } else {
        js_putf(c, b, "{%ld,%ld}", min, max);
    }
}


/* --- pointers and keywords -------------------------------------------- */

/* ptr/key with ~ and / escaped (RFC 6901), cut to fit */
static void
js_child(char *dst, size_t len, const char *ptr, const char *key)
{
    size_t  n;

    n = (size_t) snprintf(dst, len, "%s/", ptr);
    for (; *key && n + 3 < len; key++) {
        if (*key == '~' || *key == '/') {
            dst[n++] = '~';
            dst[n++] = *key == '~' ? '0' : '1';
        } else {
            dst[n++] = *key;
        }
    }
    if (n >= len) {
        n = len - 1;
    }
    dst[n] = '\0';
}


static void
js_index(char *dst, size_t len, const char *ptr, const char *key, int i)
{
    snprintf(dst, len, "%s/%s/%d", ptr, key, i);
}


static const char *
js_at(const char *ptr)
{
    return ptr[0] ? ptr : "the root";
}


static int
js_in(const char *const *list, const char *s)
{
    for (; *list; list++) {
        if (strcmp(*list, s) == 0) {
            return 1;
        }
    }
    return 0;
}


/* keywords other than these two lists (title, description, default,
   examples, $defs, ... and unknown ones) are annotations: ignored */

/* validation keywords we cannot enforce: refused */
static const char *const js_refused[] = {
    "dependentSchemas", "dependentRequired",
    "dependencies", "if", "then", "else", "not", "contains", "minContains",
    "maxContains", "uniqueItems", "multipleOf", "unevaluatedProperties",
    "unevaluatedItems", "$dynamicRef", "$dynamicAnchor",
    "$recursiveRef", "$recursiveAnchor", "extends", "disallow",
    "divisibleBy", NULL
};

/* the ones we enforce */
static const char *const js_supported[] = {
    "type", "properties", "required", "additionalProperties", "items",
    "prefixItems", "additionalItems", "enum", "const", "anyOf", "oneOf",
    "allOf", "$ref", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minItems", "maxItems", "minProperties", "maxProperties",
    "patternProperties", "propertyNames", NULL
};


/* a refused keyword whose value changes nothing (uniqueItems false, an
   empty patternProperties, then/else without if) */
static int
js_noop(const cJSON *s, const cJSON *k)
{
    const char  *n = k->string;

    if (strcmp(n, "uniqueItems") == 0) {
        const cJSON  *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");

        /* true constrains nothing on arrays of at most one element */
        return cJSON_IsFalse(k)
               || (cJSON_IsNumber(mx) && mx->valuedouble <= 1);
    }
    if (strcmp(n, "if") == 0) {
        return !cJSON_HasObjectItem(s, "then")
               && !cJSON_HasObjectItem(s, "else");
    }
    if (strcmp(n, "then") == 0 || strcmp(n, "else") == 0) {
        return !cJSON_HasObjectItem(s, "if");
    }
    if (strcmp(n, "minContains") == 0 || strcmp(n, "maxContains") == 0) {
        return !cJSON_HasObjectItem(s, "contains");
    }
    /* these with {} constrain nothing (not, contains with {} do) */
    return cJSON_IsObject(k) && k->child == NULL
           && (strcmp(n, "patternProperties") == 0
               || strcmp(n, "dependentSchemas") == 0
               || strcmp(n, "dependentRequired") == 0
               || strcmp(n, "dependencies") == 0
               || strcmp(n, "propertyNames") == 0);
}


static int
js_check_keywords(js_ctx *c, const cJSON *s, const char *ptr)
{
    const cJSON  *k;

    for (k = s->child; k; k = k->next) {
        /* an embedded resource: its "#/..." would be relative to it */
        if (strcmp(k->string, "$id") == 0 && ptr[0] && cJSON_IsString(k)
            && k->valuestring[0] != '#')
        {
            return js_fail(c, "json_schema: unsupported keyword '$id' at %s: "
                           "embedded resources are not supported",
                           js_at(ptr));
        }
        if (js_in(js_refused, k->string) && !js_noop(s, k)) {
            return js_fail(c, "json_schema: unsupported keyword '%s' at %s",
                           k->string, js_at(ptr));
        }
    }
    return JS_OK;
}


/* 1 when s has a keyword that constrains, other than skip */
static int
js_constrains(const cJSON *s, const char *skip)
{
    const cJSON  *k;

    for (k = s->child; k; k = k->next) {
        if ((skip == NULL || strcmp(k->string, skip) != 0)
            && (js_in(js_supported, k->string)
                || js_in(js_refused, k->string)))
        {
            return 1;
        }
    }
    return 0;
}


/* a count keyword: absent -> dflt; else a non-negative integer up to
   JS_MAX_REPEAT */
static int
js_count(js_ctx *c, const cJSON *s, const char *key, const char *ptr,
    long dflt, long *out)
{
    const cJSON  *k = cJSON_GetObjectItemCaseSensitive(s, key);

    *out = dflt;
    if (k == NULL) {
        return JS_OK;
    }
    if (!cJSON_IsNumber(k) || k->valuedouble < 0
        || k->valuedouble != floor(k->valuedouble))
    {
        return js_fail(c, "json_schema: '%s' at %s is not a non-negative "
                       "integer", key, js_at(ptr));
    }
    if (k->valuedouble > JS_MAX_REPEAT) {
        return js_fail(c, "json_schema: '%s' %.0f at %s is over %d, the "
                       "most the grammar enforces", key, k->valuedouble,
                       js_at(ptr), JS_MAX_REPEAT);
    }
    *out = (long) k->valuedouble;
    return JS_OK;
}


static int
js_type_bit(const char *t)
{
    static const struct { const char *name; int bit; } types[] = {
        { "null", T_NULL }, { "boolean", T_BOOL }, { "object", T_OBJ },
        { "array", T_ARR }, { "string", T_STR }, { "integer", T_INT },
        { "number", T_INT | T_FRAC },
    };
    size_t  i;

    for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (strcmp(types[i].name, t) == 0) {
            return types[i].bit;
        }
    }
    return 0;
}


/* the types "type" allows (all when absent) */
static int
js_types(js_ctx *c, const cJSON *s, const char *ptr, int *mask)
{
    const cJSON  *t = cJSON_GetObjectItemCaseSensitive(s, "type"), *i;
    int           bit;

    *mask = T_ALL;
    if (t == NULL) {
        return JS_OK;
    }
    if (cJSON_IsString(t)) {
        *mask = js_type_bit(t->valuestring);
        if (*mask == 0) {
            return js_fail(c, "json_schema: unknown type '%s' at %s",
                           t->valuestring, js_at(ptr));
        }
        return JS_OK;
    }
    if (!cJSON_IsArray(t)) {
        return js_fail(c, "json_schema: 'type' at %s is not a string or an "
                       "array", js_at(ptr));
    }
    *mask = 0;
    cJSON_ArrayForEach(i, t) {
        bit = cJSON_IsString(i) ? js_type_bit(i->valuestring) : 0;
        if (bit == 0) {
            return js_fail(c, "json_schema: 'type' at %s has an unknown "
                           "type", js_at(ptr));
        }
        *mask |= bit;
    }
    return JS_OK;
}


/* the types of one JSON value */
static int
js_value_type(const cJSON *v)
{
    if (cJSON_IsNull(v)) {
        return T_NULL;
    }
    if (cJSON_IsBool(v)) {
        return T_BOOL;
    }
    if (cJSON_IsString(v)) {
        return T_STR;
    }
    if (cJSON_IsArray(v)) {
        return T_ARR;
    }
    if (cJSON_IsObject(v)) {
        return T_OBJ;
    }
    return v->valuedouble == floor(v->valuedouble) ? T_INT : T_FRAC;
}


/* --- alternatives ----------------------------------------------------- */

typedef struct {
    llm_strbuf  b;
    int         n;
} js_alts;


static void
js_alt_add(js_ctx *c, js_alts *a, const char *x)
{
    if (a->n++) {
        js_put(c, &a->b, " | ");
    }
    js_put(c, &a->b, x);
}


/* writes the alternatives to e: JS_EMPTY when there are none */
static int
js_alt_end(js_ctx *c, js_alts *a, llm_strbuf *e)
{
    int  rc = JS_OK;

    if (c->failed) {
        rc = JS_ERR;
    } else if (a->n == 0) {
        rc = JS_EMPTY;
    } else if (a->n == 1) {
        js_put(c, e, a->b.data);
    } else {
        js_put(c, e, "( ");
        js_put(c, e, a->b.data);
        js_put(c, e, " )");
    }
    llm_strbuf_free(&a->b);
    return c->failed ? JS_ERR : rc;
}


/* generates s, adding it to the alternatives when it accepts something */
static int
js_alt_gen(js_ctx *c, js_alts *a, const cJSON *s, const char *ptr)
{
    llm_strbuf  t;
    int         rc;

    js_buf(c, &t);
    rc = js_gen(c, s, ptr, &t);
    if (rc == JS_OK) {
        js_alt_add(c, a, t.data);
    }
    llm_strbuf_free(&t);
    return rc == JS_ERR ? JS_ERR : JS_OK;
}


/* --- integers and numbers --------------------------------------------- */

static int
js_all(const char *s, char d, int n)
{
    int  i;

    for (i = 0; i < n; i++) {
        if (s[i] != d) {
            return 0;
        }
    }
    return 1;
}


static void
js_digits(js_ctx *c, llm_strbuf *b, char lo, char hi)
{
    if (lo == '0' && hi == '9') {
        js_put(c, b, "[0-9]");
    } else if (lo == hi) {
        js_putf(c, b, "\"%c\"", lo);
    } else {
        js_putf(c, b, "[%c-%c]", lo, hi);
    }
}


static void
js_any_digits(js_ctx *c, llm_strbuf *b, int n)
{
    js_put(c, b, "[0-9]");
    js_rep(c, b, n, n);
}


/* the decimal strings of n digits from a to b (a <= b, same length) */
static void
js_same_len(js_ctx *c, llm_strbuf *b, const char *a, const char *z, int n)
{
    char  nines[JS_INT_DIGITS + 1], zeros[JS_INT_DIGITS + 1];
    int   i = 0, k, za, zn, sep = 0;
    char  lo, hi;

    while (i < n && a[i] == z[i]) {
        i++;
    }
    if (i > 0) {
        js_putf(c, b, "\"%.*s\"", i, a);
    }
    if (i == n) {
        return;
    }
    if (i > 0) {
        js_put(c, b, " ");
    }
    k = n - i - 1;
    if (k == 0) {
        js_digits(c, b, a[i], z[i]);
        return;
    }
    za = js_all(a + i + 1, '0', k);
    zn = js_all(z + i + 1, '9', k);
    if (za && zn) {
        js_digits(c, b, a[i], z[i]);
        js_put(c, b, " ");
        js_any_digits(c, b, k);
        return;
    }
    memset(nines, '9', k);
    memset(zeros, '0', k);
    js_put(c, b, "( ");
    lo = za ? a[i] : a[i] + 1;
    hi = zn ? z[i] : z[i] - 1;
    if (!za) {
        js_putf(c, b, "\"%c\" ", a[i]);
        js_same_len(c, b, a + i + 1, nines, k);
        sep = 1;
    }
    if (lo <= hi) {
        js_put(c, b, sep ? " | " : "");
        js_digits(c, b, lo, hi);
        js_put(c, b, " ");
        js_any_digits(c, b, k);
        sep = 1;
    }
    if (!zn) {
        js_put(c, b, sep ? " | " : "");
        js_putf(c, b, "\"%c\" ", z[i]);
        js_same_len(c, b, zeros, z + i + 1, k);
    }
    js_put(c, b, " )");
}


static int
js_len10(int64_t v)
{
    int  n = 1;

    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}


/* the canonical decimals of a..z (0 <= a <= z < 10^16), as alternatives */
static void
js_int_range(js_ctx *c, js_alts *alts, int64_t a, int64_t z)
{
    char        sa[24], sz[24];
    int64_t     p10, lo, hi;
    int         len, full_from = 0;
    llm_strbuf  t;

    for (len = js_len10(a), p10 = 1; p10 * 10 <= a; p10 *= 10) {
        /* p10: 10^(len - 1) */
    }
    for (; len <= JS_INT_DIGITS && (len == 1 ? 0 : p10) <= z;
         len++, p10 *= 10)
    {
        lo = len == 1 || a > p10 ? a : p10;
        hi = z < p10 * 10 - 1 ? z : p10 * 10 - 1;
        if (lo == p10 && hi == p10 * 10 - 1 && len > 1) {
            /* every number of len digits: merged with the next lengths */
            if (full_from == 0) {
                full_from = len;
            }
            if (hi == z || len == JS_INT_DIGITS) {
                js_buf(c, &t);
                js_put(c, &t, "[1-9] [0-9]");
                js_rep(c, &t, full_from - 1, len - 1);
                js_alt_add(c, alts, t.data);
                llm_strbuf_free(&t);
                full_from = 0;
            }
            continue;
        }
        if (full_from) {
            js_buf(c, &t);
            js_put(c, &t, "[1-9] [0-9]");
            js_rep(c, &t, full_from - 1, len - 2);
            js_alt_add(c, alts, t.data);
            llm_strbuf_free(&t);
            full_from = 0;
        }
        snprintf(sa, sizeof(sa), "%lld", (long long) lo);
        snprintf(sz, sizeof(sz), "%lld", (long long) hi);
        js_buf(c, &t);
        js_same_len(c, &t, sa, sz, len);
        js_alt_add(c, alts, t.data);
        llm_strbuf_free(&t);
    }
}


#define JS_NO_MAX  INT64_MAX

/* fraction digits after integer part i that keep 15 significant digits
   (DBL_DIG: distinct decimals of 15 digits are distinct doubles) */
static int
js_frac_room(int64_t i)
{
    return i == 0 ? 15 : 15 - js_len10(i) > 0 ? 15 - js_len10(i) : 0;
}

/* magnitudes m of a number (ae, be: exclusive), 0 <= a, integer bounds;
   frac: with a fraction part allowed (no exponent when bounded) */
static void
js_magnitude(js_ctx *c, js_alts *alts, int64_t a, int ae, int64_t b,
    int be, int frac, const char *sign)
{
    static const int64_t  top = 9999999999999999LL;     /* 16 digits */
    js_alts               ints;
    int64_t               lo, hi;
    llm_strbuf            t;
    int                   fd;

    memset(&ints, 0, sizeof(ints));
    js_buf(c, &ints.b);
    js_buf(c, &t);

    if (!frac) {
        /* integers: exclusive bounds are inclusive ones */
        lo = ae ? a + 1 : a;
        hi = b == JS_NO_MAX ? top : (be ? b - 1 : b);
        if (lo <= hi) {
            js_int_range(c, &ints, lo, hi);
        }
        if (js_alt_end(c, &ints, &t) == JS_OK) {
            js_put(c, &t, "");
            js_buf(c, &ints.b);
            ints.n = 0;
            js_putf(c, &ints.b, "%s%s", sign, t.data);
            js_alt_add(c, alts, ints.b.data);
        }
        llm_strbuf_free(&ints.b);
        llm_strbuf_free(&t);
        return;
    }

    /* integer part in [lo, hi] with any fraction (below an exclusive b:
       up to b - 2, b - 1 comes next) */
    lo = ae ? a + 1 : a;
    hi = b == JS_NO_MAX ? top : (be ? b - 2 : b - 1);
    if (lo <= hi) {
        js_int_range(c, &ints, lo, hi);
    }
    if (js_alt_end(c, &ints, &t) == JS_OK) {
        llm_strbuf  x;

        js_buf(c, &x);
        js_putf(c, &x, "%s%s ( \".\" [0-9]{1,%d} )?", sign, t.data,
                JS_FRAC_DIGITS);
        js_alt_add(c, alts, x.data);
        llm_strbuf_free(&x);
    }
    llm_strbuf_free(&t);
    js_buf(c, &t);
    /* next to an exclusive bound a fraction has at most 15 significant
       digits: more could read back as the bound itself (19.0000000000000001
       is the double 19) */
    if (b != JS_NO_MAX && be && b - 1 >= lo) {
        fd = js_frac_room(b - 1);
        js_putf(c, &t, "%s\"%lld\"", sign, (long long) (b - 1));
        if (fd > 0) {
            js_putf(c, &t, " ( \".\" [0-9]{1,%d} )?", fd);
        }
        js_alt_add(c, alts, t.data);
    }
    llm_strbuf_free(&t);
    js_buf(c, &t);
    /* a + f with f > 0 when a is exclusive */
    fd = js_frac_room(a);
    if (ae && (b == JS_NO_MAX || a < b) && fd > 0) {
        js_putf(c, &t, "%s\"%lld.\" [0-9]{0,%d} [1-9]", sign, (long long) a,
                fd - 1);
        js_alt_add(c, alts, t.data);
    }
    llm_strbuf_free(&t);
    js_buf(c, &t);
    /* b itself */
    if (b != JS_NO_MAX && !be && b >= (ae ? a + 1 : a)) {
        js_putf(c, &t, "%s\"%lld\"", sign, (long long) b);
        js_alt_add(c, alts, t.data);
    }
    llm_strbuf_free(&t);
}


/* one bound: the tighter of minimum and exclusiveMinimum (or maximum and
   exclusiveMaximum); *set 0 when neither is there */
static int
js_bound(js_ctx *c, const cJSON *s, const char *ptr, int is_min, int integer,
    int *set, double *v, int *excl)
{
    const char  *kn = is_min ? "minimum" : "maximum";
    const char  *ke = is_min ? "exclusiveMinimum" : "exclusiveMaximum";
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, kn);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, ke);
    double       w;

    *set = 0;
    *excl = 0;
    if (n && !cJSON_IsNumber(n)) {
        return js_fail(c, "json_schema: '%s' at %s is not a number", kn,
                       js_at(ptr));
    }
    if (x && !cJSON_IsNumber(x) && !cJSON_IsBool(x)) {
        return js_fail(c, "json_schema: '%s' at %s is not a number", ke,
                       js_at(ptr));
    }
    if (n) {
        *set = 1;
        *v = n->valuedouble;
        /* draft 4: exclusiveMinimum is a flag on minimum */
        *excl = cJSON_IsTrue(x);
    }
    if (x && cJSON_IsNumber(x)) {
        w = x->valuedouble;
        if (!*set || (is_min ? w >= *v : w <= *v)) {
            *set = 1;
            *v = w;
            *excl = 1;
        }
    }
    if (!*set) {
        return JS_OK;
    }
    if (!isfinite(*v) || fabs(*v) > JS_MAX_SAFE) {
        return js_fail(c, "json_schema: '%s' %g at %s is beyond 2^53",
                       *excl ? ke : kn, *v, js_at(ptr));
    }
    if (*v != floor(*v)) {
        if (!integer) {
            return js_fail(c, "json_schema: '%s' %g at %s: only integer "
                           "bounds are enforced on numbers", *excl ? ke : kn,
                           *v, js_at(ptr));
        }
        /* on integers a fractional bound is an inclusive integer one */
        *v = is_min ? ceil(*v) : floor(*v);
        *excl = 0;
    }
    return JS_OK;
}


static int
js_gen_number(js_ctx *c, const cJSON *s, const char *ptr, int integer,
    llm_strbuf *e)
{
    int      has_lo, has_hi, lo_x, hi_x;
    double   lo, hi;
    int64_t  l, h;
    js_alts  alts;

    if (js_bound(c, s, ptr, 1, integer, &has_lo, &lo, &lo_x) != JS_OK
        || js_bound(c, s, ptr, 0, integer, &has_hi, &hi, &hi_x) != JS_OK)
    {
        return JS_ERR;
    }
    if (!has_lo && !has_hi) {
        js_need(c, e, integer ? N_INT : N_NUMBER,
                integer ? "integer" : "number");
        return JS_OK;
    }
    /* an absent bound's value is not set: converting it is undefined */
    l = has_lo ? (int64_t) lo : 0;
    h = has_hi ? (int64_t) hi : 0;
    memset(&alts, 0, sizeof(alts));
    js_buf(c, &alts.b);

    /* x >= 0 */
    if (!has_hi || h > 0 || (h == 0 && !hi_x)) {
        if (has_lo && l >= 0) {
            js_magnitude(c, &alts, l, lo_x, has_hi ? h : JS_NO_MAX, hi_x,
                         !integer, "");
        } else {
            js_magnitude(c, &alts, 0, 0, has_hi ? h : JS_NO_MAX, hi_x,
                         !integer, "");
        }
    }
    /* x < 0: its magnitude in (max(0, -hi), -lo] */
    if (!has_lo || l < 0) {
        if (has_hi && h < 0) {
            js_magnitude(c, &alts, -h, hi_x, has_lo ? -l : JS_NO_MAX, lo_x,
                         !integer, "\"-\" ");
        } else {
            js_magnitude(c, &alts, 0, 1, has_lo ? -l : JS_NO_MAX, lo_x,
                         !integer, "\"-\" ");
        }
    }
    return js_alt_end(c, &alts, e);
}


/* --- patterns --------------------------------------------------------- */

/* ECMA-262 regular expressions, the subset a grammar can say: literals,
   ., classes, \d \w \s (\D \W \S as ASCII only), groups, |, quantifiers,
   ^ and $ at the ends of the top-level alternatives. A pattern is not
   anchored (it may match anywhere in the string) unless ^ / $ say so. */

#define RE_MAX_RANGES  128

typedef struct {
    uint32_t    lo[RE_MAX_RANGES], hi[RE_MAX_RANGES];
    int         n;
    int         over;       /* more were added than fit */
} re_class;

typedef struct {
    js_ctx      *c;
    const char  *p, *end;
    const char  *ptr;
    int          depth;
    const char  *start;
} js_re;


static int
re_fail(js_re *r, const char *what)
{
    return js_fail(r->c, "json_schema: pattern at %s: %s (at offset %d)",
                   js_at(r->ptr), what, (int) (r->p - r->start));
}


/* one UTF-8 code point from r->p; 0 at the end or on a bad sequence */
static uint32_t
re_utf8(js_re *r)
{
    const unsigned char  *p = (const unsigned char *) r->p;
    uint32_t              cp;
    int                   n, i;

    if (p >= (const unsigned char *) r->end) {
        return 0;
    }
    if (p[0] < 0x80) {
        r->p++;
        return p[0];
    }
    n = p[0] >= 0xf0 ? 3 : p[0] >= 0xe0 ? 2 : 1;
    cp = p[0] & (0x3f >> n);
    for (i = 1; i <= n; i++) {
        if (p + i >= (const unsigned char *) r->end || (p[i] & 0xc0) != 0x80)
        {
            return 0;
        }
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    r->p += n + 1;
    return cp;
}


static void
re_add(re_class *k, uint32_t lo, uint32_t hi)
{
    if (k->n < RE_MAX_RANGES) {
        k->lo[k->n] = lo;
        k->hi[k->n] = hi;
        k->n++;
    } else {
        k->over = 1;
    }
}


/* sorted, overlapping and adjacent ranges merged */
static void
re_normalize(re_class *k)
{
    uint32_t  lo, hi;
    int       i, j, n = 0;

    for (i = 1; i < k->n; i++) {
        lo = k->lo[i];
        hi = k->hi[i];
        for (j = i; j > 0 && k->lo[j - 1] > lo; j--) {
            k->lo[j] = k->lo[j - 1];
            k->hi[j] = k->hi[j - 1];
        }
        k->lo[j] = lo;
        k->hi[j] = hi;
    }
    for (i = 0; i < k->n; i++) {
        if (n > 0 && k->lo[i] <= k->hi[n - 1] + 1) {
            if (k->hi[i] > k->hi[n - 1]) {
                k->hi[n - 1] = k->hi[i];
            }
            continue;
        }
        k->lo[n] = k->lo[i];
        k->hi[n] = k->hi[i];
        n++;
    }
    k->n = n;
}


static void
re_digit(re_class *k)
{
    re_add(k, '0', '9');
}


static void
re_word(re_class *k)
{
    re_add(k, '0', '9');
    re_add(k, 'A', 'Z');
    re_add(k, '_', '_');
    re_add(k, 'a', 'z');
}


/* \s as ECMA and Python both read it (\ufeff is not a space to Python) */
static void
re_space(re_class *k)
{
    re_add(k, '\t', '\r');
    re_add(k, ' ', ' ');
    re_add(k, 0xa0, 0xa0);
    re_add(k, 0x1680, 0x1680);
    re_add(k, 0x2000, 0x200a);
    re_add(k, 0x2028, 0x2029);
    re_add(k, 0x202f, 0x202f);
    re_add(k, 0x205f, 0x205f);
    re_add(k, 0x3000, 0x3000);
}


/* printable ASCII but the class of what (\D \W \S) */
static void
re_ascii_but(re_class *k, void (*what)(re_class *))
{
    re_class  x;
    uint32_t  ch, start = 0;
    int       i, in, open = 0;

    x.n = 0;
    x.over = 0;
    what(&x);
    for (ch = 0x20; ch <= 0x7f; ch++) {
        in = ch == 0x7f;
        for (i = 0; i < x.n && !in; i++) {
            in = ch >= x.lo[i] && ch <= x.hi[i];
        }
        if (!in && !open) {
            start = ch;
            open = 1;
        } else if (in && open) {
            re_add(k, start, ch - 1);
            open = 0;
        }
    }
}


static uint32_t
re_hex(js_re *r, int n)
{
    uint32_t  v = 0;
    int       i, d;

    for (i = 0; i < n; i++) {
        if (r->p >= r->end) {
            return UINT32_MAX;
        }
        d = r->p[0];
        if (d >= '0' && d <= '9') {
            d -= '0';
        } else if (d >= 'a' && d <= 'f') {
            d -= 'a' - 10;
        } else if (d >= 'A' && d <= 'F') {
            d -= 'A' - 10;
        } else {
            return UINT32_MAX;
        }
        v = v * 16 + (uint32_t) d;
        r->p++;
    }
    return v;
}


/*
 * After a backslash: a character (returned), or a class (*k filled, 0
 * returned, *shorthand set to 'd', 'w', 's', 'D', 'W' or 'S'), or
 * UINT32_MAX with the error set.
 */
static uint32_t
re_escape(js_re *r, int in_class, re_class *k, int *shorthand)
{
    uint32_t  ch, lo;
    char      e;

    *shorthand = 0;
    if (r->p >= r->end) {
        re_fail(r, "a trailing backslash");
        return UINT32_MAX;
    }
    e = *r->p++;
    switch (e) {
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S':
        *shorthand = e;
        if (e == 'd') {
            re_digit(k);
        } else if (e == 'w') {
            re_word(k);
        } else if (e == 's') {
            re_space(k);
        } else {
            re_ascii_but(k, e == 'D' ? re_digit
                            : e == 'W' ? re_word : re_space);
        }
        return 0;
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'b':
        if (in_class) {
            return '\b';
        }
        re_fail(r, "\\b (word boundary) is not supported");
        return UINT32_MAX;
    case 'x':
        ch = re_hex(r, 2);
        break;
    case 'u':
        ch = re_hex(r, 4);
        if (ch >= 0xd800 && ch <= 0xdbff && r->end - r->p >= 6
            && r->p[0] == '\\' && r->p[1] == 'u')
        {
            r->p += 2;
            lo = re_hex(r, 4);
            if (lo < 0xdc00 || lo > 0xdfff) {
                ch = UINT32_MAX;
            } else {
                ch = 0x10000 + ((ch - 0xd800) << 10) + (lo - 0xdc00);
            }
        }
        break;
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')
            || (e >= '1' && e <= '9'))
        {
            char  what[64];

            snprintf(what, sizeof(what), "\\%c is not supported", e);
            re_fail(r, what);
            return UINT32_MAX;
        }
        r->p--;
        return re_utf8(r);
    }
    if (ch == UINT32_MAX || (ch >= 0xd800 && ch <= 0xdfff)) {
        re_fail(r, "a bad \\x or \\u escape");
        return UINT32_MAX;
    }
    return ch;
}


/* one code point inside a GBNF class */
static void
re_class_cp(js_ctx *c, llm_strbuf *b, uint32_t cp)
{
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z')
        || (cp >= 'A' && cp <= 'Z') || (cp >= 0x20 && cp < 0x7f
            && strchr("\\]-^[", (int) cp) == NULL))
    {
        js_putf(c, b, "%c", (int) cp);
    } else if (cp < 0x80) {
        js_putf(c, b, "\\x%02x", (unsigned) cp);
    } else if (cp <= 0xffff) {
        js_putf(c, b, "\\u%04x", (unsigned) cp);
    } else {
        js_putf(c, b, "\\U%08x", (unsigned) cp);
    }
}


/* the JSON text of one character of a string (its escape when JSON needs
   one), as a GBNF literal */
static void
re_char_lit(js_ctx *c, llm_strbuf *b, uint32_t cp)
{
    char  u[8];
    int   n = 0;

    if (cp < 0x80) {
        u[n++] = (char) cp;
    } else if (cp < 0x800) {
        u[n++] = (char) (0xc0 | (cp >> 6));
        u[n++] = (char) (0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        u[n++] = (char) (0xe0 | (cp >> 12));
        u[n++] = (char) (0x80 | ((cp >> 6) & 0x3f));
        u[n++] = (char) (0x80 | (cp & 0x3f));
    } else {
        u[n++] = (char) (0xf0 | (cp >> 18));
        u[n++] = (char) (0x80 | ((cp >> 12) & 0x3f));
        u[n++] = (char) (0x80 | ((cp >> 6) & 0x3f));
        u[n++] = (char) (0x80 | (cp & 0x3f));
    }
    u[n] = '\0';
    if (cp == 0) {
        js_lit(c, b, "\\u0000", 6);
        return;
    }
    {
        llm_strbuf  j;

        js_buf(c, &j);
        js_json_string(c, &j, u);
        if (!c->failed) {
            js_lit(c, b, j.data + 1, j.len - 2);   /* without the quotes */
        }
        llm_strbuf_free(&j);
    }
}


/* a character class as GBNF: chars that JSON escapes become their escapes
   (a positive class); a negated one never matches a control character */
static int
re_emit_class(js_re *r, llm_strbuf *b, re_class *k, int negated)
{
    js_ctx     *c = r->c;
    llm_strbuf  cls, esc;
    uint32_t    lo, hi, ch;
    int         i, n_esc = 0, n_cls = 0, has_q = 0, has_bs = 0;

    re_normalize(k);
    if (k->over || k->n > RE_MAX_RANGES - 8) {
        /* the engine's cap on a class's ranges, with ours added */
        return re_fail(r, "a class with too many ranges");
    }
    js_buf(c, &cls);
    js_buf(c, &esc);
    js_put(c, &cls, negated ? "[^" : "[");
    for (i = 0; i < k->n; i++) {
        lo = k->lo[i];
        hi = k->hi[i];
        /* the characters JSON must escape: 0x00-0x1f, '"', '\\' */
        for (ch = lo; ch <= hi && ch < 0x20; ch++) {
            if (!negated) {
                js_put(c, &esc, n_esc++ ? " | " : "");
                re_char_lit(c, &esc, ch);
            }
        }
        if (lo <= '"' && hi >= '"') {
            has_q = 1;
        }
        if (lo <= '\\' && hi >= '\\') {
            has_bs = 1;
        }
        if (lo < 0x20) {
            lo = 0x20;
        }
        if (lo > hi) {
            continue;
        }
        /* the class part: [lo, hi] minus '"' and '\\' (added below for a
           negated class, as escapes for a positive one) */
        while (lo <= hi) {
            uint32_t  end = hi;

            if (lo <= '"' && end >= '"') {
                end = lo == '"' ? '"' : '"' - 1;
            } else if (lo <= '\\' && end >= '\\') {
                end = lo == '\\' ? '\\' : '\\' - 1;
            }
            if (!(lo == end && (lo == '"' || lo == '\\'))) {
                re_class_cp(c, &cls, lo);
                if (end > lo) {
                    js_put(c, &cls, "-");
                    re_class_cp(c, &cls, end);
                }
                n_cls++;
            }
            lo = end + 1;
        }
    }
    if (negated) {
        js_put(c, &cls, "\"\\\\\\x00-\\x1f]");
        n_cls++;
        if (!has_q) {
            js_put(c, &esc, n_esc++ ? " | " : "");
            js_put(c, &esc, "\"\\\\\\\"\"");
        }
        if (!has_bs) {
            js_put(c, &esc, n_esc++ ? " | " : "");
            js_put(c, &esc, "\"\\\\\\\\\"");
        }
    } else {
        js_put(c, &cls, "]");
        if (has_q) {
            js_put(c, &esc, n_esc++ ? " | " : "");
            js_put(c, &esc, "\"\\\\\\\"\"");
        }
        if (has_bs) {
            js_put(c, &esc, n_esc++ ? " | " : "");
            js_put(c, &esc, "\"\\\\\\\\\"");
        }
    }
    if (n_cls == 0 && n_esc == 0) {
        llm_strbuf_free(&cls);
        llm_strbuf_free(&esc);
        return re_fail(r, "a class that matches nothing");
    }
    if (n_esc == 0) {
        js_put(c, b, cls.data);
    } else if (n_cls == 0) {
        js_putf(c, b, "( %s )", esc.data);
    } else {
        js_putf(c, b, "( ");
        js_put(c, b, cls.data);
        js_put(c, b, " | ");
        js_put(c, b, esc.data);
        js_put(c, b, " )");
    }
    llm_strbuf_free(&cls);
    llm_strbuf_free(&esc);
    return c->failed ? JS_ERR : JS_OK;
}


static int
re_class_parse(js_re *r, llm_strbuf *b)
{
    re_class  k;
    uint32_t  lo, hi;
    int       negated = 0, sh, first = 1;

    k.n = 0;
    k.over = 0;
    if (r->p < r->end && *r->p == '^') {
        negated = 1;
        r->p++;
    }
    for ( ;; ) {
        if (r->p >= r->end) {
            return re_fail(r, "an unclosed [");
        }
        if (*r->p == ']' && !first) {
            r->p++;
            break;
        }
        if (*r->p == ']') {
            return re_fail(r, "an empty class []");
        }
        first = 0;
        if (*r->p == '\\') {
            r->p++;
            lo = re_escape(r, 1, &k, &sh);
            if (lo == UINT32_MAX) {
                return JS_ERR;
            }
            if (sh) {
                if (negated || (sh >= 'A' && sh <= 'Z')) {
                    /* Python's \d \w \s are Unicode-wide: [^\d] and
                       [\D] would not agree with ECMA's */
                    return re_fail(r, "\\D, \\W, \\S inside a class, or "
                                   "\\d, \\w, \\s in a negated one, are "
                                   "not supported");
                }
                continue;
            }
        } else if (*r->p == '[' && r->end - r->p > 1 && r->p[1] == ':') {
            return re_fail(r, "POSIX classes are not supported");
        } else {
            lo = re_utf8(r);
            if (lo == 0) {
                return re_fail(r, "bad UTF-8");
            }
        }
        hi = lo;
        if (r->end - r->p >= 2 && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                hi = re_escape(r, 1, &k, &sh);
                if (hi == UINT32_MAX) {
                    return JS_ERR;
                }
                if (sh) {
                    return re_fail(r, "a range ending in a class");
                }
            } else {
                hi = re_utf8(r);
            }
            if (hi < lo) {
                return re_fail(r, "a range out of order");
            }
        }
        if (k.n == RE_MAX_RANGES) {
            return re_fail(r, "a class with too many ranges");
        }
        re_add(&k, lo, hi);
    }
    return re_emit_class(r, b, &k, negated);
}


/* {n}, {n,}, {n,m} after an atom; 0 when r->p is no quantifier */
static int
re_braces(js_re *r, long *min, long *max)
{
    const char  *p = r->p + 1;
    char        *q;

    long         lo, hi;

    if (p >= r->end || *p < '0' || *p > '9') {
        return 0;
    }
    lo = strtol(p, &q, 10);
    hi = lo;
    if (*q == ',') {
        q++;
        if (*q == '}') {
            hi = -1;
        } else if (*q >= '0' && *q <= '9') {
            hi = strtol(q, &q, 10);
        } else {
            return 0;
        }
    }
    if (*q != '}') {
        return 0;       /* a literal '{' (as ECMA's Annex B reads it) */
    }
    *min = lo;
    *max = hi;
    r->p = q + 1;
    return 1;
}


static int re_alt(js_re *r, llm_strbuf *b, int top);


static int
re_atom(js_re *r, llm_strbuf *b)
{
    js_ctx    *c = r->c;
    re_class   k;
    uint32_t   ch;
    int        sh;

    k.n = 0;
    k.over = 0;
    switch (*r->p) {
    case '(':
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            if (r->end - r->p >= 2 && r->p[1] == ':') {
                r->p += 2;
            } else if (r->end - r->p >= 2 && r->p[1] == '<'
                       && r->p[2] != '=' && r->p[2] != '!')
            {
                /* a named group is a group */
                const char  *gt = memchr(r->p, '>', r->end - r->p);

                if (gt == NULL) {
                    return re_fail(r, "a bad group name");
                }
                r->p = gt + 1;
            } else {
                return re_fail(r, "lookaround and (?...) groups are not "
                               "supported");
            }
        }
        if (++r->depth > JS_MAX_DEPTH) {
            return re_fail(r, "groups nested too deep");
        }
        js_put(c, b, "( ");
        if (re_alt(r, b, 0) != JS_OK) {
            return JS_ERR;
        }
        r->depth--;
        if (r->p >= r->end || *r->p != ')') {
            return re_fail(r, "an unclosed (");
        }
        r->p++;
        js_put(c, b, " )");
        return JS_OK;
    case '[':
        r->p++;
        return re_class_parse(r, b);
    case '.':
        r->p++;
        re_add(&k, '\n', '\n');
        re_add(&k, '\r', '\r');
        re_add(&k, 0x2028, 0x2029);
        return re_emit_class(r, b, &k, 1);
    case '\\':
        r->p++;
        ch = re_escape(r, 0, &k, &sh);
        if (ch == UINT32_MAX) {
            return JS_ERR;
        }
        if (sh) {
            return re_emit_class(r, b, &k, 0);
        }
        re_char_lit(c, b, ch);
        return c->failed ? JS_ERR : JS_OK;
    case '*': case '+': case '?':
        return re_fail(r, "a quantifier with nothing before it");
    case ')':
        return re_fail(r, "an unmatched )");
    case '^': case '$':
        return re_fail(r, "^ and $ are supported only at the ends of the "
                       "pattern's top-level alternatives");
    default:
        ch = re_utf8(r);
        if (ch == 0) {
            return re_fail(r, "bad UTF-8");
        }
        re_char_lit(c, b, ch);
        return c->failed ? JS_ERR : JS_OK;
    }
}


/* a sequence up to | or ) or the end; *end_anchor when it ends in $ */
static int
re_seq(js_re *r, llm_strbuf *b, int top, int *end_anchor, int *empty)
{
    js_ctx      *c = r->c;
    llm_strbuf   a;
    long         min, max;
    int          n = 0;

    *end_anchor = 0;
    *empty = 1;
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (*r->p == '$' && top
            && (r->p + 1 == r->end || r->p[1] == '|'))
        {
            r->p++;
            *end_anchor = 1;
            break;
        }
        js_buf(c, &a);
        if (re_atom(r, &a) != JS_OK) {
            llm_strbuf_free(&a);
            return JS_ERR;
        }
        min = max = 1;
        if (r->p < r->end) {
            if (*r->p == '*') {
                min = 0, max = -1, r->p++;
            } else if (*r->p == '+') {
                min = 1, max = -1, r->p++;
            } else if (*r->p == '?') {
                min = 0, max = 1, r->p++;
            } else if (*r->p == '{' && re_braces(r, &min, &max)) {
                if (min > JS_MAX_REPEAT || max > JS_MAX_REPEAT
                    || (max >= 0 && max < min))
                {
                    llm_strbuf_free(&a);
                    return re_fail(r, "a bad or too large {n,m}");
                }
            }
            if (r->p < r->end && *r->p == '?' && !(min == 1 && max == 1)) {
                r->p++;     /* lazy: the same strings */
            }
            if (r->p < r->end && strchr("*+?", *r->p) && !(min == 1 && max == 1)) {
                llm_strbuf_free(&a);
                return re_fail(r, "a quantifier after a quantifier");
            }
        }
        js_put(c, b, n++ ? " " : "");
        if (min == 1 && max == 1) {
            js_put(c, b, a.data);
        } else if (max == 0) {
            js_put(c, b, "\"\"");
        } else {
            js_put(c, b, "( ");
            js_put(c, b, a.data);
            js_put(c, b, " )");
            js_rep(c, b, min, max);
        }
        llm_strbuf_free(&a);
    }
    *empty = n == 0;
    return c->failed ? JS_ERR : JS_OK;
}


static int
re_alt(js_re *r, llm_strbuf *b, int top)
{
    js_ctx      *c = r->c;
    llm_strbuf   s;
    int          n = 0, start, end, empty;

    for ( ;; ) {
        start = 0;
        if (top && r->p < r->end && *r->p == '^') {
            r->p++;
            start = 1;
        }
        js_buf(c, &s);
        if (re_seq(r, &s, top, &end, &empty) != JS_OK) {
            llm_strbuf_free(&s);
            return JS_ERR;
        }
        js_put(c, b, n++ ? " | " : "");
        if (top && empty && !(start && end)) {
            /* anything */
            js_need(c, b, N_CHAR, "char");
            js_put(c, b, "*");
        } else {
            if (top && !start) {
                js_need(c, b, N_CHAR, "char");
                js_put(c, b, "* ");
            }
            js_put(c, b, empty ? "\"\"" : s.data);
            if (top && !end) {
                js_put(c, b, " ");
                js_need(c, b, N_CHAR, "char");
                js_put(c, b, "*");
            }
        }
        llm_strbuf_free(&s);
        if (r->p < r->end && *r->p == '|') {
            r->p++;
            continue;
        }
        break;
    }
    if (top && r->p < r->end) {
        return re_fail(r, "an unmatched )");
    }
    return c->failed ? JS_ERR : JS_OK;
}


static int
js_pattern(js_ctx *c, const char *re, const char *ptr, llm_strbuf *e)
{
    js_re       r;
    llm_strbuf  b;
    int         rc;

    r.c = c;
    r.p = re;
    r.start = re;
    r.end = re + strlen(re);
    r.ptr = ptr;
    r.depth = 0;
    js_buf(c, &b);
    rc = re_alt(&r, &b, 1);
    if (rc == JS_OK) {
        js_put(c, e, "\"\\\"\" ( ");
        js_put(c, e, b.data);
        js_put(c, e, " ) \"\\\"\"");
    }
    llm_strbuf_free(&b);
    return c->failed ? JS_ERR : rc;
}


/* --- strings ---------------------------------------------------------- */


/* the formats enforced: a quoted string of the node's grammar, a
   date-time being a date, "T" and a time */
static int
js_format(js_ctx *c, const char *f, const char *ptr, llm_strbuf *e)
{
    static const struct {
        const char  *name;
        unsigned     node;
    } formats[] = {
        { "date", N_DATE }, { "time", N_TIME }, { "uuid", N_UUID },
        { "email", N_EMAIL }, { "date-time", 0 },
    };
    size_t  i, n = sizeof(formats) / sizeof(formats[0]);

    for (i = 0; i < n && strcmp(f, formats[i].name) != 0; i++) {
        /* void */
    }
    if (i == n) {
        return js_fail(c, "json_schema: unsupported format '%s' at %s", f,
                       js_at(ptr));
    }

    js_put(c, e, "\"\\\"\" ");
    if (formats[i].node == 0) {
        js_need(c, e, N_DATE, "date");
        js_put(c, e, " \"T\" ");
        js_need(c, e, N_TIME, "time");
    } else {
        js_need(c, e, formats[i].node, formats[i].name);
    }
    js_put(c, e, " \"\\\"\"");
    return c->failed ? JS_ERR : JS_OK;
}

static int
js_gen_string(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON  *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    long          min, max;

    if (js_count(c, s, "minLength", ptr, 0, &min) != JS_OK
        || js_count(c, s, "maxLength", ptr, -1, &max) != JS_OK)
    {
        return JS_ERR;
    }
    if (max >= 0 && max < min) {
        return JS_EMPTY;
    }
    if ((pat || fmt) && (min > 0 || max >= 0)) {
        return js_fail(c, "json_schema: '%s' with minLength/maxLength at %s "
                       "is not supported", pat ? "pattern" : "format",
                       js_at(ptr));
    }
    if (pat && fmt) {
        return js_fail(c, "json_schema: 'pattern' with 'format' at %s is "
                       "not supported", js_at(ptr));
    }
    if (pat) {
        if (!cJSON_IsString(pat)) {
            return js_fail(c, "json_schema: 'pattern' at %s is not a string",
                           js_at(ptr));
        }
        return js_pattern(c, pat->valuestring, ptr, e);
    }
    if (fmt) {
        return js_format(c, cJSON_IsString(fmt) ? fmt->valuestring : "",
                         ptr, e);
    }
    if (min == 0 && max < 0) {
        js_need(c, e, N_STRING, "string");
        return JS_OK;
    }
    js_put(c, e, "\"\\\"\" ");
    js_need(c, e, N_CHAR, "char");
    js_rep(c, e, min, max);
    js_put(c, e, " \"\\\"\"");
    return c->failed ? JS_ERR : JS_OK;
}


/* --- objects ---------------------------------------------------------- */

typedef struct {
    const char  *name;
    uint32_t    *cp;        /* the name's code points */
    int          len;
} js_key;


static int
js_key_cmp(const void *a, const void *b)
{
    const js_key  *x = a, *y = b;
    int            i;

    for (i = 0; i < x->len && i < y->len; i++) {
        if (x->cp[i] != y->cp[i]) {
            return x->cp[i] < y->cp[i] ? -1 : 1;
        }
    }
    return x->len - y->len;
}


/*
 * The rest of a key (its closing quote included) after the first d code
 * points, which keys[0..n) share, such that the key is none of them: the
 * names of the declared properties, so that an additional property never
 * repeats one (a parser keeps the last of two equal keys). Additional keys
 * have no escapes, so their text is their value.
 */
static void
js_not_keys(js_ctx *c, llm_strbuf *b, js_key *keys, int n, int d)
{
    re_class  diverge;
    int       i, j, alts = 0, ends_here = 0;

    diverge.n = 0;
    diverge.over = 0;
    js_put(c, b, "( ");
    for (i = 0; i < n; i = j) {
        if (keys[i].len == d) {
            ends_here = 1;
            j = i + 1;
            continue;
        }
        for (j = i + 1; j < n && keys[j].len > d
             && keys[j].cp[d] == keys[i].cp[d]; j++)
        {
            /* the group sharing keys[i].cp[d] */
        }
        js_put(c, b, alts++ ? " | " : "");
        re_char_lit(c, b, keys[i].cp[d]);
        js_put(c, b, " ");
        js_not_keys(c, b, keys + i, j - i, d + 1);
        re_add(&diverge, keys[i].cp[d], keys[i].cp[d]);
    }
    js_put(c, b, alts++ ? " | " : "");
    js_put(c, b, "[^");
    re_normalize(&diverge);
    if (diverge.over || diverge.n > RE_MAX_RANGES - 8) {
        js_fail(c, "json_schema: property names begin with too many "
                "different characters after a shared prefix");
    }
    for (i = 0; i < diverge.n; i++) {
        re_class_cp(c, b, diverge.lo[i]);
        if (diverge.hi[i] > diverge.lo[i]) {
            js_put(c, b, "-");
            re_class_cp(c, b, diverge.hi[i]);
        }
    }
    js_put(c, b, "\"\\\\\\x00-\\x1f] ");
    js_need(c, b, N_KCHAR, "kchar");
    js_put(c, b, "* \"\\\"\"");
    if (!ends_here) {
        js_put(c, b, " | \"\\\"\"");
    }
    js_put(c, b, " )");
}


static int
js_utf8_cps(const char *s, uint32_t *cp, int max)
{
    js_re  r;
    int    n = 0;

    r.p = s;
    r.end = s + strlen(s);
    while (r.p < r.end && n < max) {
        cp[n] = re_utf8(&r);
        if (cp[n] == 0 || cp[n] < 0x20 || cp[n] == '"' || cp[n] == '\\') {
            return -1;
        }
        n++;
    }
    return r.p == r.end ? n : -1;
}


static int js_extra_key_text(js_ctx *c, llm_strbuf *b, const char **names,
    int n);


/* an additional property's key: any string but the declared names; one
   rule for each set of names (objects often share theirs) */
static int
js_extra_key(js_ctx *c, llm_strbuf *b, const char **names, int n)
{
    llm_strbuf  t;
    char        name[96];
    int         i, rc;

    if (n == 0) {
        js_need(c, b, N_STRING, "string");
        return JS_OK;
    }
    js_buf(c, &t);
    rc = js_extra_key_text(c, &t, names, n);
    for (i = 0; rc == JS_OK && i < c->n_keys; i++) {
        if (strcmp(c->key_text[i], t.data) == 0) {
            js_putf(c, b, "%s-keys%d", c->root, c->key_id[i]);
            llm_strbuf_free(&t);
            return c->failed ? JS_ERR : JS_OK;
        }
    }
    if (rc == JS_OK) {
        i = ++c->n_ids;
        snprintf(name, sizeof(name), "%s-keys%d", c->root, i);
        rc = js_rule(c, name, &t);
        js_put(c, b, name);
        if (c->n_keys < JS_MAX_KEYS) {
            c->key_id[c->n_keys] = i;
            c->key_text[c->n_keys++] = t.data;     /* kept */
            t.data = NULL;
        }
    }
    llm_strbuf_free(&t);
    return c->failed ? JS_ERR : rc;
}


static int
js_extra_key_text(js_ctx *c, llm_strbuf *b, const char **names, int n)
{
    js_key    *keys;
    uint32_t  *cps;
    int        i, k = 0, len;
    size_t     total = 0;

    if (n == 0) {
        js_need(c, b, N_STRING, "string");
        return JS_OK;
    }
    for (i = 0; i < n; i++) {
        total += strlen(names[i]);
    }
    keys = calloc(n, sizeof(*keys));
    cps = calloc(total + 1, sizeof(*cps));
    if (keys == NULL || cps == NULL) {
        free(keys);
        free(cps);
        return js_fail(c, "json_schema: out of memory");
    }
    for (i = 0, total = 0; i < n; i++) {
        len = js_utf8_cps(names[i], cps + total, (int) strlen(names[i]));
        if (len < 0) {
            continue;   /* has an escape: no additional key can equal it */
        }
        keys[k].name = names[i];
        keys[k].cp = cps + total;
        keys[k].len = len;
        total += len;
        k++;
    }
    qsort(keys, k, sizeof(*keys), js_key_cmp);
    js_put(c, b, "\"\\\"\" ");
    js_not_keys(c, b, keys, k, 0);
    free(keys);
    free(cps);
    return c->failed ? JS_ERR : JS_OK;
}


typedef struct {
    const char    *name;
    const cJSON   *schema;     /* NULL: the additionalProperties schema */
    int            required;
    char           kv[96];     /* its rule */
} js_prop;


static int
js_required(const cJSON *req, const char *name)
{
    const cJSON  *r;

    cJSON_ArrayForEach(r, req) {
        if (cJSON_IsString(r) && strcmp(r->valuestring, name) == 0) {
            return 1;
        }
    }
    return 0;
}



/*
 * patternProperties and propertyNames need to know at compile time
 * whether a declared name is a key they allow. A pattern is run as
 * ECMA-262 reads it (JSON Schema's dialect), by PCRE2 with ECMAScript's
 * \uHHHH and \s: the grammar's translation matches a subset of that, so a
 * name the grammar could write as a pattern key is always found.
 */
static const char  js_ecma_space[] =
    "\\t\\n\\u000b\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f"
    "\\u205f\\u3000\\ufeff";


/* 1 when the pattern finds a match in name (patterns are not anchored),
   0 when not, JS_ERR */
static int
js_re_search(js_ctx *c, const char *re, const char *name, const char *what,
    const char *ptr)
{
    pcre2_code        *code;
    pcre2_match_data  *md;
    llm_strbuf         t;
    PCRE2_SIZE         off;
    const char        *p;
    int                in_class = 0, rc, e;

    js_buf(c, &t);
    for (p = re; *p; p++) {
        if (*p == '\\' && p[1] == 's') {
            js_put(c, &t, in_class ? "" : "[");
            js_put(c, &t, js_ecma_space);
            js_put(c, &t, in_class ? "" : "]");
            p++;
        } else if (*p == '\\' && p[1] == 'S' && !in_class) {
            js_put(c, &t, "[^");
            js_put(c, &t, js_ecma_space);
            js_put(c, &t, "]");
            p++;
        } else if (*p == '\\' && p[1]) {
            llm_strbuf_append(&t, p, 2);
            p++;
        } else {
            in_class = *p == '[' ? 1 : *p == ']' ? 0 : in_class;
            llm_strbuf_append(&t, p, 1);
        }
    }
    if (c->failed) {
        llm_strbuf_free(&t);
        return JS_ERR;
    }
    code = pcre2_compile((PCRE2_SPTR) t.data, t.len,
                         PCRE2_UTF | PCRE2_ALT_BSUX, &e, &off, NULL);
    llm_strbuf_free(&t);
    if (code == NULL) {
        return js_fail(c, "json_schema: unsupported keyword '%s' at %s: its "
                       "pattern '%s' cannot be checked against the declared "
                       "names", what, js_at(ptr), re);
    }
    md = pcre2_match_data_create_from_pattern(code, NULL);
    rc = md ? pcre2_match(code, (PCRE2_SPTR) name, strlen(name), 0, 0, md,
                          NULL)
            : PCRE2_ERROR_NOMEMORY;
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        return js_fail(c, "json_schema: unsupported keyword '%s' at %s: "
                       "pattern '%s' cannot be run on the name '%s'", what,
                       js_at(ptr), re, name);
    }
    return rc >= 0;
}


/* 1 when propertyNames' string schema pn accepts name, 0 when not,
   JS_ERR */
static int
js_name_allowed(js_ctx *c, const cJSON *pn, const char *name,
    const char *ptr)
{
    const cJSON  *vals = cJSON_GetObjectItemCaseSensitive(pn, "enum");
    const cJSON  *cn = cJSON_GetObjectItemCaseSensitive(pn, "const");
    const cJSON  *pat = cJSON_GetObjectItemCaseSensitive(pn, "pattern");
    const cJSON  *v;
    const char   *q;
    long          min, max, len = 0;
    int           found;

    if (cJSON_HasObjectItem(pn, "format")) {
        return js_fail(c, "json_schema: unsupported keyword 'propertyNames' "
                       "at %s: a 'format' for names beside declared "
                       "properties or an enum", js_at(ptr));
    }
    if (js_count(c, pn, "minLength", ptr, 0, &min) != JS_OK
        || js_count(c, pn, "maxLength", ptr, -1, &max) != JS_OK)
    {
        return JS_ERR;
    }
    for (q = name; *q; q++) {
        len += ((unsigned char) *q & 0xC0) != 0x80;     /* code points */
    }
    if (len < min || (max >= 0 && len > max)) {
        return 0;
    }
    if (cn && !(cJSON_IsString(cn) && strcmp(cn->valuestring, name) == 0)) {
        return 0;
    }
    if (vals) {
        found = 0;
        cJSON_ArrayForEach(v, vals) {
            found |= cJSON_IsString(v) && strcmp(v->valuestring, name) == 0;
        }
        if (!found) {
            return 0;
        }
    }
    if (pat) {
        if (!cJSON_IsString(pat)) {
            return js_fail(c, "json_schema: 'pattern' at %s/propertyNames is "
                           "not a string", ptr);
        }
        return js_re_search(c, pat->valuestring, name, "propertyNames", ptr);
    }
    return 1;
}


/* propertyNames: a schema of strings only (keys are strings) */
static int
js_check_names_schema(js_ctx *c, const cJSON *pn, const char *ptr)
{
    static const char *const ok[] = {
        "type", "enum", "const", "pattern", "format", "minLength",
        "maxLength", NULL
    };
    const cJSON  *k, *t;

    if (!cJSON_IsObject(pn)) {
        return js_fail(c, "json_schema: 'propertyNames' at %s is not a "
                       "schema", js_at(ptr));
    }
    for (k = pn->child; k; k = k->next) {
        if ((js_in(js_supported, k->string) || js_in(js_refused, k->string))
            && !js_in(ok, k->string))
        {
            return js_fail(c, "json_schema: unsupported keyword '%s' in "
                           "'propertyNames' at %s (a string schema of type, "
                           "enum, const, pattern, format, minLength, "
                           "maxLength is)", k->string, js_at(ptr));
        }
    }
    t = cJSON_GetObjectItemCaseSensitive(pn, "type");
    if (t == NULL || (cJSON_IsString(t)
                      && strcmp(t->valuestring, "string") == 0))
    {
        return JS_OK;
    }
    if (cJSON_IsArray(t)) {
        cJSON_ArrayForEach(k, t) {
            if (cJSON_IsString(k) && strcmp(k->valuestring, "string") == 0) {
                return JS_OK;
            }
        }
    }
    return JS_EMPTY;    /* no string is of its type: no key */
}


/* a key of an enum/const propertyNames, as a literal */
static void
js_key_literal(js_ctx *c, llm_strbuf *b, const char *name)
{
    llm_strbuf  t;

    js_buf(c, &t);
    js_json_string(c, &t, name);
    if (!c->failed) {
        js_lit(c, b, t.data, t.len);
    }
    llm_strbuf_free(&t);
}


/*
 * The keys of additional properties under patternProperties or
 * propertyNames (ppat: the patterns, one schema for all; pn: the names
 * schema), the declared names n of names[] not among them (checked by the
 * caller). JS_EMPTY when no key is allowed.
 */
static int
js_rule_keys(js_ctx *c, llm_strbuf *b, const cJSON *ppat, const cJSON *pn,
    const char **names, int n, const char *ptr)
{
    const cJSON  *p, *vals, *cn;
    char          sub[512];
    int           alts = 0, i, rc = JS_OK;

    if (ppat) {
        js_put(c, b, "( ");
        cJSON_ArrayForEach(p, ppat) {
            js_put(c, b, alts++ ? " | " : "");
            js_child(sub, sizeof(sub), ptr, "patternProperties");
            if (js_pattern(c, p->string, sub, b) != JS_OK) {
                return JS_ERR;
            }
        }
        js_put(c, b, " )");
        return c->failed ? JS_ERR : JS_OK;
    }
    js_child(sub, sizeof(sub), ptr, "propertyNames");
    vals = cJSON_GetObjectItemCaseSensitive(pn, "enum");
    cn = cJSON_GetObjectItemCaseSensitive(pn, "const");
    if (vals == NULL && cn == NULL) {
        return js_gen_string(c, pn, sub, b);    /* n is 0 here */
    }
    /* a finite set: the names it allows, but the declared ones */
    js_put(c, b, "( ");
    for (p = vals ? vals->child : cn; p; p = vals ? p->next : NULL) {
        if (!cJSON_IsString(p)) {
            continue;
        }
        rc = js_name_allowed(c, pn, p->valuestring, ptr);
        if (rc == JS_ERR) {
            return JS_ERR;
        }
        if (rc == 0) {
            continue;
        }
        for (i = 0; i < n && strcmp(names[i], p->valuestring); i++) {
            /* declared? */
        }
        if (i < n) {
            continue;
        }
        js_put(c, b, alts++ ? " | " : "");
        js_key_literal(c, b, p->valuestring);
    }
    js_put(c, b, " )");
    return c->failed ? JS_ERR : alts ? JS_OK : JS_EMPTY;
}


/*
 * patternProperties and propertyNames against the declared names list[]:
 * a declared name that a pattern matches would need both schemas (and the
 * pattern's key rule would let it repeat), so it is refused; a declared
 * name that propertyNames rejects is left out (or, required, the object
 * accepts nothing). *ppat is the patterns (NULL: none), *pn the names
 * schema (NULL: none).
 */
static int
js_key_rules(js_ctx *c, const cJSON *s, const char *ptr, js_prop *list,
    int *n, const cJSON **ppat, const cJSON **pn)
{
    const cJSON  *pp = cJSON_GetObjectItemCaseSensitive(s,
                                                         "patternProperties");
    const cJSON  *p, *first = NULL, *ap;
    llm_strbuf    scratch;
    char          sub[512];
    int           i, j, rc = 0;

    *ppat = NULL;
    *pn = cJSON_GetObjectItemCaseSensitive(s, "propertyNames");
    if (pp && !cJSON_IsObject(pp)) {
        return js_fail(c, "json_schema: 'patternProperties' at %s is not an "
                       "object", js_at(ptr));
    }
    if (*pn && (cJSON_IsTrue(*pn)
                || (cJSON_IsObject(*pn) && !js_constrains(*pn, NULL))))
    {
        *pn = NULL;     /* true, {}: any key */
    }
    if (pp && pp->child && *pn) {
        return js_fail(c, "json_schema: unsupported keyword 'propertyNames' "
                       "at %s: with patternProperties", js_at(ptr));
    }
    ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (ap == NULL || cJSON_IsTrue(ap)) {
        /* patterns of schemas that constrain nothing change nothing when
           every other key is allowed too */
        cJSON_ArrayForEach(p, pp) {
            if (!cJSON_IsTrue(p) && !(cJSON_IsObject(p)
                                      && !js_constrains(p, NULL)))
            {
                break;
            }
        }
        if (p == NULL) {
            pp = NULL;
        }
    }
    cJSON_ArrayForEach(p, pp) {
        if (first && !cJSON_Compare(first, p, 1)) {
            return js_fail(c, "json_schema: unsupported keyword "
                           "'patternProperties' at %s: patterns with "
                           "different schemas (a key that matches several "
                           "needs them all)", js_at(ptr));
        }
        first = p;
        /* our translation's error first (the key rule will need it) */
        js_buf(c, &scratch);
        js_child(sub, sizeof(sub), ptr, "patternProperties");
        rc = js_pattern(c, p->string, sub, &scratch);
        llm_strbuf_free(&scratch);
        if (rc != JS_OK) {
            return JS_ERR;
        }
        for (i = 0; i < *n; i++) {
            rc = js_re_search(c, p->string, list[i].name,
                              "patternProperties", ptr);
            if (rc != 0) {
                break;      /* a declared name the pattern matches */
            }
        }
        if (rc == JS_ERR) {
            return JS_ERR;
        }
        if (i < *n) {
            return js_fail(c, "json_schema: unsupported keyword "
                           "'patternProperties' at %s: property '%s' matches "
                           "pattern '%s' (it would need both schemas)",
                           js_at(ptr), list[i].name, p->string);
        }
        *ppat = pp;
    }
    if (*pn == NULL) {
        return c->failed ? JS_ERR : JS_OK;
    }
    if (!cJSON_IsFalse(*pn)) {
        rc = js_check_names_schema(c, *pn, ptr);
        if (rc == JS_ERR) {
            return rc;
        }
    } else {
        rc = JS_EMPTY;
    }
    /* the declared names it rejects are left out */
    for (i = 0, j = 0; i < *n; i++) {
        int  ok = rc == JS_OK ? js_name_allowed(c, *pn, list[i].name, ptr)
                              : 0;

        if (ok == JS_ERR) {
            return JS_ERR;
        }
        if (ok) {
            list[j++] = list[i];
        } else if (list[i].required) {
            return JS_EMPTY;
        }
    }
    *n = j;
    if (rc == JS_EMPTY) {
        *pn = NULL;     /* no key at all: additional ones are left out */
        return JS_NOKEYS;
    }
    return c->failed ? JS_ERR : JS_OK;
}


/* kv ::= "\"name\"" ws ":" ws value */
static int
js_kv(js_ctx *c, js_prop *p, const cJSON *extra, int extra_any,
    const char *ptr, char *name, size_t name_len)
{
    llm_strbuf  body, v;
    char        sub[512];
    int         rc;

    js_buf(c, &body);
    js_buf(c, &v);
    if (p->schema) {
        char  props[512];

        js_child(props, sizeof(props), ptr, "properties");
        js_child(sub, sizeof(sub), props, p->name);
        rc = js_gen(c, p->schema, sub, &v);
    } else if (extra_any) {
        js_need(c, &v, N_VALUE, "value");
        rc = JS_OK;
    } else {
        js_child(sub, sizeof(sub), ptr, "additionalProperties");
        rc = js_gen(c, extra, sub, &v);
    }
    if (rc == JS_OK) {
        js_name(c, name, name_len, "kv");
        js_json_string(c, &body, p->name);
        if (!c->failed) {
            /* the key's JSON text as a literal */
            llm_strbuf  key;

            js_buf(c, &key);
            js_lit(c, &key, body.data, body.len);
            body.len = 0;
            body.data[0] = '\0';
            js_put(c, &body, key.data);
            llm_strbuf_free(&key);
        }
        js_put(c, &body, " ");
        js_need(c, &body, N_WS, "ws");
        js_put(c, &body, " \":\" ");
        js_need(c, &body, N_WS, "ws");
        js_put(c, &body, " ");
        js_put(c, &body, v.data);
        rc = js_rule(c, name, &body);
    }
    llm_strbuf_free(&body);
    llm_strbuf_free(&v);
    return rc;
}


/* ws "," ws */
static void
js_comma(js_ctx *c, llm_strbuf *b)
{
    js_need(c, b, N_WS, "ws");
    js_put(c, b, " \",\" ");
    js_need(c, b, N_WS, "ws");
    js_put(c, b, " ");
}


static int
js_gen_object(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON  *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON  *ap = cJSON_GetObjectItemCaseSensitive(s,
                                                      "additionalProperties");
    const cJSON  *p, *r;
    js_prop      *list = NULL;
    const char  **names = NULL;
    llm_strbuf    body, xkey, xkv;
    char          name[96], xname[96], rest[128], prev[128];
    const cJSON  *ppat, *pn, *pp, *pnames;
    long          minp, maxp;
    int           n = 0, cap, i, j, rc = JS_ERR, n_req = 0, extras;
    int           extra_any, keyed;

    if (props && !cJSON_IsObject(props)) {
        return js_fail(c, "json_schema: 'properties' at %s is not an object",
                       js_at(ptr));
    }
    if (req && !cJSON_IsArray(req)) {
        return js_fail(c, "json_schema: 'required' at %s is not an array",
                       js_at(ptr));
    }
    cJSON_ArrayForEach(r, req) {
        if (!cJSON_IsString(r)) {
            return js_fail(c, "json_schema: 'required' at %s has a "
                           "non-string", js_at(ptr));
        }
    }
    if (ap && !cJSON_IsBool(ap) && !cJSON_IsObject(ap)) {
        return js_fail(c, "json_schema: 'additionalProperties' at %s is not "
                       "a schema", js_at(ptr));
    }
    if (js_count(c, s, "minProperties", ptr, 0, &minp) != JS_OK
        || js_count(c, s, "maxProperties", ptr, -1, &maxp) != JS_OK)
    {
        return JS_ERR;
    }
    extras = ap == NULL || !cJSON_IsFalse(ap);
    extra_any = ap == NULL || cJSON_IsTrue(ap);
    pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    pnames = cJSON_GetObjectItemCaseSensitive(s, "propertyNames");
    keyed = (pp && pp->child) || (pnames && !cJSON_IsTrue(pnames));

    /* {"type": "object"}: any object */
    if (cJSON_GetArraySize(props) == 0 && cJSON_GetArraySize(req) == 0
        && extra_any && minp == 0 && maxp < 0 && !keyed)
    {
        js_put(c, e, c->root);
        js_put(c, e, "-object");
        c->need |= N_VALUE;
        return JS_OK;
    }

    /* the declared properties in order, then required names not among
       them (with the additionalProperties schema) */
    cap = cJSON_GetArraySize(props) + cJSON_GetArraySize(req) + 1;
    list = calloc(cap, sizeof(*list));
    names = calloc(cap, sizeof(*names));
    if (list == NULL || names == NULL) {
        free(list);
        free(names);
        return js_fail(c, "json_schema: out of memory");
    }
    cJSON_ArrayForEach(p, props) {
        list[n].name = p->string;
        list[n].schema = p;
        list[n].required = js_required(req, p->string);
        n++;
    }
    cJSON_ArrayForEach(r, req) {
        for (i = 0; i < n && strcmp(list[i].name, r->valuestring); i++) {
            /* declared? */
        }
        if (i < n) {
            continue;
        }
        if (!extras && pp && pp->child) {
            rc = js_fail(c, "json_schema: unsupported keyword "
                         "'patternProperties' at %s: with '%s' required but "
                         "not in properties", js_at(ptr), r->valuestring);
            goto done;
        }
        if (!extras) {
            rc = JS_EMPTY;      /* required but not allowed */
            goto done;
        }
        list[n].name = r->valuestring;
        list[n].schema = NULL;
        list[n].required = 1;
        n++;
    }
    /* patternProperties, propertyNames: the keys of additional ones */
    rc = js_key_rules(c, s, ptr, list, &n, &ppat, &pn);
    if (rc == JS_ERR || rc == JS_EMPTY) {
        goto done;
    }
    if (rc == JS_NOKEYS) {
        extras = 0;
    }
    if (ppat) {
        extras = 1;     /* keys that match no pattern are left out */
        extra_any = 0;
    }
    if (pn && extras && n > 0
        && !cJSON_HasObjectItem(pn, "enum") && !cJSON_HasObjectItem(pn, "const"))
    {
        rc = js_fail(c, "json_schema: unsupported keyword 'propertyNames' at "
                     "%s: a pattern or length for additional keys beside "
                     "properties (an additional key must not repeat one)",
                     js_at(ptr));
        goto done;
    }
    for (i = 0; i < n; i++) {
        names[i] = list[i].name;
    }

    c->cdepth++;
    /* each property's kv rule; one that accepts nothing is left out (or
       the object accepts nothing, when it is required) */
    for (i = 0; i < n; i++) {
        rc = js_kv(c, &list[i], ap, extra_any, ptr, list[i].kv,
                   sizeof(list[i].kv));
        if (rc == JS_ERR) {
            goto done_depth;
        }
        if (rc == JS_EMPTY) {
            if (list[i].required) {
                goto done_depth;
            }
            list[i].kv[0] = '\0';
        }
        n_req += list[i].required;
    }

    /* additional properties: key ws ":" ws value */
    xname[0] = '\0';
    if (extras) {
        js_prop  x;

        memset(&x, 0, sizeof(x));
        js_buf(c, &xkey);
        js_buf(c, &xkv);
        rc = ppat || pn ? js_rule_keys(c, &xkey, ppat, pn, names, n, ptr)
                        : js_extra_key(c, &xkey, names, n);
        if (rc == JS_OK) {
            x.name = "";
            if (ppat) {
                char  sub[512], pat[512];

                js_child(pat, sizeof(pat), ptr, "patternProperties");
                js_child(sub, sizeof(sub), pat, ppat->child->string);
                rc = js_gen(c, ppat->child, sub, &xkv);
            } else if (extra_any) {
                js_need(c, &xkv, N_VALUE, "value");
            } else {
                char  sub[512];

                js_child(sub, sizeof(sub), ptr, "additionalProperties");
                rc = js_gen(c, ap, sub, &xkv);
            }
        }
        if (rc == JS_OK) {
            llm_strbuf  kv;

            js_buf(c, &kv);
            js_put(c, &kv, xkey.data);
            js_put(c, &kv, " ");
            js_need(c, &kv, N_WS, "ws");
            js_put(c, &kv, " \":\" ");
            js_need(c, &kv, N_WS, "ws");
            js_put(c, &kv, " ");
            js_put(c, &kv, xkv.data);
            js_name(c, xname, sizeof(xname), "kv");
            rc = js_rule(c, xname, &kv);
            llm_strbuf_free(&kv);
        }
        llm_strbuf_free(&xkey);
        llm_strbuf_free(&xkv);
        if (rc == JS_ERR) {
            goto done_depth;
        }
        if (rc == JS_EMPTY) {
            xname[0] = '\0';
            extras = 0;
        }
    }

    /* minProperties / maxProperties: duplicate additional keys would count
       once, so only what the declared properties decide is enforced */
    if (n > 0 || !extras) {
        int  n_decl = 0;

        for (i = 0; i < n; i++) {
            n_decl += list[i].kv[0] != '\0';
        }
        if (!extras && minp > n_decl) {
            rc = JS_EMPTY;
            goto done_depth;
        }
        /* at least one property is what the f-chain below says, at most
           one a choice of one */
        if (minp > (n_req > 0 ? n_req : 1)
            || (maxp > 1 && (extras || maxp < n_decl)))
        {
            if (maxp >= 0 && maxp < n_req) {
                rc = JS_EMPTY;
                goto done_depth;
            }
            rc = js_fail(c, "json_schema: minProperties/maxProperties at %s "
                         "with properties is not supported (beyond what "
                         "required and additionalProperties say)",
                         js_at(ptr));
            goto done_depth;
        }
    } else if (minp > 1) {
        rc = js_fail(c, "json_schema: minProperties %ld at %s is not "
                     "supported (over 1, with only additional properties)",
                     minp, js_at(ptr));
        goto done_depth;
    }
    if (maxp >= 0 && maxp < minp) {
        rc = JS_EMPTY;
        goto done_depth;
    }

    js_buf(c, &body);
    js_name(c, name, sizeof(name), "object");

    if (n > 0 && maxp == 1) {
        /* one property at most: the required one, or any one of them */
        llm_strbuf  alt;
        int         alts = 0;

        js_buf(c, &alt);
        for (i = 0; i < n; i++) {
            if (list[i].kv[0] && (n_req == 0 || list[i].required)) {
                js_put(c, &alt, alts++ ? " | " : "");
                js_put(c, &alt, list[i].kv);
            }
        }
        if (extras && n_req == 0) {
            js_put(c, &alt, alts++ ? " | " : "");
            js_put(c, &alt, xname);
        }
        /* "{" ws ( ( kv | ... ) ws )? "}", the group required when one
           property must be there */
        js_put(c, &body, "\"{\" ");
        js_need(c, &body, N_WS, "ws");
        if (alts) {
            js_put(c, &body, " ( ( ");
            js_put(c, &body, alt.data);
            js_put(c, &body, " ) ");
            js_need(c, &body, N_WS, "ws");
            js_put(c, &body, n_req || minp ? " )" : " )?");
        }
        js_put(c, &body, " \"}\"");
        llm_strbuf_free(&alt);
        rc = alts || !(n_req || minp) ? js_rule(c, name, &body) : JS_EMPTY;
        llm_strbuf_free(&body);
        if (rc == JS_OK) {
            js_put(c, e, name);
        }
        goto done_depth;
    }

    if (n == 0) {
        /* additional properties only */
        js_put(c, &body, "\"{\" ");
        js_need(c, &body, N_WS, "ws");
        if (extras && maxp != 0) {
            js_put(c, &body, " ( ");
            js_put(c, &body, xname);
            js_put(c, &body, " ( ");
            js_comma(c, &body);
            js_put(c, &body, xname);
            js_put(c, &body, " )");
            js_rep(c, &body, 0, maxp < 0 ? -1 : maxp - 1);
            js_put(c, &body, " ");
            js_need(c, &body, N_WS, "ws");
            js_put(c, &body, " )");
            if (minp == 0) {
                js_put(c, &body, "?");
            }
        }
        js_put(c, &body, " \"}\"");
        rc = js_rule(c, name, &body);
        llm_strbuf_free(&body);
        if (rc == JS_OK) {
            js_put(c, e, name);
        }
        goto done_depth;
    }

    /*
     * name-aI: the properties from I on, after one has been written
     * (each with its comma); name-fI: from I on, none written yet, at
     * least one to write. Required ones must be there, optional ones may
     * be left out; additional ones come last.
     */
    rest[0] = '\0';
    if (extras) {
        llm_strbuf  t;

        snprintf(rest, sizeof(rest), "%s-a%d", name, n);
        js_buf(c, &t);
        js_put(c, &t, "( ");
        js_comma(c, &t);
        js_put(c, &t, xname);
        js_put(c, &t, " )*");
        js_rule(c, rest, &t);
        llm_strbuf_free(&t);
    }
    prev[0] = '\0';     /* name-f(I+1), when there is one */
    if (extras) {
        llm_strbuf  t;

        snprintf(prev, sizeof(prev), "%s-f%d", name, n);
        js_buf(c, &t);
        js_put(c, &t, xname);
        js_put(c, &t, " ");
        js_put(c, &t, rest);
        js_rule(c, prev, &t);
        llm_strbuf_free(&t);
    }
    for (i = n - 1; i >= 0; i--) {
        char        a[128], f[128];
        llm_strbuf  t;

        if (list[i].kv[0] == '\0') {
            continue;
        }
        /* aI ::= (ws "," ws kvI)? a(I+1), for the kvs before it */
        snprintf(a, sizeof(a), "%s-a%d", name, i);
        js_buf(c, &t);
        for (j = 0; j < i && list[j].kv[0] == '\0'; j++) {
            /* a kept property before I? */
        }
        js_put(c, &t, list[i].required ? "" : "( ");
        js_comma(c, &t);
        js_put(c, &t, list[i].kv);
        js_put(c, &t, list[i].required ? "" : " )?");
        if (rest[0]) {
            js_put(c, &t, " ");
            js_put(c, &t, rest);
        }
        if (j < i) {
            js_rule(c, a, &t);
        }
        llm_strbuf_free(&t);

        /* fI ::= kvI a(I+1) | f(I+1) (optional) */
        snprintf(f, sizeof(f), "%s-f%d", name, i);
        js_buf(c, &t);
        js_put(c, &t, list[i].kv);
        if (rest[0]) {
            js_put(c, &t, " ");
            js_put(c, &t, rest);
        }
        if (!list[i].required && prev[0]) {
            js_put(c, &t, " | ");
            js_put(c, &t, prev);
        }
        js_rule(c, f, &t);
        llm_strbuf_free(&t);
        snprintf(rest, sizeof(rest), "%s", a);
        snprintf(prev, sizeof(prev), "%s", f);
    }
    js_put(c, &body, "\"{\" ");
    js_need(c, &body, N_WS, "ws");
    if (prev[0]) {
        js_put(c, &body, " ( ");
        js_put(c, &body, prev);
        js_put(c, &body, " ");
        js_need(c, &body, N_WS, "ws");
        js_put(c, &body, n_req || minp ? " )" : " )?");
    }
    js_put(c, &body, " \"}\"");
    rc = js_rule(c, name, &body);
    llm_strbuf_free(&body);
    if (rc == JS_OK) {
        js_put(c, e, name);
    }

done_depth:
    c->cdepth--;
done:
    free(list);
    free(names);
    return c->failed ? JS_ERR : rc;
}


/* --- arrays ----------------------------------------------------------- */

static int
js_gen_array(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON  *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON  *tail, *it;
    const char   *tail_key = "items";
    char          name[96], sub[512], **elem = NULL;
    llm_strbuf    body, t, tv;
    long          min, max;
    int           k = 0, i, rc = JS_OK, tail_ok;

    if (js_count(c, s, "minItems", ptr, 0, &min) != JS_OK
        || js_count(c, s, "maxItems", ptr, -1, &max) != JS_OK)
    {
        return JS_ERR;
    }
    /* draft 2020-12: prefixItems + items; before it: items as an array +
       additionalItems */
    if (prefix && cJSON_IsArray(items)) {
        return js_fail(c, "json_schema: 'prefixItems' with an array 'items' "
                       "at %s", js_at(ptr));
    }
    if (cJSON_IsArray(items)) {
        prefix = items;
        tail = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
        tail_key = "additionalItems";
    } else {
        tail = items;
    }
    if (prefix && !cJSON_IsArray(prefix)) {
        return js_fail(c, "json_schema: 'prefixItems' at %s is not an array",
                       js_at(ptr));
    }
    if (tail && !cJSON_IsBool(tail) && !cJSON_IsObject(tail)) {
        return js_fail(c, "json_schema: '%s' at %s is not a schema",
                       tail_key, js_at(ptr));
    }

    c->cdepth++;
    k = cJSON_GetArraySize(prefix);
    elem = calloc(k + 1, sizeof(*elem));
    if (elem == NULL) {
        c->cdepth--;
        return js_fail(c, "json_schema: out of memory");
    }
    /* the prefix: one that accepts nothing ends the array before it */
    i = 0;
    cJSON_ArrayForEach(it, prefix) {
        js_buf(c, &t);
        js_index(sub, sizeof(sub), ptr, prefix == items ? "items"
                 : "prefixItems", i);
        rc = js_gen(c, it, sub, &t);
        if (rc == JS_ERR) {
            llm_strbuf_free(&t);
            goto done;
        }
        if (rc == JS_EMPTY) {
            llm_strbuf_free(&t);
            if (max < 0 || max > i) {
                max = i;
            }
            break;
        }
        elem[i++] = t.data;
    }
    k = i;
    if (max >= 0 && k > max) {
        k = (int) max;
    }
    js_buf(c, &tv);
    tail_ok = 0;
    if (tail == NULL || cJSON_IsTrue(tail)) {
        js_need(c, &tv, N_VALUE, "value");
        tail_ok = 1;
    } else {
        js_child(sub, sizeof(sub), ptr, tail_key);
        rc = js_gen(c, tail, sub, &tv);
        if (rc == JS_ERR) {
            llm_strbuf_free(&tv);
            goto done;
        }
        tail_ok = rc == JS_OK;
    }
    if (!tail_ok && (max < 0 || max > k)) {
        max = k;
    }
    if (max >= 0 && max < min) {
        llm_strbuf_free(&tv);
        rc = JS_EMPTY;
        goto done;
    }

    js_name(c, name, sizeof(name), "array");
    js_buf(c, &body);
    js_put(c, &body, "\"[\" ");
    js_need(c, &body, N_WS, "ws");
    if (max != 0) {
        /* element 0, then elements 1..k-1 of the prefix (each optional past
           minItems), then the tail's repetition */
        js_put(c, &body, " ( ");
        js_put(c, &body, k > 0 ? elem[0] : tv.data);
        for (i = 1; i < k; i++) {
            js_put(c, &body, " ");
            js_put(c, &body, i >= min ? "( " : "");
            js_comma(c, &body);
            js_put(c, &body, elem[i]);
        }
        if (tail_ok && (max < 0 || max > (k ? k : 1))) {
            long  done_n = k ? k : 1;
            long  lo = min > done_n ? min - done_n : 0;

            js_put(c, &body, " ( ");
            js_comma(c, &body);
            js_put(c, &body, tv.data);
            js_put(c, &body, " )");
            js_rep(c, &body, lo, max < 0 ? -1 : max - done_n);
        }
        for (i = k - 1; i >= 1; i--) {
            if (i >= min) {
                js_put(c, &body, " )?");
            }
        }
        js_put(c, &body, " ");
        js_need(c, &body, N_WS, "ws");
        js_put(c, &body, min > 0 ? " )" : " )?");
    }
    js_put(c, &body, " \"]\"");
    rc = js_rule(c, name, &body);
    llm_strbuf_free(&body);
    llm_strbuf_free(&tv);
    if (rc == JS_OK) {
        js_put(c, e, name);
    }

done:
    for (i = 0; elem && i <= cJSON_GetArraySize(prefix); i++) {
        free(elem[i]);
    }
    free(elem);
    c->cdepth--;
    return c->failed ? JS_ERR : rc;
}


/* --- enum and const --------------------------------------------------- */

/* v as compact JSON text; a number in the shortest form that reads back
   as the same double (a parser must see the value the schema has) */
static int
js_json_value(js_ctx *c, llm_strbuf *b, const cJSON *v, const char *ptr)
{
    const cJSON  *k;
    char          num[40];
    int           prec;

    if (cJSON_IsNull(v)) {
        js_put(c, b, "null");
    } else if (cJSON_IsTrue(v)) {
        js_put(c, b, "true");
    } else if (cJSON_IsFalse(v)) {
        js_put(c, b, "false");
    } else if (cJSON_IsString(v)) {
        js_json_string(c, b, v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        if (!isfinite(v->valuedouble)
            || (v->valuedouble == floor(v->valuedouble)
                && fabs(v->valuedouble) > JS_MAX_SAFE))
        {
            return js_fail(c, "json_schema: a number in 'enum' or 'const' at "
                           "%s is beyond 2^53", js_at(ptr));
        }
        if (v->valuedouble == floor(v->valuedouble)) {
            snprintf(num, sizeof(num), "%.0f", v->valuedouble);
        } else {
            for (prec = 15; prec <= 17; prec++) {
                snprintf(num, sizeof(num), "%.*g", prec, v->valuedouble);
                if (strtod(num, NULL) == v->valuedouble) {
                    break;
                }
            }
        }
        js_put(c, b, num);
    } else if (cJSON_IsArray(v)) {
        js_put(c, b, "[");
        for (k = v->child; k; k = k->next) {
            if (js_json_value(c, b, k, ptr) != JS_OK) {
                return JS_ERR;
            }
            js_put(c, b, k->next ? "," : "");
        }
        js_put(c, b, "]");
    } else {
        js_put(c, b, "{");
        for (k = v->child; k; k = k->next) {
            js_json_string(c, b, k->string);
            js_put(c, b, ":");
            if (js_json_value(c, b, k, ptr) != JS_OK) {
                return JS_ERR;
            }
            js_put(c, b, k->next ? "," : "");
        }
        js_put(c, b, "}");
    }
    return c->failed ? JS_ERR : JS_OK;
}


/* the type a keyword constrains (0: none or several) */
static int
js_keyword_type(const char *k)
{
    static const char *const str[] = {
        "minLength", "maxLength", "pattern", "format", NULL
    };
    static const char *const num[] = {
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL
    };
    static const char *const obj[] = {
        "properties", "required", "additionalProperties", "minProperties",
        "maxProperties", "patternProperties", "propertyNames", NULL
    };
    static const char *const arr[] = {
        "items", "prefixItems", "additionalItems", "minItems", "maxItems",
        NULL
    };

    return js_in(str, k) ? T_STR : js_in(num, k) ? T_INT | T_FRAC
           : js_in(obj, k) ? T_OBJ : js_in(arr, k) ? T_ARR : 0;
}


static int
js_gen_enum(js_ctx *c, const cJSON *s, const char *ptr, int mask,
    llm_strbuf *e)
{
    const cJSON  *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON  *co = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON  *v, *k;
    js_alts       alts;
    int           t;

    if (en && !cJSON_IsArray(en)) {
        return js_fail(c, "json_schema: 'enum' at %s is not an array",
                       js_at(ptr));
    }
    for (k = s->child; k; k = k->next) {
        int  kt = js_keyword_type(k->string), vt = 0;

        for (v = en ? en->child : co; v && kt; v = en ? v->next : NULL) {
            vt |= js_value_type(v);
        }
        if (kt && !(kt & vt & mask)) {
            continue;   /* no value is of the type it constrains */
        }
        if (js_in(js_supported, k->string) && strcmp(k->string, "enum")
            && strcmp(k->string, "const") && strcmp(k->string, "type"))
        {
            return js_fail(c, "json_schema: '%s' with '%s' at %s is not "
                           "supported", en ? "enum" : "const", k->string,
                           js_at(ptr));
        }
    }
    memset(&alts, 0, sizeof(alts));
    js_buf(c, &alts.b);
    for (v = en ? en->child : co; v; v = en ? v->next : NULL) {
        if (en && co && !cJSON_Compare(v, co, 1)) {
            continue;
        }
        t = js_value_type(v);
        if (!(t & mask)) {
            continue;
        }
        if (cJSON_IsNumber(v) && (!isfinite(v->valuedouble)
                                  || (t == T_INT
                                      && fabs(v->valuedouble) > JS_MAX_SAFE)))
        {
            llm_strbuf_free(&alts.b);
            return js_fail(c, "json_schema: a number in '%s' at %s is beyond "
                           "2^53", en ? "enum" : "const", js_at(ptr));
        }
        {
            llm_strbuf  j, l;

            js_buf(c, &j);
            js_buf(c, &l);
            if (js_json_value(c, &j, v, ptr) == JS_OK) {
                js_lit(c, &l, j.data, j.len);
                js_alt_add(c, &alts, l.data);
            }
            llm_strbuf_free(&j);
            llm_strbuf_free(&l);
            if (c->failed) {
                llm_strbuf_free(&alts.b);
                return JS_ERR;
            }
        }
    }
    return js_alt_end(c, &alts, e);
}


/* --- $ref ------------------------------------------------------------- */

/* the node a "#/a/b" pointer names (~0 ~1 and %XX decoded), or NULL */
static const cJSON *
js_resolve(const cJSON *doc, const char *ref)
{
    const cJSON  *node = doc;
    char          key[512];
    size_t        n;
    const char   *p = ref + 1;
    char         *end;

    while (*p == '/') {
        p++;
        n = 0;
        while (*p && *p != '/' && n + 1 < sizeof(key)) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                key[n++] = p[1] == '0' ? '~' : '/';
                p += 2;
            } else if (p[0] == '%' && p[1] && p[2]) {
                char  hex[3] = { p[1], p[2], 0 };

                key[n++] = (char) strtol(hex, &end, 16);
                if (*end) {
                    return NULL;
                }
                p += 3;
            } else {
                key[n++] = *p++;
            }
        }
        key[n] = '\0';
        if (cJSON_IsArray(node)) {
            long  i = strtol(key, &end, 10);

            if (*end || n == 0) {
                return NULL;
            }
            node = cJSON_GetArrayItem(node, (int) i);
        } else if (cJSON_IsObject(node)) {
            node = cJSON_GetObjectItemCaseSensitive(node, key);
        } else {
            return NULL;
        }
        if (node == NULL) {
            return NULL;
        }
    }
    return *p ? NULL : node;
}


/* the target of s's $ref, through refs to refs */
static int
js_ref_target(js_ctx *c, const cJSON *s, const char *ptr, const cJSON **t)
{
    const cJSON  *ref;
    int           hops;

    for (hops = 0; hops < JS_MAX_DEPTH; hops++) {
        ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!cJSON_IsString(ref)) {
            return js_fail(c, "json_schema: '$ref' at %s is not a string",
                           js_at(ptr));
        }
        if (ref->valuestring[0] != '#') {
            return js_fail(c, "json_schema: unsupported keyword '$ref' at %s: "
                           "only references inside the schema ('#/...') are "
                           "supported, not '%s'", js_at(ptr),
                           ref->valuestring);
        }
        if (ref->valuestring[1] != '\0' && ref->valuestring[1] != '/') {
            return js_fail(c, "json_schema: unsupported keyword '$ref' at %s: "
                           "anchors ('%s') are not supported", js_at(ptr),
                           ref->valuestring);
        }
        *t = js_resolve(c->doc, ref->valuestring);
        if (*t == NULL) {
            return js_fail(c, "json_schema: '$ref' '%s' at %s names nothing "
                           "in the schema", ref->valuestring, js_at(ptr));
        }
        if (!cJSON_IsObject(*t) || !cJSON_HasObjectItem(*t, "$ref")
            || js_constrains(*t, "$ref"))
        {
            return JS_OK;
        }
        s = *t;
    }
    return js_fail(c, "json_schema: '$ref' at %s: a circle of references",
                   js_at(ptr));
}


static int
js_gen_ref(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *t;
    js_ref       *r;
    llm_strbuf    body;
    char          name[96], tptr[512];
    int           i, rc;

    if (js_ref_target(c, s, ptr, &t) != JS_OK) {
        return JS_ERR;
    }
    for (i = 0; i < c->n_refs; i++) {
        r = &c->refs[i];
        if (r->target != t) {
            continue;
        }
        if (r->busy && r->cdepth == c->cdepth) {
            return js_fail(c, "json_schema: '$ref' at %s is left-recursive "
                           "(it reaches itself before any '{' or '[')",
                           js_at(ptr));
        }
        if (r->empty) {
            return JS_EMPTY;
        }
        if (r->busy) {
            r->recursed = 1;
        }
        js_putf(c, e, "%s-ref%d", c->root, r->id);
        return c->failed ? JS_ERR : JS_OK;
    }
    if (c->n_refs == JS_MAX_REFS) {
        return js_fail(c, "json_schema: over %d $ref targets", JS_MAX_REFS);
    }
    r = &c->refs[c->n_refs++];
    r->target = t;
    r->id = ++c->n_ids;
    r->busy = 1;
    r->cdepth = c->cdepth;
    r->empty = 0;
    r->recursed = 0;
    snprintf(name, sizeof(name), "%s-ref%d", c->root, r->id);
    snprintf(tptr, sizeof(tptr), "%s",
             cJSON_GetObjectItemCaseSensitive(s, "$ref")->valuestring + 1);
    js_buf(c, &body);
    rc = js_gen(c, t, tptr, &body);
    r = &c->refs[i];
    r->busy = 0;
    if (rc == JS_OK) {
        rc = js_rule(c, name, &body);
    } else if (rc == JS_EMPTY) {
        r->empty = 1;
        if (r->recursed) {
            rc = js_fail(c, "json_schema: the schema at %s accepts nothing",
                         tptr[0] ? tptr : "the root");
        }
    }
    llm_strbuf_free(&body);
    if (rc == JS_OK) {
        js_put(c, e, name);
    }
    return c->failed ? JS_ERR : rc;
}


/* --- allOf: one schema from several ----------------------------------- */

#define JS_MAX_BRANCHES  64

typedef struct {
    const cJSON    *b[JS_MAX_BRANCHES];
    int             n;
    int             empty;
} js_branches;


/* s and what its $ref and allOf bring, flattened */
static int
js_flatten(js_ctx *c, const cJSON *s, const char *ptr, js_branches *br,
    int depth)
{
    const cJSON  *t, *i;

    if (depth > JS_MAX_DEPTH) {
        return js_fail(c, "json_schema: allOf at %s nested too deep (or a "
                       "circle of references)", js_at(ptr));
    }
    if (cJSON_IsTrue(s)) {
        return JS_OK;
    }
    if (cJSON_IsFalse(s)) {
        br->empty = 1;
        return JS_OK;
    }
    if (!cJSON_IsObject(s)) {
        return js_fail(c, "json_schema: a schema in allOf at %s is not an "
                       "object or a boolean", js_at(ptr));
    }
    if (js_check_keywords(c, s, ptr) != JS_OK) {
        return JS_ERR;
    }
    if (br->n == JS_MAX_BRANCHES) {
        return js_fail(c, "json_schema: allOf at %s merges over %d schemas",
                       js_at(ptr), JS_MAX_BRANCHES);
    }
    br->b[br->n++] = s;
    if (cJSON_HasObjectItem(s, "$ref")) {
        if (js_ref_target(c, s, ptr, &t) != JS_OK
            || js_flatten(c, t, ptr, br, depth + 1) != JS_OK)
        {
            return JS_ERR;
        }
    }
    t = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (t) {
        if (!cJSON_IsArray(t)) {
            return js_fail(c, "json_schema: 'allOf' at %s is not an array",
                           js_at(ptr));
        }
        cJSON_ArrayForEach(i, t) {
            if (js_flatten(c, i, ptr, br, depth + 1) != JS_OK) {
                return JS_ERR;
            }
        }
    }
    return JS_OK;
}


static int
js_dup_into(js_ctx *c, cJSON *obj, const char *key, const cJSON *v)
{
    cJSON  *d = cJSON_Duplicate(v, 1);

    if (d == NULL || !(key ? cJSON_AddItemToObject(obj, key, d)
                           : cJSON_AddItemToArray(obj, d)))
    {
        cJSON_Delete(d);
        return js_fail(c, "json_schema: out of memory");
    }
    return JS_OK;
}


/* adds to an array a reference to v (no copy: a $ref inside stays where
   it is, so its target is the one the memo knows) */
static int
js_ref_into(js_ctx *c, cJSON *arr, const cJSON *v)
{
    if (arr == NULL || !cJSON_AddItemReferenceToArray(arr, (cJSON *) v)) {
        return js_fail(c, "json_schema: out of memory");
    }
    return JS_OK;
}


/* x, an {"allOf": [s]} a merge made, becomes a reference to s itself: a
   recursive schema merged with something stays one rule, not an endless
   copy */
static void
js_collapse(cJSON *parent, cJSON *x)
{
    cJSON  *all, *tmp, *r;

    all = x ? cJSON_GetObjectItem(x, "allOf") : NULL;
    if (all == NULL || x->child->next != NULL
        || cJSON_GetArraySize(all) != 1)
    {
        return;
    }
    tmp = cJSON_CreateArray();
    if (tmp == NULL || !cJSON_AddItemReferenceToArray(tmp, all->child)) {
        cJSON_Delete(tmp);
        return;
    }
    r = cJSON_DetachItemFromArray(tmp, 0);
    cJSON_Delete(tmp);
    if (cJSON_IsObject(parent)) {
        cJSON_ReplaceItemInObjectCaseSensitive(parent, x->string, r);
    } else {
        cJSON_ReplaceItemViaPointer(parent, x, r);
    }
}


/* adds a schema to name's list in the merged properties: a list of one is
   the schema, of more an allOf */
static int
js_prop_add(js_ctx *c, cJSON *props, const char *name, const cJSON *v)
{
    cJSON  *cur = cJSON_GetObjectItemCaseSensitive(props, name), *all, *d;

    if (cur == NULL) {
        all = cJSON_CreateObject();
        if (all == NULL || !cJSON_AddItemToObject(props, name, all)
            || cJSON_AddArrayToObject(all, "allOf") == NULL)
        {
            return js_fail(c, "json_schema: out of memory");
        }
        cur = all;
    }
    (void) d;
    return js_ref_into(c, cJSON_GetObjectItem(cur, "allOf"), v);
}


static int
js_has_prop(const cJSON *s, const char *name)
{
    const cJSON  *p = cJSON_GetObjectItemCaseSensitive(s, "properties");

    return cJSON_IsObject(p) && cJSON_HasObjectItem(p, name);
}


/* keywords merged by taking the largest (min*) or smallest (max*) */
static const char *const js_mins[] = {
    "minLength", "minItems", "minProperties", "minimum", NULL
};
static const char *const js_maxs[] = {
    "maxLength", "maxItems", "maxProperties", "maximum", NULL
};

/* keywords that cannot be in two of the schemas merged */
static const char *const js_once[] = {
    "pattern", "format", "anyOf", "oneOf", "propertyNames", NULL
};


/*
 * Element i of the merged array meets each schema's element i: its
 * prefixItems[i] when it has one, its items (the tail) otherwise; the
 * merged tail meets every tail. (A tail with no prefix applies from 0.)
 */
static int
js_merge_items(js_ctx *c, js_branches *br, cJSON *m, const char *ptr)
{
    const cJSON  *pre[JS_MAX_BRANCHES], *tail[JS_MAX_BRANCHES], *items, *x;
    cJSON        *arr = NULL, *all, *t = NULL;
    int           i, j, kmax = 0, any_tail = 0;

    for (i = 0; i < br->n; i++) {
        items = cJSON_GetObjectItemCaseSensitive(br->b[i], "items");
        pre[i] = cJSON_GetObjectItemCaseSensitive(br->b[i], "prefixItems");
        tail[i] = items;
        if (cJSON_IsArray(items)) {
            if (pre[i]) {
                return js_fail(c, "json_schema: 'prefixItems' with an array "
                               "'items' at %s", js_at(ptr));
            }
            pre[i] = items;
            tail[i] = cJSON_GetObjectItemCaseSensitive(br->b[i],
                                                       "additionalItems");
        }
        if (pre[i] && !cJSON_IsArray(pre[i])) {
            return js_fail(c, "json_schema: 'prefixItems' at %s is not an "
                           "array", js_at(ptr));
        }
        if (cJSON_GetArraySize(pre[i]) > kmax) {
            kmax = cJSON_GetArraySize(pre[i]);
        }
        if (tail[i] && cJSON_IsTrue(tail[i])) {
            tail[i] = NULL;
        }
        any_tail |= tail[i] != NULL;
    }
    if (kmax > 0) {
        arr = cJSON_AddArrayToObject(m, "prefixItems");
    }
    if (any_tail) {
        t = cJSON_AddObjectToObject(m, "items");
        if (t == NULL || cJSON_AddArrayToObject(t, "allOf") == NULL) {
            return js_fail(c, "json_schema: out of memory");
        }
    }
    for (j = 0; j < kmax; j++) {
        all = cJSON_CreateObject();
        if (arr == NULL || all == NULL || !cJSON_AddItemToArray(arr, all)
            || cJSON_AddArrayToObject(all, "allOf") == NULL)
        {
            cJSON_Delete(all);
            return js_fail(c, "json_schema: out of memory");
        }
        for (i = 0; i < br->n; i++) {
            x = j < cJSON_GetArraySize(pre[i]) ? cJSON_GetArrayItem(pre[i], j)
                                                : tail[i];
            if (x && js_ref_into(c, cJSON_GetObjectItem(all, "allOf"), x)
                != JS_OK)
            {
                return JS_ERR;
            }
        }
    }
    for (i = 0; i < br->n && t; i++) {
        if (tail[i] && js_ref_into(c, cJSON_GetObjectItem(t, "allOf"),
                                   tail[i]) != JS_OK)
        {
            return JS_ERR;
        }
    }
    return JS_OK;
}


static int
js_merge(js_ctx *c, js_branches *br, const char *ptr, cJSON **out)
{
    cJSON        *m, *props, *req, *all, *v, *next_v;
    const cJSON  *s, *k, *p, *ap;
    int           i, j, mask = T_ALL, tm, seen_types = 0, rc;

    *out = NULL;
    m = cJSON_CreateObject();
    if (m == NULL || !cJSON_AddItemToArray(c->owned, m)) {
        cJSON_Delete(m);
        return js_fail(c, "json_schema: out of memory");
    }
    props = cJSON_AddObjectToObject(m, "properties");
    req = cJSON_AddArrayToObject(m, "required");
    if (props == NULL || req == NULL) {
        return js_fail(c, "json_schema: out of memory");
    }
    for (i = 0; i < br->n; i++) {
        s = br->b[i];
        for (k = s->child; k; k = k->next) {
            const char  *n = k->string;
            cJSON       *cur = cJSON_GetObjectItemCaseSensitive(m, n);

            if (strcmp(n, "$ref") == 0 || strcmp(n, "allOf") == 0
                || !js_in(js_supported, n))
            {
                continue;
            }
            if (strcmp(n, "type") == 0) {
                if (js_types(c, s, ptr, &tm) != JS_OK) {
                    return JS_ERR;
                }
                mask &= tm;
                seen_types = 1;
            } else if (strcmp(n, "properties") == 0) {
                if (!cJSON_IsObject(k)) {
                    return js_fail(c, "json_schema: 'properties' at %s is "
                                   "not an object", js_at(ptr));
                }
                cJSON_ArrayForEach(p, k) {
                    if (js_prop_add(c, props, p->string, p) != JS_OK) {
                        return JS_ERR;
                    }
                }
            } else if (strcmp(n, "required") == 0) {
                cJSON_ArrayForEach(p, k) {
                    if (!cJSON_IsString(p)) {
                        return js_fail(c, "json_schema: 'required' at %s "
                                       "has a non-string", js_at(ptr));
                    }
                    if (!js_required(req, p->valuestring)
                        && js_dup_into(c, req, NULL, p) != JS_OK)
                    {
                        return JS_ERR;
                    }
                }
            } else if (strcmp(n, "items") == 0
                       || strcmp(n, "prefixItems") == 0
                       || strcmp(n, "additionalItems") == 0)
            {
                continue;       /* js_merge_items */
            } else if (strcmp(n, "additionalProperties") == 0) {
                if (cur == NULL) {
                    cur = cJSON_CreateObject();
                    if (cur == NULL || !cJSON_AddItemToObject(m, n, cur)
                        || cJSON_AddArrayToObject(cur, "allOf") == NULL)
                    {
                        return js_fail(c, "json_schema: out of memory");
                    }
                }
                if (cJSON_IsArray(cur)) {
                    return js_fail(c, "json_schema: allOf at %s: cannot "
                                   "merge two array 'items'", js_at(ptr));
                }
                if (js_ref_into(c, cJSON_GetObjectItem(cur, "allOf"), k)
                    != JS_OK)
                {
                    return JS_ERR;
                }
            } else if (js_in(js_mins, n) || js_in(js_maxs, n)
                       || strcmp(n, "exclusiveMinimum") == 0
                       || strcmp(n, "exclusiveMaximum") == 0)
            {
                int  up = js_in(js_mins, n) || strcmp(n, "exclusiveMinimum")
                                               == 0;

                if (!cJSON_IsNumber(k)) {
                    return js_fail(c, "json_schema: allOf at %s: cannot merge "
                                   "'%s' that is not a number", js_at(ptr),
                                   n);
                }
                if (cur == NULL) {
                    if (js_dup_into(c, m, n, k) != JS_OK) {
                        return JS_ERR;
                    }
                } else if (up ? k->valuedouble > cur->valuedouble
                              : k->valuedouble < cur->valuedouble)
                {
                    cJSON_SetNumberValue(cur, k->valuedouble);
                }
            } else if (strcmp(n, "enum") == 0) {
                if (cur == NULL) {
                    if (js_dup_into(c, m, n, k) != JS_OK) {
                        return JS_ERR;
                    }
                } else {
                    /* the values in both */
                    cJSON  *x = cur->child, *next;

                    for (; x; x = next) {
                        next = x->next;
                        cJSON_ArrayForEach(p, k) {
                            if (cJSON_Compare(x, p, 1)) {
                                break;
                            }
                        }
                        if (p == NULL) {
                            cJSON_Delete(cJSON_DetachItemViaPointer(cur, x));
                        }
                    }
                }
            } else if (strcmp(n, "const") == 0) {
                if (cur == NULL) {
                    if (js_dup_into(c, m, n, k) != JS_OK) {
                        return JS_ERR;
                    }
                } else if (!cJSON_Compare(cur, k, 1)) {
                    br->empty = 1;
                }
            } else if (strcmp(n, "patternProperties") == 0) {
                /* exact only when no other schema says which keys are
                   additional (its additionalProperties would change) */
                if (k->child == NULL) {
                    continue;
                }
                for (j = 0; j < br->n; j++) {
                    static const char *const objk[] = {
                        "properties", "required", "additionalProperties",
                        "patternProperties", "propertyNames",
                        "minProperties", "maxProperties", NULL
                    };
                    const cJSON  *o;

                    for (o = j == i ? NULL : br->b[j]->child; o;
                         o = o->next)
                    {
                        if (js_in(objk, o->string)) {
                            return js_fail(c, "json_schema: allOf at %s: "
                                           "cannot merge 'patternProperties' "
                                           "with another schema's '%s'",
                                           js_at(ptr), o->string);
                        }
                    }
                }
                if (js_dup_into(c, m, n, k) != JS_OK) {
                    return JS_ERR;
                }
            } else if (js_in(js_once, n)) {
                if (cur && !cJSON_Compare(cur, k, 1)) {
                    return js_fail(c, "json_schema: allOf at %s: cannot "
                                   "merge two different '%s'", js_at(ptr),
                                   n);
                }
                if (cur == NULL && js_dup_into(c, m, n, k) != JS_OK) {
                    return JS_ERR;
                }
            }
        }
    }
    if (br->empty || mask == 0) {
        return JS_EMPTY;
    }
    if (js_merge_items(c, br, m, ptr) != JS_OK) {
        return JS_ERR;
    }

    /* additionalProperties of each schema apply to the names the others
       declare: false leaves them out, a schema joins theirs */
    all = cJSON_GetObjectItemCaseSensitive(m, "additionalProperties");
    for (i = 0; i < br->n; i++) {
        s = br->b[i];
        ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        if (ap == NULL || cJSON_IsTrue(ap)) {
            continue;
        }
        p = req->child;
        for (j = 0; j < 2; j++) {
            cJSON  *x = j == 0 ? props->child : req->child, *next;

            for (; x; x = next) {
                const char  *name = j == 0 ? x->string : x->valuestring;

                next = x->next;
                if (js_has_prop(s, name)) {
                    continue;
                }
                if (j == 1 && cJSON_HasObjectItem(props, name)) {
                    continue;   /* done with the properties */
                }
                if (cJSON_IsFalse(ap)) {
                    if (js_required(req, name)) {
                        return JS_EMPTY;
                    }
                    if (j == 0) {
                        cJSON_Delete(cJSON_DetachItemViaPointer(props, x));
                    }
                    continue;
                }
                if (js_prop_add(c, props, name, ap) != JS_OK) {
                    return JS_ERR;
                }
            }
        }
        (void) p;
    }
    /* an additionalProperties false among them wins */
    if (all) {
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(all, "allOf")) {
            if (cJSON_IsFalse(p)) {
                cJSON_ReplaceItemInObject(m, "additionalProperties",
                                          cJSON_CreateFalse());
                break;
            }
        }
    }
    if (seen_types) {
        cJSON  *t = cJSON_AddArrayToObject(m, "type");
        static const struct { int bits; const char *name; } names[] = {
            { T_NULL, "null" }, { T_BOOL, "boolean" }, { T_OBJ, "object" },
            { T_ARR, "array" }, { T_STR, "string" },
        };

        if (t == NULL) {
            return js_fail(c, "json_schema: out of memory");
        }
        for (j = 0; j < 5; j++) {
            if (mask & names[j].bits) {
                cJSON_AddItemToArray(t, cJSON_CreateString(names[j].name));
            }
        }
        if ((mask & (T_INT | T_FRAC)) == (T_INT | T_FRAC)) {
            cJSON_AddItemToArray(t, cJSON_CreateString("number"));
        } else if (mask & T_INT) {
            cJSON_AddItemToArray(t, cJSON_CreateString("integer"));
        } else if (mask & T_FRAC) {
            return js_fail(c, "json_schema: allOf at %s: the types leave "
                           "non-integer numbers only", js_at(ptr));
        }
    }
    for (v = props->child; v; v = next_v) {
        next_v = v->next;
        js_collapse(props, v);
    }
    js_collapse(m, cJSON_GetObjectItem(m, "additionalProperties"));
    js_collapse(m, cJSON_GetObjectItem(m, "items"));
    v = cJSON_GetObjectItem(m, "prefixItems");
    for (v = v ? v->child : NULL; v; v = next_v) {
        next_v = v->next;
        js_collapse(cJSON_GetObjectItem(m, "prefixItems"), v);
    }
    if (props->child == NULL) {
        cJSON_DeleteItemFromObject(m, "properties");
    }
    if (req->child == NULL) {
        cJSON_DeleteItemFromObject(m, "required");
    }
    rc = JS_OK;
    *out = m;
    return rc;
}


/* s with allOf or with $ref and other keywords: the schemas merged */
static int
js_gen_allof(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    js_branches  br;
    cJSON       *m;
    int          rc;

    br.n = 0;
    br.empty = 0;
    if (js_flatten(c, s, ptr, &br, 0) != JS_OK) {
        return JS_ERR;
    }
    if (br.empty) {
        return JS_EMPTY;
    }
    rc = js_merge(c, &br, ptr, &m);
    if (rc != JS_OK) {
        return rc;
    }
    return js_gen(c, m, ptr, e);
}


/* anyOf / oneOf (as anyOf): each branch, with the keywords beside it */
static int
js_gen_anyof(js_ctx *c, const cJSON *s, const cJSON *list, const char *ptr,
    llm_strbuf *e)
{
    const cJSON  *b;
    cJSON        *rest, *pair, *arr;
    js_alts       alts;
    char          sub[512];
    int           i = 0, with_rest;

    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0) {
        return js_fail(c, "json_schema: '%s' at %s is not a non-empty array",
                       list->string, js_at(ptr));
    }
    with_rest = js_constrains(s, list->string);
    rest = NULL;
    if (with_rest) {
        rest = cJSON_Duplicate(s, 1);
        if (rest == NULL || !cJSON_AddItemToArray(c->owned, rest)) {
            cJSON_Delete(rest);
            return js_fail(c, "json_schema: out of memory");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(rest, list->string);
    }
    memset(&alts, 0, sizeof(alts));
    js_buf(c, &alts.b);
    cJSON_ArrayForEach(b, list) {
        js_index(sub, sizeof(sub), ptr, list->string, i++);
        if (!with_rest) {
            if (js_alt_gen(c, &alts, b, sub) != JS_OK) {
                llm_strbuf_free(&alts.b);
                return JS_ERR;
            }
            continue;
        }
        /* {"allOf": [rest, branch]} */
        pair = cJSON_CreateObject();
        arr = pair ? cJSON_AddArrayToObject(pair, "allOf") : NULL;
        if (arr == NULL || !cJSON_AddItemToArray(c->owned, pair)) {
            cJSON_Delete(pair);
            llm_strbuf_free(&alts.b);
            return js_fail(c, "json_schema: out of memory");
        }
        cJSON_AddItemReferenceToArray(arr, rest);
        cJSON_AddItemReferenceToArray(arr, (cJSON *) b);
        if (js_alt_gen(c, &alts, pair, sub) != JS_OK) {
            llm_strbuf_free(&alts.b);
            return JS_ERR;
        }
    }
    return js_alt_end(c, &alts, e);
}


/* --- one subschema ---------------------------------------------------- */

static int
js_gen_types(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    js_alts     alts;
    llm_strbuf  t;
    int         mask, rc = JS_OK;

    if (js_types(c, s, ptr, &mask) != JS_OK) {
        return JS_ERR;
    }
    if (cJSON_HasObjectItem(s, "enum") || cJSON_HasObjectItem(s, "const")) {
        return js_gen_enum(c, s, ptr, mask, e);
    }
    if (mask == T_ALL && !js_constrains(s, NULL)) {
        js_need(c, e, N_VALUE, "value");
        return JS_OK;
    }
    memset(&alts, 0, sizeof(alts));
    js_buf(c, &alts.b);
    if (mask & T_NULL) {
        js_alt_add(c, &alts, "\"null\"");
    }
    if (mask & T_BOOL) {
        js_alt_add(c, &alts, "\"true\"");
        js_alt_add(c, &alts, "\"false\"");
    }
#define JS_TYPE(bit, call)                                                   \
    if (rc != JS_ERR && (mask & (bit))) {                                    \
        js_buf(c, &t);                                                       \
        rc = call;                                                           \
        if (rc == JS_OK) {                                                   \
            js_alt_add(c, &alts, t.data);                                    \
        }                                                                    \
        llm_strbuf_free(&t);                                                 \
    }
    JS_TYPE(T_STR, js_gen_string(c, s, ptr, &t));
    JS_TYPE(T_INT | T_FRAC, js_gen_number(c, s, ptr, !(mask & T_FRAC), &t));
    JS_TYPE(T_OBJ, js_gen_object(c, s, ptr, &t));
    JS_TYPE(T_ARR, js_gen_array(c, s, ptr, &t));
#undef JS_TYPE
    if (rc == JS_ERR) {
        llm_strbuf_free(&alts.b);
        return JS_ERR;
    }
    return js_alt_end(c, &alts, e);
}


static int
js_gen(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *any, *one;
    int           rc;

    if (cJSON_IsTrue(s)) {
        js_need(c, e, N_VALUE, "value");
        return c->failed ? JS_ERR : JS_OK;
    }
    if (cJSON_IsFalse(s)) {
        return JS_EMPTY;
    }
    if (!cJSON_IsObject(s)) {
        return js_fail(c, "json_schema: the schema at %s is not an object or "
                       "a boolean", js_at(ptr));
    }
    if (c->depth >= JS_MAX_DEPTH) {
        return js_fail(c, "json_schema: the schema at %s is nested deeper "
                       "than %d", js_at(ptr), JS_MAX_DEPTH);
    }
    if (js_check_keywords(c, s, ptr) != JS_OK) {
        return JS_ERR;
    }
    c->depth++;
    any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    if (cJSON_HasObjectItem(s, "$ref")) {
        rc = js_constrains(s, "$ref") ? js_gen_allof(c, s, ptr, e)
                                      : js_gen_ref(c, s, ptr, e);
    } else if (cJSON_HasObjectItem(s, "allOf")) {
        rc = js_gen_allof(c, s, ptr, e);
    } else if (any && one) {
        rc = js_fail(c, "json_schema: 'anyOf' with 'oneOf' at %s is not "
                     "supported", js_at(ptr));
    } else if (any || one) {
        rc = js_gen_anyof(c, s, any ? any : one, ptr, e);
    } else {
        rc = js_gen_types(c, s, ptr, e);
    }
    c->depth--;
    return c->failed ? JS_ERR : rc;
}


/* a key twice in one object: parsers differ on which one counts (cJSON
   the first, python the last), so the schema is ambiguous */
static int
js_duplicates(js_ctx *c, const cJSON *v, char *ptr, size_t len)
{
    const cJSON  *k, *j;
    size_t        n = strlen(ptr);
    int           i = 0;

    for (k = v->child; k; k = k->next, i++) {
        if (cJSON_IsObject(v)) {
            for (j = v->child; j != k; j = j->next) {
                if (strcmp(j->string, k->string) == 0) {
                    return js_fail(c, "json_schema: the key '%s' is twice in "
                                   "the object at %s", k->string,
                                   js_at(ptr));
                }
            }
        }
        if (k->child == NULL) {
            continue;
        }
        if (cJSON_IsObject(v)) {
            char  tmp[512];

            js_child(tmp, sizeof(tmp), ptr, k->string);
            snprintf(ptr + n, len - n, "%s", tmp + n);
        } else {
            snprintf(ptr + n, len - n, "/%d", i);
        }
        if (js_duplicates(c, k, ptr, len) != JS_OK) {
            return JS_ERR;
        }
        ptr[n] = '\0';
    }
    return JS_OK;
}


/*
 * The schema text before cJSON reads it: UTF-8 (the grammar's literals are
 * its bytes), no control bytes (cJSON lets them into strings, JSON does
 * not), no \u0000 (a C string would cut the name there: "a\u0000b" would
 * become the property "a").
 */
static int
js_check_text(js_ctx *c, const char *schema, size_t len)
{
    const unsigned char  *p = (const unsigned char *) schema;
    size_t                i, n, k, bs = 0;
    uint32_t              cp;

    for (i = 0; i < len; i += n) {
        n = 1;
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') {
            return js_fail(c, "json_schema: the schema has a control byte "
                           "(0x%02x at byte %zu)", p[i], i);
        }
        if (p[i] == '\\') {
            if (bs % 2 == 0 && len - i >= 6 && memcmp(p + i, "\\u0000", 6) == 0)
            {
                return js_fail(c, "json_schema: the schema has \\u0000 (at "
                               "byte %zu)", i);
            }
            bs++;
            continue;
        }
        bs = 0;
        if (p[i] < 0x80) {
            continue;
        }
        n = p[i] >= 0xf0 ? 4 : p[i] >= 0xe0 ? 3 : p[i] >= 0xc2 ? 2 : 0;
        if (n == 0 || p[i] > 0xf4 || i + n > len) {
            goto bad;
        }
        cp = p[i] & (0xff >> (n + 1));
        for (k = 1; k < n; k++) {
            if ((p[i + k] & 0xc0) != 0x80) {
                goto bad;
            }
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000
            || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        {
            goto bad;
        }
    }
    return JS_OK;

bad:
    return js_fail(c, "json_schema: the schema is not valid UTF-8 (at byte "
                   "%zu)", i);
}


/* --- the shared rules ------------------------------------------------- */

static void
js_shared(js_ctx *c, llm_strbuf *out)
{
    const char  *r = c->root;

    if (c->need & N_VALUE) {
        c->need |= N_STRING | N_NUMBER | N_WS;
        js_putf(c, out, "%s-value ::= %s-object | %s-array | %s-string | "
                "%s-number | \"true\" | \"false\" | \"null\"\n", r, r, r, r,
                r);
        js_putf(c, out, "%s-object ::= \"{\" %s-ws ( %s-member ( %s-ws "
                "\",\" %s-ws %s-member )* %s-ws )? \"}\"\n", r, r, r, r, r,
                r, r);
        js_putf(c, out, "%s-member ::= %s-string %s-ws \":\" %s-ws "
                "%s-value\n", r, r, r, r, r);
        js_putf(c, out, "%s-array ::= \"[\" %s-ws ( %s-value ( %s-ws \",\" "
                "%s-ws %s-value )* %s-ws )? \"]\"\n", r, r, r, r, r, r, r);
    }
    if (c->need & N_STRING) {
        c->need |= N_CHAR;
        js_putf(c, out, "%s-string ::= \"\\\"\" %s-char* \"\\\"\"\n", r, r);
    }
    if (c->need & N_CHAR) {
        /* escapes of lone surrogates are left out: a parser would read
           \ud83d\ude00 as one character where the grammar counts two */
        js_putf(c, out, "%s-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( "
                "[\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} "
                "| [dD] [0-7] [0-9a-fA-F]{2} ) )\n", r);
    }
    if (c->need & N_KCHAR) {
        js_putf(c, out, "%s-kchar ::= [^\"\\\\\\x00-\\x1f]\n", r);
    }
    if (c->need & N_NUMBER) {
        js_putf(c, out, "%s-number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,%d} ) "
                "( \".\" [0-9]{1,%d} )? ( [eE] [-+]? [0-9]{1,2} )?\n", r,
                JS_INT_DIGITS - 1, JS_FRAC_DIGITS);
    }
    if (c->need & N_INT) {
        js_putf(c, out, "%s-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,%d} "
                ")\n", r, JS_INT_DIGITS - 1);
    }
    if (c->need & N_DATE) {
        /* a real date: the days of each month, 29 February of leap years;
           years 0001-9999 */
        js_putf(c, out, "%s-date ::= %s-year \"-\" ( ( \"01\" | \"03\" | "
                "\"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( "
                "%s-day28 | \"29\" | \"30\" | \"31\" ) | ( \"04\" | \"06\" | "
                "\"09\" | \"11\" ) \"-\" ( %s-day28 | \"29\" | \"30\" ) | "
                "\"02-\" %s-day28 ) | %s-leap \"-02-29\"\n", r, r, r, r, r,
                r);
        js_putf(c, out, "%s-year ::= [1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | "
                "\"00\" [1-9] [0-9] | \"000\" [1-9]\n", r);
        js_putf(c, out, "%s-leap ::= [0-9]{2} ( \"0\" [48] | [2468] [048] | "
                "[13579] [26] ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) "
                "\"00\"\n", r);
        js_putf(c, out, "%s-day28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" "
                "[0-8]\n", r);
    }
    if (c->need & N_TIME) {
        js_putf(c, out, "%s-time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" "
                "[0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? ( \"Z\" "
                "| [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n",
                r);
    }
    if (c->need & N_UUID) {
        js_putf(c, out, "%s-uuid ::= %s-hex{8} \"-\" %s-hex{4} \"-\" "
                "%s-hex{4} \"-\" %s-hex{4} \"-\" %s-hex{12}\n", r, r, r, r,
                r, r);
        js_putf(c, out, "%s-hex ::= [0-9a-fA-F]\n", r);
    }
    if (c->need & N_EMAIL) {
        /* a dot-atom local part (RFC 5322) at a domain of labels */
        js_putf(c, out, "%s-email ::= %s-atext+ ( \".\" %s-atext+ )* \"@\" "
                "[a-zA-Z0-9] [a-zA-Z0-9\\x2d]* ( \".\" [a-zA-Z0-9] "
                "[a-zA-Z0-9\\x2d]* )*\n", r, r, r);
        js_putf(c, out, "%s-atext ::= [a-zA-Z0-9!#$%%&'*+/=?\\x5e_`{|}~\\x2d]\n",
                r);
    }
    if (c->need & N_WS) {
        if (c->max_ws > 0) {
            js_putf(c, out, "%s-ws ::= [ \\t\\n]{0,%d}\n", r, c->max_ws);
        } else {
            js_putf(c, out, "%s-ws ::= \"\"\n", r);
        }
    }
}


int
llm_json_schema_to_gbnf(const char *schema, size_t len, const char *root,
    int max_ws, llm_strbuf *out, char *err, size_t err_len)
{
    js_ctx       c;
    llm_strbuf   e;
    const char  *end, *p;
    int          rc, i;

    memset(&c, 0, sizeof(c));
    c.err = err;
    c.err_len = err_len;
    c.root = root;
    c.max_ws = max_ws;
    c.max = out->max ? out->max : 0;
    if (err_len) {
        err[0] = '\0';
    }
    for (p = root; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '-'))
        {
            break;
        }
    }
    if (*p || p == root || p - root > JS_MAX_ROOT) {
        return js_fail(&c, "json_schema: bad rule name '%.64s'", root);
    }
    if (max_ws < 0) {
        return js_fail(&c, "json_schema: max_ws %d is negative", max_ws);
    }
    if (js_check_text(&c, schema, len) != JS_OK) {
        return -1;
    }
    end = NULL;
    c.doc = cJSON_ParseWithLengthOpts(schema, len, &end, 0);
    if (c.doc == NULL) {
        return js_fail(&c, "json_schema: the schema is not valid JSON (near "
                       "byte %zu)", (size_t) (end ? end - schema : 0));
    }
    c.owned = cJSON_CreateArray();
    c.refs = calloc(JS_MAX_REFS, sizeof(*c.refs));
    if (c.owned == NULL || c.refs == NULL) {
        rc = js_fail(&c, "json_schema: out of memory");
        goto done;
    }
    js_buf(&c, &c.rules);
    js_buf(&c, &e);
    {
        char  ptr[512] = "";

        rc = js_duplicates(&c, c.doc, ptr, sizeof(ptr));
    }
    if (rc == JS_OK) {
        rc = js_gen(&c, c.doc, "", &e);
    }
    if (rc == JS_EMPTY) {
        rc = js_fail(&c, "json_schema: the schema accepts no JSON value");
    }
    if (rc == JS_OK) {
        js_put(&c, out, root);
        js_put(&c, out, " ::= ");
        js_put(&c, out, e.data);
        js_put(&c, out, "\n");
        js_put(&c, out, c.rules.data ? c.rules.data : "");
        js_shared(&c, out);
        rc = c.failed ? JS_ERR : JS_OK;
    }
    llm_strbuf_free(&e);
    llm_strbuf_free(&c.rules);

done:
    for (i = 0; i < c.n_keys; i++) {
        free(c.key_text[i]);
    }
    free(c.refs);
    cJSON_Delete(c.owned);
    cJSON_Delete((cJSON *) c.doc);
    return rc == JS_OK ? 0 : -1;
}
