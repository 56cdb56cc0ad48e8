/*
 * `ngx_llm_engine generate`: offline generation for users and tests.
 *
 *   generate --model PATH (--prompt TEXT | --chat FILE.json)
 *            [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]
 *            [--seed S] [--threads N] [--greedy-ids] [--no-bos] [--no-echo]
 *            [--backend cpu|cuda] [--tensor-parallel N]
 *
 * --backend picks the backend (cuda where built); --tensor-parallel N
 * loads rank 0 of N and lets the backend run all N ranks (CPU rank
 * threads, or N GPUs), as `tensor_parallel N` does in llm_engine.
 * --prompt continues TEXT and, like llama2.c, prints TEXT first (--no-echo
 * prints the completion only); --chat renders {"messages": [...]} (or a
 * bare array) with the model's own chat template and prints the reply.
 * The default temperature is 0 (greedy) so runs are reproducible; the
 * completion stops at an end-of-sequence / end-of-turn token or after
 * --max-tokens. --greedy-ids prints the generated ids on one line instead
 * of the text.
 *
 * The step is the engine's, for one sequence: prefill the prompt in chunks,
 * then one token per forward, sample, detokenize (UTF-8 safe), repeat.
 *
 * defines: llm_cli_generate
 */
#include "backend/backend.h"
#include "server/cli.h"
#include "model/kv.h"
#include "jinja/jinja.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "format/file.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_PREFILL_CHUNK  256

typedef struct {
    const char  *model;
    const char  *prompt;
    const char  *chat;
    int          max_tokens;
    float        temperature;
    int          top_k;
    float        top_p;
    long long    seed;          /* -1: none given */
    int          threads;
    int          greedy_ids;
    int          no_bos;
    int          no_echo;
    const char  *backend;       /* "cpu" (default) or "cuda" */
    int          tp;            /* tensor parallel ranks */
    int          kv_dtype;      /* enum llm_kv_dtype */
} cli_args;


static void
cli_usage(void)
{
    fprintf(stderr,
        "usage: ngx_llm_engine generate --model PATH (--prompt TEXT | "
        "--chat FILE.json)\n"
        "         [--max-tokens N] [--temperature T] [--top-k K] "
        "[--top-p P] [--seed S]\n"
        "         [--threads N] [--greedy-ids] [--no-bos] [--no-echo]\n"
        "         [--backend cpu|cuda] [--tensor-parallel N] "
        "[--kv-cache-dtype f16|f32]\n");
}


static int
parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
    char  *end;

    errno = 0;
    *out = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(*out >= lo)
        || !(*out <= hi))
    {
        fprintf(stderr, "generate: %s \"%s\": expected a number in "
                "[%g, %g]\n", opt, s, lo, hi);
        return -1;
    }
    return 0;
}


