/*
 * WordPiece, BERT's tokenizer, as Hugging Face tokenizers' BertNormalizer,
 * BertPreTokenizer and WordPiece model compute it (BertTokenizerFast):
 *
 *   normalize  drop NUL, U+FFFD and every control (categories Cc Cf Cn Co
 *              Cs) but tab, LF and CR; whitespace becomes a space; a space
 *              either side of each CJK ideograph; when stripping accents
 *              (uncased models): NFD, then the nonspacing marks (Mn) out;
 *              then lowercase, a code point at a time
 *   split      at whitespace (dropped) and around each punctuation mark
 *              (ASCII punctuation, or a Unicode P* category): words
 *   wordpiece  each word greedily, longest vocabulary prefix first, later
 *              pieces looked up as "##rest"; a word with a piece no entry
 *              matches, or of more than max_chars code points, is [UNK]
 *
 * The vocabulary is held as vocab.txt spells it ("word", "##piece"); a
 * GGUF's (llama.cpp's converter writes "\u2581word" and "piece") is turned
 * back by tok_wpm_vocab_text. A token's piece (for the detokenizer) is the
 * word with a space before it, the continuation bare.
 *
 * defines: tok_wpm_encode, tok_wpm_vocab_text, tok_wpm_decode_text
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer/internal.h"
#include "text/utf8.h"


/* Rust's char::is_whitespace (the White_Space property) */
static int
wpm_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0
           || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028
           || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}


static int
wpm_control(uint32_t c)
{
    int cat;

    if (c == '\t' || c == '\n' || c == '\r') {
        return 0;
    }
    cat = utf8proc_category((utf8proc_int32_t) c);
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF
           || cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_CO
           || cat == UTF8PROC_CATEGORY_CS;
}


/* tokenizers' is_chinese_char ranges, as they are */
static int
wpm_cjk(uint32_t c)
{
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf)
           || (c >= 0x20000 && c <= 0x2a6df)
           || (c >= 0x2a700 && c <= 0x2b73f)
           || (c >= 0x2b740 && c <= 0x2b81f)
           || (c >= 0x2b920 && c <= 0x2ceaf)
           || (c >= 0xf900 && c <= 0xfaff)
           || (c >= 0x2f800 && c <= 0x2fa1f);
}


static int
wpm_punct(uint32_t c)
{
    int cat;

    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96)
        || (c >= 123 && c <= 126))
    {
        return 1;
    }
    cat = utf8proc_category((utf8proc_int32_t) c);
    return cat == UTF8PROC_CATEGORY_PC || cat == UTF8PROC_CATEGORY_PD
           || cat == UTF8PROC_CATEGORY_PS || cat == UTF8PROC_CATEGORY_PE
           || cat == UTF8PROC_CATEGORY_PI || cat == UTF8PROC_CATEGORY_PF
           || cat == UTF8PROC_CATEGORY_PO;
}


/* a growable code point buffer */
typedef struct {
    uint32_t  *cp;
    size_t     n;
    size_t     cap;
    int        oom;
} wpm_buf;


static void
wpm_push(wpm_buf *b, uint32_t c)
{
    uint32_t  *p;

    if (b->oom) {
        return;
    }
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 64;
        p = realloc(b->cp, b->cap * sizeof(*p));
        if (p == NULL) {
            b->oom = 1;
            return;
        }
        b->cp = p;
    }
    b->cp[b->n++] = c;
}


/* one code point through the normalizer into out */
static void
wpm_normalize_cp(const llm_tokenizer *t, uint32_t c, wpm_buf *out)
{
    utf8proc_int32_t  d[8];
    utf8proc_ssize_t  n, i;
    int               last;

    if (t->wpm_clean) {
        if (c == 0 || c == 0xfffd || wpm_control(c)) {
            return;
        }
        if (wpm_space(c)) {
            c = ' ';
        }
    }
    n = 1;
    d[0] = (utf8proc_int32_t) c;
    if (t->wpm_strip) {
        last = 0;
        n = utf8proc_decompose_char((utf8proc_int32_t) c, d, 8,
                                    UTF8PROC_DECOMPOSE, &last);
        if (n < 1 || n > 8) {
            n = 1;
            d[0] = (utf8proc_int32_t) c;
        }
    }
    for (i = 0; i < n; i++) {
        if (t->wpm_strip
            && utf8proc_category(d[i]) == UTF8PROC_CATEGORY_MN)
        {
            continue;
        }
        wpm_push(out, t->wpm_lower ? (uint32_t) utf8proc_tolower(d[i])
                                   : (uint32_t) d[i]);
    }
}


