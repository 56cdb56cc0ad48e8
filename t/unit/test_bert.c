/*
 * BERT-family encoders (model/bert.c, backend/encoder.c) against
 * sentence-transformers and transformers (t/data/embed/bert.json, written
 * by tools/bert_oracle.py from tiny random-weight models):
 *
 *   1. Embedders: hf-bert-embed (bert, CLS pooling) and hf-nomic-embed
 *      (nomic-bert, mean pooling), both L2-normalised, each as its HF
 *      directory and as GGUF F32, F16 and Q8_0: the model's own tokenizer
 *      gives the golden ids, and the pooled vector is within the golden's
 *      cosine distance (1e-4) of sentence-transformers' encode for F32 and
 *      F16 weights, within Q8_TOLERANCE for Q8_0 (docs/numerics.md). The
 *      maxima are printed.
 *   2. The cross-encoder hf-bert-rerank (BertForSequenceClassification,
 *      one label), HF and GGUF F32/F16: llm_encoder_pair of the separately
 *      tokenized query and document == transformers' pair ids and types;
 *      llm_encoder_score's logit within 1e-3 of transformers', and its
 *      sigmoid of CrossEncoder.predict's score. The .nopooler GGUF (as
 *      llama.cpp's converter writes one: no pooler) loads and its logit is
 *      the classifier's on the [CLS] state (llama.cpp's rank pooling).
 *   3. The batcher's backend: three sequences in one forward == each
 *      alone, bit for bit; a sequence not starting at position 0, and
 *      logit rows, refused. A cross-encoder refuses embeddings and an
 *      embedder refuses scoring; token types past the table refused.
 *   4. The scheduler: the embeddings of all cases submitted at once with
 *      max_batched_tokens 48 (each input whole in a step, none chunked)
 *      == llm_pool of each forward alone, bit for bit; an input longer
 *      than max_batched_tokens refused (LLM_SCHED_TOO_LONG); no block
 *      registered in the prefix cache; the memory plan sizes no KV pool.
 *   5. The cross-encoder in the batcher: every golden pair submitted at
 *      once with its type_split (the types reach the forward as
 *      llm_batch.type), 64 tokens a step: each answers one float ==
 *      sigmoid(llm_encoder_score of the pair alone), bit for bit, within
 *      1e-3 of CrossEncoder.predict; the same pairs without types differ
 *      (the types are read). HF directory and GGUF F32/F16.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tap.h"
#include "backend/backend.h"
#include "backend/encoder.h"
#include "model/bert.h"
#include "model/model.h"
#include "model/plan.h"
#include "model/pool.h"
#include "model/score.h"
#include "params/sampling.h"
#include "sched/scheduler.h"

#define GOLDEN        "t/data/embed/bert.json"
#define MAX_IDS       128
#define MAX_CASES     16
#define Q8_TOLERANCE  2e-3


static int
json_ids(const cJSON *a, int32_t *ids, int max)
{
    const cJSON  *c;
    int           n = 0;

    cJSON_ArrayForEach(c, a) {
        if (n < max) {
            ids[n] = (int32_t) c->valuedouble;
        }
        n++;
    }
    return n;
}


/* 1 - cos(v, golden) */
static double
cos_dist(const float *v, const cJSON *golden, int n)
{
    double        dot = 0, a = 0, b = 0, g;
    const cJSON  *c;
    int           i = 0;

    cJSON_ArrayForEach(c, golden) {
        if (i >= n) {
            return 1.0;
        }
        g = c->valuedouble;
        dot += v[i] * g;
        a += (double) v[i] * v[i];
        b += g * g;
        i++;
    }
    return i == n ? 1.0 - dot / sqrt(a * b) : 1.0;
}


/* the pooled vector of ids, as the engine computes it */
static int
embed_one(const llm_model *m, const int32_t *ids, int n, float *out)
{
    const llm_config  *c = &m->cfg;
    float             *h = malloc((size_t) n * c->dim * sizeof(float));
    char               err[256];
    int                rc = -1;

    if (h != NULL && llm_encoder_forward(m, NULL, ids, NULL, n, h, err,
                                         sizeof(err)) == 0)
    {
        rc = llm_pool(h, n, c->dim, c->pooling, c->pool_normalize, c->dim,
                      out);
    } else {
        printf("# %s\n", err);
    }
    free(h);
    return rc;
}


