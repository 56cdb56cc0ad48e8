/*
 * Jinja subset, part 1: the lexer and the parser.
 *
 * The lexer follows jinja2's (lexer.py) with transformers' settings:
 * trim_blocks (the first newline after %} or #} is dropped), lstrip_blocks
 * (spaces before {% or {# at the start of a line are dropped), "-" strips
 * all whitespace on its side, "+" turns lstrip off, newlines are normalized
 * to \n and a single trailing newline of the source is dropped
 * (keep_trailing_newline=False). The parser follows jinja2's precedence
 * (parser.py): filters and tests bind tighter than any binary operator.
 *
 * defines: jinja_parse, jinja_free
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/internal.h"
#include "text/utf8.h"

#define JINJA_MAX_PARSE_DEPTH  200
#define JINJA_MAX_SOURCE       (16u << 20)


/* --- lexer -------------------------------------------------------------- */

typedef enum {
    TK_EOF, TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP,
} tok_kind;

typedef struct {
    tok_kind     kind;
    int          line;
    const char  *s;        /* NUL-terminated copy in the arena */
    size_t       n;
    long long    i;
    double       f;
} token;

typedef struct {
    jarena      *arena;
    const char  *src;
    size_t       len;
    size_t       pos;
    int          line;
    token       *toks;
    size_t       ntoks, cap;
    char        *err;
    size_t       errlen;
    int          failed;
    /* parser */
    size_t       at;
    int          depth;
} jparser;


static void
fail(jparser *p, int line, const char *fmt, ...)
{
    va_list  ap;
    int      n;

    if (p->failed) {
        return;
    }
    p->failed = 1;
    if (p->errlen == 0) {
        return;
    }
    n = snprintf(p->err, p->errlen, "line %d: ", line);
    if (n < 0 || (size_t) n >= p->errlen) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - n, fmt, ap);
    va_end(ap);
}


static char *
arena_strndup(jparser *p, const char *s, size_t n)
{
    char  *d;

    d = jarena_alloc(p->arena, n + 1);
    if (d == NULL) {
        fail(p, p->line, "out of memory");
        return NULL;
    }
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}


static token *
push_tok(jparser *p, tok_kind kind)
{
    token   *t;
    size_t   cap;

    if (p->ntoks == p->cap) {
        cap = p->cap ? p->cap * 2 : 256;
        t = realloc(p->toks, cap * sizeof(token));
        if (t == NULL) {
            fail(p, p->line, "out of memory");
            return NULL;
        }
        p->toks = t;
        p->cap = cap;
    }
    t = &p->toks[p->ntoks++];
    memset(t, 0, sizeof(*t));
    t->kind = kind;
    t->line = p->line;
    return t;
}


static int
is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
           || c == '\v';
}


static void
count_lines(jparser *p, const char *s, size_t n)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        p->line += s[i] == '\n';
    }
}


/* text before a tag: apply "-" or lstrip_blocks, then emit it */
static void
emit_text(jparser *p, const char *s, size_t n, char sign, int is_var,
    int line_starting)
{
    size_t   l_pos, i;
    token   *t;
    int      line;

    line = p->line;
    count_lines(p, s, n);
    if (sign == '-') {
        while (n > 0 && is_ws(s[n - 1])) {
            n--;
        }
    } else if (sign != '+' && !is_var) {
        l_pos = n;
        while (l_pos > 0 && s[l_pos - 1] != '\n') {
            l_pos--;
        }
        if ((l_pos > 0 || line_starting) && l_pos < n) {
            for (i = l_pos; i < n && is_ws(s[i]); i++) { /* void */ }
            if (i == n) {
                n = l_pos;
            }
        }
    }
    if (n == 0) {
        return;
    }
    t = push_tok(p, TK_TEXT);
    if (t == NULL) {
        return;
    }
    t->line = line;
    t->s = arena_strndup(p, s, n);
    t->n = n;
}


/* after a tag end: "-" strips all whitespace, trim_blocks one newline */
static void
after_tag_end(jparser *p, int strip, int trim_newline)
{
    if (strip) {
        while (p->pos < p->len && is_ws(p->src[p->pos])) {
            p->line += p->src[p->pos] == '\n';
            p->pos++;
        }
    } else if (trim_newline && p->pos < p->len && p->src[p->pos] == '\n') {
        p->line++;
        p->pos++;
    }
}


static int
hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}


/* Python "unicode-escape" decoding of a string literal's body */
static void
lex_string(jparser *p)
{
    char      q, c, *d;
    size_t    start, i, n, k, digits;
    unsigned long cp;
    token    *t;
    int       line, h;

    line = p->line;
    q = p->src[p->pos++];
    start = p->pos;
    while (p->pos < p->len && p->src[p->pos] != q) {
        if (p->src[p->pos] == '\\' && p->pos + 1 < p->len) {
            p->pos++;
        }
        p->line += p->src[p->pos] == '\n';
        p->pos++;
    }
    if (p->pos >= p->len) {
        fail(p, line, "unterminated string");
        return;
    }
    n = p->pos - start;
    p->pos++;
    d = jarena_alloc(p->arena, n + 1);
    if (d == NULL) {
        fail(p, line, "out of memory");
        return;
    }
    k = 0;
    for (i = start; i < start + n; i++) {
        c = p->src[i];
        if (c != '\\' || i + 1 >= start + n) {
            d[k++] = c;
            continue;
        }
        c = p->src[++i];
        switch (c) {
        case 'n': d[k++] = '\n'; break;
        case 't': d[k++] = '\t'; break;
        case 'r': d[k++] = '\r'; break;
        case 'b': d[k++] = '\b'; break;
        case 'f': d[k++] = '\f'; break;
        case 'v': d[k++] = '\v'; break;
        case 'a': d[k++] = '\a'; break;
        case '\\': d[k++] = '\\'; break;
        case '\'': d[k++] = '\''; break;
        case '"': d[k++] = '"'; break;
        case '\n': break;
        case 'x': case 'u': case 'U':
            digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            cp = 0;
            for (size_t j = 0; j < digits; j++) {
                h = i + 1 + j < start + n ? hexval(p->src[i + 1 + j]) : -1;
                if (h < 0) {
                    fail(p, line, "truncated \\%c escape in a string", c);
                    return;
                }
                cp = cp * 16 + h;
            }
            if (cp > 0x10ffff) {
                fail(p, line, "invalid \\%c escape in a string", c);
                return;
            }
            i += digits;
            k += llm_utf8_encode((uint32_t) cp, d + k);
            break;
        default:
            if (c >= '0' && c <= '7') {
                cp = 0;
                for (digits = 0; digits < 3 && i < start + n
                     && p->src[i] >= '0' && p->src[i] <= '7'; digits++) {
                    cp = cp * 8 + (p->src[i++] - '0');
                }
                i--;
                k += llm_utf8_encode((uint32_t) cp, d + k);
                break;
            }
            /* unknown escapes keep their backslash, as in Python */
            d[k++] = '\\';
            d[k++] = c;
        }
    }
    d[k] = '\0';
    t = push_tok(p, TK_STRING);
    if (t != NULL) {
        t->line = line;
        t->s = d;
        t->n = k;
    }
}


