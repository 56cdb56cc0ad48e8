/*
 * Byte-level BPE (GPT-2 family: GPT-2, SmolLM2, Llama 3, Qwen2).
 *
 * Design note. Text is first cut into words by the family's pre-tokenizer
 * regexes (the exact expressions of its tokenizer.json, run by PCRE2 with
 * UTF + UCP, JIT-compiled once at load). Each word starts as one symbol
 * per byte (the vocabulary has a token for every byte, written in GPT-2's
 * byte-to-unicode alphabet) and the adjacent pair with the lowest merge
 * rank is merged until none is left, leftmost first on ties, exactly as
 * Hugging Face's BPE does. Merges are keyed by (left id, right id), so
 * encoding works on raw bytes and never builds strings; a heap of candidate
 * pairs keeps a long word O(n log n).
 *
 * defines: tok_bpe_init, tok_bpe_pre_regexes, tok_bpe_add_regex,
 *          tok_bpe_gpt2_regex, tok_bpe_encode, tok_bpe_encode_chars,
 *          tok_bpe_decode_text, tok_bpe_free
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "tokenizer/internal.h"
#include "text/utf8.h"


/* --- GPT-2 byte <-> unicode alphabet ------------------------------------ */

/* bytes that stand for themselves; the others map to U+0100 + n in order */
static int
byte_is_printable(int b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC)
           || (b >= 0xAE && b <= 0xFF);
}


static uint32_t
byte_to_codepoint(int b)
{
    int n = 0;

    if (byte_is_printable(b)) {
        return (uint32_t) b;
    }
    for (int i = 0; i < b; i++) {
        n += !byte_is_printable(i);
    }
    return 0x100 + (uint32_t) n;
}


/* -1 when the code point is not in the alphabet */
static int
codepoint_to_byte(uint32_t cp)
{
    uint32_t n = 0;

    if (cp < 0x100) {
        return byte_is_printable((int) cp) ? (int) cp : -1;
    }
    for (int b = 0; b < 256; b++) {
        if (!byte_is_printable(b) && 0x100 + n++ == cp) {
            return b;
        }
    }
    return -1;
}


size_t
tok_bpe_decode_text(const char *text, size_t len, char *out)
{
    const unsigned char *s = (const unsigned char *) text;
    size_t i = 0, n = 0;

    while (i < len) {
        uint32_t cp;
        size_t k = llm_utf8_decode(s + i, len - i, &cp);
        int b = k ? codepoint_to_byte(cp) : -1;

        if (b >= 0) {
            out[n++] = (char) b;
            i += k;
        } else {
            /* not in the alphabet (e.g. an added token): keep as is */
            out[n++] = text[i++];
        }
    }
    return n;
}


/* encodes raw bytes into the byte-level alphabet; out holds 2 * len */
static size_t
bpe_encode_bytes(const unsigned char *s, size_t len, char *out)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        n += llm_utf8_encode(byte_to_codepoint(s[i]), out + n);
    }
    return n;
}


int
tok_bpe_init(llm_tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char enc[4];
        size_t n = llm_utf8_encode(byte_to_codepoint(b), enc);

        t->byte_token[b] = tok_find(t, enc, n);
    }
    return 0;
}


/* --- pre-tokenizer regexes ---------------------------------------------- */

/* the regexes as written in each family's tokenizer.json */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+"               \
    "| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+" \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"  \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*" \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?"                    \
    "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"      \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"  \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"             \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"             \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"             \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_BLOOM " ?[^(\\s|.,!?…。，、।۔،)]+"

typedef struct {
    const char  *names;        /* '|'-separated tokenizer.ggml.pre values */
    int          ignore_merges;
    const char  *re[TOK_MAX_REGEX];
} pre_family;

/* tokenizer.ggml.pre -> regexes, the mapping llama.cpp's llama-vocab.cpp
   makes; "default" is llama.cpp's fallback for BPE files without a name */