static int
parse_args(int argc, char **argv, cli_args *a)
{
    double  v;
    int     i;

    memset(a, 0, sizeof(*a));
    a->max_tokens = 256;
    a->top_p = 1.0f;
    a->seed = -1;
    a->threads = 2;
    a->backend = "cpu";
    a->tp = 1;

    for (i = 1; i < argc; i++) {
        const char *o = argv[i];

        if (strcmp(o, "--greedy-ids") == 0) {
            a->greedy_ids = 1;
            continue;
        }
        if (strcmp(o, "--no-bos") == 0) {
            a->no_bos = 1;
            continue;
        }
        if (strcmp(o, "--no-echo") == 0) {
            a->no_echo = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "generate: unknown option or missing value: "
                    "%s\n", o);
            return -1;
        }
        const char *val = argv[++i];

        if (strcmp(o, "--model") == 0) {
            a->model = val;
        } else if (strcmp(o, "--prompt") == 0) {
            a->prompt = val;
        } else if (strcmp(o, "--chat") == 0) {
            a->chat = val;
        } else if (strcmp(o, "--max-tokens") == 0) {
            if (parse_num(o, val, 1, 1 << 20, &v)) return -1;
            a->max_tokens = (int) v;
        } else if (strcmp(o, "--temperature") == 0) {
            if (parse_num(o, val, 0, 100, &v)) return -1;
            a->temperature = (float) v;
        } else if (strcmp(o, "--top-k") == 0) {
            if (parse_num(o, val, 0, 1 << 30, &v)) return -1;
            a->top_k = (int) v;
        } else if (strcmp(o, "--top-p") == 0) {
            if (parse_num(o, val, 0, 1, &v)) return -1;
            a->top_p = (float) v;
        } else if (strcmp(o, "--seed") == 0) {
            if (parse_num(o, val, 0, 9007199254740992.0, &v)) return -1;
            a->seed = (long long) v;
        } else if (strcmp(o, "--threads") == 0) {
            if (parse_num(o, val, 1, 1024, &v)) return -1;
            a->threads = (int) v;
        } else if (strcmp(o, "--backend") == 0) {
            if (strcmp(val, "cpu") != 0 && strcmp(val, "cuda") != 0) {
                fprintf(stderr, "generate: --backend \"%s\": expected cpu "
                        "or cuda\n", val);
                return -1;
            }
            a->backend = val;
        } else if (strcmp(o, "--tensor-parallel") == 0) {
            if (parse_num(o, val, 1, 64, &v)) return -1;
            a->tp = (int) v;
        } else if (strcmp(o, "--kv-cache-dtype") == 0) {
            a->kv_dtype = llm_kv_dtype_parse(val);
            if (a->kv_dtype < 0) {
                fprintf(stderr, "generate: --kv-cache-dtype \"%s\": "
                        "expected f16 or f32\n", val);
                return -1;
            }
        } else {
            fprintf(stderr, "generate: unknown option %s\n", o);
            return -1;
        }
    }
    if (a->model == NULL || (a->prompt == NULL) == (a->chat == NULL)) {
        fprintf(stderr, "generate: --model and one of --prompt or --chat "
                "are required\n");
        return -1;
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * prompt
 */

char *
llm_cli_read_file(const char *who, const char *path, size_t max, size_t *len)
{
    char  *buf = llm_read_file(path, max, len);

    if (buf == NULL) {
        fprintf(stderr, "%s: %s: %s\n", who, path, strerror(errno));
    }
    return buf;
}


/* the special-token strings transformers passes to chat templates */
static void
add_token_string(cJSON *obj, const char *name, const llm_tokenizer *tok,
    int32_t id)
{
    const char  *s;
    size_t       len;
    char        *copy;

    if (id < 0 || (s = llm_token_text(tok, id, &len)) == NULL) {
        return;
    }
    copy = strndup(s, len);
    if (copy != NULL) {
        cJSON_AddStringToObject(obj, name, copy);
        free(copy);
    }
}


/* the chat file rendered with the model's template; malloc'ed text */
static char *
render_chat(const char *path, const llm_model *m, const llm_tokenizer *tok)
{
    char        *src, *json, *out = NULL, err[512];
    size_t       len, out_len;
    cJSON       *root, *ctx, *messages, *special;
    jinja_tmpl  *t;

    /* GGUF metadata, or chat_template.jinja / tokenizer_config.json */
    err[0] = '\0';
    src = llm_model_chat_template(m, err, sizeof(err));
    if (src == NULL) {
        fprintf(stderr, "generate: %s: %s; use --prompt\n", m->path,
                err[0] ? err : "the model has no chat template");
        return NULL;
    }
    json = llm_cli_read_file("generate", path, 0, &len);
    if (json == NULL) {
        free(src);
        return NULL;
    }
    root = cJSON_ParseWithLength(json, len);
    free(json);
    messages = cJSON_IsArray(root) ? root
               : cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(messages)) {
        fprintf(stderr, "generate: %s: expected {\"messages\": [...]} or a "
                "JSON array of messages\n", path);
        cJSON_Delete(root);
        free(src);
        return NULL;
    }
    special = cJSON_CreateObject();
    add_token_string(special, "bos_token", tok, llm_tokenizer_bos(tok));
    add_token_string(special, "eos_token", tok, llm_tokenizer_eos(tok));
    ctx = jinja_chat_context(messages, NULL, 1, special, NULL);
    cJSON_Delete(special);
    cJSON_Delete(root);
    if (ctx == NULL) {
        fprintf(stderr, "generate: %s: messages must be JSON objects\n",
                path);
        free(src);
        return NULL;
    }

    t = jinja_parse(src, strlen(src), err, sizeof(err));
    free(src);
    if (t == NULL) {
        fprintf(stderr, "generate: %s: chat template: %s\n", m->path, err);
    } else if (jinja_render(t, ctx, &out, &out_len, err, sizeof(err)) != 0) {
        fprintf(stderr, "generate: chat template: %s\n", err);
        out = NULL;
    }
    jinja_free(t);
    cJSON_Delete(ctx);
    return out;
}


