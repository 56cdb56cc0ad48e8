/*
 * Regex for the whole output -> GBNF (root ::= ...), then compiled as any
 * grammar. Supported: literals, escapes (\n \t \r \f \v \0 \xHH \uHHHH,
 * escaped punctuation), classes [...] [^...] with \d \w \s inside, \d \D
 * \w \W \s \S, '.', groups ( ) (?: ) (?<name> ) (?P<name> ), alternation,
 * * + ? {m} {m,} {m,n} (lazy forms match the same strings), ^ at the start
 * and $ at the end. Refused, by name: backreferences, lookaround, word
 * boundaries, inline flags, anchors elsewhere.
 *
 * defines: llm_regex_to_gbnf
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "grammar/json_schema.h"
#include "text/utf8.h"


typedef struct {
    const char  *src;
    const char  *p;
    const char  *end;
    llm_strbuf   out;
    char        *err;
    size_t       err_len;
    int          depth;
} rx;


static int
rx_error(rx *r, const char *fmt, ...)
{
    char     msg[200];
    va_list  ap;

    if (r->err[0] != '\0') {
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(r->err, r->err_len, "regex: %s at column %d", msg,
             (int) (r->p - r->src) + 1);
    return -1;
}


static int
put(rx *r, const char *s)
{
    if (llm_strbuf_append(&r->out, s, strlen(s)) != 0) {
        return rx_error(r, "too long");
    }
    return 0;
}


/* a code point from the source (UTF-8), or -1 */
static int32_t
rx_utf8(rx *r)
{
    uint32_t  c;
    size_t    n = llm_utf8_decode((const unsigned char *) r->p,
                                  (size_t) (r->end - r->p), &c);

    if (n == 0) {
        return rx_error(r, "invalid UTF-8");
    }
    r->p += n;
    return (int32_t) c;
}


static int
put_cp(rx *r, uint32_t c)
{
    char  buf[16];

    snprintf(buf, sizeof(buf), "\\U%08X", c);
    return put(r, buf);
}


static int32_t
rx_hex(rx *r, int n)
{
    uint32_t  c = 0;
    int       i, h;

    for (i = 0; i < n; i++) {
        char  x = r->p < r->end ? *r->p : 0;

        h = x >= '0' && x <= '9' ? x - '0' : x >= 'a' && x <= 'f'
            ? x - 'a' + 10 : x >= 'A' && x <= 'F' ? x - 'A' + 10 : -1;
        if (h < 0) {
            return rx_error(r, "bad hex escape");
        }
        c = c * 16 + (uint32_t) h;
        r->p++;
    }
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        return rx_error(r, "escape is not a Unicode scalar value");
    }
    return (int32_t) c;
}


/*
 * After a backslash: a class shorthand (its GBNF ranges in *cls, negated
 * in *neg), or one code point. -1 on a refused escape.
 */
static int32_t
rx_escape(rx *r, const char **cls, int *neg)
{
    char  c;

    *cls = NULL;
    *neg = 0;
    if (r->p >= r->end) {
        return rx_error(r, "trailing backslash");
    }
    c = *r->p++;
    switch (c) {
    case 'd': case 'D': *cls = "0-9"; *neg = c == 'D'; return 0;
    case 'w': case 'W': *cls = "a-zA-Z0-9_"; *neg = c == 'W'; return 0;
    case 's': case 'S': *cls = " \\t\\n\\r\\f\\v"; *neg = c == 'S'; return 0;
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'x': return rx_hex(r, 2);
    case 'u': return rx_hex(r, 4);
    case 'b': case 'B':
        return rx_error(r, "word boundaries (\\%c) are not supported", c);
    case 'k':
        return rx_error(r, "backreferences are not supported");
    default:
        if (c >= '1' && c <= '9') {
            return rx_error(r, "backreferences are not supported");
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            return rx_error(r, "unknown escape '\\%c'", c);
        }
        r->p--;
        return rx_utf8(r);
    }
}


static int
rx_class(rx *r)
{
    const char  *cls;
    int32_t      c;
    int          neg, first = 1;

    r->p++;
    if (put(r, "[") != 0) {
        return -1;
    }
    if (r->p < r->end && *r->p == '^') {
        r->p++;
        if (put(r, "^") != 0) {
            return -1;
        }
    }
    while (r->p < r->end && (*r->p != ']' || first)) {
        first = 0;
        if (*r->p == '[' && r->p + 1 < r->end && r->p[1] == ':') {
            return rx_error(r, "POSIX classes [:name:] are not supported");
        }
        if (*r->p == '\\') {
            r->p++;
            if ((c = rx_escape(r, &cls, &neg)) < 0) {
                return -1;
            }
            if (cls != NULL) {
                if (neg) {
                    return rx_error(r, "a negated shorthand inside [...] "
                                    "is not supported");
                }
                if (put(r, cls) != 0) {
                    return -1;
                }
                continue;
            }
        } else if ((c = rx_utf8(r)) < 0) {
            return -1;
        }
        if (put_cp(r, (uint32_t) c) != 0) {
            return -1;
        }
        if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                if ((c = rx_escape(r, &cls, &neg)) < 0) {
                    return -1;
                }
                if (cls != NULL) {
                    return rx_error(r, "a class as a range's end");
                }
            } else if ((c = rx_utf8(r)) < 0) {
                return -1;
            }
            if (put(r, "-") != 0 || put_cp(r, (uint32_t) c) != 0) {
                return -1;
            }
        }
    }
    if (r->p >= r->end) {
        return rx_error(r, "unterminated [");
    }
    r->p++;
    return put(r, "]");
}


static int rx_alt(rx *r);


