/*
 * The tokenizer's public face: loading (the builder's last step and the
 * GGUF loader), dispatch to the encoders, llm_tokenize(), the accessors
 * and the incremental detokenizer. It sits above the algorithms, which sit
 * above the vocabulary: vocab.c (tables, lookups, special tokens) <-
 * bpe.c, spm.c <- tokenizer.c <- hf.c; calls go down only.
 *
 * Design note. Everything a request needs is copied into one llm_tokenizer
 * at load time and never written again, so encoding is reentrant: all
 * scratch memory belongs to the call. Special tokens are cut out of the
 * text first (leftmost, then longest, like HF's added-token matcher); the
 * text between them goes to the BPE (tokenizer/bpe.c) or SentencePiece
 * (tokenizer/spm.c) encoder.
 *
 * defines: tok_set_pre, tok_finish, llm_tokenizer_load_gguf,
 *          llm_tokenizer_free, llm_tokenize, llm_tokenizer_*,
 *          llm_token_*, llm_detok_*, llm_detokenize
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include <utf8proc.h>

#include "tokenizer/internal.h"
#include "text/utf8.h"


/* --- the builder's last steps ------------------------------------------- */

int
tok_set_pre(llm_tokenizer *t, const char *name, char *err, size_t errlen)
{
    snprintf(t->pre_name, sizeof(t->pre_name), "%s", name);
    if (t->kind != LLM_TOKENIZER_BPE) {
        return 0;
    }
    return tok_bpe_pre_regexes(t, name, err, errlen);
}


/* decoded bytes of every token, for the detokenizer and special matching */
static int
compute_pieces(llm_tokenizer *t)
{
    char *buf = NULL;
    size_t cap = 0;

    for (int32_t id = 0; id < t->n_vocab; id++) {
        tok_entry *e = &t->tokens[id];
        size_t n;
        int64_t off;

        if (e->text_len + 2 > cap) {
            char *b = realloc(buf, cap = e->text_len + 64);

            if (b == NULL) {
                free(buf);
                return -1;
            }
            buf = b;
        }
        /* tok_text() is re-read each time: tok_pool_add may move the pool */
        if (t->kind == LLM_TOKENIZER_SPM) {
            n = tok_spm_decode_text(tok_text(t, id), e->text_len, e->type,
                                    buf);
        } else if (t->kind == LLM_TOKENIZER_WPM) {
            n = tok_wpm_decode_text(tok_text(t, id), e->text_len, e->type,
                                    buf);
        } else if (e->type == LLM_TOKEN_NORMAL) {
            n = tok_bpe_decode_text(tok_text(t, id), e->text_len, buf);
        } else {
            /* added tokens are stored as raw text, not byte-encoded */
            n = e->text_len;
            memcpy(buf, tok_text(t, id), n);
        }
        if ((off = tok_pool_add(t, buf, n)) < 0) {
            free(buf);
            return -1;
        }
        e->piece_off = (uint32_t) off;
        e->piece_len = (uint32_t) n;
        t->max_piece = n > t->max_piece ? (uint32_t) n : t->max_piece;
    }
    free(buf);
    return 0;
}


int
tok_finish(llm_tokenizer *t, char *err, size_t errlen)
{
    if (compute_pieces(t) != 0 || tok_specials_init(t) != 0) {
        snprintf(err, errlen, "tokenizer: out of memory");
        return -1;
    }
    if (t->kind == LLM_TOKENIZER_BPE) {
        tok_bpe_init(t);
    } else if (t->kind == LLM_TOKENIZER_SPM) {
        tok_spm_init(t);
    }
    tok_stops_init(t);
    return 0;
}


void
llm_tokenizer_free(llm_tokenizer *t)
{
    if (t == NULL) {
        return;
    }
    tok_bpe_free(t);
    tok_vocab_free(t);
}


/* --- UTF-8 -------------------------------------------------------------- */

