/*
 * Synthetic models: random-weight GGUF files of real models' shapes, for
 * measuring speed and memory on shapes whose weights we do not ship
 * (`ngx_llm_engine synth`, docs/perf.md "Synthetic models").
 *
 * Design note. A shape (llama 1b/8b, qwen3moe 30b-a3b, bert bge-small,
 * gpt-oss 20b, and a tiny one of each for tests) gives the
 * architecture's GGUF keys and llama.cpp's tensor names and layouts
 * (gpt-oss: its experts in MXFP4 whatever the --type, as the converter
 * keeps the checkpoint's), so llama.cpp's tools load the file as they
 * load a converted model. The vocabulary is a real one: every
 * tokenizer.* key of a vocab-only GGUF (llama.cpp's ggml-vocab-*.gguf,
 * `make deps`) is copied, and the embedding and output rows follow its
 * token count. Matrices are N(0, 0.02)-like (the sum of four uniforms,
 * one 64-bit draw per value: an 8B shape is 8e9 values), norms 1, biases
 * 0 (gpt-oss's sinks drawn as the matrices), so activations stay in range
 * through the layers. Each tensor draws from its own generator seeded by (seed, its name): the file depends on
 * the seed alone, not on the order or the thread that writes it. Rows are
 * made and written one at a time (no tensor is ever whole in memory): an
 * 8B F16 (16 GB) needs a row of memory.
 *
 * defines: llm_synth_opts, llm_synth_file, llm_synth_shapes
 */
#ifndef NGX_LLM_SYNTH_H
#define NGX_LLM_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char  *arch;          /* llama, qwen3moe, bert, gpt-oss */
    const char  *shape;         /* 1b, 8b, 30b-a3b, bge-small, 20b, tiny */
    const char  *vocab;         /* a GGUF whose tokenizer.* keys are copied */
    const char  *template_path; /* tokenizer.chat_template from a file, or
                                   NULL: the vocab's own, if any */
    uint32_t     type;          /* matrices' ggml type (F16 default) */
    uint32_t     ftype;         /* its general.file_type */
    int          layers;        /* > 0: instead of the shape's */
    uint64_t     seed;
} llm_synth_opts;

/* "llama 1b, llama 8b, ..." for messages */
const char *llm_synth_shapes(void);

/* write o's model to out; a summary line to log (may be NULL); 0, or -1
 * with err set (out is then removed) */
int llm_synth_file(const llm_synth_opts *o, const char *out, FILE *log,
    char *err, size_t err_len);

#endif
