/*
 * The model: configuration read from GGUF metadata ("the blueprint") and
 * weight views into the mmapped file. Nothing is copied or dequantized at
 * load time; a weight is a view (pointer, type, rows, cols, row stride).
 *
 * Design note. Every matrix is stored as ggml stores it: W (rows = output
 * features, cols = input features), one quantized row per output feature,
 * and a matmul computes out = x @ W^T. Tensor parallelism (Megatron style)
 * is a view computation over that layout, never a copy:
 *   column-split (wq, wk, wv, gate, up): rank r owns a range of ROWS
 *     (output features) -> data advanced by r * rows/tp * row_stride;
 *   row-split (wo, down): rank r owns a range of COLS (input features) ->
 *     data advanced by the bytes of r * cols/tp elements, row_stride kept,
 *     and the partial outputs of all ranks are summed (all-reduce).
 * Fields below are annotated with their per-rank shape and split.
 *
 * Architecture quirks (qwen2 QKV bias, qwen3 QK-norm, ...) are flags in
 * llm_config, so one forward pass serves the llama family.
 *
 * Two formats, one set of views. A GGUF file is read as is. A Hugging Face
 * directory (config.json, model.safetensors or shards listed in
 * model.safetensors.index.json) is read by renaming each safetensors
 * tensor to its GGUF name (model.layers.3.self_attn.q_proj.weight ->
 * blk.3.attn_q.weight) and reversing its shape to ggml order; from there
 * the same checks and views apply. F32/F16/BF16 matrices are used in place
 * (mmapped); only 1-D tensors (norms, biases) of F16/BF16 are widened to
 * F32 copies, because the forward reads them as floats.
 * Rotary layout: Hugging Face stores Q/K rows in rotate-half order (pairs
 * i, i + rope_dim/2), which llama.cpp's converter permutes to adjacent
 * pairs for llama GGUFs. We never permute: a HF directory always runs
 * with rope_neox = 1, a llama GGUF with 0, a qwen GGUF with 1.
 *
 * defines: llm_config, llm_layer, llm_model, llm_model_load,
 *          llm_model_load_fd, llm_model_free, llm_model_config_json,
 *          llm_model_weight_bytes,
 *          llm_model_rope_inv_freq, llm_model_rope_inv_freq_local,
 *          llm_config_layer_window, llm_config_kv_layout,
 *          llm_model_tokenizer,
 *          llm_model_chat_template, llm_hf_chat_template,
 *          llm_model_pooling_gguf, llm_model_pooling_hf,
 *          llm_model_own, llm_model_fail
 */
#ifndef NGX_LLM_MODEL_H
#define NGX_LLM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "model/kv.h"
#include "matmul.h"
#include "format/safetensors.h"
#include "tokenizer/tokenizer.h"

#define LLM_ARCH_MAX  32