static void
lex_number(jparser *p)
{
    char     buf[64];
    size_t   start, k;
    int      is_float;
    token   *t;

    start = p->pos;
    is_float = 0;
    while (p->pos < p->len && (isdigit((unsigned char) p->src[p->pos])
                               || p->src[p->pos] == '_')) {
        p->pos++;
    }
    if (p->pos + 1 < p->len && p->src[p->pos] == '.'
        && isdigit((unsigned char) p->src[p->pos + 1]))
    {
        is_float = 1;
        p->pos++;
        while (p->pos < p->len && (isdigit((unsigned char) p->src[p->pos])
                                   || p->src[p->pos] == '_')) {
            p->pos++;
        }
    }
    if (p->pos < p->len && (p->src[p->pos] == 'e' || p->src[p->pos] == 'E')) {
        size_t  e = p->pos + 1;

        if (e < p->len && (p->src[e] == '+' || p->src[e] == '-')) {
            e++;
        }
        if (e < p->len && isdigit((unsigned char) p->src[e])) {
            is_float = 1;
            p->pos = e;
            while (p->pos < p->len && isdigit((unsigned char) p->src[p->pos])) {
                p->pos++;
            }
        }
    }
    k = 0;
    for (size_t i = start; i < p->pos && k < sizeof(buf) - 1; i++) {
        if (p->src[i] != '_') {
            buf[k++] = p->src[i];
        }
    }
    buf[k] = '\0';
    if (p->pos - start >= sizeof(buf) - 1) {
        fail(p, p->line, "number too long");
        return;
    }
    t = push_tok(p, is_float ? TK_FLOAT : TK_INT);
    if (t == NULL) {
        return;
    }
    if (is_float) {
        t->f = strtod(buf, NULL);
    } else {
        unsigned long long v = strtoull(buf, NULL, 10);

        if (k > 18 && (v > (unsigned long long) 1 << 62 || k > 19)) {
            fail(p, p->line, "integer literal too large");
            return;
        }
        t->i = (long long) v;
    }
}


static const char *const ops3[] = { "//", "**", "==", "!=", "<=", ">=", NULL };

/* the tokens of one {{ }} or {% %} tag up to and including its end */
static void
lex_tag(jparser *p, int is_var)
{
    const char  *s;
    token       *t;
    int          braces, strip, keep, line;
    size_t       start;

    braces = 0;
    line = p->line;
    for ( ;; ) {
        while (p->pos < p->len && is_ws(p->src[p->pos])) {
            p->line += p->src[p->pos] == '\n';
            p->pos++;
        }
        if (p->failed) {
            return;
        }
        if (p->pos >= p->len) {
            fail(p, line, "unclosed %s tag", is_var ? "{{" : "{%");
            return;
        }
        s = p->src + p->pos;
        strip = 0;
        keep = 0;
        if (*s == '-' || *s == '+') {
            if ((!is_var && p->len - p->pos >= 3 && s[1] == '%' && s[2] == '}')
                || (is_var && braces == 0 && p->len - p->pos >= 3
                    && s[1] == '}' && s[2] == '}'))
            {
                strip = *s == '-';
                keep = *s == '+';     /* "+%}" turns trim_blocks off */
                p->pos++;
                s++;
            }
        }
        if ((!is_var && p->len - p->pos >= 2 && s[0] == '%' && s[1] == '}')
            || (is_var && braces == 0 && p->len - p->pos >= 2
                && s[0] == '}' && s[1] == '}'))
        {
            p->pos += 2;
            if (push_tok(p, is_var ? TK_VAR_END : TK_BLOCK_END) == NULL) {
                return;
            }
            after_tag_end(p, strip, !is_var && !keep);
            return;
        }
        if (*s == '"' || *s == '\'') {
            lex_string(p);
            continue;
        }
        if (isdigit((unsigned char) *s)) {
            lex_number(p);
            continue;
        }
        if (isalpha((unsigned char) *s) || *s == '_') {
            start = p->pos;
            while (p->pos < p->len && (isalnum((unsigned char) p->src[p->pos])
                                       || p->src[p->pos] == '_')) {
                p->pos++;
            }
            t = push_tok(p, TK_NAME);
            if (t != NULL) {
                t->s = arena_strndup(p, p->src + start, p->pos - start);
                t->n = p->pos - start;
            }
            continue;
        }
        start = p->pos;
        for (int k = 0; ops3[k] != NULL; k++) {
            if (p->len - p->pos >= 2 && memcmp(s, ops3[k], 2) == 0) {
                p->pos += 2;
                break;
            }
        }
        if (p->pos == start) {
            if (strchr("+-*/%~<>=()[]{},.:|", *s) == NULL || *s == '\0') {
                fail(p, p->line, "unexpected character '%c'", *s);
                return;
            }
            if (*s == '{') {
                braces++;
            } else if (*s == '}') {
                braces--;
            }
            p->pos++;
        }
        t = push_tok(p, TK_OP);
        if (t != NULL) {
            t->s = arena_strndup(p, p->src + start, p->pos - start);
            t->n = p->pos - start;
        }
    }
}


