/*
 * SentencePiece-style BPE (Llama 2, Mistral, TinyLlama, stories260K).
 *
 * Design note. Spaces become "▁" (U+2581), and with add_space_prefix one
 * "▁" is put before the text. The text starts as one symbol per UTF-8
 * character; the adjacent pair whose concatenation is a vocabulary piece
 * with the highest score is merged, leftmost first on ties, until no pair
 * is a piece (sentencepiece's BPE encoder; symbols are spans of one buffer,
 * so a pair is looked up without copying). A character that is no piece
 * falls back to its bytes as <0xNN> tokens (or <unk> without them).
 *
 * defines: tok_spm_init, tok_spm_encode, tok_spm_decode_text
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "tokenizer/internal.h"
#include "text/utf8.h"

#define SPM_SPACE      "\xE2\x96\x81"      /* U+2581 "▁" */
#define SPM_SPACE_LEN  3

typedef struct {
    uint32_t    off;           /* span of the escaped text */
    uint32_t    len;           /* 0 once merged into its left neighbour */
    int32_t     id;            /* token of the span, -1 unknown yet */
    int32_t     prev;
    int32_t     next;
} spm_sym;

typedef struct {
    const llm_tokenizer *t;
    const char  *text;         /* escaped text */
    spm_sym     *sym;
    tok_pair    *heap;
    int          n_heap;
} spm_work;


/* pieces the BPE may produce: not control, byte or unknown tokens */
static int
spm_mergeable(const llm_tokenizer *t, int32_t id)
{
    return id >= 0 && (t->tokens[id].type == LLM_TOKEN_NORMAL
                       || t->tokens[id].type == LLM_TOKEN_USER_DEFINED);
}


static void
queue_pair(spm_work *w, int32_t left, int32_t right)
{
    tok_pair p = { 0 };     /* whole: the heap copies it */

    if (left < 0 || right < 0) {
        return;
    }
    p.len = w->sym[left].len + w->sym[right].len;
    p.id = tok_find(w->t, w->text + w->sym[left].off, p.len);
    if (!spm_mergeable(w->t, p.id)) {
        return;
    }
    p.key = -w->t->tokens[p.id].score;     /* the best score first */
    p.left = left;
    p.right = right;
    tok_heap_push(w->heap, &w->n_heap, p);
}


static size_t
escape_spaces(const char *text, size_t len, int add_prefix, char *out)
{
    size_t n = 0;

    if (add_prefix) {
        memcpy(out, SPM_SPACE, SPM_SPACE_LEN);
        n = SPM_SPACE_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(out + n, SPM_SPACE, SPM_SPACE_LEN);
            n += SPM_SPACE_LEN;
        } else {
            out[n++] = text[i];
        }
    }
    return n;
}


static void
emit_symbol(const spm_work *w, const spm_sym *s, tok_out *o)
{
    const llm_tokenizer *t = w->t;
    int32_t id = s->id >= 0 ? s->id : tok_find(t, w->text + s->off, s->len);

    if (spm_mergeable(t, id)) {
        tok_out_push(o, id);
        return;
    }
    for (uint32_t i = 0; i < s->len; i++) {
        int32_t b = t->byte_token[(unsigned char) w->text[s->off + i]];

        if (b >= 0) {
            tok_out_push(o, b);
        } else if (t->unk >= 0) {
            tok_out_push(o, t->unk);
            break;             /* one <unk> per unknown character */
        }
    }
}


/* merges the symbols of esc[start, end) and emits their tokens */
static void
spm_word(spm_work *w, size_t start, size_t end, tok_out *o)
{
    int32_t ns = 0;

    w->n_heap = 0;
    for (size_t i = start; i < end; ns++) {
        size_t k = llm_utf8_lead_len((unsigned char) w->text[i]);

        k = k < end - i ? k : end - i;
        w->sym[ns] = (spm_sym) { (uint32_t) i, (uint32_t) k, -1, ns - 1, -1 };
        if (ns > 0) {
            w->sym[ns - 1].next = ns;
        }
        i += k;
    }
    for (int32_t s = 0; s + 1 < ns; s++) {
        queue_pair(w, s, s + 1);
    }

    while (w->n_heap > 0) {
        tok_pair p = tok_heap_pop(w->heap, &w->n_heap);
        spm_sym *l = &w->sym[p.left], *r = &w->sym[p.right];

        if (l->len == 0 || r->len == 0 || l->len + r->len != p.len) {
            continue;          /* one side changed since it was queued */
        }
        l->len += r->len;
        l->id = p.id;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) {
            w->sym[r->next].prev = p.left;
        }
        queue_pair(w, l->prev, p.left);
        queue_pair(w, p.left, l->next);
    }

    for (int32_t s = ns > 0 ? 0 : -1; s >= 0; s = w->sym[s].next) {
        emit_symbol(w, &w->sym[s], o);
    }
}


