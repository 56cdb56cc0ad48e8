/*
 * Rerank (issue 32): a score model (model/score.h) and /v1/rerank's body
 * and reply (api/rerank.h).
 *
 *   1. The body: fields read, refusals named (query, documents count and
 *      emptiness, top_n, return_documents); the reply sorted by score,
 *      cut at top_n, documents only when asked.
 *   2. Oracle: t/data/models/hf-qwen3-rerank (tools/rerank_oracle.py:
 *      transformers 5.24, a tiny random-weight Qwen3ForCausalLM) as a
 *      yes/no reranker: each pair's ids (Qwen3-Reranker's prompt) equal
 *      transformers' tokenizer's; the last position's logit(yes) and
 *      logit(no) and the score softmax([no, yes])[yes] within 1e-3 of
 *      transformers' (the exact backend); llm_score on the pooled last
 *      state == the score from those logits.
 *   3. The batcher: every pair submitted together, 8 tokens a step: each
 *      answers one float, the score of its pair alone in one forward, bit
 *      for bit, within 1e-3 of the golden.
 *   4. The task: score on a model without "yes"/"no" tokens and on an
 *      embedder refused by name; embed on a plain decoder pools the last
 *      token, normalised; generate drops the pooling.
 *   5. Qwen3-Embedding's tokenizer: a post_processor TemplateProcessing
 *      ending in <|endoftext|> and a tokenizer_config eos_token
 *      <|im_end|>: a text with special tokens ends in <|endoftext|> (what
 *      last-token pooling takes, as transformers encodes it), while the
 *      stop token stays <|im_end|>.
 */
#define _GNU_SOURCE    /* mkdtemp */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tap.h"
#include "api/error.h"
#include "api/rerank.h"
#include "backend/backend.h"
#include "model/model.h"
#include "model/pool.h"
#include "model/score.h"
#include "params/sampling.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

#define MODEL      "t/data/models/hf-qwen3-rerank"
#define GOLDEN     "t/data/rerank/hf-qwen3.json"
#define MAX_IDS    256
#define MAX_PAIRS  8


typedef struct {
    int32_t   ids[MAX_IDS];
    int       n;
    double    yes, no, score;   /* the golden's */
} pair;


/* ---- 1. the body and the reply ----------------------------------------- */

static int
refused(const char *body, const char *param)
{
    llm_rerank_request  rq;
    llm_api_error       err;
    int                 rc;

    memset(&err, 0, sizeof(err));
    rc = llm_rerank_parse(&rq, body, strlen(body), NULL, &err);
    llm_rerank_request_free(&rq);
    if (rc == 0 || err.status != 400 || strcmp(err.param, param) != 0) {
        printf("# %s: rc %d status %d param %s: %s\n", body, rc, err.status,
               err.param, err.message);
        return 0;
    }
    return 1;
}


