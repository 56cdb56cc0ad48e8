/*
 * JSON Schema -> GBNF, integers and numbers: "integer" and "number" with
 * minimum, maximum and their exclusive forms (draft 4's flags too) as
 * rules on the digits: a range of integers as runs of digits of one
 * length each, a number's magnitude with its fraction. Bounds are at most
 * 2^53, integer parts at most JS_INT_DIGITS digits and fractions
 * JS_FRAC_DIGITS (docs/json_schema.md).
 *
 * multipleOf k (a positive integer) writes integer multiples only:
 * between two bounds that hold at most JS_MAX_MULTIPLES of them, the list;
 * without bounds, for a power of ten the digits then its zeros, and for k
 * up to JS_MAX_DIVISOR a digit automaton over the remainder mod k (and the
 * digits left, for the JS_INT_DIGITS cap), one per k in a compile.
 *
 * defines: js_gen_number
 */
#include "grammar/json_schema_int.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>


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
        js_relaxable(c, *excl ? ke : kn, NULL);
        return js_fail(c, "json_schema: '%s' %g at %s is beyond 2^53",
                       *excl ? ke : kn, *v, js_at(ptr));
    }
    if (*v != floor(*v)) {
        if (!integer) {
            js_relaxable(c, *excl ? ke : kn, NULL);
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


/* --- multipleOf ------------------------------------------------------- */

#define JS_MAX_DIVISOR      16      /* k of an automaton: k x 16 rules */
#define JS_MAX_MULTIPLES    256     /* a list between bounds */


/* name-<r>-<n> ::= ""? (when r is 0) | [digits] name-<t>-<n-1> ...: n more
   digits at most, the remainder r so far; ok[t][n] when an end is
   reachable from there */
static void
js_mult_rule(js_ctx *c, const char *name, int k, int r, int n,
    unsigned char (*ok)[JS_INT_DIGITS])
{
    llm_strbuf  b;
    char        rule[160];
    int         t, d, alts = 0;

    js_buf(c, &b);
    if (r == 0) {
        js_put(c, &b, "\"\"");
        alts++;
    }
    for (t = 0; t < k && n > 0; t++) {
        char  digits[11];
        int   nd = 0;

        for (d = 0; d < 10; d++) {
            if ((10 * r + d) % k == t) {
                digits[nd++] = (char) ('0' + d);
            }
        }
        digits[nd] = '\0';
        if (nd == 0 || !ok[t][n - 1]) {
            continue;
        }
        js_put(c, &b, alts++ ? " | [" : "[");
        js_putf(c, &b, "%s] %s-%d-%d", digits, name, t, n - 1);
    }
    snprintf(rule, sizeof(rule), "%s-%d-%d", name, r, n);
    js_rule(c, rule, &b);
    llm_strbuf_free(&b);
}


/* the integers that are multiples of k: "-"? ( "0" | [1-9] then up to
   JS_INT_DIGITS - 1 more digits, ending at remainder 0 ) */
static int
js_mult_automaton(js_ctx *c, int k, llm_strbuf *e)
{
    unsigned char  ok[JS_MAX_DIVISOR][JS_INT_DIGITS];
    char           name[96];
    int            r, n, d, t, first = 1, made = (c->mod_made >> k) & 1;

    c->mod_made |= 1u << k;
    memset(ok, 0, sizeof(ok));
    ok[0][0] = 1;
    for (n = 1; n < JS_INT_DIGITS; n++) {
        for (r = 0; r < k; r++) {
            ok[r][n] = r == 0;
            for (d = 0; d < 10 && !ok[r][n]; d++) {
                ok[r][n] = ok[(10 * r + d) % k][n - 1];
            }
        }
    }
    snprintf(name, sizeof(name), "%s-mod%d", c->root, k);
    for (n = 0; n < JS_INT_DIGITS && !made; n++) {
        for (r = 0; r < k; r++) {
            if (ok[r][n]) {
                js_mult_rule(c, name, k, r, n, ok);
            }
        }
    }
    js_put(c, e, "\"-\"? ( \"0\"");
    for (t = 0; t < k; t++) {
        if (!ok[t][JS_INT_DIGITS - 1]) {
            continue;
        }
        for (d = 1, first = 1; d < 10; d++) {
            if (d % k == t) {
                js_put(c, e, first ? " | [" : "");
                js_putf(c, e, "%d", d);
                first = 0;
            }
        }
        if (!first) {
            js_putf(c, e, "] %s-%d-%d", name, t, JS_INT_DIGITS - 1);
        }
    }
    js_put(c, e, " )");
    return c->failed ? JS_ERR : JS_OK;
}


/* the power of ten k is (1 for 10, ...), or -1 */
static int
js_pow10(int64_t k)
{
    int  p = 0;

    for (; k % 10 == 0 && k > 1; k /= 10) {
        p++;
    }
    return k == 1 && p < JS_INT_DIGITS ? p : -1;
}


/* multipleOf k between the inclusive integer bounds [lo, hi] (has_*: the
   bound is there): the list; without bounds the digits and zeros of a
   power of ten, or the automaton */
static int
js_gen_multiple(js_ctx *c, const cJSON *m, const char *ptr, int has_lo,
    int64_t lo, int has_hi, int64_t hi, llm_strbuf *e)
{
    js_alts  alts;
    int64_t  k, x;
    char     lit[32];
    int      p10, bounded = has_lo || has_hi;

    if (!cJSON_IsNumber(m) || m->valuedouble <= 0) {
        return js_fail(c, "json_schema: 'multipleOf' at %s is not a "
                       "positive number", js_at(ptr));
    }
    k = (int64_t) m->valuedouble;
    p10 = (double) k == m->valuedouble ? js_pow10(k) : -1;
    if ((double) k != m->valuedouble
        || (bounded && (!has_lo || !has_hi
                        || (hi - lo) / k > JS_MAX_MULTIPLES))
        || (!bounded && k > JS_MAX_DIVISOR && p10 < 0))
    {
        js_relaxable(c, "multipleOf", NULL);
        return js_fail(c, "json_schema: 'multipleOf' %g at %s: enforced for "
                       "integer divisors up to %d or powers of ten, or with "
                       "at most %d multiples between two bounds",
                       m->valuedouble, js_at(ptr), JS_MAX_DIVISOR,
                       JS_MAX_MULTIPLES);
    }
    if (!bounded && p10 >= 0 && k > JS_MAX_DIVISOR) {
        js_putf(c, e, "\"-\"? ( \"0\" | [1-9] [0-9]{0,%d} \"%0*d\" )",
                JS_INT_DIGITS - 1 - p10, p10, 0);
        return c->failed ? JS_ERR : JS_OK;
    }
    if (!bounded) {
        return js_mult_automaton(c, (int) k, e);
    }
    memset(&alts, 0, sizeof(alts));
    js_buf(c, &alts.b);
    x = ((lo % k) + k) % k;         /* lo's remainder, 0..k-1 */
    for (x = x ? lo + (k - x) : lo; x <= hi; x += k) {
        snprintf(lit, sizeof(lit), "\"%lld\"", (long long) x);
        js_alt_add(c, &alts, lit);
    }
    return js_alt_end(c, &alts, e);
}


int
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
    if (cJSON_HasObjectItem(s, "multipleOf")) {
        /* integer multiples only: inclusive integer bounds */
        l = has_lo ? (int64_t) (lo_x ? floor(lo) + 1 : ceil(lo)) : 0;
        h = has_hi ? (int64_t) (hi_x ? ceil(hi) - 1 : floor(hi)) : 0;
        return js_gen_multiple(c, cJSON_GetObjectItemCaseSensitive(s,
                               "multipleOf"), ptr, has_lo, l, has_hi, h, e);
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
