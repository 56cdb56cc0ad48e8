/*
 * GBNF parser (llama.cpp's syntax) with our extensions: %json { schema },
 * <[id]> and <special-token-text>. Builds rules of byte-level elements
 * (grammar_impl.h): literals become one byte set per byte, char classes on
 * code points become rules of UTF-8 byte sequences, x* x+ x? x{m,n} become
 * right-recursive or nested optional rules named after their parent
 * ("value-3"), as llama.cpp names them; x{m,n} with m or n past
 * LLM_GRAMMAR_MAX_UNROLL becomes one GE_REPEAT of a rule holding x, a
 * counter in the matcher, whatever n.
 *
 * defines: llm_gbnf_parse, llm_gbuild_free, llm_grammar_now_ns
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar_impl.h"
#include "grammar/json_schema.h"
#include "text/utf8.h"


typedef struct {
    llm_gbuild  *b;
    const char  *src;
    const char  *p;
    const char  *end;
    const char  *what;          /* "grammar", "%json", "regex" */
    const char  *line_start;
    int          line;
    int          depth;
} gp;

typedef struct {
    uint32_t    lo, hi;
} cp_range;

/* a class of code points compiled into a rule, kept to be used again */
struct llm_gclass {
    uint32_t    hash;
    int         n;
    cp_range   *r;
    int         rule;
};

#define CP_MAX  0x10FFFF


uint64_t
llm_grammar_now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}


static int
gp_error(gp *g, const char *at, const char *fmt, ...)
{
    char     msg[256];
    va_list  ap;

    if (g->b->err[0] != '\0') {
        return -1;              /* the first error is the one reported */
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(g->b->err, g->b->err_len, "%s: %s at %d:%d", g->what, msg,
             g->line, (int) (at - g->line_start) + 1);
    return -1;
}


static int
build_oom(llm_gbuild *b)
{
    if (b->err[0] == '\0') {
        snprintf(b->err, b->err_len, "grammar: out of memory");
    }
    return -1;
}


static int
grow(void **p, int *cap, int need, size_t size)
{
    int    n;
    void  *q;

    if (need <= *cap) {
        return 0;
    }
    n = *cap ? *cap * 2 : 16;
    while (n < need) {
        n *= 2;
    }
    q = realloc(*p, (size_t) n * size);
    if (q == NULL) {
        return -1;
    }
    *p = q;
    *cap = n;
    return 0;
}


static uint32_t
bytes_hash(const void *p, size_t len)
{
    const uint8_t  *s = p;
    uint32_t        h = 2166136261u;
    size_t          i;

    for (i = 0; i < len; i++) {
        h = (h ^ s[i]) * 16777619u;
    }
    return h;
}


/*
 * Grows an open-addressing table of index + 1 to twice n entries, putting
 * back every entry by key_of. Tables stay at most half full.
 */
static int
table_grow(int32_t **t, uint32_t *mask, int n, llm_gbuild *b,
    uint32_t (*key_of)(llm_gbuild *b, int i))
{
    uint32_t  size = *mask ? (*mask + 1) * 2 : 256, h;
    int32_t  *nt;
    int       i;

    while (size < (uint32_t) n * 2 + 2) {
        size *= 2;
    }
    nt = calloc(size, sizeof(int32_t));
    if (nt == NULL) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        h = key_of(b, i) & (size - 1);
        while (nt[h]) {
            h = (h + 1) & (size - 1);
        }
        nt[h] = i + 1;
    }
    free(*t);
    *t = nt;
    *mask = size - 1;
    return 0;
}


static uint32_t
rule_key(llm_gbuild *b, int i)
{
    return bytes_hash(b->rules[i].name, b->rules[i].name_len);
}


static uint32_t
set_key(llm_gbuild *b, int i)
{
    return bytes_hash(b->sets[i], 32);
}


static int
rule_find(llm_gbuild *b, const char *name, size_t len)
{
    uint32_t  h;
    int32_t   id;

    if (b->rule_hash == NULL) {
        return -1;
    }
    h = bytes_hash(name, len) & b->rule_hmask;
    while ((id = b->rule_hash[h]) != 0) {
        if (b->rules[id - 1].name_len == len
            && memcmp(b->rules[id - 1].name, name, len) == 0)
        {
            return id - 1;
        }
        h = (h + 1) & b->rule_hmask;
    }
    return -1;
}