typedef struct {
    char      arch[LLM_ARCH_MAX];  /* general.architecture: llama, ... */
    int       dim;                 /* embedding_length */
    int       n_layers;            /* block_count */
    int       n_heads;             /* attention.head_count */
    int       n_kv_heads;          /* attention.head_count_kv (GQA) */
    int       head_dim;            /* dim / n_heads (key_length if given) */
    int       hidden_dim;          /* feed_forward_length */
    int       vocab_size;          /* rows of token_embd */
    int       max_seq_len;         /* context_length */
    int       rope_dim;            /* rope.dimension_count (<= head_dim) */
    float     rope_theta;          /* rope.freq_base */
    float     norm_eps;            /* attention.layer_norm_rms_epsilon */
    int       tied_output;         /* no output.weight: logits use token_embd */
    /* architecture quirks, all 0 for llama */
    int       qkv_bias;            /* qwen2: attn_{q,k,v}.bias */
    int       qk_norm;             /* qwen3: attn_{q,k}_norm per head */
    int       rope_neox;           /* qwen, and every HF directory: rotate
                                      halves (x[i], x[i+d/2]), not GGUF
                                      llama's adjacent pairs */
    int       sliding_window;      /* mistral, gemma3: attend to the
                                      last N positions only; 0 = all */
    int       swa_pattern;         /* gemma3: layer i is global (no
                                      window) when (i + 1) % swa_pattern
                                      is 0; 0: the window on every layer */
    /* gemma3 (docs/models.md): GeGLU (tanh GELU), norms after attention
       and FFN, embeddings times embd_scale, own rope for local layers */
    int       gemma;
    float     embd_scale;          /* sqrt(dim) (float), else 1 */
    float     att_scale;           /* query_pre_attn_scalar^-0.5, else
                                      head_dim^-0.5 */
    float     rope_theta_local;    /* sliding layers' rope base (gemma3:
                                      rope_local_base_freq), else theta */
    float     rope_linear;         /* global layers: inv_freq / this
                                      (linear scaling, 4B-27B: 8), else 1 */
    /* llama3 rope scaling (Llama 3.1+): lower frequencies are slowed
       down; GGUF stores the result per frequency, HF the parameters */
    const float *rope_freqs;       /* GGUF: (rope_dim/2) divisors of
                                      inv_freq (rope_freqs.weight), or NULL */
    int       rope_llama3;         /* HF: rope_scaling type "llama3" */
    float     rope_factor;         /* HF: factor */
    float     rope_low_freq_factor;
    float     rope_high_freq_factor;
    float     rope_orig_ctx;       /* HF: original_max_position_embeddings */
    /* YaRN (gpt-oss, long-context Qwen): inv_freq blends interpolation
       (/ rope_factor) and extrapolation by a ramp over the frequencies
       between the beta_fast and beta_slow rotations of rope_orig_ctx;
       cos and sin times the attention factor, folded into att_scale */
    int       rope_yarn;
    float     rope_yarn_beta_fast; /* default 32 */
    float     rope_yarn_beta_slow; /* default 1 */
    int       rope_yarn_truncate;  /* floor/ceil the ramp's ends (HF
                                      "truncate", default true; llama.cpp
                                      always) */
    float     rope_yarn_attn;      /* attention_factor, default 0.1 ln(factor)
                                      + 1 */
    /* mixture of experts (qwen3moe, moe.h): 0 experts = dense FFN */
    int       n_expert;            /* expert_count */
    int       n_expert_used;       /* expert_used_count: top-k per token */
    int       expert_ff;           /* expert_feed_forward_length */
    int       expert_norm;         /* renormalise the top-k weights to sum
                                      1 (HF norm_topk_prob) */
    /* gpt-oss (model/gpt_oss.h): attention sinks, an output bias,
       router and expert biases (the layer's views), and: */
    int       gpt_oss;
    int       router_topk_softmax; /* softmax over the top-k logits only */
    int       swiglu_oai;          /* experts' clamped SwiGLU
                                      (activation.h) */
    /* embedders (model/pool.h, pool_config.c): LLM_POOL_NONE for a
       generation model */
    int       pooling;             /* enum llm_pool_type */
    int       pool_normalize;      /* L2-normalise the pooled vector */
    int       matryoshka;          /* trained for truncation (dimensions) */
    /* encoders (bert.h): bidirectional, one forward a sequence, no KV;
       a cross-encoder pools CLS into its score head (cfg.score) */
    int       encoder;             /* bert, nomic-bert */
    int       nomic;               /* nomic-bert: rotary, SwiGLU, no biases */
    int       n_types;             /* token types (bert's segment ids) */
    /* score models (rerankers, model/score.h): LLM_SCORE_NONE else */
    int       score;               /* enum llm_score_type */
    int32_t   score_yes;           /* LLM_SCORE_YES_NO: the output rows */
    int32_t   score_no;
} llm_config;

/* llm_tensor, the 2-D weight view (data, type, rows, cols, row_stride),
 * and its shard views llm_tensor_rows/llm_tensor_cols come from the
 * kernels library, so the loader's views feed llm_matmul directly. */