static void
test_api(void)
{
    llm_rerank_request  rq;
    llm_api_error       err;
    cJSON              *j, *res;
    char               *s, big[16 * 1024];
    float               score[3] = { 0.25f, 0.75f, 0.5f };
    size_t              n;
    int                 i, rc;
    const char         *body = "{\"model\":\"r\",\"query\":\"q?\","
                               "\"documents\":[\"a\",{\"text\":\"b\"},\"c\"],"
                               "\"top_n\":2,\"return_documents\":true}";

    rc = llm_rerank_parse(&rq, body, strlen(body), NULL, &err);
    ok(rc == 0 && strcmp(rq.model, "r") == 0 && strcmp(rq.query, "q?") == 0
       && rq.n_docs == 3 && strcmp(rq.doc[1], "b") == 0 && rq.top_n == 2
       && rq.return_documents && rq.instruction == NULL,
       "model, query, documents (strings and {text}), top_n, "
       "return_documents read");
    j = rc == 0 ? llm_rerank_reply(&rq, "rerank-1", "r", score, 9) : NULL;
    s = j ? cJSON_PrintUnformatted(j) : NULL;
    ok(s != NULL && strcmp(s, "{\"id\":\"rerank-1\",\"object\":\"rerank\","
       "\"model\":\"r\",\"results\":[{\"index\":1,\"relevance_score\":0.75,"
       "\"document\":{\"text\":\"b\"}},{\"index\":2,\"relevance_score\":0.5,"
       "\"document\":{\"text\":\"c\"}}],\"usage\":{\"prompt_tokens\":9,"
       "\"total_tokens\":9}}") == 0,
       "the reply: sorted by score, the first top_n, documents (%s)", s);
    free(s);
    cJSON_Delete(j);
    rq.top_n = 0;
    rq.return_documents = 0;
    score[2] = 0.75f;
    j = llm_rerank_reply(&rq, "x", "r", score, 9);
    res = cJSON_GetObjectItem(j, "results");
    ok(cJSON_GetArraySize(res) == 3
       && cJSON_GetObjectItem(cJSON_GetArrayItem(res, 0), "index")
          ->valueint == 1
       && cJSON_GetObjectItem(cJSON_GetArrayItem(res, 1), "index")
          ->valueint == 2
       && cJSON_GetObjectItem(cJSON_GetArrayItem(res, 0), "document")
          == NULL,
       "top_n 0: every document; ties in input order; no document text");
    cJSON_Delete(j);
    llm_rerank_request_free(&rq);

    ok(refused("{\"documents\":[\"a\"]}", "query"), "query missing: 400");
    ok(refused("{\"query\":\"\",\"documents\":[\"a\"]}", "query"),
       "an empty query: 400");
    ok(refused("{\"query\":\"q\"}", "documents"), "documents missing: 400");
    ok(refused("{\"query\":\"q\",\"documents\":[]}", "documents"),
       "no documents: 400");
    ok(refused("{\"query\":\"q\",\"documents\":[\"a\",\"\"]}",
               "documents[1]"), "an empty document: 400 naming it");
    ok(refused("{\"query\":\"q\",\"documents\":[\"a\",3]}", "documents[1]"),
       "a document not a string: 400 naming it");
    ok(refused("{\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":-1}",
               "top_n"), "top_n -1: 400");
    ok(refused("{\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":1.5}",
               "top_n"), "top_n 1.5: 400");
    ok(refused("{\"query\":\"q\",\"documents\":[\"a\"],"
               "\"return_documents\":1}", "return_documents"),
       "return_documents not a boolean: 400");
    n = (size_t) snprintf(big, sizeof(big), "{\"query\":\"q\","
                          "\"documents\":[");
    for (i = 0; i <= LLM_RERANK_MAX_DOCUMENTS; i++) {
        n += (size_t) snprintf(big + n, sizeof(big) - n, "%s\"d\"",
                               i ? "," : "");
    }
    snprintf(big + n, sizeof(big) - n, "]}");
    ok(refused(big, "documents"), "%d documents: 400",
       LLM_RERANK_MAX_DOCUMENTS + 1);
}


/* ---- 2. oracle --------------------------------------------------------- */

/* one pair's forward alone: the last position's logits and final state */
static int
forward_one(const llm_model *m, int exact, const pair *p, float *logits,
    float *hidden)
{
    llm_backend_options   o;
    llm_backend          *be;
    llm_batch             b;
    int32_t               pos[MAX_IDS], seq[MAX_IDS], last, *table;
    const int32_t        *tables[1];
    int32_t               n_blocks;
    char                  err[512];
    int                   i, rc;

    llm_backend_options_default(&o, m);
    o.n_threads = exact ? 1 : 2;
    o.exact = exact;
    o.max_batch_tokens = MAX_IDS;
    be = llm_backend_create("cpu", m, &o, err, sizeof(err));
    if (be == NULL) {
        printf("# %s\n", err);
        return -1;
    }
    n_blocks = be->opt.kv_n_blocks;
    table = malloc(n_blocks * sizeof(int32_t));
    for (i = 0; i < n_blocks; i++) {
        table[i] = i;
    }
    tables[0] = table;
    for (i = 0; i < p->n; i++) {
        pos[i] = i;
        seq[i] = 0;
    }
    last = p->n - 1;
    memset(&b, 0, sizeof(b));
    b.n_tokens = p->n;
    b.token = p->ids;
    b.pos = pos;
    b.seq = seq;
    b.n_seqs = 1;
    b.block_table = tables;
    b.n_blocks = &n_blocks;
    b.n_logits = 1;
    b.logit_idx = &last;
    b.logits = logits;
    b.n_hidden = 1;
    b.hidden_idx = &last;
    b.hidden = hidden;
    rc = llm_backend_forward(be, &b);
    if (rc != 0) {
        printf("# forward: %s\n", be->err);
    }
    llm_backend_free(be);
    free(table);
    return rc;
}