/* ---- 1. embedders ------------------------------------------------------ */

static void
test_embedder(const cJSON *e, const char *suffix, double tol)
{
    const char   *dir = cJSON_GetObjectItem(e, "model")->valuestring;
    const char   *pool = cJSON_GetObjectItem(e, "pooling")->valuestring;
    const cJSON  *c;
    char          path[512], err[512];
    llm_model     m;
    llm_tokenizer *tok;
    int32_t       ids[MAX_IDS], want[MAX_IDS];
    float         v[512];
    double        worst = 0, d;
    int           n, nw, bad_ids = 0, cases = 0;

    snprintf(path, sizeof(path), "%s%s", dir, suffix);
    if (!ok(llm_model_load(&m, path, 0, 1) == 0, "%s loads (%s)", path,
            m.err))
    {
        llm_model_free(&m);
        return;
    }
    ok(m.cfg.encoder && m.cfg.pool_normalize
       && strcmp(llm_pool_type_name(m.cfg.pooling), pool) == 0,
       "%s: an encoder, %s pooling, normalised (pooling %s)", path, pool,
       llm_pool_type_name(m.cfg.pooling));
    tok = llm_model_tokenizer(&m, err, sizeof(err));
    ok(tok != NULL, "%s: tokenizer (%s)", path, tok ? "" : err);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(e, "cases")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;

        nw = json_ids(cJSON_GetObjectItem(c, "ids"), want, MAX_IDS);
        n = tok ? llm_tokenize(tok, text, strlen(text), 1, 0, ids, MAX_IDS)
                : -1;
        if (n != nw || memcmp(ids, want, n * sizeof(int32_t)) != 0) {
            bad_ids++;
        }
        d = embed_one(&m, want, nw, v) == 0
            ? cos_dist(v, cJSON_GetObjectItem(c, "vector"), m.cfg.dim) : 1;
        worst = d > worst ? d : worst;
        cases++;
    }
    is_int(bad_ids, 0, "%s: %d texts tokenized as the golden", path, cases);
    ok(cases >= 8 && worst <= tol, "%s: %d vectors within cosine distance "
       "%g of sentence-transformers (max %.3g)", path, cases, tol, worst);
    printf("# oracle max %s: cosine distance %.3g\n", path, worst);
    llm_tokenizer_free(tok);
    llm_model_free(&m);
}


/* ---- 2. the cross-encoder --------------------------------------------- */

static void
test_rerank(const cJSON *r, const char *suffix)
{
    const char   *dir = cJSON_GetObjectItem(r, "model")->valuestring;
    const cJSON  *c;
    char          path[512], err[512];
    llm_model     m;
    llm_tokenizer *tok;
    int32_t       q[MAX_IDS], d[MAX_IDS], ids[MAX_IDS], types[MAX_IDS];
    int32_t       want[MAX_IDS], want_t[MAX_IDS];
    float         logit;
    double        worst = 0, worst_s = 0, e;
    int           nq, nd, n = 0, nw, bad = 0, cases = 0;

    snprintf(path, sizeof(path), "%s%s", dir, suffix);
    if (!ok(llm_model_load(&m, path, 0, 1) == 0, "%s loads (%s)", path,
            m.err))
    {
        llm_model_free(&m);
        return;
    }
    ok(m.cfg.score == LLM_SCORE_CLASSIFIER && m.score_head != NULL
       && m.cfg.pooling == LLM_POOL_CLS && !m.cfg.pool_normalize,
       "%s: a cross-encoder (the score hook on the [CLS] state)", path);
    tok = llm_model_tokenizer(&m, err, sizeof(err));
    if (!ok(tok != NULL, "%s: tokenizer", path)) {
        llm_model_free(&m);
        return;
    }
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(r, "cases")) {
        const char *qt = cJSON_GetObjectItem(c, "query")->valuestring;
        const char *dt = cJSON_GetObjectItem(c, "document")->valuestring;

        nq = llm_tokenize(tok, qt, strlen(qt), 0, 0, q, MAX_IDS);
        nd = llm_tokenize(tok, dt, strlen(dt), 0, 0, d, MAX_IDS);
        n = llm_encoder_pair(llm_tokenizer_bos(tok), llm_tokenizer_eos(tok),
                             q, nq, d, nd, ids, types, MAX_IDS);
        nw = json_ids(cJSON_GetObjectItem(c, "ids"), want, MAX_IDS);
        json_ids(cJSON_GetObjectItem(c, "types"), want_t, MAX_IDS);
        if (n != nw || memcmp(ids, want, n * sizeof(int32_t)) != 0
            || memcmp(types, want_t, n * sizeof(int32_t)) != 0)
        {
            bad++;
        }
        if (llm_encoder_score(&m, NULL, want, want_t, nw, &logit, err,
                              sizeof(err)) != 0)
        {
            printf("# %s\n", err);
            logit = NAN;
        }
        e = fabs(logit - cJSON_GetObjectItem(c, "logit")->valuedouble);
        worst = e > worst || isnan(e) ? e : worst;
        e = fabs(1.0 / (1.0 + exp(-logit))
                 - cJSON_GetObjectItem(c, "score")->valuedouble);
        worst_s = e > worst_s || isnan(e) ? e : worst_s;
        cases++;
    }
    is_int(bad, 0, "%s: %d pairs' ids and types as transformers'", path,
           cases);
    ok(cases >= 3 && worst <= 1e-3, "%s: logits within 1e-3 of "
       "transformers (max %.3g)", path, worst);
    ok(worst_s <= 1e-3, "%s: sigmoid within 1e-3 of CrossEncoder.predict "
       "(max %.3g)", path, worst_s);
    printf("# oracle max %s: logit %.3g, score %.3g\n", path, worst,
           worst_s);
    /* types past the table are refused */
    types[0] = 2;
    ok(llm_encoder_score(&m, NULL, ids, types, n, &logit, err, sizeof(err))
       != 0 && strstr(err, "type") != NULL, "type 2 refused (%s)", err);
    llm_tokenizer_free(tok);
    llm_model_free(&m);
}


