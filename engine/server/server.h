/*
 * The engine process (ngx_llm_engine serve): options and entry point.
 * defines: llm_server_opts, llm_server_opts_default, llm_server_parse_opts,
 *          llm_server_main, llm_server_plan_options
 */
#ifndef NGX_LLM_SERVER_H
#define NGX_LLM_SERVER_H

#include <stdint.h>
#include <sys/types.h>

#include "model/plan.h"

typedef struct {
    const char  *name;              /* llm_engine block name */
    const char  *socket_name;       /* abstract socket, without the NUL */
    const char  *model_path;        /* for messages when model_fd is set */
    const char  *backend;           /* cpu | cuda */
    const char  *error_log;         /* nginx's error log file (stderr) */
    int          model_fd;          /* opened by nginx's master */
    int          listen_fd;         /* bound by the starting worker */
    pid_t        master_pid;
    uint64_t     config_hash;
    int          threads;
    int          max_num_seqs;
    int          max_model_len;
    int          max_batched_tokens;
    int          max_queued;
    int          max_prefill_tokens;    /* 0: max_batched_tokens */
    int          batch_share;       /* %, docs/scheduler.md */
    int          tensor_parallel;
    uint64_t     kv_cache_bytes;
    int          prefix_caching;    /* 1 (default): share full prompt blocks */
    int          kv_dtype;          /* enum llm_kv_dtype, f16 by default */
    int          kv_prealloc;       /* 1 (default): fault the pool in */
    int          speculative_ngram;         /* 1: prompt-lookup drafts */
    int          speculative_draft_tokens;  /* drafts per step */
    int          speculative_ngram_size;    /* n-gram looked up */
    int          task;              /* enum llm_task (model/score.h) */
} llm_server_opts;

void llm_server_opts_default(llm_server_opts *o);
int llm_server_parse_opts(llm_server_opts *o, int argc, char **argv);
int llm_server_main(int argc, char **argv);

/* the memory plan's options for these engine options (the ring's size
 * included): the engine's start and `ngx_llm_engine plan` share it */
void llm_server_plan_options(llm_plan_options *po, const llm_server_opts *o);

#endif