static const pre_family pre_families[] = {
    { "gpt-2|phi-2|jina-es|jina-de|jina-v2-es|jina-v2-de|gigachat|mpt|olmo"
      "|jais|exaone4|roberta-bpe|jina-v1-en|jina-v2-code|mellum|a.x-4.0",
      0, { RE_GPT2 } },
    { "llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2",
      1, { RE_LLAMA3 } },
    { "dbrx|smaug-bpe|chatglm-bpe|glm4", 0, { RE_LLAMA3 } },
    { "qwen2|deepseek-r1-qwen|megrez|stablelm2|hunyuan|kormo", 0,
      { RE_QWEN2 } },
    { "smollm|starcoder|refact|command-r|codeshell|exaone|minerva-7b", 0,
      { "\\p{N}", RE_GPT2 } },
    { "tekken", 1, { RE_TEKKEN } },
    { "gpt-4o|llama4", 0, { RE_GPT4O } },
    { "poro-chat|bloom|gpt3-finnish", 0, { RE_BLOOM } },
    { "viking", 0, { RE_BLOOM, "\\p{N}" } },
    { "falcon", 0, { "[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2,
                     "[0-9][0-9][0-9]" } },
    { "default", 0, { "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+",
                      "[0-9][0-9][0-9]" } },
};


static int
name_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; *p; ) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t) (bar - p) : strlen(p);

        if (k == n && memcmp(p, name, n) == 0) {
            return 1;
        }
        p += k + (bar != NULL);
    }
    return 0;
}


static pcre2_code *
compile_regex(const char *re, char *err, size_t errlen)
{
    PCRE2_UCHAR msg[128];
    PCRE2_SIZE at;
    pcre2_code *code;
    int rc;

    code = pcre2_compile((PCRE2_SPTR) re, PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP, &rc, &at, NULL);
    if (code == NULL) {
        pcre2_get_error_message(rc, msg, sizeof(msg));
        snprintf(err, errlen, "tokenizer: regex \"%s\" at %zu: %s", re,
                 (size_t) at, (char *) msg);
        return NULL;
    }
    /* without JIT pcre2_match() falls back to the interpreter */
    (void) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return code;
}


int
tok_bpe_add_regex(llm_tokenizer *t, const char *re, char *err, size_t errlen)
{
    if (t->n_re == TOK_MAX_REGEX) {
        snprintf(err, errlen, "tokenizer: more than %d pre-tokenizer regexes",
                 TOK_MAX_REGEX);
        return -1;
    }
    t->re[t->n_re] = compile_regex(re, err, errlen);
    if (t->re[t->n_re] == NULL) {
        return -1;
    }
    t->n_re++;
    return 0;
}


/* the GPT-2 regex a ByteLevel pre-tokenizer with use_regex applies */
const char *
tok_bpe_gpt2_regex(void)
{
    return RE_GPT2;
}


int
tok_bpe_pre_regexes(llm_tokenizer *t, const char *name, char *err,
    size_t errlen)
{
    size_t n = sizeof(pre_families) / sizeof(pre_families[0]);

    for (size_t i = 0; i < n; i++) {
        const pre_family *f = &pre_families[i];

        if (!name_in_list(f->names, name)) {
            continue;
        }
        t->ignore_merges = f->ignore_merges;
        for (int k = 0; k < TOK_MAX_REGEX && f->re[k]; k++) {
            t->re[k] = compile_regex(f->re[k], err, errlen);
            if (t->re[k] == NULL) {
                return -1;
            }
            t->n_re = k + 1;
        }
        return 0;
    }
    snprintf(err, errlen, "tokenizer: unknown pre-tokenizer \"%s\" "
             "(tokenizer.ggml.pre)", name);
    return -1;
}


void
tok_bpe_free(llm_tokenizer *t)
{
    for (int i = 0; i < t->n_re; i++) {
        pcre2_code_free(t->re[i]);
    }
    t->n_re = 0;
}


/* --- splitting ---------------------------------------------------------- */

typedef struct {
    uint32_t    off;
    uint32_t    len;
} span;


static void
span_push(span *s, size_t *n, size_t off, size_t len)
{
    if (len > 0) {
        s[*n].off = (uint32_t) off;
        s[*n].len = (uint32_t) len;
        (*n)++;
    }
}