/* text (valid UTF-8) normalized into code points */
static int
wpm_normalize(const llm_tokenizer *t, const char *text, size_t len,
    wpm_buf *out)
{
    const unsigned char  *s = (const unsigned char *) text;
    uint32_t              c;
    size_t                i = 0, k;

    while (i < len) {
        k = llm_utf8_decode(s + i, len - i, &c);
        if (k == 0) {
            k = 1;
            c = 0xfffd;
        }
        i += k;
        if (t->wpm_chinese && wpm_cjk(c)) {
            wpm_push(out, ' ');
            wpm_normalize_cp(t, c, out);
            wpm_push(out, ' ');
        } else {
            wpm_normalize_cp(t, c, out);
        }
    }
    return out->oom ? -1 : 0;
}


/* one word (n code points) into pieces; [UNK] when it cannot be spelled */
static int
wpm_word(const llm_tokenizer *t, const uint32_t *w, size_t n, char *buf,
    tok_out *o)
{
    size_t   start = 0, end, i, len;
    int32_t  id;
    int      first = o->n;

    if (n > (size_t) t->wpm_max_chars) {
        tok_out_push(o, t->unk);
        return 0;
    }
    while (start < n) {
        id = -1;
        for (end = n; end > start; end--) {
            len = 0;
            if (start > 0) {
                memcpy(buf, "##", 2);
                len = 2;
            }
            for (i = start; i < end; i++) {
                len += llm_utf8_encode(w[i], buf + len);
            }
            id = tok_find(t, buf, len);
            if (id >= 0) {
                break;
            }
        }
        if (id < 0) {
            o->n = first;          /* the pieces so far are dropped */
            tok_out_push(o, t->unk);
            return 0;
        }
        tok_out_push(o, id);
        start = end;
    }
    return 0;
}


int
tok_wpm_encode(const llm_tokenizer *t, const char *text, size_t len,
    tok_out *o)
{
    wpm_buf   b = { 0 };
    size_t    i, start;
    char     *buf;
    int       rc = 0;

    if (wpm_normalize(t, text, len, &b) != 0) {
        free(b.cp);
        return -1;
    }
    /* a piece: "##" and up to every code point of the word, 4 bytes each */
    buf = malloc(2 + 4 * (b.n + 1));
    if (buf == NULL) {
        free(b.cp);
        return -1;
    }
    for (i = 0, start = 0; i <= b.n && rc == 0; i++) {
        if (i < b.n && !wpm_space(b.cp[i]) && !wpm_punct(b.cp[i])) {
            continue;
        }
        if (i > start) {
            rc = wpm_word(t, b.cp + start, i - start, buf, o);
        }
        if (rc == 0 && i < b.n && wpm_punct(b.cp[i])) {
            rc = wpm_word(t, b.cp + i, 1, buf, o);
        }
        start = i + 1;
    }
    free(buf);
    free(b.cp);
    return rc;
}


size_t
tok_wpm_vocab_text(const char *text, size_t len, int type, char *out)
{
    if (type != LLM_TOKEN_NORMAL
        || (len >= 2 && text[0] == '[' && text[len - 1] == ']'))
    {
        memcpy(out, text, len);
        return len;
    }
    if (len >= 3 && memcmp(text, "\xe2\x96\x81", 3) == 0) {
        memcpy(out, text + 3, len - 3);
        return len - 3;
    }
    memcpy(out, "##", 2);
    memcpy(out + 2, text, len);
    return len + 2;
}


size_t
tok_wpm_decode_text(const char *text, size_t len, int type, char *out)
{
    if (type != LLM_TOKEN_NORMAL) {
        memcpy(out, text, len);
        return len;
    }
    if (len >= 2 && memcmp(text, "##", 2) == 0) {
        memcpy(out, text + 2, len - 2);
        return len - 2;
    }
    out[0] = ' ';
    memcpy(out + 1, text, len);
    return len + 1;
}