static int
rule_add(llm_gbuild *b, const char *name, size_t len)
{
    llm_grule  *r;

    if (b->n_rules >= LLM_GRAMMAR_MAX_RULES) {
        snprintf(b->err, b->err_len, "grammar: more than %d rules",
                 LLM_GRAMMAR_MAX_RULES);
        return -1;
    }
    if (grow((void **) &b->rules, &b->cap_rules, b->n_rules + 1,
             sizeof(llm_grule)) != 0)
    {
        return build_oom(b);
    }
    r = &b->rules[b->n_rules];
    memset(r, 0, sizeof(*r));
    r->name = malloc(len + 1);
    if (r->name == NULL) {
        return build_oom(b);
    }
    memcpy(r->name, name, len);
    r->name[len] = '\0';
    r->name_len = len;
    b->n_rules++;
    if ((uint32_t) b->n_rules * 2 > b->rule_hmask) {
        if (table_grow(&b->rule_hash, &b->rule_hmask, b->n_rules, b,
                       rule_key) != 0)
        {
            return build_oom(b);
        }
    } else {
        uint32_t  h = rule_key(b, b->n_rules - 1) & b->rule_hmask;

        while (b->rule_hash[h]) {
            h = (h + 1) & b->rule_hmask;
        }
        b->rule_hash[h] = b->n_rules;
    }
    return b->n_rules - 1;
}


/* a helper rule named after its parent: "value-3" */
static int
rule_new_helper(llm_gbuild *b, int parent)
{
    char  name[160];
    int   r, n;

    n = snprintf(name, sizeof(name), "%.120s-%d", b->rules[parent].name,
                 b->n_rules);
    r = rule_add(b, name, (size_t) n);
    if (r >= 0) {
        b->rules[r].defined = 1;
    }
    return r;
}


static int
emit(llm_gbuild *b, int rule, int type, int32_t val)
{
    llm_grule  *r = &b->rules[rule];

    if (grow((void **) &r->el, &r->cap_el, r->n_el + 1, sizeof(llm_gelem))
        != 0)
    {
        return build_oom(b);
    }
    r->el[r->n_el].type = type;
    r->el[r->n_el].val = val;
    r->n_el++;
    return 0;
}


static int
set_add(llm_gbuild *b, const uint8_t set[32])
{
    uint32_t  h;
    int32_t   id;

    if (b->set_hash != NULL) {
        h = bytes_hash(set, 32) & b->set_hmask;
        while ((id = b->set_hash[h]) != 0) {
            if (memcmp(b->sets[id - 1], set, 32) == 0) {
                return id - 1;
            }
            h = (h + 1) & b->set_hmask;
        }
    }
    if (grow((void **) &b->sets, &b->cap_sets, b->n_sets + 1, 32) != 0) {
        return build_oom(b);
    }
    memcpy(b->sets[b->n_sets], set, 32);
    b->n_sets++;
    if ((uint32_t) b->n_sets * 2 > b->set_hmask) {
        if (table_grow(&b->set_hash, &b->set_hmask, b->n_sets, b, set_key)
            != 0)
        {
            return build_oom(b);
        }
    } else {
        h = set_key(b, b->n_sets - 1) & b->set_hmask;
        while (b->set_hash[h]) {
            h = (h + 1) & b->set_hmask;
        }
        b->set_hash[h] = b->n_sets;
    }
    return b->n_sets - 1;
}