#define REPLACEMENT      "\xEF\xBF\xBD"      /* U+FFFD */
#define REPLACEMENT_LEN  3


/* a copy of text with each invalid sequence replaced, or NULL if valid;
   with marks (one per byte of text, may be NULL), *out_marks gets the
   copy's: a replacement is marked when a byte it replaces was */
static char *
utf8_repair(const char *text, size_t len, const uint8_t *marks,
    size_t *out_len, uint8_t **out_marks, int *oom)
{
    const unsigned char *s = (const unsigned char *) text;
    size_t i = 0, n, k = 0;
    char *out;
    uint8_t *m = NULL, any;

    while (i < len && llm_utf8_check(s + i, len - i, &n) == LLM_UTF8_VALID) {
        i += n;
    }
    if (i == len) {
        return NULL;
    }
    if ((out = malloc(3 * len)) == NULL
        || (marks != NULL && (m = malloc(3 * len)) == NULL))
    {
        free(out);
        *oom = 1;
        return NULL;
    }
    memcpy(out, text, i);
    if (m != NULL) {
        memcpy(m, marks, i);
    }
    k = i;
    while (i < len) {
        if (llm_utf8_check(s + i, len - i, &n) == LLM_UTF8_VALID) {
            memcpy(out + k, text + i, n);
            if (m != NULL) {
                memcpy(m + k, marks + i, n);
            }
            k += n;
        } else {
            memcpy(out + k, REPLACEMENT, REPLACEMENT_LEN);
            if (m != NULL) {
                any = 0;
                for (size_t j = 0; j < n; j++) {
                    any |= marks[i + j];
                }
                memset(m + k, any, REPLACEMENT_LEN);
            }
            k += REPLACEMENT_LEN;
        }
        i += n;
    }
    *out_len = k;
    *out_marks = m;
    return out;
}


/* --- encoding ----------------------------------------------------------- */

/* NFC / NFKC by libutf8proc; a malloc'd copy or NULL (out of memory) */
static char *
normalize(const llm_tokenizer *t, const char *text, size_t len,
    size_t *out_len)
{
    utf8proc_uint8_t *out = NULL;
    utf8proc_ssize_t n;
    int opts = UTF8PROC_STABLE | UTF8PROC_COMPOSE
               | (t->normalize == TOK_NORM_NFKC ? UTF8PROC_COMPAT : 0);

    n = utf8proc_map((const utf8proc_uint8_t *) text, (utf8proc_ssize_t) len,
                     &out, (utf8proc_option_t) opts);
    if (n < 0) {
        return NULL;
    }
    *out_len = (size_t) n;
    return (char *) out;
}


static int
encode_fragment(const llm_tokenizer *t, const char *text, size_t len,
    int first, tok_out *o)
{
    int prefix = t->add_space_prefix && (first || !t->prefix_first_only)
                 && !(t->prefix_if_no_space && text[0] == ' ');

    if (t->kind == LLM_TOKENIZER_WPM) {
        return tok_wpm_encode(t, text, len, o);
    }
    if (t->normalize != TOK_NORM_NONE) {
        size_t n;
        char *norm = normalize(t, text, len, &n);
        int rc;

        if (norm == NULL) {
            return -1;
        }
        rc = t->kind == LLM_TOKENIZER_SPM
             ? tok_spm_encode(t, norm, n, prefix, o)
             : tok_bpe_encode(t, norm, n, o);
        free(norm);
        return rc;
    }
    if (t->kind == LLM_TOKENIZER_SPM) {
        /* every text between special tokens gets the space prefix, as in
           llama.cpp and HF's per-segment Prepend("▁") normalizer */
        return tok_spm_encode(t, text, len, prefix, o);
    }
    return tok_bpe_encode(t, text, len, o);
}


