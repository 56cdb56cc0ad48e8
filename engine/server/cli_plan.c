/*
 * `ngx_llm_engine plan`: the memory plan of a model and settings, as the
 * engine computes it at start (engine/model/plan.h), for models this
 * machine could not load.
 *
 *   plan (--model FILE.gguf|DIR | --config config.json
 *         | --layers N --hidden-size N --heads N [--kv-heads N]
 *           [--head-dim N] --vocab N --intermediate N [--context N]
 *           [--tied 0|1])
 *        [--dtype bf16|f16|f32|q8_0|q4_1|...]  weights of a shape/config
 *        [--max-model-len N] [--max-num-seqs N] [--max-batched-tokens N]
 *        [--kv-cache-memory SIZE | --kv-cache-ratio R] [--kv-cache-dtype
 *        f16|f32] [--tensor-parallel N] [--backend cpu|cuda] [--threads N]
 *        [--device-memory SIZE]
 *
 * SIZE takes k, m, g (powers of 1024) like the kv_cache_memory directive.
 * Without --device-memory the CPU plan is checked against what this
 * machine still has (MemAvailable, or the cgroup's limit), as the engine
 * checks it at start; a CUDA plan only when given one.
 * Exit status: 0 the plan fits (or nothing to check it against), 1 it
 * does not fit the device, 2 bad arguments or a plan the engine refuses.
 *
 * defines: llm_cli_plan
 */
#include "common/defaults.h"
#include "format/hf_config.h"
#include "model/kv.h"
#include "model/model.h"
#include "model/plan.h"
#include "server/cli.h"
#include "server/server.h"
#include "tensor_type.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char        *model;
    const char        *config;
    const char        *dtype;
    int                shape_given;
    int                kv_ratio_given;
    uint64_t           device_bytes;
    llm_plan_shape     sh;
    llm_server_opts    so;
    double             kv_ratio;
} plan_args;


static void
plan_usage(void)
{
    fprintf(stderr,
        "usage: ngx_llm_engine plan (--model PATH | --config config.json | "
        "--layers N --hidden-size N --heads N [--kv-heads N] [--head-dim N] "
        "--vocab N --intermediate N [--context N] [--tied 0|1]) "
        "[--dtype bf16] [--max-model-len N] [--max-num-seqs N] "
        "[--max-batched-tokens N] [--kv-cache-memory SIZE | "
        "--kv-cache-ratio R] [--kv-cache-dtype f16|f32] "
        "[--tensor-parallel N] [--backend cpu|cuda] [--threads N] "
        "[--device-memory SIZE]\n");
}


/* "8192", "512m", "80g" -> bytes; -1 if not a size */
static int
plan_size(const char *s, uint64_t *out)
{
    char                *end;
    unsigned long long   v;
    int                  shift = 0;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s) {
        return -1;
    }
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v > (UINT64_MAX >> shift)) {
        return -1;
    }
    *out = (uint64_t) v << shift;
    return 0;
}


static int
plan_int(const char *opt, const char *s, int *out)
{
    uint64_t  v;

    if (plan_size(s, &v) != 0 || v < 1 || v > (1u << 30)) {
        fprintf(stderr, "plan: %s: invalid number \"%s\"\n", opt, s);
        return -1;
    }
    *out = (int) v;
    return 0;
}