static int
load_golden(const cJSON *root, const llm_tokenizer *tok, pair *p,
    int *ids_same)
{
    const cJSON  *c, *q, *pr, *a, *v, *inst;
    int           n = 0, k, got;
    int32_t       mine[MAX_IDS];

    *ids_same = 1;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        q = cJSON_GetObjectItem(c, "query");
        inst = cJSON_GetObjectItem(c, "instruction");
        cJSON_ArrayForEach(pr, cJSON_GetObjectItem(c, "pairs")) {
            if (n == MAX_PAIRS) {
                return n;
            }
            a = cJSON_GetObjectItem(pr, "ids");
            k = 0;
            cJSON_ArrayForEach(v, a) {
                if (k < MAX_IDS) {
                    p[n].ids[k++] = v->valueint;
                }
            }
            p[n].n = k;
            p[n].yes = cJSON_GetObjectItem(pr, "logit_yes")->valuedouble;
            p[n].no = cJSON_GetObjectItem(pr, "logit_no")->valuedouble;
            p[n].score = cJSON_GetObjectItem(pr, "score")->valuedouble;
            v = cJSON_GetObjectItem(pr, "document");
            got = llm_rerank_yes_no_ids(tok, cJSON_GetStringValue(inst),
                                        q->valuestring,
                                        strlen(q->valuestring),
                                        v->valuestring,
                                        strlen(v->valuestring), mine,
                                        MAX_IDS);
            if (got != k || memcmp(mine, p[n].ids, k * sizeof(int32_t))) {
                printf("# pair %d: %d ids, transformers %d\n", n, got, k);
                *ids_same = 0;
            }
            n++;
        }
    }
    return n;
}


/* ---- 3. the batcher ---------------------------------------------------- */

typedef struct {
    float  v[2];
    int    dims, n_emb, n_fin, finish;
} rec;


static void
on_embedding(void *user, const float *vec, int dims)
{
    rec  *r = user;

    r->v[0] = vec[0];
    r->dims = dims;
    r->n_emb++;
}


static void
on_finish(void *user, const llm_seq_result *res)
{
    rec  *r = user;

    r->n_fin++;
    r->finish = res->finish;
}


static int
run_sched(llm_model *m, const pair *p, int n, rec *r)
{
    llm_backend_options   o;
    llm_backend          *be;
    llm_sched_options     so;
    llm_sched            *s;
    llm_request           req;
    llm_seq              *q;
    char                  err[512];
    int                   i, rc = 0, steps = 0;

    llm_backend_options_default(&o, m);
    be = llm_backend_create("cpu", m, &o, err, sizeof(err));
    llm_sched_options_default(&so);
    so.max_batched_tokens = 8;
    so.prefix_caching = 0;
    so.on_embedding = on_embedding;
    so.on_finish = on_finish;
    s = be ? llm_sched_create(be, &so, err, sizeof(err)) : NULL;
    if (s == NULL) {
        printf("# %s\n", err);
        llm_backend_free(be);
        return -1;
    }
    for (i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        memset(&req, 0, sizeof(req));
        req.prompt = p[i].ids;
        req.n_prompt = p[i].n;
        llm_sampling_params_default(&req.sampling);
        req.embed = 1;
        req.user = &r[i];
        if (llm_sched_add(s, &req, &q, err, sizeof(err)) != LLM_SCHED_OK) {
            printf("# add %d: %s\n", i, err);
            rc = -1;
        }
    }
    req.embed_dims = 4;
    ok(llm_sched_add(s, &req, &q, err, sizeof(err)) == LLM_SCHED_BAD_REQUEST,
       "a score takes no dimensions (%s)", err);
    while (llm_sched_has_work(s) && steps++ < 5000) {
        if (llm_sched_step(s) < 0) {
            rc = -1;
        }
    }
    for (i = 0; i < n; i++) {
        rc |= r[i].n_fin == 1 && r[i].n_emb == 1 && r[i].dims == 1
              && r[i].finish == LLM_SEQ_STOP ? 0 : -1;
    }
    llm_sched_free(s);
    llm_backend_free(be);
    return rc;
}