/* marks (NULL: none) flags the bytes where no control token may match */
static int
encode_text(const llm_tokenizer *t, const char *text, size_t len,
    int parse_special, const uint8_t *marks, tok_out *o)
{
    size_t start = 0, i = 0;

    while (i < len) {
        unsigned char b = (unsigned char) text[i];
        int32_t id = -1;

        if (t->special_first[b] < t->special_first[b + 1]) {
            id = tok_special_at(t, text, len, i, parse_special, marks);
        }
        if (id < 0) {
            i++;
            continue;
        }
        if (i > start
            && encode_fragment(t, text + start, i - start, start == 0, o))
        {
            return -1;
        }
        tok_out_push(o, id);
        i += t->tokens[id].piece_len;
        start = i;
    }
    if (start < len) {
        return encode_fragment(t, text + start, len - start, start == 0, o);
    }
    return 0;
}


int
llm_tokenize(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int parse_special, int32_t *ids, int max_ids)
{
    return llm_tokenize_spans(t, text, len, add_special, parse_special, NULL,
                              0, ids, max_ids);
}


/* a mark per byte of text, set inside the spans (clamped to the text) */
static uint8_t *
spans_to_marks(size_t len, const llm_span *spans, size_t n_spans)
{
    uint8_t *m = calloc(len ? len : 1, 1);

    for (size_t k = 0; m != NULL && k < n_spans; k++) {
        size_t start = spans[k].start, end = spans[k].end;

        if (end > len) {
            end = len;
        }
        if (start < end) {
            memset(m + start, 1, end - start);
        }
    }
    return m;
}


int
llm_tokenize_spans(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int parse_special, const llm_span *spans,
    size_t n_spans, int32_t *ids, int max_ids)
{
    tok_out o = { 0 };
    size_t fixed_len = 0;
    int oom = 0, rc = 0;
    char *fixed;
    uint8_t *marks = NULL, *fixed_marks = NULL;

    /* without control tokens to match, spans change nothing */
    if (n_spans > 0 && parse_special) {
        marks = spans_to_marks(len, spans, n_spans);
        if (marks == NULL) {
            return -1;
        }
    }

    /* PCRE2 and the SPM symbol split need valid UTF-8 */
    fixed = utf8_repair(text, len, marks, &fixed_len, &fixed_marks, &oom);
    if (oom) {
        free(marks);
        return -1;
    }
    if (fixed != NULL) {
        text = fixed;
        len = fixed_len;
        free(marks);
        marks = fixed_marks;
    }

    if (add_special && t->add_bos && t->bos >= 0) {
        tok_out_push(&o, t->bos);
    }
    if (encode_text(t, text, len, parse_special, marks, &o) != 0) {
        rc = -1;
    }
    if (add_special && t->add_eos && t->eos >= 0) {
        tok_out_push(&o, t->post_eos >= 0 ? t->post_eos : t->eos);
    }
    if (o.oom || o.n > INT32_MAX / 2) {
        rc = -1;
    }
    if (rc == 0 && o.n > 0 && max_ids > 0) {
        memcpy(ids, o.ids, (o.n < max_ids ? o.n : max_ids) * sizeof(int32_t));
    }
    if (rc == 0) {
        rc = o.n;
    }
    free(o.ids);
    free(fixed);
    free(marks);
    return rc;
}


/* --- accessors ---------------------------------------------------------- */

int llm_tokenizer_kind(const llm_tokenizer *t) { return t->kind; }
int32_t llm_tokenizer_n_vocab(const llm_tokenizer *t) { return t->n_vocab; }
int32_t llm_tokenizer_bos(const llm_tokenizer *t) { return t->bos; }
int32_t llm_tokenizer_eos(const llm_tokenizer *t) { return t->eos; }
int32_t llm_tokenizer_eot(const llm_tokenizer *t) { return t->eot; }
int llm_tokenizer_add_bos(const llm_tokenizer *t) { return t->add_bos; }
const char *llm_tokenizer_pre(const llm_tokenizer *t) { return t->pre_name; }