/*
 * Splits every span of in by re into matches and the gaps between them
 * (Hugging Face's "Isolated" behaviour). Each span is matched as its own
 * subject, so lookaheads stop at its end as they do in HF. The text is
 * valid UTF-8 (llm_tokenize replaced anything else). -1 on a match error.
 */
static int
split_spans(const pcre2_code *re, pcre2_match_data *md, const char *text,
    const span *in, size_t n_in, span *out, size_t *n_out)
{
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);

    *n_out = 0;
    for (size_t i = 0; i < n_in; i++) {
        PCRE2_SPTR subj = (PCRE2_SPTR) text + in[i].off;
        size_t len = in[i].len, pos = 0, last = 0;

        while (pos < len) {
            int rc = pcre2_match(re, subj, len, pos, PCRE2_NO_UTF_CHECK, md,
                                 NULL);
            if (rc == PCRE2_ERROR_NOMATCH) {
                break;
            }
            if (rc < 0) {
                return -1;
            }
            span_push(out, n_out, in[i].off + last, ov[0] - last);
            span_push(out, n_out, in[i].off + ov[0], ov[1] - ov[0]);
            last = ov[1];
            /* an empty match must not stall the scan */
            pos = ov[1] > ov[0] ? ov[1]
                  : ov[1] + llm_utf8_lead_len(subj[ov[1]]);
        }
        if (last < len) {
            span_push(out, n_out, in[i].off + last, len - last);
        }
    }
    return 0;
}


/* --- merging ------------------------------------------------------------ */

typedef struct {
    int32_t     id;            /* -1 once merged into its left neighbour */
    int32_t     prev;
    int32_t     next;          /* -1 at the end of the word */
} bpe_sym;

typedef struct {
    bpe_sym     *sym;          /* (max word length) */
    tok_pair    *heap;         /* (3 * max word length) */
    int          n_heap;
    char        *enc;          /* (2 * max word length), ignore_merges */
} bpe_work;


static void
queue_pair(const llm_tokenizer *t, bpe_work *w, int32_t left)
{
    tok_pair p = { 0 };     /* whole: the heap copies it */
    int32_t right, rank;

    if (left < 0 || (right = w->sym[left].next) < 0) {
        return;
    }
    p.left = left;
    p.left_id = w->sym[left].id;
    p.right_id = w->sym[right].id;
    if (tok_merge_find(t, p.left_id, p.right_id, &rank) >= 0) {
        p.key = (float) rank;       /* exact: ranks are far below 2^24 */
        tok_heap_push(w->heap, &w->n_heap, p);
    }
}


static void
add_symbol(bpe_work *w, int32_t *n, int32_t id)
{
    w->sym[*n].id = id;
    w->sym[*n].prev = *n - 1;
    w->sym[*n].next = -1;
    if (*n > 0) {
        w->sym[*n - 1].next = *n;
    }
    (*n)++;
}


static void merge_and_emit(const llm_tokenizer *t, bpe_work *w, int32_t n,
    tok_out *o);


static void
bpe_word(const llm_tokenizer *t, bpe_work *w, const unsigned char *s,
    size_t len, tok_out *o)
{
    int32_t n = 0;

    if (t->ignore_merges) {
        int32_t id = tok_find(t, w->enc, bpe_encode_bytes(s, len, w->enc));

        if (id >= 0) {
            tok_out_push(o, id);
            return;
        }
    }

    for (size_t i = 0; i < len; i++) {
        if (t->byte_token[s[i]] >= 0) {       /* none: HF drops the byte */
            add_symbol(w, &n, t->byte_token[s[i]]);
        }
    }
    merge_and_emit(t, w, n, o);
}