/* the flags of a shape, the engine's settings, the plan's own */
static int
plan_arg(plan_args *a, const char *opt, const char *val)
{
    static const struct {
        const char  *name;
        size_t       offset;
        int          shape;
    } ints[] = {
        { "--layers", offsetof(plan_args, sh.n_layers), 1 },
        { "--hidden-size", offsetof(plan_args, sh.dim), 1 },
        { "--heads", offsetof(plan_args, sh.n_heads), 1 },
        { "--kv-heads", offsetof(plan_args, sh.n_kv_heads), 1 },
        { "--head-dim", offsetof(plan_args, sh.head_dim), 1 },
        { "--vocab", offsetof(plan_args, sh.vocab_size), 1 },
        { "--intermediate", offsetof(plan_args, sh.hidden_dim), 1 },
        { "--context", offsetof(plan_args, sh.max_seq_len), 1 },
        { "--max-model-len", offsetof(plan_args, so.max_model_len), 0 },
        { "--max-num-seqs", offsetof(plan_args, so.max_num_seqs), 0 },
        { "--max-batched-tokens",
          offsetof(plan_args, so.max_batched_tokens), 0 },
        { "--tensor-parallel", offsetof(plan_args, so.tensor_parallel), 0 },
        { "--threads", offsetof(plan_args, so.threads), 0 },
    };
    size_t  i;

    for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        if (strcmp(opt, ints[i].name) == 0) {
            a->shape_given |= ints[i].shape;
            return plan_int(opt, val, (int *) ((char *) a + ints[i].offset));
        }
    }

    if (strcmp(opt, "--model") == 0) {
        a->model = val;
    } else if (strcmp(opt, "--config") == 0) {
        a->config = val;
    } else if (strcmp(opt, "--dtype") == 0) {
        a->dtype = val;
    } else if (strcmp(opt, "--tied") == 0) {
        a->sh.tied_output = strcmp(val, "0") != 0;
    } else if (strcmp(opt, "--backend") == 0) {
        a->so.backend = val;
    } else if (strcmp(opt, "--kv-cache-dtype") == 0) {
        if ((a->so.kv_dtype = llm_kv_dtype_parse(val)) < 0) {
            fprintf(stderr, "plan: --kv-cache-dtype: \"%s\" is not f16 or "
                    "f32\n", val);
            return -1;
        }
    } else if (strcmp(opt, "--kv-cache-memory") == 0) {
        if (plan_size(val, &a->so.kv_cache_bytes) != 0
            || a->so.kv_cache_bytes == 0)
        {
            fprintf(stderr, "plan: --kv-cache-memory: invalid size \"%s\"\n",
                    val);
            return -1;
        }
    } else if (strcmp(opt, "--kv-cache-ratio") == 0) {
        a->kv_ratio = strtod(val, NULL);
        a->kv_ratio_given = 1;
        if (!(a->kv_ratio > 0 && a->kv_ratio <= 0.99)) {
            fprintf(stderr, "plan: --kv-cache-ratio: \"%s\" is not in "
                    "(0, 0.99]\n", val);
            return -1;
        }
    } else if (strcmp(opt, "--device-memory") == 0) {
        if (plan_size(val, &a->device_bytes) != 0) {
            fprintf(stderr, "plan: --device-memory: invalid size \"%s\"\n",
                    val);
            return -1;
        }
    } else {
        fprintf(stderr, "plan: unknown option \"%s\"\n", opt);
        return -1;
    }
    return 0;
}


/* config.json: its shape, and torch_dtype as the weights' type unless
 * --dtype says otherwise */
static int
plan_shape_config(plan_args *a)
{
    int            t;
    char          *text;
    size_t         len;
    cJSON         *root;
    llm_model      m;
    const cJSON   *dt;

    text = llm_cli_read_file("plan", a->config, HF_MAX_JSON, &len);
    if (text == NULL) {
        return -1;
    }
    if (llm_model_config_json(&m, a->config, text, len) != 0) {
        fprintf(stderr, "plan: %s\n", m.err);
        free(text);
        return -1;
    }
    root = cJSON_ParseWithLength(text, len);
    dt = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");
    if (!cJSON_IsString(dt)) {
        dt = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    }
    if (a->dtype == NULL) {
        a->dtype = !cJSON_IsString(dt) ? "bf16"
                   : strcmp(dt->valuestring, "float32") == 0 ? "f32"
                   : strcmp(dt->valuestring, "float16") == 0 ? "f16"
                   : "bf16";
    }
    cJSON_Delete(root);
    free(text);

    memset(&a->sh, 0, sizeof(a->sh));
    a->sh.n_layers = m.cfg.n_layers;
    a->sh.dim = m.cfg.dim;
    a->sh.n_heads = m.cfg.n_heads;
    a->sh.n_kv_heads = m.cfg.n_kv_heads;
    a->sh.head_dim = m.cfg.head_dim;
    a->sh.hidden_dim = m.cfg.hidden_dim;
    a->sh.n_expert = m.cfg.n_expert;
    a->sh.expert_ff = m.cfg.expert_ff;
    a->sh.vocab_size = m.cfg.vocab_size;
    a->sh.max_seq_len = m.cfg.max_seq_len;
    a->sh.tied_output = m.cfg.tied_output;

    t = llm_plan_weight_type(a->dtype);
    if (t < 0) {
        fprintf(stderr, "plan: --dtype: unknown type \"%s\"\n", a->dtype);
        return -1;
    }
    a->sh.weight_type = (uint32_t) t;
    /* gpt-oss's published experts are MXFP4 whatever torch_dtype says */
    a->sh.expert_type = m.cfg.gpt_oss ? GGML_TYPE_MXFP4 : 0;
    llm_plan_shape_weights(&a->sh);
    return 0;
}


