/*
 * The memory plan (engine/model/plan.c), against numbers computed by hand.
 *
 *   1. Llama-3-8B (t/data/plan/llama-3-8b-config.json, Meta's config.json):
 *      8,030,261,248 parameters = 16,060,522,496 bytes of bf16; KV f16
 *      32 layers x 2 x 8 kv heads x 128 x 2 bytes = 131,072 bytes per
 *      token; kv_cache_memory 1g = 512 blocks of 16 = 8192 tokens = one
 *      sequence of 8192; tensor_parallel 2 halves what is split and keeps
 *      embeddings, lm_head and norms (1,050,939,392 parameters) whole.
 *   2. SmolLM2-135M Q4_1 ($MODEL): 30 x 2 x 3 x 64 x 2 = 23,040 bytes per
 *      token (docs/directives.md: 22.5 KiB), 1g = 2912 blocks = 46,592
 *      tokens = 5 sequences of 8192; weights = the file's tensor bytes.
 *   3. Refusals: a pool under one sequence, a tensor_parallel that does
 *      not divide the heads; a device too small does not fit.
 *   4. `ngx_llm_engine plan` prints the same numbers ($BUILD).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "common/defaults.h"
#include "model/kv.h"
#include "model/model.h"
#include "model/plan.h"
#include "tensor_type.h"

#define CONFIG_8B  "t/data/plan/llama-3-8b-config.json"


/* the engine's defaults: backend cpu, f16, 1g, 8192, 64 */
static void
options_default(llm_plan_options *o)
{
    memset(o, 0, sizeof(*o));
    o->backend = LLM_PLAN_CPU;
    o->tp = 1;
    o->kv_dtype = LLM_KV_F16;
    o->max_model_len = LLM_DEFAULT_MAX_MODEL_LEN;
    o->max_num_seqs = LLM_DEFAULT_MAX_NUM_SEQS;
    o->max_batched_tokens = 256;
    o->threads = 2;
    o->kv_block_size = LLM_KV_BLOCK_SIZE_DEFAULT;
    o->kv_cache_bytes = 1ull << 30;
}


static void
shape_8b(llm_plan_shape *sh)
{
    char       *text;
    size_t      len = 0;
    llm_model   m;

    text = tap_slurp(CONFIG_8B, &len);
    ok(text != NULL, "read %s", CONFIG_8B);
    if (text == NULL) {
        tap_bail_out("no " CONFIG_8B);
    }
    is_int(llm_model_config_json(&m, CONFIG_8B, text, len), 0,
           "config.json parses: %s", m.err);
    free(text);

    memset(sh, 0, sizeof(*sh));
    sh->n_layers = m.cfg.n_layers;
    sh->dim = m.cfg.dim;
    sh->n_heads = m.cfg.n_heads;
    sh->n_kv_heads = m.cfg.n_kv_heads;
    sh->head_dim = m.cfg.head_dim;
    sh->hidden_dim = m.cfg.hidden_dim;
    sh->vocab_size = m.cfg.vocab_size;
    sh->max_seq_len = m.cfg.max_seq_len;
    sh->tied_output = m.cfg.tied_output;
    sh->weight_type = GGML_TYPE_BF16;
    llm_plan_shape_weights(sh);
}