/* {% raw %} ... {% endraw %}: the body is text, tags and all */
static int
lex_raw(jparser *p, size_t open, char sign)
{
    size_t       q, body_start, end;
    const char  *s;
    char         esign;

    q = open + 2 + (sign != 0);
    while (q < p->len && is_ws(p->src[q])) q++;
    if (p->len - q < 3 || memcmp(p->src + q, "raw", 3) != 0
        || (q + 3 < p->len && (isalnum((unsigned char) p->src[q + 3])
                               || p->src[q + 3] == '_')))
    {
        return 0;
    }
    q += 3;
    while (q < p->len && is_ws(p->src[q])) q++;
    esign = 0;
    if (q < p->len && (p->src[q] == '-' || p->src[q] == '+')) esign = p->src[q++];
    if (p->len - q < 2 || p->src[q] != '%' || p->src[q + 1] != '}') {
        return 0;
    }
    count_lines(p, p->src + open, q + 2 - open);
    p->pos = q + 2;
    after_tag_end(p, esign == '-', 1);
    body_start = p->pos;
    for (end = body_start; end + 1 < p->len; end++) {
        s = p->src + end;
        if (s[0] != '{' || s[1] != '%') {
            continue;
        }
        q = end + 2;
        sign = 0;
        if (q < p->len && (p->src[q] == '-' || p->src[q] == '+')) sign = p->src[q++];
        while (q < p->len && is_ws(p->src[q])) q++;
        if (p->len - q < 6 || memcmp(p->src + q, "endraw", 6) != 0) {
            continue;
        }
        q += 6;
        while (q < p->len && is_ws(p->src[q])) q++;
        esign = 0;
        if (q < p->len && (p->src[q] == '-' || p->src[q] == '+')) esign = p->src[q++];
        if (p->len - q < 2 || p->src[q] != '%' || p->src[q + 1] != '}') {
            continue;
        }
        emit_text(p, p->src + body_start, end - body_start, sign, 0, 0);
        count_lines(p, p->src + end, q + 2 - end);
        p->pos = q + 2;
        after_tag_end(p, esign == '-', 1);
        return 1;
    }
    fail(p, p->line, "missing {%% endraw %%}");
    return 1;
}


static void
lex(jparser *p)
{
    size_t       i, text_start, end;
    char         sign, kind;
    int          line_starting;

    line_starting = 1;
    while (p->pos < p->len && !p->failed) {
        text_start = p->pos;
        for (i = p->pos; i + 1 < p->len; i++) {
            if (p->src[i] == '{' && (p->src[i + 1] == '{' || p->src[i + 1] == '%'
                                     || p->src[i + 1] == '#')) {
                break;
            }
        }
        if (i + 1 >= p->len) {
            emit_text(p, p->src + text_start, p->len - text_start, 0, 1, 0);
            p->pos = p->len;
            break;
        }
        kind = p->src[i + 1];
        sign = i + 2 < p->len && (p->src[i + 2] == '-' || p->src[i + 2] == '+')
               ? p->src[i + 2] : 0;
        emit_text(p, p->src + text_start, i - text_start, sign, kind == '{',
                  line_starting);
        p->pos = i + 2 + (sign != 0);
        if (kind == '%' && lex_raw(p, i, sign)) {
            line_starting = p->pos > 0 && p->src[p->pos - 1] == '\n';
            continue;
        }
        if (kind == '#') {
            for (end = p->pos; end + 1 < p->len; end++) {
                if (p->src[end] == '#' && p->src[end + 1] == '}') {
                    break;
                }
            }
            if (end + 1 >= p->len) {
                fail(p, p->line, "unclosed comment");
                return;
            }
            count_lines(p, p->src + p->pos, end + 2 - p->pos);
            p->pos = end + 2;
            /* "-#}" strips what follows, "+#}" keeps the newline */
            after_tag_end(p, end > i + 2 && p->src[end - 1] == '-',
                          !(end > i + 2 && p->src[end - 1] == '+'));
        } else {
            if (push_tok(p, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN) == NULL) {
                return;
            }
            lex_tag(p, kind == '{');
        }
        line_starting = p->pos > 0 && p->src[p->pos - 1] == '\n';
    }
    push_tok(p, TK_EOF);
}


/* --- parser ------------------------------------------------------------- */

static jnode *parse_expr(jparser *p);
static jnode *parse_unary(jparser *p, int with_filter);
static jnode *parse_primary(jparser *p);
static jnode *parse_body(jparser *p, const char *const *ends);


static token *
peek(jparser *p)
{
    return &p->toks[p->at];
}


static token *
next_tok(jparser *p)
{
    token  *t = &p->toks[p->at];

    if (t->kind != TK_EOF) {
        p->at++;
    }
    return t;
}


static int
is_op(jparser *p, const char *op)
{
    token  *t = peek(p);

    return t->kind == TK_OP && strcmp(t->s, op) == 0;
}


static int
is_name(jparser *p, const char *name)
{
    token  *t = peek(p);

    return t->kind == TK_NAME && strcmp(t->s, name) == 0;
}


static const char *
tok_desc(token *t)
{
    switch (t->kind) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "text";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_STRING: return "a string";
    case TK_INT: case TK_FLOAT: return "a number";
    default: return t->s;
    }
}


static int
expect_op(jparser *p, const char *op)
{
    if (!is_op(p, op)) {
        fail(p, peek(p)->line, "expected '%s', got %s", op, tok_desc(peek(p)));
        return 0;
    }
    next_tok(p);
    return 1;
}


static int
expect_kind(jparser *p, tok_kind kind, const char *what)
{
    if (peek(p)->kind != kind) {
        fail(p, peek(p)->line, "expected %s, got %s", what, tok_desc(peek(p)));
        return 0;
    }
    next_tok(p);
    return 1;
}


static jnode *
new_node(jparser *p, jnode_kind kind, int line)
{
    jnode  *n;

    n = jarena_alloc(p->arena, sizeof(jnode));
    if (n == NULL) {
        fail(p, line, "out of memory");
        return NULL;
    }
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->line = line;
    return n;
}