typedef struct {
    const float *attn_norm;        /* (dim) */
    llm_tensor   wq;               /* (n_heads*head_dim/tp, dim) column-split */
    llm_tensor   wk;               /* (n_kv_heads*head_dim/tp, dim) column-split */
    llm_tensor   wv;               /* (n_kv_heads*head_dim/tp, dim) column-split */
    llm_tensor   wo;               /* (dim, n_heads*head_dim/tp) row-split */
    const float *bq;               /* (n_heads*head_dim/tp) qkv_bias, else NULL */
    const float *bk;               /* (n_kv_heads*head_dim/tp) or NULL */
    const float *bv;               /* (n_kv_heads*head_dim/tp) or NULL */
    const float *q_norm;           /* (head_dim) qk_norm, else NULL */
    const float *k_norm;           /* (head_dim) qk_norm, else NULL */
    const float *attn_post_norm;   /* (dim) gemma3: on att @ wo^T */
    const float *attn_sinks;       /* (n_heads/tp) gpt-oss: a logit per
                                      head in the softmax's denominator
                                      (attention.h), else NULL */
    const float *bo;               /* (dim) gpt-oss: attn_output.bias, or
                                      NULL; tp 1 only */
    const float *ffn_norm;         /* (dim) */
    const float *ffn_post_norm;    /* (dim) gemma3: on the FFN's output */
    llm_tensor   w_gate;           /* (hidden_dim/tp, dim) column-split */
    llm_tensor   w_up;             /* (hidden_dim/tp, dim) column-split */
    llm_tensor   w_down;           /* (dim, hidden_dim/tp) row-split */
    /* MoE layers (cfg.n_expert > 0) have these instead of the three
       above, each expert a 2-D view (moe.h); tp 1 only */
    llm_tensor   router;           /* (n_expert, dim) ffn_gate_inp */
    llm_tensor  *exp_gate;         /* (n_expert) views (expert_ff, dim) */
    llm_tensor  *exp_up;           /* (n_expert) views (expert_ff, dim) */
    llm_tensor  *exp_down;         /* (n_expert) views (dim, expert_ff) */
    /* gpt-oss's biases, else NULL */
    const float *router_b;         /* (n_expert) ffn_gate_inp.bias */
    const float *exp_gate_b;       /* (n_expert, expert_ff) */
    const float *exp_up_b;         /* (n_expert, expert_ff) */
    const float *exp_down_b;       /* (n_expert, dim) */
} llm_layer;

typedef struct llm_model_s {
    llm_config   cfg;
    int          tp_rank;          /* this rank's shard, 0..tp_size-1 */
    int          tp_size;          /* ranks in the group (docs/tp.md) */
    llm_tensor   tok_embd;         /* (vocab_size, dim) replicated */
    const float *out_norm;         /* (dim) replicated */
    llm_tensor   output;           /* (vocab_size, dim) replicated; the same
                                      view as tok_embd when tied_output */
    llm_layer   *layers;           /* (n_layers) */
    gguf_file    gguf;             /* GGUF: owns the mapping the views point
                                      into (HF: empty, n_tensors 0) */
    char        *path;             /* the file or directory, for messages */
    int          hf;               /* loaded from a Hugging Face directory */
    st_file     *st;               /* HF: (n_st) mapped safetensors files */
    int          n_st;
    gguf_tensor *hf_tensors;       /* HF: (n_hf_tensors) the files' tensors
                                      under GGUF names, ggml shape order */
    int          n_hf_tensors;
    float      **owned;            /* (n_owned) F32 copies of 1-D tensors,
                                      rope factors: freed with the model */
    int          n_owned;
    llm_tensor  *experts;          /* (n_layers, 3, n_expert) the expert
                                      views the layers point into */
    struct llm_bert *bert;         /* an encoder's own views (bert.h),
                                      else NULL */
    /* a cross-encoder's head (model/score.h, LLM_SCORE_CLASSIFIER): the
       pooled row h (dim) into one logit; 0, or -1. NULL: none */
    int        (*score_head)(const struct llm_model_s *m, const float *h,
                             float *logit);
    char         err[768];         /* "<file>: <fault>" after a failure */
} llm_model;

