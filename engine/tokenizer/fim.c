/*
 * Fill-in-the-middle tokens and prompts (tokenizer/fim.h).
 *
 * defines: llm_fim_find, llm_fim_prompt
 */
#include "tokenizer/fim.h"

#include <string.h>

/* the triples models ship, by their vocabulary text */
static const char *const  fim_names[][3] = {
    { "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>" },  /* Qwen2.5 */
    { "<fim_prefix>", "<fim_suffix>", "<fim_middle>" },        /* StarCoder */
    { "<fim-prefix>", "<fim-suffix>", "<fim-middle>" },        /* SantaCoder */
    { "\xe2\x96\x81<PRE>", "\xe2\x96\x81<SUF>", "\xe2\x96\x81<MID>" },
                                                        /* CodeLlama (HF) */
    { "<PRE>", "<SUF>", "<MID>" },                      /* CodeLlama (GGUF) */
};


static int32_t
fim_lookup(const llm_tokenizer *t, const char *s)
{
    return llm_token_lookup(t, s, strlen(s));
}


int
llm_fim_find(const llm_tokenizer *t, const gguf_file *g, llm_fim *f)
{
    size_t    i;
    uint32_t  pre, suf, mid;
    int32_t   n = llm_tokenizer_n_vocab(t);

    if (g != NULL
        && gguf_get_u32(g, "tokenizer.ggml.fim_pre_token_id", &pre) == 0
        && gguf_get_u32(g, "tokenizer.ggml.fim_suf_token_id", &suf) == 0
        && gguf_get_u32(g, "tokenizer.ggml.fim_mid_token_id", &mid) == 0
        && pre < (uint32_t) n && suf < (uint32_t) n && mid < (uint32_t) n)
    {
        f->pre = (int32_t) pre;
        f->suf = (int32_t) suf;
        f->mid = (int32_t) mid;
        return 0;
    }

    for (i = 0; i < sizeof(fim_names) / sizeof(fim_names[0]); i++) {
        f->pre = fim_lookup(t, fim_names[i][0]);
        f->suf = fim_lookup(t, fim_names[i][1]);
        f->mid = fim_lookup(t, fim_names[i][2]);
        if (f->pre >= 0 && f->suf >= 0 && f->mid >= 0) {
            return 0;
        }
    }

    f->pre = f->suf = f->mid = -1;
    return -1;
}


/* one id at ids[n] when it fits; the count goes on either way */
static int
fim_put(int32_t *ids, int cap, int n, int32_t id)
{
    if (n < cap) {
        ids[n] = id;
    }
    return n + 1;
}


/* text's ids at ids[n..] (what fits), the count after them */
static int
fim_text(const llm_tokenizer *t, const char *s, size_t len, int32_t *ids,
    int cap, int n)
{
    int  k;

    k = llm_tokenize(t, s, len, 0, 0, n < cap ? ids + n : NULL,
                     n < cap ? cap - n : 0);
    return k < 0 ? -1 : n + k;
}


int
llm_fim_prompt(const llm_tokenizer *t, const llm_fim *f,
    const char *prefix, size_t prefix_len, const char *suffix,
    size_t suffix_len, int32_t *ids, int cap)
{
    int  n = 0;

    if (llm_tokenizer_add_bos(t) && llm_tokenizer_bos(t) >= 0) {
        n = fim_put(ids, cap, n, llm_tokenizer_bos(t));
    }
    n = fim_put(ids, cap, n, f->pre);
    n = fim_text(t, prefix, prefix_len, ids, cap, n);
    if (n < 0) {
        return -1;
    }
    n = fim_put(ids, cap, n, f->suf);
    n = fim_text(t, suffix, suffix_len, ids, cap, n);
    if (n < 0) {
        return -1;
    }
    return fim_put(ids, cap, n, f->mid);
}