/* ids of text; *n_out ids in a malloc'ed array, or NULL */
static int32_t *
tokenize_all(const llm_tokenizer *tok, const char *text, int add_special,
    int *n_out)
{
    size_t    len = strlen(text);
    int       n, cap = (int) len + 8;
    int32_t  *ids = malloc(sizeof(int32_t) * cap);

    if (ids == NULL) {
        return NULL;
    }
    n = llm_tokenize(tok, text, len, add_special, 1, ids, cap);
    if (n > cap) {
        free(ids);
        cap = n;
        ids = malloc(sizeof(int32_t) * cap);
        n = ids ? llm_tokenize(tok, text, len, add_special, 1, ids, cap) : -1;
    }
    if (n <= 0) {
        fprintf(stderr, "generate: the prompt encodes to no tokens\n");
        free(ids);
        return NULL;
    }
    *n_out = n;
    return ids;
}


/* ---------------------------------------------------------------------------
 * generation
 */

typedef struct {
    llm_backend    *be;
    int32_t        *table;      /* KV block ids 0..n_blocks-1 */
    int32_t         n_blocks;
    float          *logits;     /* (vocab) */
} cli_seq;


/* run tokens ids[0..n) at positions start.., logits of the last one */
static int
cli_forward(cli_seq *s, const int32_t *ids, int n, int start)
{
    const int32_t  *tables[1] = { s->table };
    int32_t         pos[CLI_PREFILL_CHUNK], seq[CLI_PREFILL_CHUNK] = { 0 };
    int32_t         last;
    int             done, chunk, i;

    for (done = 0; done < n; done += chunk) {
        chunk = n - done < CLI_PREFILL_CHUNK ? n - done : CLI_PREFILL_CHUNK;
        for (i = 0; i < chunk; i++) {
            pos[i] = start + done + i;
        }
        last = chunk - 1;
        llm_batch b = { chunk, ids + done, pos, seq, 1, tables,
                        &s->n_blocks, 1, &last, s->logits, 0, NULL, NULL,
                        NULL, 0, NULL };
        if (llm_backend_forward(s->be, &b) != 0) {
            fprintf(stderr, "generate: forward: %s\n", s->be->err);
            return -1;
        }
    }
    return 0;
}