/* llama.cpp's conversion of a cross-encoder drops BERT's pooler: the file
   loads, and its logit is the classifier's on the [CLS] state, as
   llama.cpp's rank pooling computes it */
static void
test_rerank_nopooler(const cJSON *r)
{
    const char   *dir = cJSON_GetObjectItem(r, "model")->valuestring;
    const cJSON  *c;
    char          path[512], err[512];
    llm_model     m;
    int32_t       ids[MAX_IDS], types[MAX_IDS];
    float         logit;
    double        worst = 0, e;
    int           n, cases = 0;

    snprintf(path, sizeof(path), "%s.nopooler.gguf", dir);
    if (!ok(llm_model_load(&m, path, 0, 1) == 0, "%s loads (%s)", path,
            m.err))
    {
        llm_model_free(&m);
        return;
    }
    ok(m.cfg.score == LLM_SCORE_CLASSIFIER && m.bert->pooler.data == NULL,
       "%s: a cross-encoder without a pooler", path);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(r, "cases")) {
        n = json_ids(cJSON_GetObjectItem(c, "ids"), ids, MAX_IDS);
        json_ids(cJSON_GetObjectItem(c, "types"), types, MAX_IDS);
        if (llm_encoder_score(&m, NULL, ids, types, n, &logit, err,
                              sizeof(err)) != 0)
        {
            logit = NAN;
        }
        e = fabs(logit - cJSON_GetObjectItem(c, "logit_no_pooler")
                         ->valuedouble);
        worst = e > worst || isnan(e) ? e : worst;
        cases++;
    }
    ok(cases >= 3 && worst <= 1e-3, "%s: logits within 1e-3 of "
       "transformers' classifier on the [CLS] state (max %.3g)", path,
       worst);
    printf("# oracle max %s: logit %.3g\n", path, worst);
    llm_model_free(&m);
}


/* ---- 3. the batcher's backend ----------------------------------------- */