static void
test_8b(void)
{
    llm_plan          p;
    llm_plan_shape    sh;
    llm_plan_options  o;

    shape_8b(&sh);
    is_int(sh.vocab_size, 128256, "8B: vocab_size from config.json");
    is_int(sh.head_dim, 128, "8B: head_dim 4096 / 32");
    is_int(sh.weight_bytes, 16060522496ull, "8B: bf16 weights 16.06 GB");

    options_default(&o);
    is_int(llm_plan_compute(&p, &sh, &o), 0, "8B: plan computes");
    is_int(p.weight_bytes, 16060522496ull, "8B tp 1: all weights per rank");
    is_int(p.kv_token_bytes, 131072, "8B: KV f16 128 KiB per token");
    is_int(p.kv_blocks, 512, "8B: 1g holds 512 blocks");
    is_int(p.kv_tokens, 8192, "8B: 8192 tokens");
    is_int(p.kv_pool_bytes, 1ull << 30, "8B: the pool is 1 GiB");
    is_int(p.seqs_fit, 1, "8B: one sequence of 8192");
    is_int(p.all_fit, 0, "8B: 64 x 8192 does not fit 1g");

    o.kv_dtype = LLM_KV_F32;
    llm_plan_compute(&p, &sh, &o);
    is_int(p.kv_token_bytes, 262144, "8B: KV f32 256 KiB per token");

    /* the CUDA backend keeps bf16 whatever kv_cache_dtype says */
    o.backend = LLM_PLAN_CUDA;
    o.tp = 2;
    o.kv_cache_bytes = 64ull << 30;
    o.max_batched_tokens = 2048;
    is_int(llm_plan_compute(&p, &sh, &o), 0, "8B cuda tp 2: computes");
    is_int(p.kv_token_bytes, 131072, "8B cuda: bf16 KV, 128 KiB per token");
    is_int(p.kv_token_bytes_rank, 65536, "8B tp 2: half the KV per rank");
    is_int(p.weight_bytes, 2ull * (1050939392ull + 6979321856ull / 2),
           "8B tp 2: replicated + half of the split weights per rank");
    is_int(p.kv_tokens, 524288, "8B: 64g holds 524288 tokens");
    is_int(p.all_fit, 1, "8B: 64 x 8192 fits 64g");

    o.device_bytes = 72ull << 30;
    llm_plan_compute(&p, &sh, &o);
    is_int(p.device_fit, 1, "8B tp 2: 8.5 + 32 GiB fit a 72 GiB device");
    o.tp = 1;
    llm_plan_compute(&p, &sh, &o);
    is_int(p.device_fit, 0, "8B tp 1: 15 + 64 GiB do not fit 72 GiB");

    /* the ratio: of what weights and workspace leave */
    o.kv_cache_bytes = 0;
    o.kv_cache_ratio = 0.5;
    is_int(llm_plan_compute(&p, &sh, &o), 0, "8B cuda ratio: computes");
    ok(p.kv_pool_bytes <= (o.device_bytes - p.weight_bytes
                           - p.workspace_bytes) / 2
       && p.kv_pool_bytes + p.kv_block_bytes_rank
          > (o.device_bytes - p.weight_bytes - p.workspace_bytes) / 2,
       "8B cuda ratio 0.5: the pool is half of what is left, in blocks");

    options_default(&o);
    o.tp = 3;
    is_int(llm_plan_compute(&p, &sh, &o), -1, "8B tp 3: refused");
    ok(strstr(p.err, "does not divide") != NULL, "tp 3: says why: %s",
       p.err);
}


