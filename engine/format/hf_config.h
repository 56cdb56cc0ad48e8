/*
 * Small files of a Hugging Face model directory (no weights).
 * defines: llm_hf_read_at, llm_hf_chat_template, llm_hf_context_length
 */
#ifndef NGX_LLM_HF_CONFIG_H
#define NGX_LLM_HF_CONFIG_H

#include <stddef.h>

/* json files of a model directory stay small */
#define HF_MAX_JSON  (64u << 20)

/*
 * The whole of dir/name (dirfd: the directory), NUL-terminated and
 * malloc'ed. NULL with err set; a missing file that is not required leaves
 * err empty.
 */
char *llm_hf_read_at(int dirfd, const char *dir, const char *name,
    int required, size_t *len, char *err, size_t errlen);

/*
 * The chat template: chat_template.jinja, else tokenizer_config.json's
 * "chat_template" (a string, or the "default" entry of a list). malloc'ed;
 * NULL with err empty when there is none, with err set on a fault.
 */
char *llm_hf_chat_template(int dirfd, const char *dir, char *err,
    size_t errlen);

/* config.json's max_position_embeddings, 0 when absent */
int llm_hf_context_length(int dirfd, const char *dir);

#endif