/* growable child array in the arena */
static int
add_kid(jparser *p, jnode *n, jnode *kid, int *cap)
{
    jnode  **k;

    if (kid == NULL) {
        return 0;
    }
    if (n->nkids == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        k = jarena_alloc(p->arena, *cap * sizeof(jnode *));
        if (k == NULL) {
            fail(p, n->line, "out of memory");
            return 0;
        }
        if (n->nkids) {
            memcpy(k, n->kids, n->nkids * sizeof(jnode *));
        }
        n->kids = k;
    }
    n->kids[n->nkids++] = kid;
    return 1;
}


/* (args, name=value) after the opening parenthesis was consumed */
static int
parse_args(jparser *p, jnode *n, int *cap)
{
    jnode  *arg, *kw;
    token  *t;

    while (!is_op(p, ")")) {
        if (p->failed) {
            return 0;
        }
        if (n->nkids > 0 && !expect_op(p, ",")) {
            return 0;
        }
        if (is_op(p, ")")) {
            break;
        }
        t = peek(p);
        if (t->kind == TK_NAME && p->toks[p->at + 1].kind == TK_OP
            && strcmp(p->toks[p->at + 1].s, "=") == 0)
        {
            next_tok(p);
            next_tok(p);
            kw = new_node(p, JN_KWARG, t->line);
            if (kw == NULL) {
                return 0;
            }
            kw->str = t->s;
            kw->len = t->n;
            kw->a = parse_expr(p);
            if (kw->a == NULL || !add_kid(p, n, kw, cap)) {
                return 0;
            }
            continue;
        }
        arg = parse_expr(p);
        if (!add_kid(p, n, arg, cap)) {
            return 0;
        }
    }
    return expect_op(p, ")");
}


static jnode *
parse_tuple_or_paren(jparser *p, int line)
{
    jnode  *first, *tup;
    int     cap = 0;

    if (is_op(p, ")")) {
        next_tok(p);
        return new_node(p, JN_TUPLE, line);
    }
    first = parse_expr(p);
    if (first == NULL) {
        return NULL;
    }
    if (is_op(p, ")")) {
        next_tok(p);
        return first;
    }
    tup = new_node(p, JN_TUPLE, line);
    if (tup == NULL || !add_kid(p, tup, first, &cap)) {
        return NULL;
    }
    while (is_op(p, ",")) {
        next_tok(p);
        if (is_op(p, ")")) {
            break;
        }
        if (!add_kid(p, tup, parse_expr(p), &cap)) {
            return NULL;
        }
    }
    return expect_op(p, ")") ? tup : NULL;
}


static jnode *
parse_list_or_dict(jparser *p, int line, int is_dict)
{
    jnode       *n;
    int          cap = 0;
    const char  *close = is_dict ? "}" : "]";

    n = new_node(p, is_dict ? JN_DICT : JN_LIST, line);
    while (n != NULL && !is_op(p, close)) {
        if (n->nkids > 0 && !expect_op(p, ",")) {
            return NULL;
        }
        if (is_op(p, close)) {
            break;
        }
        if (!add_kid(p, n, parse_expr(p), &cap)) {
            return NULL;
        }
        if (is_dict && (!expect_op(p, ":")
                        || !add_kid(p, n, parse_expr(p), &cap))) {
            return NULL;
        }
    }
    return n != NULL && expect_op(p, close) ? n : NULL;
}


static jnode *
parse_primary(jparser *p)
{
    token  *t;
    jnode  *n;
    char   *s;
    size_t  len;

    t = next_tok(p);
    switch (t->kind) {
    case TK_NAME:
        n = new_node(p, JN_LITERAL, t->line);
        if (n == NULL) {
            return NULL;
        }
        if (strcmp(t->s, "true") == 0 || strcmp(t->s, "True") == 0
            || strcmp(t->s, "false") == 0 || strcmp(t->s, "False") == 0)
        {
            n->lit.type = JV_BOOL;
            n->lit.u.b = t->s[0] == 't' || t->s[0] == 'T';
        } else if (strcmp(t->s, "none") == 0 || strcmp(t->s, "None") == 0) {
            n->lit.type = JV_NONE;
        } else {
            n->kind = JN_NAME;
            n->str = t->s;
            n->len = t->n;
        }
        return n;
    case TK_STRING:
        /* adjacent string literals are one string, as in Python */
        s = (char *) t->s;
        len = t->n;
        while (peek(p)->kind == TK_STRING) {
            token  *u = next_tok(p);
            char   *c = jarena_alloc(p->arena, len + u->n + 1);

            if (c == NULL) {
                fail(p, t->line, "out of memory");
                return NULL;
            }
            memcpy(c, s, len);
            memcpy(c + len, u->s, u->n + 1);
            s = c;
            len += u->n;
        }
        n = new_node(p, JN_LITERAL, t->line);
        if (n != NULL) {
            n->lit.type = JV_STR;
            n->lit.u.str.s = s;
            n->lit.u.str.n = len;
            n->lit.taint = JT_NONE;    /* the template's own text */
        }
        return n;
    case TK_INT:
        n = new_node(p, JN_LITERAL, t->line);
        if (n != NULL) {
            n->lit.type = JV_INT;
            n->lit.u.i = t->i;
        }
        return n;
    case TK_FLOAT:
        n = new_node(p, JN_LITERAL, t->line);
        if (n != NULL) {
            n->lit.type = JV_FLOAT;
            n->lit.u.f = t->f;
        }
        return n;
    case TK_OP:
        if (strcmp(t->s, "(") == 0) {
            return parse_tuple_or_paren(p, t->line);
        }
        if (strcmp(t->s, "[") == 0) {
            return parse_list_or_dict(p, t->line, 0);
        }
        if (strcmp(t->s, "{") == 0) {
            return parse_list_or_dict(p, t->line, 1);
        }
        /* fall through */
    default:
        fail(p, t->line, "unexpected %s", tok_desc(t));
        return NULL;
    }
}


