/*
 * The engine's command line (ngx_llm_engine serve --socket ... --model
 * ..., as the module starts it): one row per option, as nginx's commands,
 * into llm_server_opts over the defaults of common/defaults.h; and what
 * the memory plan takes from the options, shared by the engine's start
 * and `ngx_llm_engine plan`.
 *
 * defines: llm_server_opts_default, llm_server_parse_opts,
 *          llm_server_plan_options, llm_server_ring_slots
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/defaults.h"
#include "model/kv.h"
#include "model/score.h"
#include "ring/ngx_llm_ring.h"
#include "server/log.h"
#include "server/server.h"
#include "server/server_int.h"


/* ---------------------------------------------------------------------- */
/* options                                                                */

static int
llm_parse_u64(const char *s, uint64_t *out)
{
    char               *end;
    unsigned long long  v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || end == s || *end) {
        return -1;
    }
    *out = v;
    return 0;
}


/* the engine's command line: one row per option, as nginx's commands */
typedef enum { OPT_STR, OPT_INT, OPT_PID, OPT_U64, OPT_BOOL, OPT_KV_DTYPE,
               OPT_TASK } llm_opt_kind;

typedef struct {
    const char    *name;
    llm_opt_kind   kind;
    size_t         offset;          /* in llm_server_opts */
} llm_opt;

#define OPT(name, kind, field)  { name, kind, offsetof(llm_server_opts, field) }

static const llm_opt  llm_opts[] = {
    OPT("--name", OPT_STR, name),
    OPT("--socket", OPT_STR, socket_name),
    OPT("--model", OPT_STR, model_path),
    OPT("--backend", OPT_STR, backend),
    OPT("--error-log", OPT_STR, error_log),
    OPT("--kv-cache-dtype", OPT_KV_DTYPE, kv_dtype),
    OPT("--model-fd", OPT_INT, model_fd),
    OPT("--listen-fd", OPT_INT, listen_fd),
    OPT("--master-pid", OPT_PID, master_pid),
    OPT("--config-hash", OPT_U64, config_hash),
    OPT("--threads", OPT_INT, threads),
    OPT("--max-num-seqs", OPT_INT, max_num_seqs),
    OPT("--max-model-len", OPT_INT, max_model_len),
    OPT("--max-batched-tokens", OPT_INT, max_batched_tokens),
    OPT("--max-queued", OPT_INT, max_queued),
    OPT("--max-prefill-tokens", OPT_INT, max_prefill_tokens),
    OPT("--batch-share", OPT_INT, batch_share),
    OPT("--kv-cache-memory", OPT_U64, kv_cache_bytes),
    OPT("--prefix-caching", OPT_BOOL, prefix_caching),
    OPT("--kv-prealloc", OPT_BOOL, kv_prealloc),
    OPT("--tensor-parallel", OPT_INT, tensor_parallel),
    OPT("--speculative-ngram", OPT_BOOL, speculative_ngram),
    OPT("--speculative-draft-tokens", OPT_INT, speculative_draft_tokens),
    OPT("--speculative-ngram-size", OPT_INT, speculative_ngram_size),
    OPT("--task", OPT_TASK, task),
};


void
llm_server_opts_default(llm_server_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->model_fd = -1;
    o->listen_fd = -1;
    o->threads = LLM_DEFAULT_THREADS;
    o->max_num_seqs = LLM_DEFAULT_MAX_NUM_SEQS;
    o->max_model_len = LLM_DEFAULT_MAX_MODEL_LEN;
    o->max_batched_tokens = 0;        /* by backend, after parsing */
    o->max_queued = LLM_DEFAULT_MAX_QUEUED;
    o->batch_share = LLM_DEFAULT_BATCH_SHARE;
    o->kv_cache_bytes = LLM_DEFAULT_KV_CACHE_BYTES;
    o->prefix_caching = LLM_DEFAULT_PREFIX_CACHING;
    o->kv_dtype = LLM_KV_F16;
    o->kv_prealloc = LLM_DEFAULT_KV_PREALLOC;
    o->tensor_parallel = LLM_DEFAULT_TENSOR_PARALLEL;
    o->speculative_ngram = LLM_DEFAULT_SPEC_NGRAM;
    o->speculative_draft_tokens = LLM_DEFAULT_SPEC_DRAFT_TOKENS;
    o->speculative_ngram_size = LLM_DEFAULT_SPEC_NGRAM_SIZE;
    o->backend = "cpu";
    o->name = "default";
}