static void
test_smollm2(void)
{
    uint64_t          i, sum = 0;
    llm_plan          p;
    llm_model         m;
    llm_plan_shape    sh;
    llm_plan_options  o;

    memset(&m, 0, sizeof(m));
    if (llm_model_load(&m, tap_model(), 0, 1) != 0) {
        tap_bail_out(m.err);
    }
    llm_plan_shape_of(&sh, &m);
    for (i = 0; i < m.gguf.n_tensors; i++) {
        sum += m.gguf.tensors[i].nbytes;
    }
    is_int(sh.weight_bytes, sum, "SmolLM2: weights are the tensors' bytes");
    is_int(sh.weight_type, GGML_TYPE_Q4_1, "SmolLM2: mostly Q4_1");

    options_default(&o);
    is_int(llm_plan_compute(&p, &sh, &o), 0, "SmolLM2: plan computes");
    is_int(p.kv_token_bytes, 23040, "SmolLM2: KV f16 22.5 KiB per token");
    is_int(p.kv_blocks, 2912, "SmolLM2: 1g holds 2912 blocks");
    is_int(p.kv_tokens, 46592, "SmolLM2: 46592 tokens");
    is_int(p.seqs_fit, 5, "SmolLM2: 5 sequences of 8192");
    is_int(p.all_fit, 0, "SmolLM2: 64 x 8192 does not fit 1g");
    ok(p.workspace_bytes > (uint64_t) 64 * 49152 * 4
       && p.workspace_bytes < (256ull << 20),
       "SmolLM2: workspace %llu bytes: the logits and more, under 256 MiB",
       (unsigned long long) p.workspace_bytes);

    o.max_num_seqs = 5;
    llm_plan_compute(&p, &sh, &o);
    is_int(p.all_fit, 1, "SmolLM2: 5 x 8192 fits");

    o.device_bytes = 512ull << 20;
    llm_plan_compute(&p, &sh, &o);
    is_int(p.device_fit, 0, "SmolLM2: a 1 GiB pool does not fit 512 MiB");

    o.kv_cache_bytes = 1ull << 20;
    is_int(llm_plan_compute(&p, &sh, &o), -1, "SmolLM2: 1m pool refused");
    ok(strstr(p.err, "less than one sequence of max_model_len 8192")
       != NULL, "1m: says why: %s", p.err);

    llm_model_free(&m);
}


/* the CLI prints what the library computes */
static void
test_cli(void)
{
    char        cmd[1024], out[8192];
    size_t      n;
    FILE       *f;
    const char *build = getenv("BUILD");

    snprintf(cmd, sizeof(cmd), "%s/ngx_llm_engine plan --config %s "
             "--device-memory 1g 2>&1", build ? build : "build", CONFIG_8B);
    f = popen(cmd, "r");
    n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
    out[n] = '\0';
    /* 8B on the CPU: pool and workspace are over 1 GiB */
    is_int(f ? WEXITSTATUS(pclose(f)) : -1, 1, "plan exits 1: no fit");
    ok(strstr(out, "weights             16060522496 bytes per rank")
       != NULL, "plan prints the 8B weights");
    ok(strstr(out, "KV per token        131072 bytes (128.0 KiB) f16, "
                   "262144 f32, 131072 bf16") != NULL,
       "plan prints KV per token by dtype");
    ok(strstr(out, "1 of max_model_len 8192 fit") != NULL,
       "plan prints the sequences that fit");
    ok(strstr(out, "does NOT fit") != NULL, "plan says it does not fit");
    if (strstr(out, "16060522496") == NULL) {
        printf("# %s\n", out);
    }

    snprintf(cmd, sizeof(cmd), "%s/ngx_llm_engine plan --layers 32 "
             "--hidden-size 4096 --heads 32 --kv-heads 8 --vocab 128256 "
             "--intermediate 14336 --dtype bf16 --device-memory 4g 2>&1",
             build ? build : "build");
    f = popen(cmd, "r");
    n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
    out[n] = '\0';
    is_int(f ? WEXITSTATUS(pclose(f)) : -1, 0, "a bare shape fits 4g");
    ok(strstr(out, "weights             16060522496 bytes per rank")
       != NULL, "a bare 8B shape: the same weights as its config.json");

    /* gpt-oss-20b's config (torch_dtype bf16): experts counted as MXFP4
     * (17 bytes per 32), the rest bf16: 12.80 GiB, its published size */
    snprintf(cmd, sizeof(cmd), "%s/ngx_llm_engine plan --config "
             "t/data/plan/gpt-oss-20b-config.json --max-model-len 8192 "
             "2>&1", build ? build : "build");
    f = popen(cmd, "r");
    n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
    out[n] = '\0';
    if (f != NULL) {
        pclose(f);
    }
    ok(strstr(out, "weights             13747605120 bytes per rank")
       != NULL, "gpt-oss-20b's config: MXFP4 experts, bf16 rest "
       "(13747605120 bytes)");
}


int
main(void)
{
    test_8b();
    test_smollm2();
    test_cli();
    return tap_done();
}