static int
emit_byte_range(llm_gbuild *b, int rule, unsigned lo, unsigned hi)
{
    uint8_t   set[32];
    unsigned  c;
    int       s;

    if (lo == hi && b->single[lo] > 0) {    /* a literal's byte */
        return emit(b, rule, GE_BYTES, b->single[lo] - 1);
    }
    if (b->range_set == NULL
        && (b->range_set = calloc(65536, sizeof(int32_t))) == NULL)
    {
        return build_oom(b);
    }
    if (b->range_set[lo << 8 | hi] > 0) {    /* a UTF-8 sequence's byte */
        return emit(b, rule, GE_BYTES, b->range_set[lo << 8 | hi] - 1);
    }
    memset(set, 0, sizeof(set));
    for (c = lo; c <= hi; c++) {
        set[c >> 3] |= (uint8_t) (1u << (c & 7));
    }
    s = set_add(b, set);
    if (s >= 0 && lo == hi) {
        b->single[lo] = s + 1;
    }
    if (s >= 0) {
        b->range_set[lo << 8 | hi] = s + 1;
    }
    return s < 0 ? -1 : emit(b, rule, GE_BYTES, s);
}


/* --- code points to UTF-8 byte sequences ---------------------------------- */

/*
 * Emits into rule one alternative per byte-range sequence of [lo, hi]:
 * split where the encoded length changes, then until each byte position
 * spans whole continuation ranges (the construction RE2 and Rust's regex
 * use).
 */
static int
utf8_ranges(llm_gbuild *b, int rule, uint32_t lo, uint32_t hi, int *n_alt)
{
    static const uint32_t  top[] = { 0x7F, 0x7FF, 0xFFFF };
    uint8_t                 a[4], z[4];
    uint32_t                m;
    int                     i, n;

    for (i = 0; i < 3; i++) {
        if (lo <= top[i] && hi > top[i]) {
            return utf8_ranges(b, rule, lo, top[i], n_alt) != 0
                   || utf8_ranges(b, rule, top[i] + 1, hi, n_alt) != 0
                   ? -1 : 0;
        }
    }
    n = (int) llm_utf8_encode(lo, (char *) a);
    for (i = 1; i < n; i++) {
        m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                return utf8_ranges(b, rule, lo, lo | m, n_alt) != 0
                       || utf8_ranges(b, rule, (lo | m) + 1, hi, n_alt) != 0
                       ? -1 : 0;
            }
            if ((hi & m) != m) {
                return utf8_ranges(b, rule, lo, (hi & ~m) - 1, n_alt) != 0
                       || utf8_ranges(b, rule, hi & ~m, hi, n_alt) != 0
                       ? -1 : 0;
            }
        }
    }
    llm_utf8_encode(hi, (char *) z);
    if ((*n_alt)++ > 0 && emit(b, rule, GE_ALT, 0) != 0) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (emit_byte_range(b, rule, a[i], z[i]) != 0) {
            return -1;
        }
    }
    return 0;
}


static int
range_cmp(const void *x, const void *y)
{
    const cp_range  *a = x, *b = y;

    return a->lo < b->lo ? -1 : a->lo > b->lo;
}


/*
 * Emits a matcher for a set of code point ranges into parent: one byte
 * set when all of it is ASCII, else a helper rule of UTF-8 sequences.
 * Surrogates are never matched.
 */