/* [a], [a:b], [a:b:c] after "[" */
static jnode *
parse_subscript(jparser *p, jnode *obj, int line)
{
    jnode  *n, *parts[3] = { NULL, NULL, NULL };
    int     i, cap = 0, is_slice = 0;

    for (i = 0; i < 3; i++) {
        if (!is_op(p, ":") && !is_op(p, "]")) {
            parts[i] = parse_expr(p);
            if (parts[i] == NULL) {
                return NULL;
            }
        }
        if (i < 2 && is_op(p, ":")) {
            next_tok(p);
            is_slice = 1;
            continue;
        }
        break;
    }
    if (!expect_op(p, "]")) {
        return NULL;
    }
    if (!is_slice) {
        if (parts[0] == NULL) {
            fail(p, line, "empty subscript");
            return NULL;
        }
        n = new_node(p, JN_GETITEM, line);
        if (n != NULL) {
            n->a = obj;
            n->b = parts[0];
        }
        return n;
    }
    n = new_node(p, JN_SLICE, line);
    if (n == NULL) {
        return NULL;
    }
    n->a = obj;
    for (i = 0; i < 3; i++) {
        if (n->nkids == cap) {
            cap = 3;
            n->kids = jarena_alloc(p->arena, 3 * sizeof(jnode *));
            if (n->kids == NULL) {
                fail(p, line, "out of memory");
                return NULL;
            }
        }
        n->kids[n->nkids++] = parts[i];
    }
    return n;
}


static jnode *
parse_postfix(jparser *p, jnode *n)
{
    token  *t;
    jnode  *m;
    int     cap;

    while (n != NULL && !p->failed) {
        t = peek(p);
        if (is_op(p, ".")) {
            next_tok(p);
            t = next_tok(p);
            if (t->kind == TK_INT) {
                /* x.0 is x[0] */
                m = new_node(p, JN_GETITEM, t->line);
                jnode *idx = new_node(p, JN_LITERAL, t->line);
                if (m == NULL || idx == NULL) {
                    return NULL;
                }
                idx->lit.type = JV_INT;
                idx->lit.u.i = t->i;
                m->a = n;
                m->b = idx;
                n = m;
                continue;
            }
            if (t->kind != TK_NAME) {
                fail(p, t->line, "expected an attribute name, got %s",
                     tok_desc(t));
                return NULL;
            }
            m = new_node(p, JN_GETATTR, t->line);
            if (m == NULL) {
                return NULL;
            }
            m->a = n;
            m->str = t->s;
            m->len = t->n;
            n = m;
        } else if (is_op(p, "[")) {
            next_tok(p);
            n = parse_subscript(p, n, t->line);
        } else if (is_op(p, "(")) {
            next_tok(p);
            m = new_node(p, JN_CALL, t->line);
            if (m == NULL) {
                return NULL;
            }
            m->a = n;
            cap = 0;
            if (!parse_args(p, m, &cap)) {
                return NULL;
            }
            n = m;
        } else {
            break;
        }
    }
    return n;
}


/* a test argument without parentheses: "is divisibleby 3" */
static int
starts_test_arg(jparser *p)
{
    token  *t = peek(p);

    if (t->kind == TK_STRING || t->kind == TK_INT || t->kind == TK_FLOAT) {
        return 1;
    }
    if (t->kind == TK_NAME) {
        return strcmp(t->s, "else") && strcmp(t->s, "or") && strcmp(t->s, "and")
               && strcmp(t->s, "if") && strcmp(t->s, "in")
               && strcmp(t->s, "is") && strcmp(t->s, "not");
    }
    return is_op(p, "(") || is_op(p, "[") || is_op(p, "{");
}


static jnode *
parse_filter_expr(jparser *p, jnode *n)
{
    token  *t;
    jnode  *m;
    int     cap;

    while (n != NULL && !p->failed) {
        t = peek(p);
        if (is_op(p, "|") || is_name(p, "is")) {
            int  is_test = t->kind == TK_NAME;

            next_tok(p);
            m = new_node(p, is_test ? JN_TEST : JN_FILTER, t->line);
            if (m == NULL) {
                return NULL;
            }
            if (is_test && is_name(p, "not")) {
                next_tok(p);
                m->op = 1;
            }
            t = next_tok(p);
            if (t->kind != TK_NAME) {
                fail(p, t->line, "expected a %s name, got %s",
                     is_test ? "test" : "filter", tok_desc(t));
                return NULL;
            }
            m->str = t->s;
            m->len = t->n;
            /* filters are known now, as jinja2 knows them when it compiles;
               rendering then dispatches on the id */
            if (!is_test && (m->op = jfilter_id(t->s, t->n)) == 0) {
                fail(p, t->line, "no filter named '%s'", t->s);
                return NULL;
            }
            /* dotted names (e.g. "is test.name") are not supported */
            m->a = n;
            cap = 0;
            if (is_op(p, "(")) {
                next_tok(p);
                if (!parse_args(p, m, &cap)) {
                    return NULL;
                }
            } else if (is_test && starts_test_arg(p)) {
                jnode *arg = parse_postfix(p, parse_primary(p));

                if (!add_kid(p, m, arg, &cap)) {
                    return NULL;
                }
            }
            n = m;
        } else if (is_op(p, "(")) {
            n = parse_postfix(p, n);
        } else {
            break;
        }
    }
    return n;
}


static jnode *
parse_unary(jparser *p, int with_filter)
{
    token  *t = peek(p);
    jnode  *n;

    if (++p->depth > JINJA_MAX_PARSE_DEPTH) {
        fail(p, t->line, "expression nested too deeply");
        return NULL;
    }
    if (is_op(p, "-") || is_op(p, "+")) {
        next_tok(p);
        n = new_node(p, t->s[0] == '-' ? JN_NEG : JN_POS, t->line);
        if (n != NULL) {
            n->a = parse_unary(p, 0);
            if (n->a == NULL) {
                n = NULL;
            }
        }
    } else {
        n = parse_postfix(p, parse_primary(p));
    }
    if (with_filter) {
        n = parse_filter_expr(p, n);
    }
    p->depth--;
    return n;
}


static jnode *
binop(jparser *p, int op, jnode *a, jnode *b, int line)
{
    jnode  *n;

    if (a == NULL || b == NULL) {
        return NULL;
    }
    n = new_node(p, JN_BINOP, line);
    if (n != NULL) {
        n->op = op;
        n->a = a;
        n->b = b;
    }
    return n;
}