int
llm_tokenizer_stop_ids(const llm_tokenizer *t, const int32_t **ids)
{
    *ids = t->stop;
    return t->n_stop;
}


int
llm_token_is_stop(const llm_tokenizer *t, int32_t id)
{
    for (int i = 0; i < t->n_stop; i++) {
        if (t->stop[i] == id) {
            return 1;
        }
    }
    return 0;
}


int
llm_token_type(const llm_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->tokens[id].type
                                      : LLM_TOKEN_UNDEFINED;
}


int
llm_token_is_special(const llm_tokenizer *t, int32_t id)
{
    int type = llm_token_type(t, id);

    return type == LLM_TOKEN_CONTROL || type == LLM_TOKEN_UNKNOWN;
}


const char *
llm_token_text(const llm_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab) {
        return NULL;
    }
    *len = t->tokens[id].text_len;
    return t->pool + t->tokens[id].text_off;
}


const char *
llm_token_piece(const llm_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab) {
        return NULL;
    }
    *len = t->tokens[id].piece_len;
    return t->pool + t->tokens[id].piece_off;
}


int32_t
llm_token_lookup(const llm_tokenizer *t, const char *text, size_t len)
{
    return tok_find(t, text, len);
}


/* --- incremental detokenizer -------------------------------------------- */

size_t
llm_detok_max_out(const llm_tokenizer *t)
{
    /* every byte of held-back + piece may become a 3-byte U+FFFD */
    return 3 * ((size_t) t->max_piece + sizeof(((llm_detok *) 0)->pending));
}


void
llm_detok_init(llm_detok *d, unsigned flags)
{
    memset(d, 0, sizeof(*d));
    d->flags = (uint8_t) flags;
}


/* writes the valid sequences of s, U+FFFD for invalid ones; a trailing
   incomplete sequence is left for the caller: returns bytes consumed */
static size_t
emit_utf8(const unsigned char *s, size_t len, char *out, size_t *k)
{
    size_t i = 0, n;

    while (i < len) {
        int rc = llm_utf8_check(s + i, len - i, &n);

        if (rc == LLM_UTF8_INCOMPLETE) {
            break;
        }
        if (rc == LLM_UTF8_VALID) {
            memcpy(out + *k, s + i, n);
            *k += n;
        } else {
            memcpy(out + *k, REPLACEMENT, REPLACEMENT_LEN);
            *k += REPLACEMENT_LEN;
        }
        i += n;
    }
    return i;
}


/* completes (or rejects) the held-back sequence with the piece's first
   bytes; returns how many piece bytes that used */
static size_t
finish_pending(llm_detok *d, const unsigned char *p, size_t len, char *out,
    size_t *k)
{
    unsigned char buf[8];
    size_t take = len < 4 ? len : 4, used, n = d->n_pending;

    memcpy(buf, d->pending, n);
    memcpy(buf + n, p, take);
    used = emit_utf8(buf, n + take, out, k);
    /* emit_utf8 stops after the first sequence only if the rest is
       incomplete; bytes it consumed beyond the pending ones came from p */
    if (used < n) {
        /* still incomplete: the piece was too short to finish it */
        memcpy(d->pending, buf, n + take);
        d->n_pending = (uint8_t) (n + take);
        return take;
    }
    d->n_pending = 0;
    return used - n;
}