static int
emit_class(llm_gbuild *b, int parent, cp_range *r, int n, int negate)
{
    cp_range  out[260];
    uint32_t  next, h;
    int       i, k, rule, n_alt;

    qsort(r, (size_t) n, sizeof(*r), range_cmp);
    for (i = 0, k = 0; i < n; i++) {          /* merge */
        if (k > 0 && r[i].lo <= out[k - 1].hi + 1) {
            if (r[i].hi > out[k - 1].hi) {
                out[k - 1].hi = r[i].hi;
            }
        } else {
            out[k++] = r[i];
        }
    }
    n = k;
    if (negate) {
        memcpy(r, out, (size_t) n * sizeof(*r));
        next = 0;
        for (i = 0, k = 0; i < n; i++) {
            if (r[i].lo > next) {
                out[k].lo = next;
                out[k++].hi = r[i].lo - 1;
            }
            next = r[i].hi + 1;
        }
        if (next <= CP_MAX) {
            out[k].lo = next;
            out[k++].hi = CP_MAX;
        }
        n = k;
    }
    if (n == 0) {
        return -2;
    }
    if (out[n - 1].hi < 0x80) {
        uint8_t   set[32];
        uint32_t  c;
        int       s;

        memset(set, 0, sizeof(set));
        for (i = 0; i < n; i++) {
            for (c = out[i].lo; c <= out[i].hi; c++) {
                set[c >> 3] |= (uint8_t) (1u << (c & 7));
            }
        }
        s = set_add(b, set);
        return s < 0 ? -1 : emit(b, parent, GE_BYTES, s);
    }
    h = bytes_hash(out, (size_t) n * sizeof(cp_range));
    for (i = 0; i < b->n_classes; i++) {
        if (b->classes[i].hash == h && b->classes[i].n == n
            && memcmp(b->classes[i].r, out, (size_t) n * sizeof(cp_range))
               == 0)
        {
            return emit(b, parent, GE_RULE, b->classes[i].rule);
        }
    }
    rule = rule_new_helper(b, parent);
    if (rule < 0 || grow((void **) &b->classes, &b->cap_classes,
                         b->n_classes + 1, sizeof(struct llm_gclass)) != 0
        || (b->classes[b->n_classes].r = malloc((size_t) n
                                                * sizeof(cp_range))) == NULL)
    {
        return build_oom(b);
    }
    memcpy(b->classes[b->n_classes].r, out, (size_t) n * sizeof(cp_range));
    b->classes[b->n_classes].n = n;
    b->classes[b->n_classes].hash = h;
    b->classes[b->n_classes++].rule = rule;
    n_alt = 0;
    for (i = 0; i < n; i++) {
        uint32_t  lo = out[i].lo, hi = out[i].hi;

        /* cut the surrogates out */
        if (lo <= 0xDFFF && hi >= 0xD800) {
            if (lo < 0xD800 && utf8_ranges(b, rule, lo, 0xD7FF, &n_alt)) {
                return -1;
            }
            if (hi > 0xDFFF && utf8_ranges(b, rule, 0xE000, hi, &n_alt)) {
                return -1;
            }
            continue;
        }
        if (utf8_ranges(b, rule, lo, hi, &n_alt) != 0) {
            return -1;
        }
    }
    return emit(b, parent, GE_RULE, rule);
}


/* --- lexing --------------------------------------------------------------- */

static void
skip_space(gp *g, int newline_ok)
{
    while (g->p < g->end) {
        char  c = *g->p;

        if (c == ' ' || c == '\t') {
            g->p++;
        } else if (c == '#') {
            while (g->p < g->end && *g->p != '\n' && *g->p != '\r') {
                g->p++;
            }
        } else if (newline_ok && (c == '\n' || c == '\r')) {
            g->p++;
            if (c == '\n') {
                g->line++;
                g->line_start = g->p;
            }
        } else {
            break;
        }
    }
}


static int
is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c >= '0' && c <= '9') || c == '-' || c == '_';
}


static int
hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}


/* one character of a literal or class: a code point, or -1 */
static int32_t
parse_char(gp *g)
{
    const char  *at = g->p;
    uint32_t     c;
    int          n, i, h;

    if (g->p >= g->end) {
        return gp_error(g, at, "unexpected end of input");
    }
    c = (uint8_t) *g->p;
    if (c == '\\') {
        if (++g->p >= g->end) {
            return gp_error(g, at, "unexpected end of input");
        }
        c = (uint8_t) *g->p++;
        switch (c) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case 'f': return '\f';
        case 'v': return '\v';
        case '0': return 0;
        case '"': case '\\': case '[': case ']': case '-': case '^':
        case '\'': case '/': case '.':
            return (int32_t) c;
        case 'x': n = 2; break;
        case 'u': n = 4; break;
        case 'U': n = 8; break;
        default:
            return gp_error(g, at, "unknown escape '\\%c'", (char) c);
        }
        for (c = 0, i = 0; i < n; i++) {
            if (g->p >= g->end || (h = hexval(*g->p)) < 0) {
                return gp_error(g, at, "bad hex escape");
            }
            c = c * 16 + (uint32_t) h;
            g->p++;
        }
        if (c > CP_MAX || (c >= 0xD800 && c <= 0xDFFF)) {
            return gp_error(g, at, "escape is not a Unicode scalar value");
        }
        return (int32_t) c;
    }
    if (c == '\n' || c == '\r') {
        return gp_error(g, at, "newline inside a literal or class");
    }
    /* UTF-8 in the source */
    n = (int) llm_utf8_decode((const unsigned char *) g->p,
                              (size_t) (g->end - g->p), &c);
    if (n == 0) {
        return gp_error(g, at, "invalid UTF-8");
    }
    g->p += n;
    return (int32_t) c;
}


