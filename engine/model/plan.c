/*
 * The memory plan (see plan.h).
 *
 * defines: llm_plan_shape_of, llm_plan_shape_weights, llm_plan_compute,
 *          llm_plan_weight_type
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "model/plan.h"
#include "model/kv.h"
#include "tensor_type.h"

/* backend_cpu.c's attention groups per score row (ATT_G) */
#define PLAN_CPU_ATT_G        4
/* backend_cuda.cu: LOGIT_ROWS, WORKSPACE_BYTES, the largest graph bucket */
#define PLAN_CUDA_LOGIT_ROWS  256
#define PLAN_CUDA_WORKSPACE   (32u << 20)
#define PLAN_CUDA_BUCKET_MAX  256


/* what tensor parallelism leaves whole on every rank: blk.N.*_norm, and
 * every tensor outside the blocks (token_embd, output, output_norm) */
static int
plan_replicated(const char *name)
{
    return strncmp(name, "blk.", 4) != 0 || strstr(name, "_norm") != NULL;
}


void
llm_plan_shape_of(llm_plan_shape *sh, const llm_model *m)
{
    uint32_t            t, best;
    uint64_t            i, n, bytes_by_type[GGML_TYPE_COUNT] = { 0 };
    const llm_config   *c = &m->cfg;
    const gguf_tensor  *tensors;
    llm_kv_layout       lo;

    memset(sh, 0, sizeof(*sh));
    sh->n_layers = c->n_layers;
    sh->dim = c->dim;
    sh->n_heads = c->n_heads;
    sh->n_kv_heads = c->n_kv_heads;
    sh->head_dim = c->head_dim;
    sh->hidden_dim = c->hidden_dim;
    sh->n_expert = c->n_expert;
    sh->expert_ff = c->expert_ff;
    sh->n_expert_used = c->n_expert_used;
    sh->vocab_size = c->vocab_size;
    sh->max_seq_len = c->max_seq_len;
    sh->tied_output = c->tied_output;
    sh->encoder = c->encoder;
    if (llm_config_kv_layout(c, &lo, NULL, NULL) == 0) {
        sh->kv_groups = lo.n_groups;
        sh->kv_window = lo.window;
        for (i = 0; i < (uint64_t) lo.n_groups; i++) {
            sh->kv_sliding += lo.sliding[i];
        }
    }

    tensors = m->hf ? m->hf_tensors : m->gguf.tensors;
    n = m->hf ? (uint64_t) m->n_hf_tensors : m->gguf.n_tensors;

    for (i = 0; i < n; i++) {
        if (strstr(tensors[i].name, ".hf.") != NULL) {
            continue;   /* gpt-oss's raw HF experts: counted repacked */
        }
        sh->weight_bytes += tensors[i].nbytes;
        if (plan_replicated(tensors[i].name)) {
            sh->replicated_bytes += tensors[i].nbytes;
        }
        if (tensors[i].type < GGML_TYPE_COUNT) {
            bytes_by_type[tensors[i].type] += tensors[i].nbytes;
        }
    }

    best = 0;
    for (t = 0; t < GGML_TYPE_COUNT; t++) {
        if (bytes_by_type[t] > bytes_by_type[best]) {
            best = t;
        }
    }
    sh->weight_type = best;
}


void
llm_plan_shape_weights(llm_plan_shape *sh)
{
    uint64_t  q, kv, layer, embd, norms, experts = 0;
    uint32_t  et = sh->expert_type ? sh->expert_type : sh->weight_type;

    q = (uint64_t) sh->n_heads * sh->head_dim;
    kv = (uint64_t) sh->n_kv_heads * sh->head_dim;

    /* wq, wk, wv, wo; gate, up, down (MoE: the router and every
     * expert's three, those at expert_type) */
    layer = (uint64_t) sh->dim * (q + 2 * kv) + q * sh->dim;
    if (sh->n_expert > 0) {
        layer += (uint64_t) sh->n_expert * sh->dim;
        experts = (uint64_t) sh->n_layers * sh->n_expert * sh->dim * 3
                  * sh->expert_ff;
    } else {
        layer += 3 * (uint64_t) sh->dim * sh->hidden_dim;
    }
    embd = (uint64_t) sh->vocab_size * sh->dim * (sh->tied_output ? 1 : 2);
    /* attn_norm, ffn_norm per layer, output_norm; f32 in a GGUF, the
     * checkpoint's type in a HF directory: counted at weight_type */
    norms = (uint64_t) sh->n_layers * 2 * sh->dim + sh->dim;

    sh->weight_bytes = ggml_row_size(sh->weight_type,
                                     (uint64_t) sh->n_layers * layer)
                       + ggml_row_size(et, experts)
                       + ggml_row_size(sh->weight_type, embd)
                       + ggml_row_size(sh->weight_type, norms);
    sh->replicated_bytes = ggml_row_size(sh->weight_type, embd)
                           + ggml_row_size(sh->weight_type, norms);
}