int
llm_detok_push(const llm_tokenizer *t, llm_detok *d, int32_t id, char *out,
    size_t cap)
{
    const unsigned char *p;
    size_t len, k = 0, used;

    if (cap < llm_detok_max_out(t)) {
        return -1;
    }
    if (id < 0 || id >= t->n_vocab
        || ((d->flags & LLM_DETOK_SKIP_SPECIAL) && llm_token_is_special(t, id)))
    {
        return 0;
    }
    p = (const unsigned char *) t->pool + t->tokens[id].piece_off;
    len = t->tokens[id].piece_len;

    /* HF's SentencePiece decoder strips one space, the dummy prefix, from
       the start of the whole text */
    if (!d->started && len > 0 && p[0] == ' '
        && (d->flags & LLM_DETOK_STRIP_SPACE)
        && t->kind == LLM_TOKENIZER_SPM && t->add_space_prefix)
    {
        p++;
        len--;
        d->started = 1;
    }
    d->started |= len > 0;

    if (d->n_pending > 0) {
        used = finish_pending(d, p, len, out, &k);
        p += used;
        len -= used;
    }
    used = emit_utf8(p, len, out, &k);
    if (used < len) {
        memcpy(d->pending, p + used, len - used);
        d->n_pending = (uint8_t) (len - used);
    }
    return (int) k;
}


int
llm_detok_flush(llm_detok *d, char *out, size_t cap)
{
    if (cap < REPLACEMENT_LEN) {
        return -1;
    }
    if (d->n_pending == 0) {
        return 0;
    }
    d->n_pending = 0;
    memcpy(out, REPLACEMENT, REPLACEMENT_LEN);
    return REPLACEMENT_LEN;
}


int
llm_detokenize(const llm_tokenizer *t, const int32_t *ids, int n,
    unsigned flags, char *out, size_t cap)
{
    size_t step = llm_detok_max_out(t), total = 0;
    char *buf = malloc(step);
    llm_detok d;
    int k;

    if (buf == NULL) {
        return -1;
    }
    llm_detok_init(&d, flags);
    for (int i = 0; i <= n; i++) {
        k = i < n ? llm_detok_push(t, &d, ids[i], buf, step)
                  : llm_detok_flush(&d, buf, step);
        if (total < cap) {
            memcpy(out + total, buf,
                   (size_t) k < cap - total ? (size_t) k : cap - total);
        }
        total += (size_t) k;
    }
    free(buf);
    if (total < cap) {
        out[total] = '\0';
    }
    return total > INT32_MAX ? -1 : (int) total;
}


/* --- GGUF loader -------------------------------------------------------- */

static int
gguf_opt_id(const gguf_file *g, const char *key, int32_t n_vocab,
    int32_t *out, char *err, size_t errlen)
{
    uint32_t v;

    if (gguf_find_kv(g, key) == NULL) {
        return 0;
    }
    if (gguf_get_u32(g, key, &v) != 0 || v >= (uint32_t) n_vocab) {
        snprintf(err, errlen, "tokenizer: %s is not a token id below %d",
                 key, (int) n_vocab);
        return -1;
    }
    *out = (int32_t) v;
    return 0;
}


static void
gguf_opt_bool(const gguf_file *g, const char *key, int *out)
{
    int v;

    if (gguf_get_bool(g, key, &v) == 0) {
        *out = v;
    }
}


/* a numeric array of n_vocab elements of the given type, or NULL */
static const uint8_t *
gguf_vocab_array(const gguf_file *g, const char *key, uint32_t want,
    int32_t n_vocab, char *err, size_t errlen, int *bad)
{
    uint32_t type;
    uint64_t n;
    const void *data;

    if (gguf_get_arr(g, key, &type, &n, &data) != 0) {
        return NULL;
    }
    if (type != want || n != (uint64_t) n_vocab) {
        snprintf(err, errlen, "tokenizer: %s has %llu elements of type %u, "
                 "expected %d of type %u", key, (unsigned long long) n,
                 type, (int) n_vocab, want);
        *bad = 1;
        return NULL;
    }
    return data;
}