static jnode *
parse_pow(jparser *p)
{
    jnode  *n = parse_unary(p, 1);

    while (n != NULL && is_op(p, "**")) {
        int line = next_tok(p)->line;

        n = binop(p, JOP_POW, n, parse_unary(p, 1), line);
    }
    return n;
}


static jnode *
parse_math2(jparser *p)
{
    jnode  *n = parse_pow(p);
    int     op;

    while (n != NULL) {
        if (is_op(p, "*")) op = JOP_MUL;
        else if (is_op(p, "/")) op = JOP_DIV;
        else if (is_op(p, "//")) op = JOP_FLOORDIV;
        else if (is_op(p, "%")) op = JOP_MOD;
        else break;
        int line = next_tok(p)->line;
        n = binop(p, op, n, parse_pow(p), line);
    }
    return n;
}


static jnode *
parse_concat(jparser *p)
{
    jnode  *n = parse_math2(p);

    while (n != NULL && is_op(p, "~")) {
        int line = next_tok(p)->line;

        n = binop(p, JOP_CONCAT, n, parse_math2(p), line);
    }
    return n;
}


static jnode *
parse_math1(jparser *p)
{
    jnode  *n = parse_concat(p);
    int     op;

    while (n != NULL && (is_op(p, "+") || is_op(p, "-"))) {
        op = is_op(p, "+") ? JOP_ADD : JOP_SUB;
        int line = next_tok(p)->line;
        n = binop(p, op, n, parse_concat(p), line);
    }
    return n;
}


static int
compare_op(jparser *p)
{
    static const struct { const char *s; int op; } tab[] = {
        { "==", JOP_EQ }, { "!=", JOP_NE }, { "<", JOP_LT }, { "<=", JOP_LE },
        { ">", JOP_GT }, { ">=", JOP_GE },
    };

    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
        if (is_op(p, tab[i].s)) {
            next_tok(p);
            return tab[i].op;
        }
    }
    if (is_name(p, "in")) {
        next_tok(p);
        return JOP_IN;
    }
    if (is_name(p, "not") && p->toks[p->at + 1].kind == TK_NAME
        && strcmp(p->toks[p->at + 1].s, "in") == 0)
    {
        next_tok(p);
        next_tok(p);
        return JOP_NOTIN;
    }
    return 0;
}


static jnode *
parse_compare(jparser *p)
{
    jnode  *first, *n;
    int     op, cap = 0, line, ncap = 0;
    int    *ops = NULL;

    first = parse_math1(p);
    if (first == NULL) {
        return NULL;
    }
    line = peek(p)->line;
    op = compare_op(p);
    if (op == 0) {
        return first;
    }
    n = new_node(p, JN_COMPARE, line);
    if (n == NULL || !add_kid(p, n, first, &cap)) {
        return NULL;
    }
    while (op != 0) {
        if (n->nkids - 1 == ncap) {
            int  *o;

            ncap = ncap ? ncap * 2 : 4;
            o = jarena_alloc(p->arena, ncap * sizeof(int));
            if (o == NULL) {
                fail(p, line, "out of memory");
                return NULL;
            }
            if (ops != NULL) {
                memcpy(o, ops, (n->nkids - 1) * sizeof(int));
            }
            ops = o;
        }
        ops[n->nkids - 1] = op;
        if (!add_kid(p, n, parse_math1(p), &cap)) {
            return NULL;
        }
        op = compare_op(p);
    }
    n->ops = ops;
    return n;
}


static jnode *
parse_not(jparser *p)
{
    jnode  *n;
    int     line;

    if (is_name(p, "not")) {
        line = next_tok(p)->line;
        if (++p->depth > JINJA_MAX_PARSE_DEPTH) {
            fail(p, line, "expression nested too deeply");
            return NULL;
        }
        n = new_node(p, JN_NOT, line);
        if (n != NULL) {
            n->a = parse_not(p);
            if (n->a == NULL) {
                n = NULL;
            }
        }
        p->depth--;
        return n;
    }
    return parse_compare(p);
}


static jnode *
parse_and(jparser *p)
{
    jnode  *n = parse_not(p), *m;

    while (n != NULL && is_name(p, "and")) {
        m = new_node(p, JN_AND, next_tok(p)->line);
        if (m == NULL) {
            return NULL;
        }
        m->a = n;
        m->b = parse_not(p);
        n = m->b ? m : NULL;
    }
    return n;
}


static jnode *
parse_or(jparser *p)
{
    jnode  *n = parse_and(p), *m;

    while (n != NULL && is_name(p, "or")) {
        m = new_node(p, JN_OR, next_tok(p)->line);
        if (m == NULL) {
            return NULL;
        }
        m->a = n;
        m->b = parse_and(p);
        n = m->b ? m : NULL;
    }
    return n;
}


/* a if cond else b; jinja2 allows the else to be missing (then: undefined) */
static jnode *
parse_expr(jparser *p)
{
    jnode  *n, *m;

    if (++p->depth > JINJA_MAX_PARSE_DEPTH) {
        fail(p, peek(p)->line, "expression nested too deeply");
        return NULL;
    }
    n = parse_or(p);
    while (n != NULL && is_name(p, "if")) {
        m = new_node(p, JN_COND, next_tok(p)->line);
        if (m == NULL) {
            n = NULL;
            break;
        }
        m->a = n;
        m->b = parse_or(p);
        if (m->b == NULL) {
            n = NULL;
            break;
        }
        if (is_name(p, "else")) {
            next_tok(p);
            m->c = parse_expr(p);
            if (m->c == NULL) {
                n = NULL;
                break;
            }
        }
        n = m;
    }
    p->depth--;
    return n;
}


