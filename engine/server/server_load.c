/*
 * Model loading, on a thread of its own so that the event loop answers
 * pings meanwhile: the model (GGUF or a Hugging Face directory), its facts
 * in the ring, the memory plan (engine/model/plan.h), the backend, the
 * scheduler with the grammar compiler, and a warm-up generation before
 * READY. A failure is the ring's FAILED with its reason.
 *
 * defines: llm_loader_thread
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/encoder.h"
#include "format/gguf.h"
#include "grammar/grammar.h"
#include "isa.h"
#include "model/kv.h"
#include "model/model.h"
#include "model/plan.h"
#include "model/pool.h"
#include "model/score.h"
#include "sched/compile.h"
#include "sched/scheduler.h"
#include "server/log.h"
#include "server/server_int.h"
#include "params/sampling.h"
#include "tokenizer/tokenizer.h"


/* ---------------------------------------------------------------------- */
/* model loading, off the event loop so pings are answered meanwhile      */

static void
llm_copy_str(char *dst, size_t size, const gguf_file *g, const char *key)
{
    uint64_t     len;
    const char  *s;

    if (gguf_get_str(g, key, &s, &len) != 0) {
        return;
    }
    if (len >= size) {
        len = size - 1;
    }
    memcpy(dst, s, len);
    dst[len] = '\0';
}


static void
llm_fill_facts(llm_model_facts *f, const llm_model *m)
{
    uint32_t            t, best;
    uint64_t            i, n, ne, bytes_by_type[GGML_TYPE_COUNT] = { 0 };
    const char         *base;
    const gguf_tensor  *tensors;

    snprintf(f->arch, sizeof(f->arch), "%s", m->cfg.arch);
    if (m->hf) {
        /* a Hugging Face directory: its name, its safetensors */
        base = strrchr(m->path, '/');
        snprintf(f->name, sizeof(f->name), "%s", base ? base + 1 : m->path);
        tensors = m->hf_tensors;
        n = (uint64_t) m->n_hf_tensors;
    } else {
        llm_copy_str(f->name, sizeof(f->name), &m->gguf, "general.name");
        tensors = m->gguf.tensors;
        n = m->gguf.n_tensors;
    }
    f->context_length = m->cfg.max_seq_len;
    f->n_layers = m->cfg.n_layers;
    f->dim = m->cfg.dim;
    f->n_heads = m->cfg.n_heads;
    f->n_kv_heads = m->cfg.n_kv_heads;
    f->vocab_size = m->cfg.vocab_size;
    f->pooling = (uint32_t) m->cfg.pooling;
    f->matryoshka = (uint32_t) m->cfg.matryoshka;
    f->score = (uint32_t) m->cfg.score;

    for (i = 0; i < n; i++) {
        const gguf_tensor *tn = &tensors[i];

        ne = 1;
        for (t = 0; t < tn->n_dims; t++) {
            ne *= tn->ne[t];
        }
        f->n_params += ne;
        f->weight_bytes += tn->nbytes;
        if (tn->type < GGML_TYPE_COUNT) {
            bytes_by_type[tn->type] += tn->nbytes;
        }
    }

    best = 0;
    for (t = 0; t < GGML_TYPE_COUNT; t++) {
        if (bytes_by_type[t] > bytes_by_type[best]) {
            best = t;
        }
    }
    snprintf(f->file_type, sizeof(f->file_type), "%s", ggml_type_name(best));
}


/*
 * The memory plan (engine/model/plan.h, docs/operations.md): weights, KV
 * bytes per token, how many blocks and tokens the pool holds, how many
 * full-length sequences fit; the same rule `ngx_llm_engine plan` prints.
 * On the CPU the pool and workspaces must fit what this machine still has
 * (the weights are a file mapping the kernel can page); the CUDA backend
 * checks its device itself.
 */