int
llm_plan_weight_type(const char *name)
{
    uint32_t  t;

    for (t = 0; t < GGML_TYPE_COUNT; t++) {
        if (ggml_type_size(t) != 0 && strcasecmp(ggml_type_name(t), name) == 0)
        {
            return (int) t;
        }
    }
    return -1;
}


/* the quantized input of the largest matmul, for n rows (kernels'
 * llm_act_size: the CPU backend's act_buf grows to it at the first step of
 * that size) */
static uint64_t
plan_cpu_act(const llm_plan_shape *sh, int n)
{
    llm_tensor  w;

    memset(&w, 0, sizeof(w));
    w.type = sh->weight_type;
    w.rows = 1;
    w.cols = sh->hidden_dim > sh->dim ? sh->hidden_dim : sh->dim;
    w.row_stride = ggml_row_size(w.type, w.cols);

    return llm_act_size(&w, n);
}


/* moe_cpu.c's scratch for n tokens: router logits (n, experts); sel,
 * weight, pos (n, k); xg and y (n * k, dim), g and u (n * k, expert_ff)
 * floats; the fused job's activations of every routed row (for gate/up
 * and for down, the kernels' llm_act_size) */
static uint64_t
plan_cpu_moe(const llm_plan_shape *sh, uint64_t n)
{
    uint64_t    nk = n * sh->n_expert_used;
    llm_tensor  w;

    if (sh->n_expert == 0 || sh->n_expert_used == 0) {
        return 0;
    }
    memset(&w, 0, sizeof(w));
    w.type = sh->weight_type;
    w.rows = 1;
    w.cols = sh->dim;
    w.row_stride = ggml_row_size(w.type, w.cols);
    return (n * sh->n_expert + 3 * nk
            + nk * (2 * (uint64_t) sh->dim + 2 * (uint64_t) sh->expert_ff))
           * sizeof(float)
           + llm_act_size(&w, (int) nk) * 2;
}


/*
 * backend_cpu.c cpu_rank_create, per rank, floats: x, xb (n, dim); q, att
 * (n, q_dim); k, v (n, kv_dim); hb, hb2 (n, hidden); scores (threads,
 * ATT_G * context); kvbuf (threads, 2 * head_dim); the row-split partials
 * (slices, n, dim); plus act_buf; a MoE's scratch (plan_cpu_moe). The scheduler: logits (max_num_seqs,
 * vocab) floats; the block manager ~ 7 ints and a token block per block.
 */
static uint64_t
plan_cpu_workspace(const llm_plan_shape *sh, const llm_plan_options *o,
    int kv_blocks)
{
    uint64_t  n = o->max_batched_tokens, tp = o->tp, fl;
    uint64_t  q_dim = (uint64_t) sh->n_heads / tp * sh->head_dim;
    uint64_t  kv_dim = (uint64_t) sh->n_kv_heads / tp * sh->head_dim;
    uint64_t  hidden = sh->hidden_dim / tp;

    fl = n * (2 * (uint64_t) sh->dim + 2 * q_dim + 2 * kv_dim + 2 * hidden)
         + (uint64_t) o->threads * PLAN_CPU_ATT_G * sh->max_seq_len
         + (uint64_t) o->threads * 2 * sh->head_dim
         + n * sh->dim * (tp > 1 ? 2 : 1);

    return fl * sizeof(float) + plan_cpu_act(sh, (int) n)
           + plan_cpu_moe(sh, n)
           + (uint64_t) o->max_num_seqs * sh->vocab_size * sizeof(float)
           + (uint64_t) kv_blocks * (7 * sizeof(int32_t) + 8
                                     + o->kv_block_size * sizeof(int32_t));
}


/*
 * backend_cuda.cu alloc_runtime, per rank: x, y, qkv, gu (f32) and xb,
 * att, hb (bf16) of max_batched_tokens rows; xl and logits of LOGIT_ROWS;
 * the cuBLASLt workspace. The sampler's scratch and the step metadata are
 * small next to these and left out.
 */