static int parse_alternates(gp *g, int rule, int nested);


static int
parse_literal(gp *g, int rule)
{
    uint8_t  u[4];
    int32_t  c;
    int      n, i;

    g->p++;                                 /* the opening " */
    while (g->p < g->end && *g->p != '"') {
        if ((c = parse_char(g)) < 0) {
            return -1;
        }
        n = (int) llm_utf8_encode((uint32_t) c, (char *) u);
        for (i = 0; i < n; i++) {
            if (emit_byte_range(g->b, rule, u[i], u[i]) != 0) {
                return -1;
            }
        }
    }
    if (g->p >= g->end) {
        return gp_error(g, g->p, "unterminated literal");
    }
    g->p++;
    return 0;
}


static int
parse_class(gp *g, int rule)
{
    cp_range     r[130];
    const char  *at = g->p;
    int32_t      lo, hi;
    int          n = 0, negate = 0, rc;

    g->p++;                                 /* [ */
    if (g->p < g->end && *g->p == '^') {
        negate = 1;
        g->p++;
    }
    while (g->p < g->end && *g->p != ']') {
        if ((lo = parse_char(g)) < 0) {
            return -1;
        }
        hi = lo;
        if (g->p + 1 < g->end && *g->p == '-' && g->p[1] != ']') {
            g->p++;
            if ((hi = parse_char(g)) < 0) {
                return -1;
            }
            if (hi < lo) {
                return gp_error(g, at, "bad range in char class");
            }
        }
        if (n == 128) {
            return gp_error(g, at, "more than 128 ranges in a char class");
        }
        r[n].lo = (uint32_t) lo;
        r[n++].hi = (uint32_t) hi;
    }
    if (g->p >= g->end) {
        return gp_error(g, at, "unterminated char class");
    }
    g->p++;
    rc = emit_class(g->b, rule, r, n, negate);
    if (rc == -2) {
        return gp_error(g, at, "char class matches nothing");
    }
    return rc;
}


static int
parse_token(gp *g, int rule)
{
    const llm_grammar_vocab  *v = g->b->vocab;
    const char               *at = g->p, *q;
    int32_t                   id;
    long                      n;
    char                     *e;

    for (q = g->p; q < g->end && *q != '>' && *q != '\n'; q++) {
        /* find the closing > */
    }
    if (q >= g->end || *q != '>') {
        return gp_error(g, at, "unterminated <token>");
    }
    g->p = q + 1;
    if (at[1] == '[') {
        n = strtol(at + 2, &e, 10);
        if (e == at + 2 || e + 2 != g->p || e[0] != ']' || n < 0
            || (v != NULL && n >= v->n_vocab) || n > INT32_MAX)
        {
            return gp_error(g, at, "bad token id '%.*s'", (int) (g->p - at),
                            at);
        }
        return emit(g->b, rule, GE_TOKEN, (int32_t) n);
    }
    if (v == NULL) {
        return gp_error(g, at, "no vocabulary for '%.*s'", (int) (g->p - at),
                        at);
    }
    id = llm_token_lookup(v->tok, at, (size_t) (g->p - at));
    if (id < 0) {
        return gp_error(g, at, "the vocabulary has no token '%.*s'",
                        (int) (g->p - at), at);
    }
    return emit(g->b, rule, GE_TOKEN, id);
}