static void
test_backend(const cJSON *e)
{
    const char          *dir = cJSON_GetObjectItem(e, "model")->valuestring;
    const cJSON         *c;
    llm_model            m;
    llm_backend_options  o;
    llm_backend         *be;
    char                 err[512];
    int32_t              tok[3 * MAX_IDS], pos[3 * MAX_IDS], seq[3 * MAX_IDS];
    int32_t              hidx[3 * MAX_IDS], one[MAX_IDS];
    float               *hid, *alone;
    int                  n[3] = { 0 }, i, k, t = 0, same = 1, dim;
    llm_batch            b;
    float                logits[8];

    if (llm_model_load(&m, dir, 0, 1) != 0) {
        ok(0, "%s loads (%s)", dir, m.err);
        return;
    }
    dim = m.cfg.dim;
    llm_backend_options_default(&o, &m);
    o.max_batch_tokens = 3 * MAX_IDS;
    be = llm_backend_create("cpu", &m, &o, err, sizeof(err));
    ok(be != NULL, "encoder backend (%s)", be ? be->iface.name : err);
    hid = malloc(sizeof(float) * 3 * MAX_IDS * dim);
    alone = malloc(sizeof(float) * MAX_IDS * dim);
    for (i = 0, c = cJSON_GetObjectItem(e, "cases")->child; i < 3 && c;
         i++, c = c->next)
    {
        n[i] = json_ids(cJSON_GetObjectItem(c, "ids"), one, MAX_IDS);
        for (k = 0; k < n[i]; k++, t++) {
            tok[t] = one[k];
            pos[t] = k;
            seq[t] = i;
            hidx[t] = t;
        }
    }
    memset(&b, 0, sizeof(b));
    b.n_tokens = t;
    b.token = tok;
    b.pos = pos;
    b.seq = seq;
    b.n_seqs = 3;
    b.n_hidden = t;
    b.hidden_idx = hidx;
    b.hidden = hid;
    ok(be != NULL && llm_backend_forward(be, &b) == 0,
       "three sequences in one forward (%s)", be ? be->err : "");
    for (i = 0, t = 0; i < 3; t += n[i], i++) {
        char e2[256];

        llm_encoder_forward(&m, NULL, tok + t, NULL, n[i], alone, e2,
                            sizeof(e2));
        same &= memcmp(alone, hid + (size_t) t * dim,
                       (size_t) n[i] * dim * sizeof(float)) == 0;
    }
    ok(same, "batched == alone, bit for bit");
    pos[0] = 1;
    ok(be != NULL && llm_backend_forward(be, &b) != 0
       && strstr(be->err, "one forward") != NULL,
       "a sequence not from position 0 refused (%s)", be ? be->err : "");
    pos[0] = 0;
    b.n_logits = 1;
    b.logit_idx = hidx;
    b.logits = logits;
    ok(be != NULL && llm_backend_forward(be, &b) != 0,
       "logit rows refused (%s)", be ? be->err : "");
    ok(llm_encoder_score(&m, NULL, tok, NULL, n[0], logits, err,
                         sizeof(err)) != 0
       && strstr(err, "cross-encoder") != NULL,
       "an embedder refuses scoring (%s)", err);
    free(hid);
    free(alone);
    llm_backend_free(be);
    llm_model_free(&m);
}


/* ---- 4. the scheduler --------------------------------------------------- */

typedef struct {
    float    vec[512];
    int      dims;
    int      n_emb;
    int      n_fin;
} rec;


static void
on_embedding(void *user, const float *vec, int dims)
{
    rec  *r = user;

    memcpy(r->vec, vec, (size_t) dims * sizeof(float));
    r->dims = dims;
    r->n_emb++;
}


static void
on_finish(void *user, const llm_seq_result *res)
{
    rec  *r = user;

    (void) res;
    r->n_fin++;
}