static int
llm_memory_plan(llm_server *s, llm_backend_options *bo, int *max_model_len)
{
    char               msg[256];
    llm_plan           p;
    const char        *what;
    llm_plan_shape     sh;
    llm_plan_options   po;

    llm_plan_shape_of(&sh, &s->model);
    llm_server_plan_options(&po, &s->opt);

    /* the CUDA backend checks its device itself (backend_cuda.cu) */
    what = "MemAvailable";
    if (po.backend == LLM_PLAN_CPU) {
        po.device_bytes = llm_plan_host_available(&what);
    }

    if (llm_plan_compute(&p, &sh, &po) != 0) {
        llm_log(LLM_LOG_ERR, "%s", p.err);
        llm_ring_fail(s, p.err);
        return -1;
    }
    *max_model_len = p.max_model_len;

    llm_backend_options_default(bo, &s->model);
    bo->n_threads = s->opt.threads;
    bo->kv_block_size = po.kv_block_size;
    bo->kv_n_blocks = p.kv_blocks;
    bo->max_batch_tokens = s->opt.max_batched_tokens;
    bo->kv_dtype = s->opt.kv_dtype;
    bo->kv_prealloc = s->opt.kv_prealloc;

    llm_log(LLM_LOG_NOTICE, "memory plan: weights %llu bytes, KV %zu bytes "
            "per token (%s), %d blocks of %d tokens (%d tokens, %llu bytes), "
            "%d sequences of max_model_len %d fit; workspace %llu bytes, "
            "%llu bytes in all per rank",
            (unsigned long long) s->ring->model.weight_bytes,
            p.kv_token_bytes, po.backend == LLM_PLAN_CUDA ? "bf16"
                              : llm_kv_dtype_name(s->opt.kv_dtype),
            p.kv_blocks, po.kv_block_size, p.kv_tokens,
            (unsigned long long) p.kv_pool_bytes * po.tp, p.seqs_fit,
            p.max_model_len, (unsigned long long) p.workspace_bytes,
            (unsigned long long) p.total_bytes);

    if (s->model.cfg.encoder) {
        llm_log(LLM_LOG_NOTICE, "memory plan: an encoder keeps no KV: no "
                "pool allocated, kv_cache_memory unused; %d blocks count "
                "admissions only", p.kv_blocks);
    }

    if (p.device_fit == 0) {
        snprintf(msg, sizeof(msg), "memory plan does not fit: KV pool and "
                 "workspace need %llu bytes, %s is %llu bytes (lower "
                 "kv_cache_memory)", (unsigned long long) p.need_bytes, what,
                 (unsigned long long) po.device_bytes);
        llm_log(LLM_LOG_ERR, "%s", msg);
        llm_ring_fail(s, msg);
        return -1;
    }

    if (po.device_bytes > 0
        && p.need_bytes + p.weight_bytes * po.tp > po.device_bytes)
    {
        llm_log(LLM_LOG_WARN, "memory plan: weights, KV pool and workspace "
                "(%llu bytes) exceed %s (%llu bytes): the weights will be "
                "paged from disk",
                (unsigned long long) (p.need_bytes + p.weight_bytes * po.tp),
                what, (unsigned long long) po.device_bytes);
    }

    return 0;
}


/*
 * A short greedy generation must work before health says ready (an
 * encoder: one forward of 4 tokens, outside the batcher): a 4-token
 * prefill step, then decode steps, so both step shapes have run. The
 * workspaces were touched when allocated (docs/operations.md,
 * pre-allocation); a longer prefill touches nothing more and costs every
 * engine restart (32 tokens: +0.5 s measured in t/010 on a busy CPU).
 */
static int
llm_warm_up(llm_server *s, llm_sched *sched)
{
    int            i, rc;
    char           err[256];
    int32_t        prompt[4];
    llm_seq       *seq;
    llm_request    req;
    llm_sched_stats st;

    for (i = 0; i < 4; i++) {
        prompt[i] = (i * 7 + 1) % s->model.cfg.vocab_size;
    }
    if (s->model.cfg.encoder) {
        /* an encoder generates nothing: one forward of its 4 tokens */
        float  hidden[4 * 4096];

        if (s->model.cfg.dim > 4096
            || llm_encoder_forward(&s->model, NULL, prompt, NULL, 4, hidden,
                                   err, sizeof(err)) != 0)
        {
            llm_log(LLM_LOG_ERR, "warm-up forward failed: %s",
                    s->model.cfg.dim > 4096 ? "dim past 4096" : err);
            llm_ring_fail(s, "warm-up forward failed");
            return -1;
        }
        return 0;
    }

    memset(&req, 0, sizeof(req));
    req.prompt = prompt;
    req.n_prompt = 4;
    llm_sampling_params_default(&req.sampling);
    req.sampling.temperature = 0;
    req.max_tokens = 4;
    req.ignore_eos = 1;

    if (llm_sched_add(sched, &req, &seq, err, sizeof(err)) != 0) {
        llm_log(LLM_LOG_ERR, "warm-up refused: %s", err);
        llm_ring_fail(s, "warm-up request refused");
        return -1;
    }

    for (i = 0; i < 64 && llm_sched_has_work(sched); i++) {
        rc = llm_step(s, sched);
        if (rc < 0) {
            break;
        }
    }

    llm_sched_stats_get(sched, &st);
    if (st.generation_tokens != 4 || llm_sched_has_work(sched)) {
        llm_log(LLM_LOG_ERR, "warm-up generation failed (%llu tokens)",
                (unsigned long long) st.generation_tokens);
        llm_ring_fail(s, "warm-up generation failed");
        return -1;
    }

    return 0;
}