/* runs the merges over w->sym[0 .. n) and appends the resulting ids */
static void
merge_and_emit(const llm_tokenizer *t, bpe_work *w, int32_t n, tok_out *o)
{
    w->n_heap = 0;
    for (int32_t i = 0; i + 1 < n; i++) {
        queue_pair(t, w, i);
    }

    while (w->n_heap > 0) {
        tok_pair p = tok_heap_pop(w->heap, &w->n_heap);
        bpe_sym *l = &w->sym[p.left];
        int32_t r = l->next, rank;

        if (l->id != p.left_id || r < 0 || w->sym[r].id != p.right_id) {
            continue;          /* a neighbour changed since it was queued */
        }
        l->id = tok_merge_find(t, l->id, w->sym[r].id, &rank);
        l->next = w->sym[r].next;
        if (l->next >= 0) {
            w->sym[l->next].prev = p.left;
        }
        w->sym[r].id = -1;
        queue_pair(t, w, l->prev);
        queue_pair(t, w, p.left);
    }

    for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = w->sym[i].next) {
        tok_out_push(o, w->sym[i].id);
    }
}


int
tok_bpe_encode(const llm_tokenizer *t, const char *text, size_t len,
    tok_out *o)
{
    pcre2_match_data *md = NULL;
    span *a, *b, *tmp;
    size_t na = 0, nb = 0, longest = 0;
    bpe_work w = { 0 };
    int rc = -1;

    if (len == 0) {
        return 0;
    }
    a = malloc((len + 1) * sizeof(span));
    b = malloc((len + 1) * sizeof(span));
    md = pcre2_match_data_create(1, NULL);
    if (a == NULL || b == NULL || md == NULL) {
        goto done;
    }

    span_push(a, &na, 0, len);
    for (int i = 0; i < t->n_re; i++) {
        if (split_spans(t->re[i], md, text, a, na, b, &nb) != 0) {
            goto done;
        }
        tmp = a, a = b, b = tmp;
        na = nb;
    }

    for (size_t i = 0; i < na; i++) {
        longest = a[i].len > longest ? a[i].len : longest;
    }
    w.sym = malloc(longest * sizeof(bpe_sym));
    w.heap = malloc(3 * longest * sizeof(tok_pair));
    w.enc = malloc(2 * longest + 1);
    if (w.sym == NULL || w.heap == NULL || w.enc == NULL) {
        goto done;
    }

    for (size_t i = 0; i < na; i++) {
        bpe_word(t, &w, (const unsigned char *) text + a[i].off, a[i].len, o);
    }
    rc = o->oom ? -1 : 0;

done:
    free(w.sym);
    free(w.heap);
    free(w.enc);
    free(a);
    free(b);
    pcre2_match_data_free(md);
    return rc;
}


/*
 * Rank BPE over UTF-8 characters with byte fallback: Hugging Face's BPE
 * model for SentencePiece-converted vocabularies (Mistral, Llama 2 as
 * tokenizer.json). text is one word, spaces already "▁".
 */
int
tok_bpe_encode_chars(const llm_tokenizer *t, const char *text, size_t len,
    tok_out *o)
{
    bpe_work w = { 0 };
    int32_t n = 0;

    if (len == 0) {
        return 0;
    }
    /* a character is one symbol or one per byte: at most len symbols */
    w.sym = malloc(len * sizeof(bpe_sym));
    w.heap = malloc(3 * len * sizeof(tok_pair));
    if (w.sym == NULL || w.heap == NULL) {
        free(w.sym);
        free(w.heap);
        return -1;
    }
    for (size_t i = 0; i < len; ) {
        size_t k = llm_utf8_lead_len((unsigned char) text[i]);
        int32_t id;

        k = k < len - i ? k : len - i;
        id = tok_find(t, text + i, k);
        if (id >= 0) {
            add_symbol(&w, &n, id);
        } else {
            int have_all = 1;

            for (size_t b = 0; b < k; b++) {
                have_all &= t->byte_token[(unsigned char) text[i + b]] >= 0;
            }
            for (size_t b = 0; b < k && have_all; b++) {
                add_symbol(&w, &n, t->byte_token[(unsigned char) text[i + b]]);
            }
            if (!have_all && t->unk >= 0) {
                add_symbol(&w, &n, t->unk);
            }
        }
        i += k;
    }
    merge_and_emit(t, &w, n, o);
    free(w.sym);
    free(w.heap);
    return o->oom ? -1 : 0;
}