static void
test_sched(const cJSON *e)
{
    const char           *dir = cJSON_GetObjectItem(e, "model")->valuestring;
    const cJSON          *c;
    llm_model             m;
    llm_backend_options   o;
    llm_backend          *be;
    llm_sched_options     so;
    llm_sched            *s = NULL;
    llm_request           req;
    llm_seq              *q;
    char                  err[512];
    static int32_t        ids[MAX_CASES][MAX_IDS], longer[64];
    static rec            r[MAX_CASES];
    float                 want[512];
    int                   n[MAX_CASES], k = 0, i, same = 1, steps = 0;
    int                   added = 1, rc;
    llm_sched_stats       st;
    llm_plan_shape        sh;
    llm_plan_options      po;
    llm_plan              plan;

    if (llm_model_load(&m, dir, 0, 1) != 0) {
        ok(0, "%s loads (%s)", dir, m.err);
        return;
    }
    llm_backend_options_default(&o, &m);
    be = llm_backend_create("cpu", &m, &o, err, sizeof(err));
    llm_sched_options_default(&so);
    so.max_batched_tokens = 48;
    so.on_embedding = on_embedding;
    so.on_finish = on_finish;
    s = be ? llm_sched_create(be, &so, err, sizeof(err)) : NULL;
    if (!ok(s != NULL, "scheduler on the encoder (%s)", s ? "" : err)) {
        llm_backend_free(be);
        llm_model_free(&m);
        return;
    }
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(e, "cases")) {
        if (k == MAX_CASES) {
            break;
        }
        n[k] = json_ids(cJSON_GetObjectItem(c, "ids"), ids[k], MAX_IDS);
        memset(&r[k], 0, sizeof(r[k]));
        memset(&req, 0, sizeof(req));
        req.prompt = ids[k];
        req.n_prompt = n[k];
        llm_sampling_params_default(&req.sampling);
        req.embed = 1;
        req.user = &r[k];
        added &= llm_sched_add(s, &req, &q, err, sizeof(err))
                 == LLM_SCHED_OK;
        k++;
    }
    ok(added, "%d embeddings added (%s)", k, added ? "" : err);
    while (llm_sched_has_work(s) && steps++ < 1000) {
        if (llm_sched_step(s) < 0) {
            same = 0;
        }
    }
    for (i = 0; i < k; i++) {
        same &= r[i].n_emb == 1 && r[i].n_fin == 1 && r[i].dims == m.cfg.dim
                && embed_one(&m, ids[i], n[i], want) == 0
                && memcmp(want, r[i].vec, m.cfg.dim * sizeof(float)) == 0;
    }
    ok(same, "%d embeddings through the batcher (48 tokens a step, %d "
       "steps) == each forward alone, bit for bit", k, steps);
    llm_sched_stats_get(s, &st);
    ok(so.prefix_caching == 1 && st.kv_blocks_cached == 0
       && st.prefix_hit_tokens == 0, "prefix caching asked, yet no encoder "
       "block registered (%d cached) nor hit", st.kv_blocks_cached);
    llm_plan_shape_of(&sh, &m);
    memset(&po, 0, sizeof(po));
    po.tp = 1;
    po.threads = 1;
    po.max_batched_tokens = 48;
    po.max_model_len = 128;
    po.max_num_seqs = 8;
    po.kv_block_size = 16;
    po.kv_cache_bytes = 1u << 30;
    rc = llm_plan_compute(&plan, &sh, &po);
    ok(rc == 0 && plan.kv_pool_bytes == 0
       && plan.kv_token_bytes == 0 && plan.kv_blocks == 8 * 128 / 16,
       "the plan sizes no KV pool for an encoder (%llu bytes, %d blocks "
       "counting admissions)", (unsigned long long) plan.kv_pool_bytes,
       plan.kv_blocks);
    for (i = 0; i < 60; i++) {
        longer[i] = ids[0][i % n[0]];
    }
    memset(&req, 0, sizeof(req));
    req.prompt = longer;
    req.n_prompt = 60;
    llm_sampling_params_default(&req.sampling);
    req.embed = 1;
    req.user = &r[0];
    rc = llm_sched_add(s, &req, &q, err, sizeof(err));
    ok(rc == LLM_SCHED_TOO_LONG && strstr(err, "one forward") != NULL,
       "60 tokens past max_batched_tokens 48 refused (%s)", err);
    llm_sched_free(s);
    llm_backend_free(be);
    llm_model_free(&m);
}


/* ---- 5. the cross-encoder in the batcher ------------------------------ */