/* one option's value into its field; -1 (logged) when it is not one */
static int
llm_opt_set(llm_server_opts *o, const llm_opt *opt, const char *arg)
{
    uint64_t   v;
    void      *field = (char *) o + opt->offset;

    switch (opt->kind) {
    case OPT_STR:
        *(const char **) field = arg;
        return 0;
    case OPT_KV_DTYPE:
        *(int *) field = llm_kv_dtype_parse(arg);
        if (*(int *) field < 0) {
            llm_log(LLM_LOG_EMERG, "option \"%s\": \"%s\" is not f16 "
                    "or f32", opt->name, arg);
            return -1;
        }
        return 0;
    case OPT_TASK:
        if (llm_task_parse(arg, (int *) field) != 0) {
            llm_log(LLM_LOG_EMERG, "option \"%s\": \"%s\" is not auto, "
                    "generate, embed or score", opt->name, arg);
            return -1;
        }
        return 0;
    default:
        break;
    }

    if (llm_parse_u64(arg, &v) != 0
        || (opt->kind != OPT_U64 && v > INT32_MAX))
    {
        llm_log(LLM_LOG_EMERG, "option \"%s\": invalid number \"%s\"",
                opt->name, arg);
        return -1;
    }
    switch (opt->kind) {
    case OPT_PID:
        *(pid_t *) field = (pid_t) v;
        break;
    case OPT_U64:
        *(uint64_t *) field = v;
        break;
    case OPT_BOOL:
        *(int *) field = v != 0;
        break;
    default:
        *(int *) field = (int) v;
        break;
    }
    return 0;
}


int
llm_server_parse_opts(llm_server_opts *o, int argc, char **argv)
{
    int     i;
    size_t  n;

    llm_server_opts_default(o);

    for (i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            llm_log(LLM_LOG_EMERG, "option \"%s\" needs a value", argv[i]);
            return -1;
        }
        for (n = 0; n < sizeof(llm_opts) / sizeof(llm_opts[0]); n++) {
            if (strcmp(argv[i], llm_opts[n].name) == 0) {
                break;
            }
        }
        if (n == sizeof(llm_opts) / sizeof(llm_opts[0])) {
            llm_log(LLM_LOG_EMERG, "unknown option \"%s\"", argv[i]);
            return -1;
        }
        if (llm_opt_set(o, &llm_opts[n], argv[i + 1]) != 0) {
            return -1;
        }
    }

    if (o->max_batched_tokens == 0) {
        o->max_batched_tokens =
            llm_default_max_batched_tokens(strcmp(o->backend, "cuda") == 0);
    }

    if (o->socket_name == NULL || o->master_pid <= 0
        || (o->model_fd < 0 && o->model_path == NULL))
    {
        llm_log(LLM_LOG_EMERG, "serve needs --socket, --master-pid and "
                "--model or --model-fd");
        return -1;
    }

    if (o->model_path == NULL) {
        o->model_path = "(model fd)";
    }

    return 0;
}


/* a batch place and a queue place per request, and 16 spare */
uint32_t
llm_server_ring_slots(const llm_server_opts *o)
{
    uint32_t  n = (uint32_t) o->max_num_seqs + o->max_queued + 16;

    return n > LLM_RING_MAX_SLOTS ? LLM_RING_MAX_SLOTS : n;
}


void
llm_server_plan_options(llm_plan_options *po, const llm_server_opts *o)
{
    memset(po, 0, sizeof(*po));
    po->backend = strcmp(o->backend, "cuda") == 0 ? LLM_PLAN_CUDA
                                                  : LLM_PLAN_CPU;
    po->tp = o->tensor_parallel;
    po->kv_dtype = o->kv_dtype;
    po->max_model_len = o->max_model_len;
    po->max_num_seqs = o->max_num_seqs;
    po->max_batched_tokens = o->max_batched_tokens;
    po->threads = o->threads;
    po->kv_block_size = LLM_KV_BLOCK_SIZE_DEFAULT;
    po->kv_cache_bytes = o->kv_cache_bytes;
    po->ring_bytes = llm_ring_size(llm_server_ring_slots(o));
}
