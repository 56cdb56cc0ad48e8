/*
 * Fill-in-the-middle: the three tokens a code model was trained to read as
 * "prefix, suffix, now the middle", found once at load, and the prompt
 * they make of a prefix and a suffix (PSM order: <pre> prefix <suf> suffix
 * <mid>, the model writes the middle).
 *
 * defines: llm_fim_find, llm_fim_prompt
 */
#ifndef NGX_LLM_TOKENIZER_FIM_H
#define NGX_LLM_TOKENIZER_FIM_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    int32_t  pre;       /* -1: the model has no FIM tokens */
    int32_t  suf;
    int32_t  mid;
} llm_fim;

/*
 * The FIM tokens of t: tokenizer.ggml.fim_{pre,suf,mid}_token_id when g (a
 * GGUF, may be NULL) has all three, else a known triple of the vocabulary
 * (Qwen2.5-Coder's <|fim_prefix|>..., StarCoder's <fim_prefix>...,
 * CodeLlama's <PRE> <SUF> <MID>). Returns 0, or -1 with f->pre = -1 when
 * there are none.
 */
int llm_fim_find(const llm_tokenizer *t, const gguf_file *g, llm_fim *f);

/*
 * The ids of a FIM prompt: the model's BOS when it adds one, <pre>, the
 * prefix, <suf>, the suffix, <mid>; the texts as plain text (no control
 * token written in them is parsed). Returns the count (like snprintf: more
 * than cap means ids was too small), or -1 when out of memory.
 */
int llm_fim_prompt(const llm_tokenizer *t, const llm_fim *f,
    const char *prefix, size_t prefix_len, const char *suffix,
    size_t suffix_len, int32_t *ids, int cap);

#endif /* NGX_LLM_TOKENIZER_FIM_H */
