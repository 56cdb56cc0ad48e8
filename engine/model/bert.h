/*
 * BERT-family encoders (issue 32): bert (absolute positions, token types,
 * erf GELU, LayerNorms with biases after each block: post-norm) and
 * nomic-bert (rotary in rotate-half order, SwiGLU, no projection biases,
 * no position table), with bidirectional attention. Their weights, from a
 * GGUF with llama.cpp's names and metadata or a Hugging Face directory
 * (BertModel, BertForSequenceClassification, NomicBertModel), renamed to
 * the GGUF names as every HF tensor is (model.c).
 *
 * A cross-encoder (BertForSequenceClassification with one label; GGUF
 * pooling_type rank) also has BERT's pooler (tanh(W x[CLS] + b), GGUF
 * cls.weight; absent in llama.cpp's conversions, which drop it) and the
 * classifier (one logit, cls.output.weight). The loader sets the score
 * hook (model/score.h): pooling CLS, cfg.score LLM_SCORE_CLASSIFIER,
 * m->score_head = classifier(tanh(pooler(h))).
 *
 * The forward is backend/encoder.c's; here only views.
 *
 * defines: llm_bert_layer, llm_bert, llm_bert_arch, llm_bert_config_gguf,
 *          llm_bert_config_hf, llm_bert_hf_name, llm_bert_find_fn,
 *          llm_bert_load,
 *          llm_bert_free
 */
#ifndef NGX_LLM_BERT_H
#define NGX_LLM_BERT_H

#include <cjson/cJSON.h>

#include "model/model.h"

typedef struct {
    llm_tensor   wq, wk, wv;       /* (dim, dim) */
    llm_tensor   wo;               /* (dim, dim) */
    const float *bq, *bk, *bv, *bo;    /* (dim) bert; NULL nomic-bert */
    const float *attn_norm_w;      /* (dim) LayerNorm after attention */
    const float *attn_norm_b;      /* (dim) */
    llm_tensor   up;               /* (hidden_dim, dim) */
    llm_tensor   gate;             /* (hidden_dim, dim) nomic-bert only */
    llm_tensor   down;             /* (dim, hidden_dim) */
    const float *up_b, *down_b;    /* bert: (hidden_dim), (dim); else NULL */
    const float *out_norm_w;       /* (dim) LayerNorm after the FFN */
    const float *out_norm_b;       /* (dim) */
} llm_bert_layer;

typedef struct llm_bert llm_bert;

struct llm_bert {
    int             nomic;         /* nomic-bert: rotary + SwiGLU */
    int             n_types;       /* token type rows (2) */
    llm_tensor      pos_embd;      /* (max_seq_len, dim) bert; data NULL
                                      for nomic-bert */
    llm_tensor      type_embd;     /* (n_types, dim) */
    const float    *embd_norm_w;   /* (dim) LayerNorm of the embeddings */
    const float    *embd_norm_b;   /* (dim) */
    llm_bert_layer *layers;        /* (n_layers) */
    /* cross-encoder (cfg.score LLM_SCORE_CLASSIFIER), else data NULL */
    llm_tensor      pooler;        /* (dim, dim); data NULL: none */
    const float    *pooler_b;      /* (dim) */
    llm_tensor      classifier;    /* (1, dim) */
    const float    *classifier_b;  /* (1) or NULL */
};

/* 1 for "bert", "nomic-bert" (GGUF) and "nomic_bert" (HF model_type) */
int llm_bert_arch(const char *arch);

/* m->cfg of a GGUF encoder (general.architecture read already): its
 * sizes, layer_norm_epsilon, rope base, token types; 0 or -1 (m->err) */
int llm_bert_config_gguf(llm_model *m);
/* the same from config.json (root); a sequence classifier must have one
 * label and becomes a rank-pooled model */
int llm_bert_config_hf(llm_model *m, const cJSON *root);
/* a HF tensor name as its GGUF name into out: 0, 1 to skip it (position
 * ids, an embedder's unused pooler), -1 when it is no part of the model */
int llm_bert_hf_name(const llm_model *m, const char *hf, char *out,
    size_t len);
/* the loader's tensor lookup by GGUF name, either format; NULL if absent */
typedef const gguf_tensor *(*llm_bert_find_fn)(const llm_model *m,
    const char *name);
/* the views of every tensor into m->bert (and m->tok_embd); 0 or -1 */
int llm_bert_load(llm_model *m, llm_bert_find_fn find);
void llm_bert_free(llm_model *m);

#endif