/* ---- 4. the task ------------------------------------------------------- */

static void
test_task(void)
{
    llm_model       m;
    llm_tokenizer  *tok;
    char            err[256];
    int             t = -1;

    ok(llm_task_parse("score", &t) == 0 && t == LLM_TASK_SCORE
       && llm_task_parse("rank", &t) == -1, "task names");
    if (llm_model_load(&m, "t/data/models/hf-qwen3", 0, 1) == 0) {
        tok = llm_model_tokenizer(&m, err, sizeof(err));
        ok(llm_model_task(&m, LLM_TASK_SCORE, tok) == -1
           && strstr(m.err, "no \"yes\" or no \"no\" token"),
           "task score without yes/no tokens refused by name (%s)", m.err);
        ok(llm_model_task(&m, LLM_TASK_EMBED, tok) == 0
           && m.cfg.pooling == LLM_POOL_LAST && m.cfg.pool_normalize,
           "task embed on a decoder: last token, normalised");
        ok(llm_model_task(&m, LLM_TASK_GENERATE, tok) == 0
           && m.cfg.pooling == LLM_POOL_NONE, "task generate: no pooling");
        llm_tokenizer_free(tok);
        llm_model_free(&m);
    }
    if (llm_model_load(&m, "t/data/models/hf-qwen3-embed", 0, 1) == 0) {
        ok(llm_model_task(&m, LLM_TASK_SCORE, NULL) == -1
           && strstr(m.err, "is an embedder"),
           "task score on a sentence-transformers embedder refused (%s)",
           m.err);
        llm_model_free(&m);
    }
}


/* ---- 5. Qwen3-Embedding's appended <|endoftext|> ----------------------- */

static void
put(const char *dir, const char *name, const char *text)
{
    char   path[1024];
    FILE  *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}


static void
test_post_eos(void)
{
    char            dir[] = "/tmp/test_rerank.XXXXXX", err[256], cmd[1100];
    char           *text, *out;
    cJSON          *tj, *post;
    int32_t         ids[16], eot, im_end;
    int             n;
    llm_tokenizer  *t = NULL;

    text = tap_slurp(MODEL "/tokenizer.json", NULL);
    tj = text ? cJSON_Parse(text) : NULL;
    post = cJSON_Parse("{\"type\":\"TemplateProcessing\",\"single\":["
                       "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
                       "{\"SpecialToken\":{\"id\":\"<|endoftext|>\","
                       "\"type_id\":0}}],\"pair\":[],"
                       "\"special_tokens\":{}}");
    if (tj != NULL && post != NULL && mkdtemp(dir) != NULL) {
        cJSON_ReplaceItemInObject(tj, "post_processor", post);
        post = NULL;
        out = cJSON_Print(tj);
        put(dir, "tokenizer.json", out ? out : "");
        free(out);
        put(dir, "tokenizer_config.json", "{\"eos_token\":\"<|im_end|>\","
            "\"pad_token\":\"<|endoftext|>\",\"add_bos_token\":false}");
        t = llm_tokenizer_load_hf(dir, err, sizeof(err));
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0) {
            printf("# could not remove %s\n", dir);
        }
    }
    cJSON_Delete(post);
    cJSON_Delete(tj);
    free(text);
    if (!ok(t != NULL, "a Qwen3-Embedding-like tokenizer loads")) {
        return;
    }
    eot = llm_token_lookup(t, "<|endoftext|>", 13);
    im_end = llm_token_lookup(t, "<|im_end|>", 10);
    n = llm_tokenize(t, "a", 1, 1, 0, ids, 16);
    ok(n == 2 && ids[1] == eot && eot >= 0,
       "with special tokens a text ends in <|endoftext|> (%d ids, last %d)",
       n, n > 0 ? ids[n - 1] : -1);
    is_int(llm_tokenizer_eos(t), im_end, "the stop token stays <|im_end|>");
    n = llm_tokenize(t, "a", 1, 0, 0, ids, 16);
    is_int(n, 1, "without special tokens nothing is appended");
    llm_tokenizer_free(t);
}


