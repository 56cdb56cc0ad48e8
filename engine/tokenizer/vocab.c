/*
 * The vocabulary, the bottom of the tokenizer: the token table and its
 * text pool, the text -> id and (left, right) -> merge hash maps, the
 * builder calls loaders add tokens and merges with, the special tokens
 * matched whole in the text, the stop tokens, and the id list encoders
 * append to. Everything here is lookups and tables; it calls nothing
 * above it (bpe.c, spm.c, tokenizer.c, the loaders).
 *
 * defines: tok_hash, tok_find, tok_merge_find, tok_new, tok_vocab_free,
 *          tok_pool_add, tok_add_token, tok_add_merge, tok_specials_init,
 *          tok_special_at, tok_stops_init, tok_out_push
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "tokenizer/internal.h"


/* --- hash maps ---------------------------------------------------------- */

uint32_t
tok_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u;          /* FNV-1a */

    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char) s[i]) * 16777619u;
    }
    return h;
}


static uint32_t
pow2_at_least(uint64_t n)
{
    uint32_t p = 16;

    while (p < n && p < (1u << 30)) {
        p <<= 1;
    }
    return p;
}


int32_t
tok_find(const llm_tokenizer *t, const char *text, size_t len)
{
    uint32_t i = tok_hash(text, len) & t->vocab_mask;

    for ( ;; i = (i + 1) & t->vocab_mask) {
        int32_t id = t->vocab_slots[i];

        if (id < 0) {
            return -1;
        }
        if (t->tokens[id].text_len == len
            && memcmp(tok_text(t, id), text, len) == 0)
        {
            return id;
        }
    }
}


static void
vocab_insert(llm_tokenizer *t, int32_t id)
{
    const tok_entry *e = &t->tokens[id];
    uint32_t i = tok_hash(tok_text(t, id), e->text_len) & t->vocab_mask;

    if (e->text_len == 0
        || tok_find(t, tok_text(t, id), e->text_len) >= 0)
    {
        return;                /* a duplicate text keeps its first id */
    }
    while (t->vocab_slots[i] >= 0) {
        i = (i + 1) & t->vocab_mask;
    }
    t->vocab_slots[i] = id;
}


static uint64_t
merge_key(int32_t left, int32_t right)
{
    /* +1 so that no pair has key 0, the empty slot */
    return ((uint64_t) (uint32_t) (left + 1) << 32) | (uint32_t) (right + 1);
}


