/*
 * The engine's defaults: what an llm_engine block, the engine's command
 * line and the library's option structs give a setting nobody set. One
 * home, constants only, so every layer may include it (docs/architecture.md):
 * the module (ngx_http_llm_module.c), the engine process (server_opts.c),
 * the scheduler and the backends read these and nothing else.
 */
#ifndef NGX_LLM_DEFAULTS_H
#define NGX_LLM_DEFAULTS_H

#define LLM_DEFAULT_THREADS             2      /* CPU backend */
#define LLM_DEFAULT_TENSOR_PARALLEL     1
#define LLM_DEFAULT_MAX_NUM_SEQS        64     /* sequences in a batch */
#define LLM_DEFAULT_MAX_MODEL_LEN       8192   /* capped by the model's */
#define LLM_DEFAULT_MAX_QUEUED          256    /* waiting; past it: 429 */
#define LLM_DEFAULT_KV_CACHE_BYTES      (1ULL << 30)
#define LLM_DEFAULT_READY_TIMEOUT_MS    30000
#define LLM_DEFAULT_PREFIX_CACHING      1
/* prompt-lookup speculative decoding (docs/scheduler.md): off; when on,
   drafts per step and the n-gram looked up */
#define LLM_DEFAULT_SPEC_NGRAM          0
#define LLM_DEFAULT_SPEC_DRAFT_TOKENS   5
#define LLM_DEFAULT_SPEC_NGRAM_SIZE     3
#define LLM_SPEC_MAX_DRAFT              16
#define LLM_SPEC_MAX_NGRAM              8
#define LLM_DEFAULT_BATCH_SHARE         25     /* %: a batch class's share
                                                  of a step while a lower
                                                  class runs (scheduler.h) */
#define LLM_DEFAULT_KV_PREALLOC         1      /* kv_cache_prealloc on */
#define LLM_KV_BLOCK_SIZE_DEFAULT       16     /* tokens per KV block */
/* a request body's bytes: llm_max_body_size's default and the parser's
   (api/request.c) */
#define LLM_DEFAULT_MAX_BODY            (4u << 20)

/*
 * Tokens per step (chunked-prefill budget), by backend. CPU: 256, because
 * a 2048-token chunk stalls every other stream for seconds and measured no
 * faster for long prompts (docs/perf.md); a GPU step takes 2048 in ms.
 */
#define LLM_DEFAULT_MAX_BATCHED_TOKENS_CPU   256
#define LLM_DEFAULT_MAX_BATCHED_TOKENS_CUDA  2048

#define llm_default_max_batched_tokens(is_cuda)                              \
    ((is_cuda) ? LLM_DEFAULT_MAX_BATCHED_TOKENS_CUDA                         \
               : LLM_DEFAULT_MAX_BATCHED_TOKENS_CPU)

#endif