static int
plan_shape_flags(plan_args *a)
{
    int  t;

    if (a->sh.n_layers == 0 || a->sh.dim == 0 || a->sh.n_heads == 0
        || a->sh.vocab_size == 0 || a->sh.hidden_dim == 0)
    {
        fprintf(stderr, "plan: a shape needs --layers, --hidden-size, "
                "--heads, --vocab and --intermediate\n");
        return -1;
    }
    if (a->sh.n_kv_heads == 0) {
        a->sh.n_kv_heads = a->sh.n_heads;
    }
    if (a->sh.head_dim == 0) {
        a->sh.head_dim = a->sh.dim / a->sh.n_heads;
    }
    if (a->sh.max_seq_len == 0) {
        a->sh.max_seq_len = LLM_DEFAULT_MAX_MODEL_LEN;
    }
    if (a->sh.n_heads % a->sh.n_kv_heads != 0) {
        fprintf(stderr, "plan: --heads %d is not a multiple of --kv-heads "
                "%d\n", a->sh.n_heads, a->sh.n_kv_heads);
        return -1;
    }
    t = llm_plan_weight_type(a->dtype ? a->dtype : "bf16");
    if (t < 0) {
        fprintf(stderr, "plan: --dtype: unknown type \"%s\"\n", a->dtype);
        return -1;
    }
    a->sh.weight_type = (uint32_t) t;
    llm_plan_shape_weights(&a->sh);
    return 0;
}


static int
plan_shape_model(plan_args *a)
{
    llm_model  m;

    memset(&m, 0, sizeof(m));
    if (llm_model_load(&m, a->model, 0, 1) != 0) {
        fprintf(stderr, "plan: %s\n", m.err);
        llm_model_free(&m);
        return -1;
    }
    llm_plan_shape_of(&a->sh, &m);
    llm_model_free(&m);
    return 0;
}


static double
gib(uint64_t b)
{
    return (double) b / (1024.0 * 1024.0 * 1024.0);
}