static int
load_tokens(llm_tokenizer *t, const gguf_file *g, const gguf_kv *tokens,
    char *err, size_t errlen)
{
    const uint8_t *scores, *types;
    int bad = 0;

    scores = gguf_vocab_array(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32,
                              t->n_vocab, err, errlen, &bad);
    types = gguf_vocab_array(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32,
                             t->n_vocab, err, errlen, &bad);
    if (bad) {
        return -1;
    }
    for (int32_t id = 0; id < t->n_vocab; id++) {
        char wpm[256];
        const char *s;
        uint64_t len;
        float score = 0.0f;
        int32_t type = LLM_TOKEN_NORMAL;

        if (gguf_arr_str(tokens, (uint64_t) id, &s, &len) != 0) {
            snprintf(err, errlen, "tokenizer: token %d unreadable", (int) id);
            return -1;
        }
        if (scores) {
            memcpy(&score, scores + 4 * (size_t) id, 4);
        }
        if (types) {
            memcpy(&type, types + 4 * (size_t) id, 4);
        }
        if (t->kind == LLM_TOKENIZER_WPM && len < sizeof(wpm) - 2) {
            len = tok_wpm_vocab_text(s, (size_t) len, type, wpm);
            s = wpm;
        }
        if (tok_add_token(t, id, s, len, score, type) != 0) {
            snprintf(err, errlen, "tokenizer: out of memory");
            return -1;
        }
    }
    return 0;
}


static int
load_merges(llm_tokenizer *t, const gguf_file *g, char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_find_kv(g, "tokenizer.ggml.merges");

    if (kv == NULL || kv->type != GGUF_TYPE_ARRAY
        || kv->arr_type != GGUF_TYPE_STRING)
    {
        snprintf(err, errlen, "tokenizer: a gpt2 (BPE) tokenizer needs the "
                 "string array tokenizer.ggml.merges");
        return -1;
    }
    for (uint64_t i = 0; i < kv->n; i++) {
        const char *s, *sp;
        uint64_t len;

        if (gguf_arr_str(kv, i, &s, &len) != 0) {
            snprintf(err, errlen, "tokenizer: merge %llu unreadable",
                     (unsigned long long) i);
            return -1;
        }
        /* "left right": byte-level texts never hold a raw space */
        sp = memchr(s, ' ', len);
        if (sp == NULL) {
            snprintf(err, errlen, "tokenizer: merge %llu \"%.*s\" has no "
                     "space", (unsigned long long) i, (int) len, s);
            return -1;
        }
        if (tok_add_merge(t, s, (size_t) (sp - s), sp + 1,
                          len - (size_t) (sp - s) - 1) != 0)
        {
            snprintf(err, errlen, "tokenizer: out of memory");
            return -1;
        }
    }
    return 0;
}


static int
load_specials(llm_tokenizer *t, const gguf_file *g, char *err, size_t errlen)
{
    static const struct { const char *key; size_t off; } ids[] = {
        { "tokenizer.ggml.bos_token_id", offsetof(llm_tokenizer, bos) },
        { "tokenizer.ggml.eos_token_id", offsetof(llm_tokenizer, eos) },
        { "tokenizer.ggml.eot_token_id", offsetof(llm_tokenizer, eot) },
        { "tokenizer.ggml.eom_token_id", offsetof(llm_tokenizer, eom) },
        { "tokenizer.ggml.unknown_token_id", offsetof(llm_tokenizer, unk) },
        { "tokenizer.ggml.padding_token_id", offsetof(llm_tokenizer, pad) },
    };

    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        int32_t *field = (int32_t *) ((char *) t + ids[i].off);

        if (gguf_opt_id(g, ids[i].key, t->n_vocab, field, err, errlen)) {
            return -1;
        }
    }
    if (t->kind == LLM_TOKENIZER_WPM) {
        /* llama.cpp's WPM: [CLS] text [SEP] */
        if (gguf_opt_id(g, "tokenizer.ggml.cls_token_id", t->n_vocab,
                        &t->bos, err, errlen)
            || gguf_opt_id(g, "tokenizer.ggml.seperator_token_id",
                           t->n_vocab, &t->eos, err, errlen))
        {
            return -1;
        }
        t->add_bos = t->bos >= 0;
        t->add_eos = t->eos >= 0;
        if (t->unk < 0) {
            snprintf(err, errlen, "tokenizer: a bert vocabulary needs "
                     "tokenizer.ggml.unknown_token_id");
            return -1;
        }
    }
    gguf_opt_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    gguf_opt_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos);
    gguf_opt_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    return 0;
}