int
main(void)
{
    llm_model       m;
    llm_tokenizer  *tok;
    cJSON          *root;
    char           *text, err[256];
    pair            p[MAX_PAIRS];
    rec             r[MAX_PAIRS];
    float          *logits, h[4096], h1[4096], score, s2;
    double          tol, worst = 0, d;
    int             i, n, same, yes, no, rc, ids_same;

    test_api();
    test_task();
    test_post_eos();

    text = tap_slurp(GOLDEN, NULL);
    root = text ? cJSON_Parse(text) : NULL;
    if (!ok(root != NULL, "golden %s read", GOLDEN)
        || !ok(llm_model_load(&m, MODEL, 0, 1) == 0, "%s loads", MODEL))
    {
        return tap_done();
    }
    tok = llm_model_tokenizer(&m, err, sizeof(err));
    ok(tok != NULL && llm_model_task(&m, LLM_TASK_SCORE, tok) == 0
       && m.cfg.score == LLM_SCORE_YES_NO && m.cfg.pooling == LLM_POOL_LAST
       && !m.cfg.pool_normalize,
       "task score: a yes/no reranker pooling the last token");
    yes = cJSON_GetObjectItem(root, "yes")->valueint;
    no = cJSON_GetObjectItem(root, "no")->valueint;
    is_int(m.cfg.score_yes, yes, "\"yes\" is transformers' id");
    is_int(m.cfg.score_no, no, "\"no\" is transformers' id");
    tol = cJSON_GetObjectItem(root, "tolerance")->valuedouble;

    n = load_golden(root, tok, p, &ids_same);
    ok(n == 5 && ids_same, "%d pairs: Qwen3-Reranker's prompt as "
       "transformers' tokenizer gives it, id for id", n);

    logits = malloc((size_t) m.cfg.vocab_size * sizeof(float));
    for (i = 0; i < n; i++) {
        rc = forward_one(&m, 1, &p[i], logits, h);
        rc |= llm_score(&m, h, &score);
        s2 = (float) (1.0 / (1.0 + exp((double) logits[no] - logits[yes])));
        d = fmax(fabs(logits[yes] - p[i].yes), fabs(logits[no] - p[i].no));
        d = fmax(d, fabs(score - p[i].score));
        worst = fmax(worst, d);
        ok(rc == 0 && d <= tol && fabs(score - s2) <= 1e-6,
           "pair %d (%d ids): logit(yes) %.5f, logit(no) %.5f, score %.6f "
           "(transformers %.6f); the head == the logits' softmax", i,
           p[i].n, logits[yes], logits[no], score, p[i].score);
    }
    printf("# oracle: max |engine - transformers| over logits and scores "
           "%.3g (tolerance %g)\n", worst, tol);

    ok(run_sched(&m, p, n, r) == 0, "%d pairs in one batcher, 8 tokens a "
       "step: each answered one float, once", n);
    for (i = 0; i < n; i++) {
        same = forward_one(&m, 0, &p[i], logits, h1) == 0
               && llm_score(&m, h1, &score) == 0;
        ok(same && r[i].v[0] == score && fabs(score - p[i].score) <= tol,
           "pair %d: batched %.7f == alone %.7f, bit for bit", i, r[i].v[0],
           score);
    }

    free(logits);
    llm_tokenizer_free(tok);
    llm_model_free(&m);
    cJSON_Delete(root);
    free(text);
    return tap_done();
}