static void
plan_print(const plan_args *a, const llm_plan_options *po, const llm_plan *p,
    const char *device_what)
{
    const llm_plan_shape  *sh = &a->sh;
    size_t                 f16, f32;
    uint64_t               want;

    f16 = llm_kv_bytes_per_token(sh->n_layers, sh->n_kv_heads * sh->head_dim,
                                 LLM_KV_F16);
    f32 = llm_kv_bytes_per_token(sh->n_layers, sh->n_kv_heads * sh->head_dim,
                                 LLM_KV_F32);
    want = (uint64_t) po->max_num_seqs * p->max_model_len;

    printf("model               %s: %d layers, hidden %d, %d heads, %d kv "
           "heads of %d, intermediate %d, vocab %d, context %d\n",
           a->model ? a->model : a->config ? a->config : "(shape)",
           sh->n_layers, sh->dim, sh->n_heads, sh->n_kv_heads, sh->head_dim,
           sh->hidden_dim, sh->vocab_size, sh->max_seq_len);
    printf("engine              backend %s, tensor_parallel %d, "
           "kv_cache_dtype %s, max_batched_tokens %d, threads %d\n",
           a->so.backend, po->tp,
           po->backend == LLM_PLAN_CUDA ? "bf16 (cuda)"
                                        : llm_kv_dtype_name(po->kv_dtype),
           po->max_batched_tokens, po->threads);
    printf("weights             %llu bytes per rank (%.2f GiB, %s; %llu in "
           "all)\n", (unsigned long long) p->weight_bytes,
           gib(p->weight_bytes), ggml_type_name(sh->weight_type),
           (unsigned long long) sh->weight_bytes);
    printf("KV per token        %zu bytes (%.1f KiB) f16, %zu f32, %zu bf16 "
           "(cuda); this plan %zu, %zu per rank\n", f16, f16 / 1024.0, f32,
           f16, p->kv_token_bytes, p->kv_token_bytes_rank);
    printf("KV pool             %d blocks of %d tokens = %d tokens, %llu "
           "bytes per rank (%.2f GiB)\n", p->kv_blocks, po->kv_block_size,
           p->kv_tokens, (unsigned long long) p->kv_pool_bytes,
           gib(p->kv_pool_bytes));
    printf("workspace           %llu bytes per rank (%.2f GiB: activations "
           "of a %d-token step, logits, block tables, ring)\n",
           (unsigned long long) p->workspace_bytes, gib(p->workspace_bytes),
           po->max_batched_tokens);
    printf("total               %llu bytes per rank (%.2f GiB)\n",
           (unsigned long long) p->total_bytes, gib(p->total_bytes));
    printf("sequences           %d of max_model_len %d fit in the pool\n",
           p->seqs_fit, p->max_model_len);
    if (p->all_fit) {
        printf("max_num_seqs        %d x %d = %llu tokens: fit\n",
               po->max_num_seqs, p->max_model_len, (unsigned long long) want);
    } else {
        printf("max_num_seqs        %d x %d = %llu tokens: do not fit (%d "
               "tokens): all %d run only while they are short; when the "
               "running sequences outgrow the pool the newest is preempted "
               "and recomputed later, and requests past the batch wait in "
               "the queue (docs/scheduler.md)\n", po->max_num_seqs,
               p->max_model_len, (unsigned long long) want, p->kv_tokens,
               po->max_num_seqs);
    }
    if (p->device_fit < 0) {
        printf("device              not checked (--device-memory)\n");
    } else {
        printf("device              needs %llu bytes (%s), has %llu "
               "(%.2f GiB, %s): %s\n", (unsigned long long) p->need_bytes,
               po->backend == LLM_PLAN_CUDA ? "weights, pool, workspace"
               : "pool and workspace of all ranks; the weights are a file "
                 "mapping",
               (unsigned long long) po->device_bytes, gib(po->device_bytes),
               device_what, p->device_fit ? "fits"
               : "does NOT fit: the engine refuses to start");
    }
}


int
llm_cli_plan(int argc, char **argv)
{
    int                i;
    plan_args          a;
    llm_plan           p;
    const char        *what = "--device-memory";
    llm_plan_options   po;

    memset(&a, 0, sizeof(a));
    llm_server_opts_default(&a.so);
    a.kv_ratio = 0.90;

    for (i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "plan: option \"%s\" needs a value\n", argv[i]);
            plan_usage();
            return 2;
        }
        if (plan_arg(&a, argv[i], argv[i + 1]) != 0) {
            plan_usage();
            return 2;
        }
    }

    if ((a.model != NULL) + (a.config != NULL) + (a.shape_given != 0) != 1) {
        fprintf(stderr, "plan: one of --model, --config or a shape\n");
        plan_usage();
        return 2;
    }
    if ((a.model ? plan_shape_model(&a)
         : a.config ? plan_shape_config(&a) : plan_shape_flags(&a)) != 0)
    {
        return 2;
    }

    if (a.so.max_batched_tokens == 0) {
        a.so.max_batched_tokens =
            llm_default_max_batched_tokens(strcmp(a.so.backend, "cuda") == 0);
    }
    llm_server_plan_options(&po, &a.so);
    if (a.kv_ratio_given) {
        po.kv_cache_bytes = 0;
        po.kv_cache_ratio = a.kv_ratio;
    }
    po.device_bytes = a.device_bytes;
    if (po.device_bytes == 0 && po.backend == LLM_PLAN_CPU) {
        po.device_bytes = llm_plan_host_available(&what);
    }

    if (llm_plan_compute(&p, &a.sh, &po) != 0) {
        fprintf(stderr, "plan: %s\n", p.err);
        return 2;
    }
    plan_print(&a, &po, &p, what);

    return p.device_fit == 0 ? 1 : 0;
}