/* "a" or "a, b" (loop and set targets), or "ns.attr" for set */
static jnode *
parse_target(jparser *p, int allow_attr)
{
    jnode  *n, *tup;
    token  *t;
    int     cap = 0;

    tup = NULL;
    for ( ;; ) {
        t = next_tok(p);
        if (t->kind != TK_NAME) {
            fail(p, t->line, "expected a variable name, got %s", tok_desc(t));
            return NULL;
        }
        n = new_node(p, JN_NAME, t->line);
        if (n == NULL) {
            return NULL;
        }
        n->str = t->s;
        n->len = t->n;
        if (allow_attr && tup == NULL && is_op(p, ".")) {
            jnode  *m;

            next_tok(p);
            t = next_tok(p);
            if (t->kind != TK_NAME) {
                fail(p, t->line, "expected an attribute name, got %s",
                     tok_desc(t));
                return NULL;
            }
            m = new_node(p, JN_GETATTR, t->line);
            if (m == NULL) {
                return NULL;
            }
            m->a = n;
            m->str = t->s;
            m->len = t->n;
            return m;
        }
        if (tup == NULL && !is_op(p, ",")) {
            return n;
        }
        if (tup == NULL) {
            tup = new_node(p, JN_TUPLE, t->line);
            if (tup == NULL) {
                return NULL;
            }
        }
        if (!add_kid(p, tup, n, &cap)) {
            return NULL;
        }
        if (!is_op(p, ",")) {
            return tup;
        }
        next_tok(p);
    }
}


static int
end_block(jparser *p)
{
    return expect_kind(p, TK_BLOCK_END, "'%}'");
}


static const char *const ends_if[] = { "elif", "else", "endif", NULL };
static const char *const ends_for[] = { "else", "endfor", NULL };
static const char *const ends_endfor[] = { "endfor", NULL };
static const char *const ends_set[] = { "endset", NULL };
static const char *const ends_macro[] = { "endmacro", NULL };
static const char *const ends_gen[] = { "endgeneration", NULL };


/* after "if"/"elif": cond %} body (elif ... | else ... | endif) */
static jnode *
parse_if(jparser *p, int line)
{
    jnode   *n;
    token   *t;

    n = new_node(p, JN_IF, line);
    if (n == NULL || (n->a = parse_expr(p)) == NULL || !end_block(p)) {
        return NULL;
    }
    n->b = parse_body(p, ends_if);
    if (p->failed) {
        return NULL;
    }
    t = next_tok(p);
    if (strcmp(t->s, "elif") == 0) {
        n->c = parse_if(p, t->line);
        return n->c ? n : NULL;
    }
    if (strcmp(t->s, "else") == 0) {
        if (!end_block(p)) {
            return NULL;
        }
        n->c = parse_body(p, (const char *const[]) { "endif", NULL });
        if (p->failed) {
            return NULL;
        }
        next_tok(p);
    }
    return end_block(p) ? n : NULL;
}


static jnode *
parse_for(jparser *p, int line)
{
    jnode  *n;
    token  *t;

    n = new_node(p, JN_FOR, line);
    if (n == NULL || (n->t = parse_target(p, 0)) == NULL) {
        return NULL;
    }
    if (!is_name(p, "in")) {
        fail(p, peek(p)->line, "expected 'in', got %s", tok_desc(peek(p)));
        return NULL;
    }
    next_tok(p);
    /* no conditional expression here: a trailing "if" filters the loop */
    n->a = parse_or(p);
    if (n->a == NULL) {
        return NULL;
    }
    if (is_name(p, "if")) {
        next_tok(p);
        if ((n->d = parse_or(p)) == NULL) {
            return NULL;
        }
    }
    if (is_name(p, "recursive")) {
        fail(p, peek(p)->line, "recursive loops are not supported");
        return NULL;
    }
    if (!end_block(p)) {
        return NULL;
    }
    n->b = parse_body(p, ends_for);
    if (p->failed) {
        return NULL;
    }
    t = next_tok(p);
    if (strcmp(t->s, "else") == 0) {
        if (!end_block(p)) {
            return NULL;
        }
        n->c = parse_body(p, ends_endfor);
        if (p->failed) {
            return NULL;
        }
        next_tok(p);
    }
    return end_block(p) ? n : NULL;
}


static jnode *
parse_set(jparser *p, int line)
{
    jnode  *n;

    n = new_node(p, JN_SET, line);
    if (n == NULL || (n->t = parse_target(p, 1)) == NULL) {
        return NULL;
    }
    if (is_op(p, "=")) {
        next_tok(p);
        n->a = parse_expr(p);
        if (n->a == NULL) {
            return NULL;
        }
        /* set a, b = 1, 2: an unparenthesized tuple */
        if (is_op(p, ",")) {
            jnode  *tup = new_node(p, JN_TUPLE, line);
            int     cap = 0;

            if (tup == NULL || !add_kid(p, tup, n->a, &cap)) {
                return NULL;
            }
            while (is_op(p, ",")) {
                next_tok(p);
                if (!add_kid(p, tup, parse_expr(p), &cap)) {
                    return NULL;
                }
            }
            n->a = tup;
        }
        return end_block(p) ? n : NULL;
    }
    if (n->t->kind != JN_NAME) {
        fail(p, line, "a block set assigns one plain variable");
        return NULL;
    }
    if (is_op(p, "|")) {
        fail(p, line, "filtered block set is not supported");
        return NULL;
    }
    n->kind = JN_SET_BLOCK;
    if (!end_block(p)) {
        return NULL;
    }
    n->b = parse_body(p, ends_set);
    if (p->failed) {
        return NULL;
    }
    next_tok(p);
    return end_block(p) ? n : NULL;
}