/* %json { schema }: the converter's rules, parsed after the source */
static int
parse_json(gp *g, int rule)
{
    const char            *at = g->p, *q;
    llm_strbuf             out;
    llm_json_schema_opts   opts;
    char                   name[32], err[256];
    int          depth = 0, in_str = 0, r, rc;

    g->p += 5;
    skip_space(g, 1);
    if (g->p >= g->end || *g->p != '{') {
        return gp_error(g, at, "%%json needs a { schema }");
    }
    for (q = g->p; q < g->end; q++) {
        if (in_str) {
            if (*q == '\\') {
                q++;
            } else if (*q == '"') {
                in_str = 0;
            }
        } else if (*q == '"') {
            in_str = 1;
        } else if (*q == '{' || *q == '[') {
            depth++;
        } else if (*q == '}' || *q == ']') {
            if (--depth == 0) {
                break;
            }
        } else if (*q == '\n') {
            g->line++;
            g->line_start = q + 1;
        }
    }
    if (q >= g->end) {
        return gp_error(g, at, "unterminated %%json schema");
    }
    snprintf(name, sizeof(name), "json%d", g->b->n_json++);
    memset(&out, 0, sizeof(out));
    out.max = g->b->max_source ? g->b->max_source * 4 + 65536 : 0;
    opts.root = name;
    opts.max_ws = g->b->max_ws;
    opts.strict = g->b->strict;
    opts.relaxed = &g->b->relaxed;
    if (llm_json_schema_compile(g->p, (size_t) (q + 1 - g->p), &opts, &out,
                                err, sizeof(err)) != 0)
    {
        llm_strbuf_free(&out);
        return gp_error(g, at, "%s", err);
    }
    g->p = q + 1;
    rc = llm_gbnf_parse(g->b, out.data, out.len, "%json");
    llm_strbuf_free(&out);
    if (rc != 0) {
        return -1;
    }
    r = rule_find(g->b, name, strlen(name));
    if (r < 0) {
        return gp_error(g, at, "%%json made no rule");
    }
    return emit(g->b, rule, GE_RULE, r);
}


/* moves elements [from, n) of rule into a helper; returns it */
static int
wrap(llm_gbuild *b, int rule, int from)
{
    int  h, i, n;

    n = b->rules[rule].n_el - from;
    if (n == 1) {
        return -2;
    }
    h = rule_new_helper(b, rule);
    if (h < 0) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        llm_gelem  e = b->rules[rule].el[from + i];

        if (emit(b, h, e.type, e.val) != 0) {
            return -1;
        }
    }
    b->rules[rule].n_el = from;
    return emit(b, rule, GE_RULE, h) != 0 ? -1 : 0;
}


/* x{min,max} past the unrolling cap: x becomes a rule, counted */
static int
repeat_counted(llm_gbuild *b, int rule, llm_gelem x, long min, long max)
{
    int  r = x.val;

    if (x.type != GE_RULE) {
        if ((r = rule_new_helper(b, rule)) < 0
            || emit(b, r, x.type, x.val) != 0)
        {
            return -1;
        }
    }
    if (grow((void **) &b->reps, &b->cap_reps, b->n_reps + 1,
             sizeof(llm_grepeat)) != 0)
    {
        return build_oom(b);
    }
    b->reps[b->n_reps].rule = r;
    b->reps[b->n_reps].min = (int32_t) min;
    b->reps[b->n_reps].max = (int32_t) max;
    return emit(b, rule, GE_REPEAT, b->n_reps++);
}


/* the repetition x{min,max} of the last element of rule (max -1: no cap) */
static int
repeat(gp *g, int rule, int from, long min, long max)
{
    llm_gbuild  *b = g->b;
    llm_gelem    x;
    int          i, r, prev;

    if (b->rules[rule].n_el == from) {
        return gp_error(g, g->p, "repetition of nothing");
    }
    if (wrap(b, rule, from) == -1) {
        return -1;
    }
    x = b->rules[rule].el[from];
    b->rules[rule].n_el = from;
    if (min > LLM_GRAMMAR_MAX_UNROLL || max > LLM_GRAMMAR_MAX_UNROLL) {
        return repeat_counted(b, rule, x, min, max);
    }
    for (i = 0; i < min; i++) {
        if (emit(b, rule, x.type, x.val) != 0) {
            return -1;
        }
    }
    if (max < 0) {                          /* R ::= x R | "" */
        if ((r = rule_new_helper(b, rule)) < 0
            || emit(b, r, x.type, x.val) != 0 || emit(b, r, GE_RULE, r) != 0
            || emit(b, r, GE_ALT, 0) != 0)
        {
            return -1;
        }
        return emit(b, rule, GE_RULE, r);
    }
    prev = -1;                              /* R_k ::= x R_k-1 | "" */
    for (i = 0; i < max - min; i++) {
        if ((r = rule_new_helper(b, rule)) < 0
            || emit(b, r, x.type, x.val) != 0
            || (prev >= 0 && emit(b, r, GE_RULE, prev) != 0)
            || emit(b, r, GE_ALT, 0) != 0)
        {
            return -1;
        }
        prev = r;
    }
    return prev >= 0 ? emit(b, rule, GE_RULE, prev) : 0;
}