/* llm_engine's task over the model's metadata (model/score.h); a score
   task looks its "yes" and "no" up in the model's tokenizer */
static int
llm_load_task(llm_server *s)
{
    int             rc;
    char            err[256];
    llm_tokenizer  *tok = NULL;

    if (s->opt.task == LLM_TASK_SCORE && s->model.cfg.score == 0) {
        tok = llm_model_tokenizer(&s->model, err, sizeof(err));
        if (tok == NULL) {
            llm_log(LLM_LOG_ERR, "task score: no tokenizer: %s", err);
        }
    }
    rc = llm_model_task(&s->model, s->opt.task, tok);
    llm_tokenizer_free(tok);
    if (rc == 0 && s->model.cfg.pooling != 0) {
        llm_log(LLM_LOG_NOTICE, "the model %s: %s pooling%s, score head %s",
                s->model.cfg.score ? "scores pairs" : "embeds",
                llm_pool_type_name(s->model.cfg.pooling),
                s->model.cfg.pool_normalize ? ", normalised" : "",
                llm_score_type_name(s->model.cfg.score));
    }
    return rc;
}


/* from a compile thread: wake the loop, which takes the result */
static void
llm_compiled_notify(void *arg)
{
    uint64_t     one = 1;
    llm_server  *s = arg;

    (void) write(s->compiled_fd, &one, sizeof(one));
}


/*
 * Structured outputs: the tokenizer's bytes as the grammar compiler's
 * vocabulary (built once: its cost is logged) and the compile thread.
 * Without them the engine serves on and refuses constrained requests.
 */
static void
llm_grammar_setup(llm_server *s, llm_sched_options *so)
{
    char                   err[256];
    uint64_t               t0;
    llm_compiler_options   co;

    t0 = llm_now_ns();
    s->tokenizer = llm_model_tokenizer(&s->model, err, sizeof(err));
    if (s->tokenizer == NULL) {
        llm_log(LLM_LOG_WARN, "no tokenizer, structured outputs refused: %s",
                err);
        return;
    }
    s->grammar_vocab = llm_grammar_vocab_new(s->tokenizer, err, sizeof(err));
    if (s->grammar_vocab == NULL) {
        llm_log(LLM_LOG_WARN, "no grammar vocabulary, structured outputs "
                "refused: %s", err);
        return;
    }
    llm_compiler_options_default(&co);
    co.vocab = s->grammar_vocab;
    co.notify = llm_compiled_notify;
    co.notify_arg = s;
    s->compiler = llm_compiler_create(&co, err, sizeof(err));
    if (s->compiler == NULL) {
        llm_log(LLM_LOG_WARN, "structured outputs refused: %s", err);
        return;
    }
    so->compiler = s->compiler;
    so->n_grammar_vocab = llm_tokenizer_n_vocab(s->tokenizer);
    so->n_grammar_stop_ids = llm_tokenizer_stop_ids(s->tokenizer,
                                                    &so->grammar_stop_ids);
    llm_log(LLM_LOG_NOTICE, "grammar vocabulary of %d tokens built in "
            "%.1f ms", (int) so->n_grammar_vocab,
            (double) (llm_now_ns() - t0) / 1e6);
}