static jnode *
parse_macro(jparser *p, int line)
{
    jnode  *n, *param;
    token  *t;
    int     cap = 0;

    n = new_node(p, JN_MACRO, line);
    t = next_tok(p);
    if (n == NULL || t->kind != TK_NAME) {
        fail(p, t->line, "expected a macro name, got %s", tok_desc(t));
        return NULL;
    }
    n->str = t->s;
    n->len = t->n;
    if (!expect_op(p, "(")) {
        return NULL;
    }
    while (!is_op(p, ")")) {
        if (n->nkids > 0 && !expect_op(p, ",")) {
            return NULL;
        }
        t = next_tok(p);
        if (t->kind != TK_NAME) {
            fail(p, t->line, "expected a parameter name, got %s", tok_desc(t));
            return NULL;
        }
        param = new_node(p, JN_NAME, t->line);
        if (param == NULL) {
            return NULL;
        }
        param->str = t->s;
        param->len = t->n;
        if (is_op(p, "=")) {
            next_tok(p);
            if ((param->a = parse_expr(p)) == NULL) {
                return NULL;
            }
        }
        if (!add_kid(p, n, param, &cap)) {
            return NULL;
        }
    }
    next_tok(p);
    if (!end_block(p)) {
        return NULL;
    }
    n->b = parse_body(p, ends_macro);
    if (p->failed) {
        return NULL;
    }
    next_tok(p);
    if (peek(p)->kind == TK_NAME) {
        next_tok(p);   /* {% endmacro name %} */
    }
    return end_block(p) ? n : NULL;
}


/* one {% ... %} statement; the "{%" is consumed */
static jnode *
parse_statement(jparser *p)
{
    token  *t;
    jnode  *n;

    t = next_tok(p);
    if (t->kind != TK_NAME) {
        fail(p, t->line, "expected a tag name, got %s", tok_desc(t));
        return NULL;
    }
    if (strcmp(t->s, "if") == 0) {
        return parse_if(p, t->line);
    }
    if (strcmp(t->s, "for") == 0) {
        return parse_for(p, t->line);
    }
    if (strcmp(t->s, "set") == 0) {
        return parse_set(p, t->line);
    }
    if (strcmp(t->s, "macro") == 0) {
        return parse_macro(p, t->line);
    }
    if (strcmp(t->s, "break") == 0 || strcmp(t->s, "continue") == 0) {
        n = new_node(p, t->s[0] == 'b' ? JN_BREAK : JN_CONTINUE, t->line);
        return n != NULL && end_block(p) ? n : NULL;
    }
    if (strcmp(t->s, "generation") == 0) {
        /* transformers' assistant-mask tag: renders its body */
        n = new_node(p, JN_BLOCK, t->line);
        if (n == NULL || !end_block(p)) {
            return NULL;
        }
        n->b = parse_body(p, ends_gen);
        if (p->failed) {
            return NULL;
        }
        next_tok(p);
        return end_block(p) ? n : NULL;
    }
    fail(p, t->line, "unknown or unexpected tag '%s'", t->s);
    return NULL;
}


/*
 * Statements up to a {% tag %} named in ends (left unconsumed, positioned at
 * its name) or, when ends is NULL, to the end of the template.
 */
static jnode *
parse_body(jparser *p, const char *const *ends)
{
    jnode   *head = NULL, **tail = &head, *n;
    token   *t;
    int      line;

    line = peek(p)->line;
    if (++p->depth > JINJA_MAX_PARSE_DEPTH) {
        fail(p, line, "blocks nested too deeply");
        return NULL;
    }
    while (!p->failed) {
        t = peek(p);
        n = NULL;
        if (t->kind == TK_EOF) {
            if (ends != NULL) {
                fail(p, line, "missing {%% %s %%}", ends[0]);
            }
            break;
        }
        if (t->kind == TK_TEXT) {
            next_tok(p);
            n = new_node(p, JN_TEXT, t->line);
            if (n != NULL) {
                n->str = t->s;
                n->len = t->n;
            }
        } else if (t->kind == TK_VAR_BEGIN) {
            next_tok(p);
            n = new_node(p, JN_OUTPUT, t->line);
            if (n != NULL && ((n->a = parse_expr(p)) == NULL
                              || !expect_kind(p, TK_VAR_END, "'}}'"))) {
                n = NULL;
            }
        } else if (t->kind == TK_BLOCK_BEGIN) {
            token  *name = &p->toks[p->at + 1];

            if (ends != NULL && name->kind == TK_NAME) {
                int  found = 0;

                for (int i = 0; ends[i] != NULL; i++) {
                    found |= strcmp(name->s, ends[i]) == 0;
                }
                if (found) {
                    next_tok(p);
                    break;
                }
            }
            next_tok(p);
            n = parse_statement(p);
        } else {
            fail(p, t->line, "unexpected %s", tok_desc(t));
        }
        if (n == NULL) {
            break;
        }
        *tail = n;
        tail = &n->next;
    }
    p->depth--;
    return head;
}


/* \r\n and \r become \n; one trailing newline is dropped (jinja2 does both) */
static char *
normalize_source(const char *src, size_t len, size_t *out_len)
{
    char    *d;
    size_t   i, k;

    d = malloc(len + 1);
    if (d == NULL) {
        return NULL;
    }
    for (i = 0, k = 0; i < len; i++) {
        if (src[i] == '\r') {
            d[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') {
                i++;
            }
        } else {
            d[k++] = src[i];
        }
    }
    if (k > 0 && d[k - 1] == '\n') {
        k--;
    }
    d[k] = '\0';
    *out_len = k;
    return d;
}


jinja_tmpl *
jinja_parse(const char *src, size_t len, char *err, size_t errlen)
{
    jinja_tmpl  *t;
    jparser      p;
    char        *norm;

    if (errlen > 0) {
        err[0] = '\0';
    }
    if (len > JINJA_MAX_SOURCE) {
        snprintf(err, errlen, "line 1: template larger than %u bytes",
                 JINJA_MAX_SOURCE);
        return NULL;
    }
    t = calloc(1, sizeof(*t));
    norm = normalize_source(src, len, &len);
    if (t == NULL || norm == NULL) {
        free(t);
        free(norm);
        snprintf(err, errlen, "line 1: out of memory");
        return NULL;
    }
    memset(&p, 0, sizeof(p));
    p.arena = &t->arena;
    p.src = norm;
    p.len = len;
    p.line = 1;
    p.err = err;
    p.errlen = errlen;
    lex(&p);
    if (!p.failed) {
        t->body = parse_body(&p, NULL);
    }
    free(p.toks);
    free(norm);
    if (p.failed) {
        jinja_free(t);
        return NULL;
    }
    return t;
}


void
jinja_free(jinja_tmpl *t)
{
    if (t == NULL) {
        return;
    }
    jarena_free(&t->arena);
    free(t);
}