static long
parse_int(gp *g)
{
    long  n = 0;

    if (g->p >= g->end || *g->p < '0' || *g->p > '9') {
        return -1;
    }
    while (g->p < g->end && *g->p >= '0' && *g->p <= '9') {
        n = n * 10 + (*g->p++ - '0');
        if (n > LLM_GRAMMAR_MAX_REPEAT) {
            return -2;
        }
    }
    return n;
}


static int
parse_braces(gp *g, int rule, int from)
{
    const char  *at = g->p;
    long         min, max;

    g->p++;
    skip_space(g, 0);
    if ((min = parse_int(g)) < 0) {
        return gp_error(g, at, "bad repetition count");
    }
    max = min;
    skip_space(g, 0);
    if (g->p < g->end && *g->p == ',') {
        g->p++;
        skip_space(g, 0);
        max = -1;
        if (g->p < g->end && *g->p != '}' && (max = parse_int(g)) < 0) {
            return gp_error(g, at, "bad repetition count");
        }
        skip_space(g, 0);
    }
    if (g->p >= g->end || *g->p != '}') {
        return gp_error(g, at, "expected '}'");
    }
    g->p++;
    if (max >= 0 && max < min) {
        return gp_error(g, at, "repetition {%ld,%ld}: max below min", min,
                        max);
    }
    if (min > LLM_GRAMMAR_MAX_REPEAT || max > LLM_GRAMMAR_MAX_REPEAT) {
        return gp_error(g, at, "repetition count over %d",
                        LLM_GRAMMAR_MAX_REPEAT);
    }
    return repeat(g, rule, from, min, max);
}


static int
parse_sequence(gp *g, int rule, int nested)
{
    llm_gbuild  *b = g->b;
    const char  *at;
    int          from, r;

    while (g->p < g->end) {
        at = g->p;
        from = b->rules[rule].n_el;
        if (*at == '"') {
            if (parse_literal(g, rule) != 0) {
                return -1;
            }
        } else if (*at == '[') {
            if (parse_class(g, rule) != 0) {
                return -1;
            }
        } else if (*at == '.') {
            cp_range  any = { 0, CP_MAX };

            g->p++;
            if (emit_class(b, rule, &any, 1, 0) != 0) {
                return -1;
            }
        } else if (*at == '<') {
            if (parse_token(g, rule) != 0) {
                return -1;
            }
        } else if (*at == '%') {
            if (g->end - at < 5 || memcmp(at, "%json", 5) != 0) {
                return gp_error(g, at, "unknown directive");
            }
            if (parse_json(g, rule) != 0) {
                return -1;
            }
        } else if (*at == '(') {
            if (++g->depth > LLM_GRAMMAR_MAX_NEST) {
                return gp_error(g, at, "nesting deeper than %d",
                                LLM_GRAMMAR_MAX_NEST);
            }
            g->p++;
            skip_space(g, 1);
            if ((r = rule_new_helper(b, rule)) < 0
                || parse_alternates(g, r, 1) != 0)
            {
                return -1;
            }
            if (g->p >= g->end || *g->p != ')') {
                return gp_error(g, at, "expected ')'");
            }
            g->p++;
            g->depth--;
            if (emit(b, rule, GE_RULE, r) != 0) {
                return -1;
            }
        } else if (is_word(*at)) {
            while (g->p < g->end && is_word(*g->p)) {
                g->p++;
            }
            r = rule_find(b, at, (size_t) (g->p - at));
            if (r < 0) {
                if ((r = rule_add(b, at, (size_t) (g->p - at))) < 0) {
                    return -1;
                }
                b->rules[r].ref_line = g->line;
                b->rules[r].ref_col = (int) (at - g->line_start) + 1;
            }
            if (emit(b, rule, GE_RULE, r) != 0) {
                return -1;
            }
        } else {
            break;
        }
        skip_space(g, nested);
        if (g->p >= g->end) {
            break;
        }
        /* postfix operators */
        if (*g->p == '*' || *g->p == '+' || *g->p == '?') {
            char  op = *g->p++;

            if (repeat(g, rule, from, op == '+', op == '?' ? 1 : -1) != 0) {
                return -1;
            }
            skip_space(g, nested);
        } else if (*g->p == '{') {
            if (parse_braces(g, rule, from) != 0) {
                return -1;
            }
            skip_space(g, nested);
        }
        if (b->deadline_ns && llm_grammar_now_ns() > b->deadline_ns) {
            snprintf(b->err, b->err_len, "grammar: compile time limit");
            return -1;
        }
    }
    return 0;
}