static void
test_rerank_sched(const cJSON *r, const char *suffix)
{
    const char           *dir = cJSON_GetObjectItem(r, "model")->valuestring;
    const cJSON          *c;
    llm_model             m;
    llm_backend_options   o;
    llm_backend          *be;
    llm_sched_options     so;
    llm_sched            *s = NULL;
    llm_request           req;
    llm_seq              *q;
    char                  path[512], err[512];
    static int32_t        ids[MAX_CASES][MAX_IDS], types[MAX_CASES][MAX_IDS];
    static rec            rc[2][MAX_CASES];
    float                 logit, want;
    double                worst = 0, e;
    int                   n[MAX_CASES], split[MAX_CASES], k = 0, i, j;
    int                   pass, same = 1, typed = 0, added = 1, steps = 0;

    snprintf(path, sizeof(path), "%s%s", dir, suffix);
    if (llm_model_load(&m, path, 0, 1) != 0) {
        ok(0, "%s loads (%s)", path, m.err);
        return;
    }
    llm_backend_options_default(&o, &m);
    be = llm_backend_create("cpu", &m, &o, err, sizeof(err));
    llm_sched_options_default(&so);
    so.max_batched_tokens = 64;
    so.on_embedding = on_embedding;
    so.on_finish = on_finish;
    s = be ? llm_sched_create(be, &so, err, sizeof(err)) : NULL;
    if (!ok(s != NULL, "%s: scheduler on the cross-encoder (%s)", path,
            s ? "" : err))
    {
        llm_backend_free(be);
        llm_model_free(&m);
        return;
    }
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(r, "cases")) {
        if (k == MAX_CASES) {
            break;
        }
        n[k] = json_ids(cJSON_GetObjectItem(c, "ids"), ids[k], MAX_IDS);
        json_ids(cJSON_GetObjectItem(c, "types"), types[k], MAX_IDS);
        for (split[k] = 0; split[k] < n[k] && types[k][split[k]] == 0;
             split[k]++) { /* void */ }
        k++;
    }
    /* pass 0 with the pairs' types, pass 1 all type 0 */
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < k; i++) {
            memset(&rc[pass][i], 0, sizeof(rec));
            memset(&req, 0, sizeof(req));
            req.prompt = ids[i];
            req.n_prompt = n[i];
            req.type_split = pass == 0 ? split[i] : 0;
            llm_sampling_params_default(&req.sampling);
            req.embed = 1;
            req.user = &rc[pass][i];
            added &= llm_sched_add(s, &req, &q, err, sizeof(err))
                     == LLM_SCHED_OK;
        }
    }
    ok(added, "%s: %d pairs added twice (%s)", path, k, added ? "" : err);
    while (llm_sched_has_work(s) && steps++ < 1000) {
        if (llm_sched_step(s) < 0) {
            same = 0;
        }
    }
    for (i = 0; i < k; i++) {
        c = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "cases"), i);
        if (llm_encoder_score(&m, NULL, ids[i], types[i], n[i], &logit, err,
                              sizeof(err)) != 0)
        {
            same = 0;
            continue;
        }
        want = (float) (1.0 / (1.0 + exp(-(double) logit)));
        for (j = 0; j < 2; j++) {
            same &= rc[j][i].n_emb == 1 && rc[j][i].n_fin == 1
                    && rc[j][i].dims == 1;
        }
        same &= memcmp(&want, &rc[0][i].vec[0], sizeof(float)) == 0;
        typed += rc[0][i].vec[0] != rc[1][i].vec[0];
        e = fabs(rc[0][i].vec[0]
                 - cJSON_GetObjectItem(c, "score")->valuedouble);
        worst = e > worst || isnan(e) ? e : worst;
    }
    ok(same, "%s: %d pairs through the batcher (64 tokens a step, %d "
       "steps) == each scored alone, bit for bit", path, k, steps);
    ok(typed == k, "%s: the types are read (%d of %d scores change "
       "without them)", path, typed, k);
    ok(k >= 3 && worst <= 1e-3, "%s: batcher scores within 1e-3 of "
       "CrossEncoder.predict (max %.3g)", path, worst);
    printf("# oracle max %s through the batcher: score %.3g\n", path, worst);
    llm_sched_free(s);
    llm_backend_free(be);
    llm_model_free(&m);
}


int
main(void)
{
    char         *text = tap_slurp(GOLDEN, NULL);
    cJSON        *root = text ? cJSON_Parse(text) : NULL;
    const cJSON  *e;
    double        tol;

    if (root == NULL) {
        tap_bail_out("cannot read " GOLDEN);
    }
    tol = cJSON_GetObjectItem(root, "tolerance")->valuedouble;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "embedders")) {
        test_embedder(e, "", tol);
        test_embedder(e, ".gguf", tol);
        test_embedder(e, ".f16.gguf", tol);
        test_embedder(e, ".q8_0.gguf", Q8_TOLERANCE);
    }
    e = cJSON_GetObjectItem(root, "rerank");
    test_rerank(e, "");
    test_rerank(e, ".gguf");
    test_rerank(e, ".f16.gguf");
    test_rerank_nopooler(e);
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "embedders")) {
        test_backend(e);
        test_sched(e);
    }
    e = cJSON_GetObjectItem(root, "rerank");
    test_rerank_sched(e, "");
    test_rerank_sched(e, ".gguf");
    test_rerank_sched(e, ".f16.gguf");
    cJSON_Delete(root);
    free(text);
    return tap_done();
}