static uint32_t
merge_slot(uint64_t key, uint32_t mask)
{
    return (uint32_t) ((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}


int32_t
tok_merge_find(const llm_tokenizer *t, int32_t left, int32_t right,
    int32_t *rank)
{
    uint64_t key = merge_key(left, right);
    uint32_t i;

    if (t->merges == NULL) {
        return -1;
    }
    for (i = merge_slot(key, t->merge_mask); t->merges[i].key != 0;
         i = (i + 1) & t->merge_mask)
    {
        if (t->merges[i].key == key) {
            *rank = t->merges[i].rank;
            return t->merges[i].merged;
        }
    }
    return -1;
}


static int
merges_grow(llm_tokenizer *t)
{
    uint32_t cap = t->merges ? 2 * (t->merge_mask + 1) : 1u << 16;
    tok_merge *m = calloc(cap, sizeof(tok_merge)), *old = t->merges;
    uint32_t old_cap = old ? t->merge_mask + 1 : 0;

    if (m == NULL) {
        return -1;
    }
    for (uint32_t i = 0; i < old_cap; i++) {
        uint32_t s;

        if (old[i].key == 0) {
            continue;
        }
        for (s = merge_slot(old[i].key, cap - 1); m[s].key != 0;
             s = (s + 1) & (cap - 1))
        {
        }
        m[s] = old[i];
    }
    free(old);
    t->merges = m;
    t->merge_mask = cap - 1;
    return 0;
}


/* --- builder ------------------------------------------------------------ */

llm_tokenizer *
tok_new(int kind, int32_t n_vocab)
{
    llm_tokenizer *t = calloc(1, sizeof(*t));
    uint32_t slots = pow2_at_least(2 * (uint64_t) n_vocab);

    if (t == NULL) {
        return NULL;
    }
    t->kind = kind;
    t->n_vocab = n_vocab;
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
    t->tokens = calloc(n_vocab > 0 ? n_vocab : 1, sizeof(tok_entry));
    t->vocab_slots = malloc(slots * sizeof(int32_t));
    t->vocab_mask = slots - 1;
    if (t->tokens == NULL || t->vocab_slots == NULL) {
        tok_vocab_free(t);
        return NULL;
    }
    memset(t->vocab_slots, 0xFF, slots * sizeof(int32_t));
    memset(t->byte_token, 0xFF, sizeof(t->byte_token));
    return t;
}


void
tok_vocab_free(llm_tokenizer *t)
{
    if (t == NULL) {
        return;
    }
    free(t->tokens);
    free(t->pool);
    free(t->vocab_slots);
    free(t->merges);
    free(t->specials);
    free(t);
}


int64_t
tok_pool_add(llm_tokenizer *t, const char *s, size_t len)
{
    size_t off = t->pool_len;

    if (t->pool_len + len + 1 > t->pool_cap) {
        size_t cap = t->pool_cap ? t->pool_cap : 1 << 20;
        char *p;

        while (cap < t->pool_len + len + 1) {
            cap *= 2;
        }
        if (cap > UINT32_MAX || (p = realloc(t->pool, cap)) == NULL) {
            return -1;
        }
        t->pool = p;
        t->pool_cap = cap;
    }
    memcpy(t->pool + off, s, len);
    t->pool[off + len] = '\0';        /* texts read as C strings too */
    t->pool_len += len + 1;
    return (int64_t) off;
}


int
tok_add_token(llm_tokenizer *t, int32_t id, const char *text, size_t len,
    float score, int type)
{
    int64_t off;

    if (id < 0 || id >= t->n_vocab || len > UINT32_MAX) {
        return -1;
    }
    if ((off = tok_pool_add(t, text, len)) < 0) {
        return -1;
    }
    t->tokens[id].text_off = (uint32_t) off;
    t->tokens[id].text_len = (uint32_t) len;
    t->tokens[id].score = score;
    t->tokens[id].type = (uint8_t) (type >= LLM_TOKEN_NORMAL
                                    && type <= LLM_TOKEN_BYTE
                                    ? type : LLM_TOKEN_NORMAL);
    vocab_insert(t, id);
    return 0;
}


int
tok_add_merge(llm_tokenizer *t, const char *left, size_t llen,
    const char *right, size_t rlen)
{
    int32_t l = tok_find(t, left, llen), r = tok_find(t, right, rlen), m;
    int32_t rank = t->n_merges++;
    char small[256], *buf = small;
    uint64_t key;
    uint32_t i;

    if (l < 0 || r < 0) {
        return 0;              /* HF would refuse; a dead merge is harmless */
    }
    if (llen + rlen > sizeof(small) && (buf = malloc(llen + rlen)) == NULL) {
        return -1;
    }
    memcpy(buf, left, llen);
    memcpy(buf + llen, right, rlen);
    m = tok_find(t, buf, llen + rlen);
    if (buf != small) {
        free(buf);
    }
    if (m < 0) {
        return 0;
    }
    if ((t->merges == NULL || 2 * (uint32_t) rank >= t->merge_mask)
        && merges_grow(t) != 0)
    {
        return -1;
    }
    key = merge_key(l, r);
    for (i = merge_slot(key, t->merge_mask); t->merges[i].key != 0;
         i = (i + 1) & t->merge_mask)
    {
        if (t->merges[i].key == key) {
            return 0;          /* the first (lowest) rank wins */
        }
    }
    t->merges[i] = (tok_merge) { key, rank, m };
    return 0;
}


/* --- special and stop tokens -------------------------------------------- */

static int
is_matchable(const tok_entry *e)
{
    return e->piece_len > 0
           && (e->type == LLM_TOKEN_CONTROL || e->type == LLM_TOKEN_UNKNOWN
               || e->type == LLM_TOKEN_USER_DEFINED);
}


/* special tokens grouped by first byte, longest first within a group */
int
tok_specials_init(llm_tokenizer *t)
{
    int32_t n = 0, *s;

    for (int32_t id = 0; id < t->n_vocab; id++) {
        n += is_matchable(&t->tokens[id]);
    }
    s = malloc((n > 0 ? n : 1) * sizeof(int32_t));
    if (s == NULL) {
        return -1;
    }
    n = 0;
    for (int b = 0; b < 256; b++) {
        t->special_first[b] = n;
        for (int32_t id = 0; id < t->n_vocab; id++) {
            const tok_entry *e = &t->tokens[id];

            if (is_matchable(e)
                && (unsigned char) t->pool[e->piece_off] == b)
            {
                int32_t k = n++;

                /* insertion keeps the group sorted by length, descending */
                while (k > t->special_first[b]
                       && t->tokens[s[k - 1]].piece_len < e->piece_len)
                {
                    s[k] = s[k - 1];
                    k--;
                }
                s[k] = id;
            }
        }
    }
    t->special_first[256] = n;
    t->specials = s;
    t->n_specials = n;
    return 0;
}


static void
add_stop(llm_tokenizer *t, int32_t id)
{
    if (id < 0 || t->n_stop >= TOK_MAX_STOP) {
        return;
    }
    for (int i = 0; i < t->n_stop; i++) {
        if (t->stop[i] == id) {
            return;
        }
    }
    t->stop[t->n_stop++] = id;
}


/* end-of-turn texts of the families we know, preferred first */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|eom_id|>",
    "<|endoftext|>", "<|end_of_text|>", "<EOT>", "<end_of_utterance>",
    ("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"),
};


/* a control token's id by text, or -1 */
static int32_t
tok_control(const llm_tokenizer *t, const char *text)
{
    int32_t id = tok_find(t, text, strlen(text));

    return id >= 0 && t->tokens[id].type == LLM_TOKEN_CONTROL ? id : -1;
}


void
tok_stops_init(llm_tokenizer *t)
{
    size_t   n = sizeof(eot_texts) / sizeof(eot_texts[0]);
    int32_t  ret = tok_control(t, "<|return|>");
    int32_t  call = tok_control(t, "<|call|>");
    int      harmony = ret >= 0 && call >= 0;

    add_stop(t, t->eos);
    add_stop(t, t->eot);
    add_stop(t, t->eom);
    /* gpt-oss's Harmony: <|return|> ends the final answer, <|call|> a
     * tool call; <|end|> only ends a message (the analysis channel's,
     * before the final one), so it is no stop there */
    add_stop(t, harmony ? ret : -1);
    add_stop(t, harmony ? call : -1);
    for (size_t i = 0; i < n; i++) {
        int32_t id = tok_find(t, eot_texts[i], strlen(eot_texts[i]));

        if (harmony && strcmp(eot_texts[i], "<|end|>") == 0) {
            continue;
        }

        if (id >= 0 && t->tokens[id].type == LLM_TOKEN_CONTROL) {
            if (t->eot < 0 && i < 4) {
                t->eot = id;
            }
            add_stop(t, id);
        }
    }
}


/* --- encoding ----------------------------------------------------------- */

void
tok_out_push(tok_out *o, int32_t id)
{
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 256;
        int32_t *p = cap > o->cap ? realloc(o->ids, cap * sizeof(int32_t))
                                  : NULL;

        if (p == NULL) {
            o->oom = 1;
            return;
        }
        o->ids = p;
        o->cap = cap;
    }
    o->ids[o->n++] = id;
}


/* a control token is not read from request text: none of its bytes may be
   marked; the longest match failing, a shorter one may still fit before
   the mark */
static int
any_marked(const uint8_t *marks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (marks[i]) {
            return 1;
        }
    }
    return 0;
}


int32_t
tok_special_at(const llm_tokenizer *t, const char *text, size_t len,
    size_t i, int parse_special, const uint8_t *marks)
{
    unsigned char b = (unsigned char) text[i];

    for (int32_t k = t->special_first[b]; k < t->special_first[b + 1]; k++) {
        const tok_entry *e = &t->tokens[t->specials[k]];

        if (!parse_special && e->type != LLM_TOKEN_USER_DEFINED) {
            continue;
        }
        if (e->piece_len <= len - i
            && memcmp(text + i, t->pool + e->piece_off, e->piece_len) == 0
            && (marks == NULL || e->type == LLM_TOKEN_USER_DEFINED
                || !any_marked(marks + i, e->piece_len)))
        {
            return t->specials[k];
        }
    }
    return -1;
}