/* n bytes owned by the model (freed with it), or NULL */
void *llm_model_own(llm_model *m, size_t n);
/* a loader's failure: m->err = "<path>: <fault>" (printf's fmt); -1 */
int llm_model_fail(llm_model *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* the pooling of a GGUF (<arch>.pooling_type) or a sentence-transformers
 * directory (modules.json) into m->cfg; none leaves LLM_POOL_NONE. 0, or
 * -1 with m->err naming what is not supported (pool_config.c) */
int llm_model_pooling_gguf(llm_model *m);
int llm_model_pooling_hf(llm_model *m, int dirfd);

/*
 * Load a llama-family model, a GGUF file or a Hugging Face directory, for
 * tensor-parallel rank tp_rank of tp_size (0 and 1 for a single device).
 * Every tensor's shape is checked against the config. 0 on success; -1
 * with m->err set. m is always safe to free.
 * llm_model_load_fd takes an open GGUF file or an open directory (O_PATH
 * or O_RDONLY | O_DIRECTORY is enough: files are opened with openat); the
 * caller keeps owning fd.
 */
int llm_model_load(llm_model *m, const char *path, int tp_rank, int tp_size);
int llm_model_load_fd(llm_model *m, int fd, const char *path_for_messages,
    int tp_rank, int tp_size);
void llm_model_free(llm_model *m);
/*
 * Only the configuration of a Hugging Face config.json (text, len bytes;
 * dir names its directory in messages) into m->cfg, vocab_size included,
 * with the loader's checks: for the memory planner, which plans models it
 * does not load. 0, or -1 with m->err set; m holds nothing to free.
 */
int llm_model_config_json(llm_model *m, const char *dir, const char *text,
    size_t len);

/* the rope_dim/2 rotary frequencies, as transformers computes them (float
 * pow), divided by the llama3 scaling factors when the model has them;
 * of a global layer (gemma3: theta and linear scaling) */
void llm_model_rope_inv_freq(const llm_model *m, float *inv_freq);
/* the same for a sliding-window layer (gemma3: its own base, no scaling;
 * any other model: the global frequencies) */
void llm_model_rope_inv_freq_local(const llm_model *m, float *inv_freq);
/* the window of a layer: cfg->sliding_window, or 0 for a global layer */
int llm_config_layer_window(const llm_config *c, int layer);
/* the KV layer groups (kv.h, "Layer kinds"), and where group/slot are not
 * NULL each layer's group and slot ((n_layers) each); 0, or -1 (no
 * memory) */
int llm_config_kv_layout(const llm_config *c, llm_kv_layout *lo,
    int *group, int *slot);

/*
 * The model's tokenizer: GGUF metadata, or DIR/tokenizer.json (+
 * tokenizer_config.json) of a HF directory. NULL with err set on failure.
 */
llm_tokenizer *llm_model_tokenizer(const llm_model *m, char *err,
    size_t errlen);
/*
 * The model's chat template as a malloc'ed NUL-terminated copy: GGUF
 * tokenizer.chat_template, or chat_template of a HF directory's
 * tokenizer_config.json (a string, or the "default" entry of a list of
 * named templates). NULL when there is none (err "") or on a fault (err
 * says which).
 */
char *llm_model_chat_template(const llm_model *m, char *err, size_t errlen);
/* the same for a HF directory open as dirfd, without loading its weights
 * (for nginx at config time); dir names it in messages */
char *llm_hf_chat_template(int dirfd, const char *dir, char *err,
    size_t errlen);

/* bytes of weights one forward step reads for one token on this rank
 * (every matrix once plus one embedding row): the roofline's numerator */
uint64_t llm_model_weight_bytes(const llm_model *m);

#endif