static uint64_t
plan_cuda_workspace(const llm_plan_shape *sh, const llm_plan_options *o)
{
    uint64_t  n = o->max_batched_tokens, tp = o->tp;
    uint64_t  q_dim = (uint64_t) sh->n_heads / tp * sh->head_dim;
    uint64_t  kv_dim = (uint64_t) sh->n_kv_heads / tp * sh->head_dim;
    uint64_t  hidden = sh->hidden_dim / tp;

    if (n < PLAN_CUDA_BUCKET_MAX) {
        n = PLAN_CUDA_BUCKET_MAX;
    }

    return n * (2 * (uint64_t) sh->dim * 4 + sh->dim * 2
                + (q_dim + 2 * kv_dim) * 4 + q_dim * 2 + 2 * hidden * 4
                + hidden * 2)
           + (uint64_t) PLAN_CUDA_LOGIT_ROWS * (sh->dim * 2
                                                + sh->vocab_size * 4)
           + PLAN_CUDA_WORKSPACE;
}


/* max_model_len sequences the pool of kv_blocks holds at once: each takes
 * every full group's page of each block, and a sliding group's pages of
 * its window and one step (sched/block_manager.h, llm_blocks_peak) */
static int
plan_seqs_fit(const llm_plan *p, const llm_plan_shape *sh,
    const llm_plan_options *o)
{
    int64_t  all = (p->max_model_len + o->kv_block_size - 1)
                   / o->kv_block_size, w, pages;
    int      g = sh->kv_groups > 0 ? sh->kv_groups : 1;

    if (sh->kv_window == 0 || sh->kv_sliding == 0) {
        return p->kv_tokens / p->max_model_len;
    }
    w = (sh->kv_window - 1 + o->max_batched_tokens + o->kv_block_size - 1)
        / o->kv_block_size + 1;
    pages = (g - sh->kv_sliding) * all + sh->kv_sliding * (w < all ? w : all);
    return (int) ((int64_t) p->kv_blocks * g / pages);
}


/* an encoder writes no KV: kv_cache_memory is not read, the blocks are
   the scheduler's admission count only (max_num_seqs whole sequences),
   and no pool is allocated (backend/encoder.c) */
static int
plan_encoder(llm_plan *p, const llm_plan_shape *sh,
    const llm_plan_options *o)
{
    int  per_seq = (p->max_model_len + o->kv_block_size - 1)
                   / o->kv_block_size;

    p->kv_elt_bytes = 0;
    p->kv_token_bytes = 0;
    p->kv_token_bytes_rank = 0;
    p->kv_block_bytes_rank = 0;
    if (o->max_num_seqs > INT32_MAX / o->kv_block_size / per_seq) {
        snprintf(p->err, sizeof(p->err), "max_num_seqs %d of max_model_len "
                 "%d is over %d tokens", o->max_num_seqs, p->max_model_len,
                 INT32_MAX);
        return -1;
    }
    p->kv_blocks = per_seq * (o->max_num_seqs > 0 ? o->max_num_seqs : 1);
    p->kv_tokens = p->kv_blocks * o->kv_block_size;
    p->kv_pool_bytes = 0;
    if (o->backend == LLM_PLAN_CPU) {
        p->workspace_bytes = plan_cpu_workspace(sh, o, p->kv_blocks);
    }
    p->workspace_bytes += o->ring_bytes;
    p->total_bytes = p->weight_bytes + p->workspace_bytes;
    p->seqs_fit = p->kv_tokens / p->max_model_len;
    p->all_fit = 1;
    p->need_bytes = o->backend == LLM_PLAN_CUDA ? p->total_bytes
                    : p->workspace_bytes * (o->tp > 0 ? o->tp : 1);
    if (o->device_bytes > 0) {
        p->device_fit = p->need_bytes <= o->device_bytes;
    }
    return 0;
}