static int
generate(const cli_args *a, const llm_model *m, const llm_tokenizer *tok,
    const int32_t *prompt, int n_prompt)
{
    llm_backend_options   o;
    llm_sampling_params   sp;
    llm_sampler           sampler;
    llm_detok             detok;
    cli_seq               s;
    char                  err[512], *piece;
    int                   n_ctx, i, rc = -1, id, n;
    int32_t               next;

    n_ctx = n_prompt + a->max_tokens;
    if (n_ctx > m->cfg.max_seq_len) {
        n_ctx = m->cfg.max_seq_len;
    }
    if (n_prompt >= n_ctx) {
        fprintf(stderr, "generate: the prompt has %d tokens, the context "
                "only %d\n", n_prompt, m->cfg.max_seq_len);
        return -1;
    }
    llm_backend_options_default(&o, m);
    o.n_threads = a->threads;
    o.kv_dtype = a->kv_dtype;
    o.max_batch_tokens = CLI_PREFILL_CHUNK;
    o.kv_n_blocks = (n_ctx + o.kv_block_size - 1) / o.kv_block_size;

    memset(&s, 0, sizeof(s));
    s.n_blocks = o.kv_n_blocks;
    s.table = malloc(sizeof(int32_t) * s.n_blocks);
    s.logits = malloc(sizeof(float) * m->cfg.vocab_size);
    piece = malloc(llm_detok_max_out(tok) + 8);
    s.be = llm_backend_create(a->backend, m, &o, err, sizeof(err));
    if (s.be == NULL || s.table == NULL || s.logits == NULL || piece == NULL)
    {
        fprintf(stderr, "generate: %s\n", s.be ? "out of memory" : err);
        goto done;
    }
    for (i = 0; i < s.n_blocks; i++) {
        s.table[i] = i;     /* one sequence: the whole pool, in order */
    }

    llm_sampling_params_default(&sp);
    sp.temperature = a->greedy_ids ? 0.0f : a->temperature;
    sp.top_k = a->top_k;
    sp.top_p = a->top_p;
    sp.has_seed = a->seed >= 0;
    sp.seed = a->seed >= 0 ? (uint64_t) a->seed : 0;
    if (llm_sampler_init(&sampler, &sp, m->cfg.vocab_size, err,
                         sizeof(err)) != 0)
    {
        fprintf(stderr, "generate: sampling: %s\n", err);
        goto done;
    }
    llm_sampler_add_prompt(&sampler, prompt, n_prompt);
    llm_detok_init(&detok, LLM_DETOK_SKIP_SPECIAL);

    if (cli_forward(&s, prompt, n_prompt, 0) != 0) {
        goto sampler_done;
    }
    for (i = 0; n_prompt + i < n_ctx; i++) {
        id = llm_sample(&sampler, s.logits, m->cfg.vocab_size, NULL);
        if (id < 0) {
            fprintf(stderr, "generate: sampling: %s\n", sampler.err);
            goto sampler_done;
        }
        if (llm_token_is_stop(tok, id)) {
            break;
        }
        if (a->greedy_ids) {
            printf("%s%d", i ? " " : "", id);
        } else if ((n = llm_detok_push(tok, &detok, id, piece,
                                       llm_detok_max_out(tok) + 8)) > 0)
        {
            fwrite(piece, 1, n, stdout);
            fflush(stdout);
        }
        if (n_prompt + i + 1 >= n_ctx) {
            break;
        }
        next = id;
        if (cli_forward(&s, &next, 1, n_prompt + i) != 0) {
            goto sampler_done;
        }
    }
    if (!a->greedy_ids && (n = llm_detok_flush(&detok, piece, 8)) > 0) {
        fwrite(piece, 1, n, stdout);
    }
    printf("\n");
    rc = 0;

sampler_done:
    llm_sampler_free(&sampler);
done:
    llm_backend_free(s.be);
    free(s.table);
    free(s.logits);
    free(piece);
    return rc;
}


int
llm_cli_generate(int argc, char **argv)
{
    cli_args        a;
    llm_model       m;
    llm_tokenizer  *tok = NULL;
    char            err[512], *text = NULL;
    int32_t        *ids = NULL;
    int             n_ids = 0, rc = 1;

    if (parse_args(argc, argv, &a) != 0) {
        cli_usage();
        return 2;
    }
    if (llm_model_load(&m, a.model, 0, a.tp) != 0) {
        fprintf(stderr, "generate: %s\n", m.err);
        llm_model_free(&m);
        return 1;
    }
    tok = llm_model_tokenizer(&m, err, sizeof(err));
    if (tok == NULL) {
        fprintf(stderr, "generate: %s: %s\n", a.model, err);
        goto done;
    }
    if (a.chat != NULL) {
        /* the template writes BOS itself where the model wants one */
        text = render_chat(a.chat, &m, tok);
        ids = text ? tokenize_all(tok, text, 0, &n_ids) : NULL;
    } else {
        ids = tokenize_all(tok, a.prompt, !a.no_bos, &n_ids);
        if (ids != NULL && !a.greedy_ids && !a.no_echo) {
            fputs(a.prompt, stdout);
        }
    }
    if (ids != NULL && generate(&a, &m, tok, ids, n_ids) == 0) {
        rc = 0;
    }

done:
    free(text);
    free(ids);
    llm_tokenizer_free(tok);
    llm_model_free(&m);
    return rc;
}