void *
llm_loader_thread(void *arg)
{
    int                  rc, max_model_len;
    char                 err[512];
    llm_sched           *sched;
    llm_server          *s = arg;
    llm_sched_options    so;
    llm_backend_options  bo;
    llm_kv_layout        lo;

    /* rank 0 of tensor_parallel; the backend loads the other ranks' views */
    if (s->opt.model_fd >= 0) {
        rc = llm_model_load_fd(&s->model, s->opt.model_fd, s->opt.model_path,
                               0, s->opt.tensor_parallel);
    } else {
        rc = llm_model_load(&s->model, s->opt.model_path, 0,
                            s->opt.tensor_parallel);
    }

    if (rc == 0 && llm_load_task(s) != 0) {
        rc = -1;
    }
    if (rc != 0) {
        llm_log(LLM_LOG_ERR, "cannot load model: %s", s->model.err);
        llm_ring_fail(s, s->model.err);
        return NULL;
    }

    llm_fill_facts(&s->ring->model, &s->model);
    atomic_store(&s->ring->state, LLM_ENGINE_WARMING);

    llm_log(LLM_LOG_NOTICE, "model \"%s\" loaded: %s, %" PRIu64
            " parameters, %" PRIu64 " bytes of weights (%s), %u layers, "
            "context %u, vocabulary %u",
            s->opt.model_path, s->ring->model.arch, s->ring->model.n_params,
            s->ring->model.weight_bytes, s->ring->model.file_type,
            s->ring->model.n_layers, s->ring->model.context_length,
            s->ring->model.vocab_size);

    if (llm_memory_plan(s, &bo, &max_model_len) != 0) {
        return NULL;
    }

    s->backend = llm_backend_create(s->opt.backend, &s->model, &bo, err,
                                    sizeof(err));
    if (s->backend == NULL) {
        llm_log(LLM_LOG_ERR, "%s", err);
        llm_ring_fail(s, err);
        return NULL;
    }
    if (strcmp(s->opt.backend, "cpu") == 0) {
        /* the kernels decide the arithmetic: greedy replies of two
           machines differ where these do (the ready line gives the
           threads) */
        llm_log(LLM_LOG_NOTICE, "cpu backend: %s kernels",
                llm_kernels_isa_name(llm_kernels_isa()));
    }

    /* the block manager counts pages: one layer group's (model/kv.h) */
    if (llm_config_kv_layout(&s->model.cfg, &lo, NULL, NULL) != 0) {
        lo.per_group = s->model.cfg.n_layers;
    }
    atomic_store(&s->ring->stats.kv_block_size, (uint32_t) bo.kv_block_size);
    atomic_store(&s->ring->stats.kv_block_bytes,
                 llm_kv_bytes_per_token(lo.per_group,
                                        s->model.cfg.n_kv_heads
                                        * s->model.cfg.head_dim,
                                        bo.kv_dtype)
                 * (uint64_t) bo.kv_block_size);

    llm_sched_options_default(&so);
    so.max_num_seqs = s->opt.max_num_seqs;
    so.max_batched_tokens = s->opt.max_batched_tokens;
    so.max_model_len = max_model_len;
    so.max_queued = s->opt.max_queued;
    so.max_prefill_tokens = s->opt.max_prefill_tokens;
    so.batch_share = s->opt.batch_share;
    so.prefix_caching = s->opt.prefix_caching;
    so.on_token = llm_on_token;
    so.on_constraint = llm_on_constraint;
    so.on_finish = llm_on_finish;
    so.on_embedding = llm_on_embedding;
    so.can_emit = llm_can_emit;
    so.emit_room = llm_emit_room;
    so.on_step = llm_on_step;
    so.step_arg = s;
    so.spec_draft_tokens = s->opt.speculative_ngram
                           ? s->opt.speculative_draft_tokens : 0;
    so.spec_ngram = s->opt.speculative_ngram_size;
    llm_grammar_setup(s, &so);

    sched = llm_sched_create(s->backend, &so, err, sizeof(err));
    if (sched == NULL) {
        llm_log(LLM_LOG_ERR, "%s", err);
        llm_ring_fail(s, err);
        return NULL;
    }

    if (llm_warm_up(s, sched) != 0) {
        return NULL;
    }

    llm_publish_stats(s, sched);        /* the pool's size before READY */
    atomic_store_explicit(&s->sched, sched, memory_order_release);
    atomic_store(&s->ring->state, LLM_ENGINE_READY);
    llm_log(LLM_LOG_NOTICE, "ready: warm-up generation done, %d threads, "
            "max_num_seqs %d, max_batched_tokens %d", s->opt.threads,
            s->opt.max_num_seqs, s->opt.max_batched_tokens);

    return NULL;
}