/* at top level, a line that starts with '|' continues the rule (an
   extension: llama.cpp wants the '|' at the end of the line before) */
static void
skip_to_bar(gp *g)
{
    gp  save = *g;

    skip_space(g, 1);
    if (g->p >= g->end || *g->p != '|') {
        *g = save;
    }
}


static int
parse_alternates(gp *g, int rule, int nested)
{
    if (parse_sequence(g, rule, nested) != 0) {
        return -1;
    }
    if (!nested) {
        skip_to_bar(g);
    }
    while (g->p < g->end && *g->p == '|') {
        g->p++;
        if (emit(g->b, rule, GE_ALT, 0) != 0) {
            return -1;
        }
        skip_space(g, 1);
        if (parse_sequence(g, rule, nested) != 0) {
            return -1;
        }
        if (!nested) {
            skip_to_bar(g);
        }
    }
    return 0;
}


int
llm_gbnf_parse(llm_gbuild *b, const char *src, size_t len, const char *what)
{
    const char  *at;
    gp           g;
    int          r;

    memset(&g, 0, sizeof(g));
    g.b = b;
    g.src = g.p = g.line_start = src;
    g.end = src + len;
    g.what = what;
    g.line = 1;
    for ( ;; ) {
        skip_space(&g, 1);
        if (g.p >= g.end) {
            break;
        }
        at = g.p;
        while (g.p < g.end && is_word(*g.p)) {
            g.p++;
        }
        if (g.p == at) {
            return gp_error(&g, at, "expected a rule name");
        }
        r = rule_find(b, at, (size_t) (g.p - at));
        if (r >= 0 && b->rules[r].defined) {
            return gp_error(&g, at, "rule '%.*s' defined twice",
                            (int) (g.p - at), at);
        }
        if (r < 0 && (r = rule_add(b, at, (size_t) (g.p - at))) < 0) {
            return -1;
        }
        b->rules[r].defined = 1;
        skip_space(&g, 0);
        if (g.end - g.p < 3 || memcmp(g.p, "::=", 3) != 0) {
            return gp_error(&g, g.p, "expected '::='");
        }
        g.p += 3;
        skip_space(&g, 1);
        if (parse_alternates(&g, r, 0) != 0) {
            return -1;
        }
        if (g.p < g.end && *g.p != '\n' && *g.p != '\r') {
            return gp_error(&g, g.p, "unexpected '%c'", *g.p);
        }
    }
    return 0;
}


void
llm_gbuild_free(llm_gbuild *b)
{
    int  i;

    for (i = 0; i < b->n_rules; i++) {
        free(b->rules[i].name);
        free(b->rules[i].el);
    }
    free(b->rules);
    free(b->sets);
    free(b->reps);
    free(b->rule_hash);
    free(b->set_hash);
    free(b->range_set);
    for (i = 0; i < b->n_classes; i++) {
        free(b->classes[i].r);
    }
    free(b->classes);
    llm_strbuf_free(&b->relaxed);
    memset(b, 0, sizeof(*b));
}