static int
rx_group(rx *r)
{
    const char  *q;

    r->p++;
    if (r->p < r->end && *r->p == '?') {
        q = r->p + 1;
        if (q < r->end && *q == ':') {
            r->p = q + 1;
        } else if (q < r->end && (*q == '=' || *q == '!')) {
            return rx_error(r, "lookahead is not supported");
        } else if (q + 1 < r->end && *q == '<'
                   && (q[1] == '=' || q[1] == '!'))
        {
            return rx_error(r, "lookbehind is not supported");
        } else if (q < r->end && (*q == '<' || *q == 'P')) {
            if (*q == 'P' && (q + 1 >= r->end || q[1] != '<')) {
                return rx_error(r, "(?P%c is not supported", q[1]);
            }
            while (q < r->end && *q != '>') {
                q++;
            }
            if (q >= r->end) {
                return rx_error(r, "unterminated group name");
            }
            r->p = q + 1;
        } else {
            return rx_error(r, "inline flags and (?%c are not supported",
                            q < r->end ? *q : ' ');
        }
    }
    if (++r->depth > LLM_GRAMMAR_MAX_NEST) {
        return rx_error(r, "nesting deeper than %d", LLM_GRAMMAR_MAX_NEST);
    }
    if (put(r, "( ") != 0 || rx_alt(r) != 0) {
        return -1;
    }
    r->depth--;
    if (r->p >= r->end || *r->p != ')') {
        return rx_error(r, "missing ')'");
    }
    r->p++;
    return put(r, " )");
}


static int
rx_quant(rx *r)
{
    const char  *q;
    char         buf[64];
    long         a, b = -2;

    if (r->p >= r->end) {
        return 0;
    }
    if (*r->p == '*' || *r->p == '+' || *r->p == '?') {
        buf[0] = *r->p++;
        buf[1] = '\0';
    } else if (*r->p == '{') {
        a = strtol(r->p + 1, (char **) &q, 10);
        if (q == r->p + 1 || a < 0) {
            return rx_error(r, "bad quantifier");
        }
        if (*q == ',') {
            b = -1;
            if (q[1] != '}') {
                b = strtol(q + 1, (char **) &q, 10);
                if (b < 0) {
                    return rx_error(r, "bad quantifier");
                }
            } else {
                q++;
            }
        }
        if (*q != '}') {
            return rx_error(r, "bad quantifier");
        }
        r->p = q + 1;
        if (b == -2) {
            snprintf(buf, sizeof(buf), "{%ld}", a);
        } else if (b == -1) {
            snprintf(buf, sizeof(buf), "{%ld,}", a);
        } else {
            snprintf(buf, sizeof(buf), "{%ld,%ld}", a, b);
        }
    } else {
        return 0;
    }
    if (r->p < r->end && *r->p == '?') {
        r->p++;                         /* lazy: the same strings */
    } else if (r->p < r->end && *r->p == '+') {
        return rx_error(r, "possessive quantifiers are not supported");
    }
    if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?'
                          || *r->p == '{'))
    {
        return rx_error(r, "a quantifier after a quantifier");
    }
    return put(r, buf);
}


static int
rx_seq(rx *r)
{
    const char  *cls;
    int32_t      c;
    int          neg;

    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (put(r, " ") != 0) {
            return -1;
        }
        switch (*r->p) {
        case '(':
            if (rx_group(r) != 0) {
                return -1;
            }
            break;
        case '[':
            if (rx_class(r) != 0) {
                return -1;
            }
            break;
        case '.':
            r->p++;
            if (put(r, "[^\\n]") != 0) {
                return -1;
            }
            break;
        case '^':
            if (r->p != r->src) {
                return rx_error(r, "'^' is supported at the start only");
            }
            r->p++;
            continue;
        case '$':
            if (r->p + 1 != r->end) {
                return rx_error(r, "'$' is supported at the end only");
            }
            r->p++;
            continue;
        case '*': case '+': case '?': case '{':
            return rx_error(r, "nothing to repeat");
        case '\\':
            r->p++;
            if ((c = rx_escape(r, &cls, &neg)) < 0) {
                return -1;
            }
            if (cls != NULL) {
                if (put(r, neg ? "[^" : "[") != 0 || put(r, cls) != 0
                    || put(r, "]") != 0)
                {
                    return -1;
                }
                break;
            }
            if (put(r, "\"") != 0 || put_cp(r, (uint32_t) c) != 0
                || put(r, "\"") != 0)
            {
                return -1;
            }
            break;
        default:
            if ((c = rx_utf8(r)) < 0 || put(r, "\"") != 0
                || put_cp(r, (uint32_t) c) != 0 || put(r, "\"") != 0)
            {
                return -1;
            }
        }
        if (rx_quant(r) != 0) {
            return -1;
        }
    }
    return 0;
}


static int
rx_alt(rx *r)
{
    if (rx_seq(r) != 0) {
        return -1;
    }
    while (r->p < r->end && *r->p == '|') {
        r->p++;
        if (put(r, " |") != 0 || rx_seq(r) != 0) {
            return -1;
        }
    }
    return 0;
}


int
llm_regex_to_gbnf(const char *re, size_t len, char **out, char *err,
    size_t err_len)
{
    rx  r;

    memset(&r, 0, sizeof(r));
    r.src = r.p = re;
    r.end = re + len;
    r.err = err;
    r.err_len = err_len;
    r.out.max = len * 16 + 4096;
    err[0] = '\0';
    if (put(&r, "root ::=") != 0 || rx_alt(&r) != 0) {
        llm_strbuf_free(&r.out);
        return -1;
    }
    if (r.p < r.end) {
        rx_error(&r, "unmatched ')'");
        llm_strbuf_free(&r.out);
        return -1;
    }
    if (put(&r, "\n") != 0) {
        llm_strbuf_free(&r.out);
        return -1;
    }
    *out = r.out.data;
    return 0;
}