static int
load_kind(const gguf_file *g, int *kind, char *err, size_t errlen)
{
    const char *s;
    uint64_t len;

    if (gguf_get_str(g, "tokenizer.ggml.model", &s, &len) != 0) {
        snprintf(err, errlen, "tokenizer: no tokenizer.ggml.model string");
        return -1;
    }
    if (len == 4 && memcmp(s, "gpt2", 4) == 0) {
        *kind = LLM_TOKENIZER_BPE;
    } else if (len == 5 && memcmp(s, "llama", 5) == 0) {
        *kind = LLM_TOKENIZER_SPM;
    } else if (len == 4 && memcmp(s, "bert", 4) == 0) {
        *kind = LLM_TOKENIZER_WPM;
    } else {
        snprintf(err, errlen, "tokenizer: unsupported tokenizer.ggml.model "
                 "\"%.*s\" (supported: gpt2, llama, bert)", (int) len, s);
        return -1;
    }
    return 0;
}


static int
load_pre(llm_tokenizer *t, const gguf_file *g, char *err, size_t errlen)
{
    char name[32] = "default";
    const char *s;
    uint64_t len;

    if (gguf_get_str(g, "tokenizer.ggml.pre", &s, &len) == 0) {
        if (len >= sizeof(name)) {
            snprintf(err, errlen, "tokenizer: unknown pre-tokenizer "
                     "\"%.*s\"", (int) (len < 64 ? len : 64), s);
            return -1;
        }
        memcpy(name, s, len);
        name[len] = '\0';
    }
    if (t->kind == LLM_TOKENIZER_WPM) {
        /* llama.cpp's WPM: uncased (bge, MiniLM, nomic-embed) */
        t->wpm_clean = t->wpm_chinese = t->wpm_strip = t->wpm_lower = 1;
        t->wpm_max_chars = 100;
        snprintf(t->pre_name, sizeof(t->pre_name), "%s", name);
        return 0;
    }
    if (tok_set_pre(t, name, err, errlen) != 0) {
        return -1;
    }
    /* llama.cpp's family defaults, before the file's own flags */
    t->add_bos = t->kind == LLM_TOKENIZER_SPM || t->ignore_merges;
    t->add_space_prefix = t->kind == LLM_TOKENIZER_SPM;
    return 0;
}


llm_tokenizer *
llm_tokenizer_load_gguf(const gguf_file *g, char *err, size_t errlen)
{
    const gguf_kv *tokens = gguf_find_kv(g, "tokenizer.ggml.tokens");
    llm_tokenizer *t;
    int kind;

    if (load_kind(g, &kind, err, errlen) != 0) {
        return NULL;
    }
    if (tokens == NULL || tokens->type != GGUF_TYPE_ARRAY
        || tokens->arr_type != GGUF_TYPE_STRING || tokens->n == 0
        || tokens->n > (1u << 24))
    {
        snprintf(err, errlen, "tokenizer: tokenizer.ggml.tokens is missing "
                 "or not a string array of 1 .. 16M tokens");
        return NULL;
    }
    if ((t = tok_new(kind, (int32_t) tokens->n)) == NULL) {
        snprintf(err, errlen, "tokenizer: out of memory");
        return NULL;
    }
    if (load_pre(t, g, err, errlen) != 0
        || load_tokens(t, g, tokens, err, errlen) != 0
        || (kind == LLM_TOKENIZER_BPE && load_merges(t, g, err, errlen) != 0)
        || load_specials(t, g, err, errlen) != 0
        || tok_finish(t, err, errlen) != 0)
    {
        llm_tokenizer_free(t);
        return NULL;
    }
    return t;
}