int
llm_plan_compute(llm_plan *p, const llm_plan_shape *sh,
    const llm_plan_options *o)
{
    int       tp = o->tp > 0 ? o->tp : 1;
    uint64_t  pool, split;

    memset(p, 0, sizeof(*p));
    p->device_fit = -1;

    if (sh->n_heads % tp != 0 || sh->n_kv_heads % tp != 0
        || sh->hidden_dim % tp != 0)
    {
        snprintf(p->err, sizeof(p->err), "tensor_parallel %d does not divide "
                 "%d heads, %d kv heads and %d hidden", tp, sh->n_heads,
                 sh->n_kv_heads, sh->hidden_dim);
        return -1;
    }

    p->max_model_len = o->max_model_len < sh->max_seq_len
                       ? o->max_model_len : sh->max_seq_len;

    split = sh->weight_bytes - sh->replicated_bytes;
    p->weight_bytes = sh->replicated_bytes + split / tp;

    /* the CUDA backend keeps bf16 whatever kv_cache_dtype says */
    p->kv_elt_bytes = o->backend == LLM_PLAN_CUDA ? 2
                      : llm_kv_bytes_per_token(1, 1, o->kv_dtype) / 2;
    p->kv_token_bytes = (size_t) sh->n_layers * 2 * sh->n_kv_heads
                        * sh->head_dim * p->kv_elt_bytes;
    p->kv_token_bytes_rank = p->kv_token_bytes / tp;
    p->kv_block_bytes_rank = p->kv_token_bytes_rank * o->kv_block_size;

    if (o->backend == LLM_PLAN_CUDA) {
        p->workspace_bytes = plan_cuda_workspace(sh, o);
    }

    if (sh->encoder) {
        return plan_encoder(p, sh, o);
    }

    /* kv_cache_memory is the whole pool (all ranks), as the engine's
     * memory plan line has always counted it */
    if (o->kv_cache_bytes > 0) {
        pool = o->kv_cache_bytes / (p->kv_token_bytes * o->kv_block_size)
               * p->kv_block_bytes_rank;

    } else if (o->device_bytes > p->weight_bytes + p->workspace_bytes) {
        pool = (uint64_t) ((double) (o->device_bytes - p->weight_bytes
                                     - p->workspace_bytes)
                           * o->kv_cache_ratio);
    } else {
        snprintf(p->err, sizeof(p->err), "kv_cache_ratio needs the device "
                 "memory, and more of it than weights and workspace");
        return -1;
    }

    if (pool / p->kv_block_bytes_rank > (uint64_t) INT32_MAX / o->kv_block_size)
    {
        snprintf(p->err, sizeof(p->err), "kv_cache_memory %llu is over %d "
                 "tokens of KV", (unsigned long long) o->kv_cache_bytes,
                 INT32_MAX);
        return -1;
    }
    p->kv_blocks = (int) (pool / p->kv_block_bytes_rank);
    p->kv_tokens = p->kv_blocks * o->kv_block_size;
    p->kv_pool_bytes = (uint64_t) p->kv_blocks * p->kv_block_bytes_rank;

    if (o->backend == LLM_PLAN_CPU) {
        p->workspace_bytes = plan_cpu_workspace(sh, o, p->kv_blocks);
    }
    p->workspace_bytes += o->ring_bytes;

    p->total_bytes = p->weight_bytes + p->kv_pool_bytes + p->workspace_bytes;
    p->seqs_fit = plan_seqs_fit(p, sh, o);
    p->all_fit = p->seqs_fit >= o->max_num_seqs;

    /* a GPU holds a copy of the weights; the CPU backend maps the file,
     * which the kernel can page, and its ranks share one process */
    p->need_bytes = o->backend == LLM_PLAN_CUDA ? p->total_bytes
                    : (p->kv_pool_bytes + p->workspace_bytes) * tp;
    if (o->device_bytes > 0) {
        p->device_fit = p->need_bytes <= o->device_bytes;
    }

    /* by pages, as the scheduler admits: with a window, a sequence longer
       than the pool's tokens may fit */
    if (p->seqs_fit < 1) {
        snprintf(p->err, sizeof(p->err), "kv_cache_memory %llu holds %d "
                 "tokens, less than one sequence of max_model_len %d",
                 (unsigned long long) o->kv_cache_bytes, p->kv_tokens,
                 p->max_model_len);
        return -1;
    }

    return 0;
}


static uint64_t
plan_read_u64(const char *path, const char *key)
{
    char                line[256];
    FILE               *f;
    size_t              klen = key ? strlen(key) : 0;
    unsigned long long  v = 0;
    int                 found = 0;

    f = fopen(path, "re");
    if (f == NULL) {
        return 0;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        if (key == NULL) {
            found = sscanf(line, "%llu", &v) == 1;

        } else if (strncmp(line, key, klen) == 0) {
            found = sscanf(line + klen, " %llu", &v) == 1;
            v *= 1024;                           /* meminfo is in kB */
        }
    }
    fclose(f);
    return found ? v : 0;
}


/*
 * What the engine may still allocate here: MemAvailable, lowered by the
 * memory cgroup's limit minus its usage (v2 memory.max, v1
 * memory.limit_in_bytes, as a container sees its own group). 0 when
 * /proc/meminfo cannot be read.
 */
uint64_t
llm_plan_host_available(const char **what)
{
    uint64_t  avail, limit, used;

    avail = plan_read_u64("/proc/meminfo", "MemAvailable:");
    *what = "MemAvailable";

    limit = plan_read_u64("/sys/fs/cgroup/memory.max", NULL);
    used = plan_read_u64("/sys/fs/cgroup/memory.current", NULL);
    if (limit == 0) {
        limit = plan_read_u64("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                              NULL);
        used = plan_read_u64("/sys/fs/cgroup/memory/memory.usage_in_bytes",
                             NULL);
    }
    if (limit > used && limit - used < avail) {
        avail = limit - used;
        *what = "the memory cgroup's limit";
    }
    return avail;
}