static int
is_space_at(const char *s, size_t i, size_t n)
{
    return n - i >= SPM_SPACE_LEN && memcmp(s + i, SPM_SPACE,
                                            SPM_SPACE_LEN) == 0;
}


/* where the word starting at i ends: before a "▁" that follows another
   character (pieces never span that, see tok_spm_init) */
static size_t
word_end(const llm_tokenizer *t, const char *s, size_t i, size_t n)
{
    int prev_space = 0;

    if (!t->spm_word_split) {
        return n;
    }
    for (size_t k = i; k < n; ) {
        int space = is_space_at(s, k, n);

        if (space && k > i && !prev_space) {
            return k;
        }
        prev_space = space;
        k += space ? SPM_SPACE_LEN : 1;
    }
    return n;
}


int
tok_spm_encode(const llm_tokenizer *t, const char *text, size_t len,
    int add_prefix, tok_out *o)
{
    size_t cap = (len + 1) * SPM_SPACE_LEN, n, longest = 0, i, e;
    spm_work w = { .t = t };
    char *esc;
    int rc = -1;

    esc = malloc(cap);
    if (esc == NULL) {
        return -1;
    }
    n = escape_spaces(text, len, add_prefix, esc);
    w.text = esc;
    for (i = 0; i < n; i = e) {
        e = word_end(t, esc, i, n);
        longest = e - i > longest ? e - i : longest;
    }
    w.sym = malloc((longest + 1) * sizeof(spm_sym));
    w.heap = malloc(3 * (longest + 1) * sizeof(tok_pair));
    if (w.sym == NULL || w.heap == NULL) {
        goto done;
    }
    for (i = 0; i < n; i = e) {
        e = word_end(t, esc, i, n);
        if (t->merges != NULL) {
            /* merge ranks from tokenizer.json, as HF's BPE model */
            if (tok_bpe_encode_chars(t, esc + i, e - i, o) != 0) {
                goto done;
            }
        } else {
            spm_word(&w, i, e, o);
        }
    }
    rc = o->oom ? -1 : 0;

done:
    free(esc);
    free(w.sym);
    free(w.heap);
    return rc;
}


/* 1 when no piece has "▁" after another character */
static int
spm_word_split(const llm_tokenizer *t)
{
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->pool + t->tokens[id].text_off;
        size_t n = t->tokens[id].text_len;

        if (!spm_mergeable(t, id)) {
            continue;
        }
        for (size_t k = 1; k < n; k++) {
            if (is_space_at(s, k, n)
                && !(k >= SPM_SPACE_LEN && is_space_at(s, k - SPM_SPACE_LEN, n)))
            {
                return 0;          /* "a▁b" exists: no shortcut */
            }
        }
    }
    return 1;
}


/* the derived tables: the word-split shortcut, the <0xNN> byte tokens */
void
tok_spm_init(llm_tokenizer *t)
{
    t->spm_word_split = spm_word_split(t);
    for (int b = 0; b < 256; b++) {
        char hex[8];
        int32_t id;

        snprintf(hex, sizeof(hex), "<0x%02X>", b);
        id = tok_find(t, hex, 6);
        if (id >= 0 && t->tokens[id].type == LLM_TOKEN_BYTE) {
            t->byte_token[b] = id;
        }
    }
}


static int
hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}


size_t
tok_spm_decode_text(const char *text, size_t len, int type, char *out)
{
    size_t n = 0;

    if (type == LLM_TOKEN_BYTE && len == 6 && memcmp(text, "<0x", 3) == 0
        && text[5] == '>' && hex_digit(text[3]) >= 0
        && hex_digit(text[4]) >= 0)
    {
        out[0] = (char) (hex_digit(text[3]) * 16 + hex_digit(text[4]));
        return 1;
    }
    if (type == LLM_TOKEN_CONTROL || type == LLM_TOKEN_UNKNOWN) {
        memcpy(out, text, len);
        return len;
    }
    for (size_t i = 0; i < len; ) {
        if (len - i >= SPM_SPACE_LEN
            && memcmp(text + i, SPM_SPACE, SPM_SPACE_LEN) == 0)
        {
            out[n++] = ' ';
            i += SPM_SPACE_LEN;
        } else {
            out[n++] = text[i++];
        }
    }
    return n;
}
