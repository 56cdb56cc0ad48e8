/*
 * Embeddings (issue 32): the final hidden states a forward gives
 * (llm_batch.hidden, rows hidden_idx) pooled by model/pool.c.
 *
 *   1. Oracle: t/data/models/hf-qwen3 (tiny random-weight Qwen3) pooled
 *      last-token and mean, L2-normalised, and Matryoshka-truncated, within
 *      the golden's tolerance (1e-4 per component) of transformers' fp32
 *      last_hidden_state pooled as sentence-transformers
 *      (tools/embed_oracle.py writes t/data/embed/hf-qwen3.json).
 *      The backend runs exact (float activations, double sums).
 *   2. Batched == alone, bit for bit: the three prompts in one forward
 *      (three sequences) give the same pooled vectors as each alone, at the
 *      default (fast) numerics.
 *   3. Hidden rows beside logit rows change no logit and no hidden state;
 *      a bad hidden row index is refused.
 *   4. Pool types: none and rank refused, names parsed (max refused).
 *   5. The model's pooling (pool_config.c): hf-qwen3 and its GGUF twin
 *      are generation models; the directory with a sentence-transformers
 *      modules.json (Transformer, Pooling lasttoken, Normalize) is a
 *      normalised last-token embedder; Dense, max pooling, include_prompt
 *      false refused by name; Matryoshka only with is_matryoshka.
 *   6. The batcher: three embeddings (last and mean pooling, Matryoshka
 *      16) and a generation submitted together, prefilled in chunks of 8
 *      tokens a step: each vector equals llm_pool over its prompt run
 *      alone in one forward, bit for bit; the generation gives the tokens
 *      it gives alone; a generation model refuses an embedding.
 */
#define _GNU_SOURCE    /* mkdtemp */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tap.h"
#include "backend/backend.h"
#include "model/model.h"
#include "model/pool.h"
#include "params/sampling.h"
#include "sched/scheduler.h"

#define MODEL      "t/data/models/hf-qwen3"
#define GOLDEN     "t/data/embed/hf-qwen3.json"
#define MAX_IDS    256
#define MAX_CASES  8


typedef struct {
    int32_t   ids[MAX_IDS];
    int       n;
} prompt;


/*
 * One forward of n_p prompts as n_p sequences (each its own KV blocks),
 * every token's hidden state into hidden (total tokens, dim), and, when
 * logits is not NULL, every token's logits. 0 on success.
 */
static int
forward_all(const llm_model *m, int exact, const prompt *p, int n_p,
    float *hidden, float *logits)
{
    llm_backend_options   o;
    llm_backend          *be;
    llm_batch             b;
    int32_t               tok[MAX_CASES * MAX_IDS], pos[MAX_CASES * MAX_IDS];
    int32_t               seq[MAX_CASES * MAX_IDS], idx[MAX_CASES * MAX_IDS];
    int32_t              *table[MAX_CASES], n_blocks[MAX_CASES];
    const int32_t        *tables[MAX_CASES];
    char                  err[512];
    int                   s, i, n = 0, per, rc;

    llm_backend_options_default(&o, m);
    o.n_threads = exact ? 1 : 2;
    o.exact = exact;
    o.max_batch_tokens = MAX_CASES * MAX_IDS;
    be = llm_backend_create("cpu", m, &o, err, sizeof(err));
    if (be == NULL) {
        printf("# %s\n", err);
        return -1;
    }
    per = be->opt.kv_n_blocks / MAX_CASES;
    for (s = 0; s < n_p; s++) {
        table[s] = malloc(per * sizeof(int32_t));
        for (i = 0; i < per; i++) {
            table[s][i] = s * per + i;
        }
        tables[s] = table[s];
        n_blocks[s] = per;
        for (i = 0; i < p[s].n; i++, n++) {
            tok[n] = p[s].ids[i];
            pos[n] = i;
            seq[n] = s;
            idx[n] = n;
        }
    }
    memset(&b, 0, sizeof(b));
    b.n_tokens = n;
    b.token = tok;
    b.pos = pos;
    b.seq = seq;
    b.n_seqs = n_p;
    b.block_table = tables;
    b.n_blocks = n_blocks;
    b.n_logits = logits ? n : 0;
    b.logit_idx = idx;
    b.logits = logits;
    b.n_hidden = hidden ? n : 0;
    b.hidden_idx = idx;
    b.hidden = hidden;
    rc = llm_backend_forward(be, &b);
    if (rc != 0) {
        printf("# forward: %s\n", be->err);
    }
    llm_backend_free(be);
    for (s = 0; s < n_p; s++) {
        free(table[s]);
    }
    return rc;
}


static double
max_diff(const float *v, const cJSON *golden, int n)
{
    double  worst = 0, d;
    int     i;

    if (cJSON_GetArraySize(golden) != n) {
        return INFINITY;
    }
    for (i = 0; i < n; i++) {
        d = fabs(v[i] - cJSON_GetArrayItem(golden, i)->valuedouble);
        worst = d > worst ? d : worst;
    }
    return worst;
}


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


#define ST_MODULES(extra)                                                   \
    "[{\"idx\":0,\"name\":\"0\",\"path\":\"\","                           \
    "\"type\":\"sentence_transformers.models.Transformer\"},"             \
    "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\","                   \
    "\"type\":\"sentence_transformers.models.Pooling\"}" extra "]"

/*
 * A copy of hf-qwen3 (weights linked) with modules.json, 1_Pooling and
 * config.json as given; loads it into *m. Returns llm_model_load's rc.
 */
static int
st_dir(llm_model *m, const char *modules, const char *pooling,
    const char *config_extra)
{
    char   dir[] = "/tmp/test_embed.XXXXXX", path[1024], src[1024];
    char  *cfg, *end;
    int    rc;

    if (mkdtemp(dir) == NULL) {
        return -2;
    }
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    if (realpath(MODEL "/model.safetensors", src) == NULL
        || symlink(src, path) != 0)
    {
        return -2;
    }
    cfg = tap_slurp(MODEL "/config.json", NULL);
    end = cfg ? strrchr(cfg, '}') : NULL;
    if (end == NULL) {
        return -2;
    }
    *end = '\0';
    snprintf(path, sizeof(path), "%s%s}\n", cfg, config_extra);
    free(cfg);
    put(dir, "config.json", path);
    put(dir, "modules.json", modules);
    snprintf(path, sizeof(path), "%s/1_Pooling", dir);
    mkdir(path, 0700);
    put(dir, "1_Pooling/config.json", pooling);
    rc = llm_model_load(m, dir, 0, 1);
    if (rc != 0) {
        printf("# %s\n", m->err);
    }
    snprintf(path, sizeof(path), "rm -rf '%s'", dir);
    if (system(path) != 0) {
        printf("# could not remove %s\n", dir);
    }
    return rc;
}


#define LAST_POOL  "{\"word_embedding_dimension\":64," \
                   "\"pooling_mode_lasttoken\":true}"

static void
test_pool_config(void)
{
    llm_model  m;
    int        rc;

    rc = llm_model_load(&m, MODEL, 0, 1);
    ok(rc == 0 && m.cfg.pooling == LLM_POOL_NONE,
       "hf-qwen3 (no modules.json) is a generation model");
    llm_model_free(&m);
    rc = llm_model_load(&m, MODEL ".gguf", 0, 1);
    ok(rc == 0 && m.cfg.pooling == LLM_POOL_NONE,
       "hf-qwen3.gguf (no pooling_type) is a generation model");
    llm_model_free(&m);

    rc = st_dir(&m, ST_MODULES(",{\"idx\":2,\"name\":\"2\",\"path\":"
                "\"2_Normalize\",\"type\":"
                "\"sentence_transformers.models.Normalize\"}"),
                LAST_POOL, "");
    ok(rc == 0 && m.cfg.pooling == LLM_POOL_LAST && m.cfg.pool_normalize
       && !m.cfg.matryoshka,
       "Transformer + Pooling lasttoken + Normalize: normalised last token, "
       "no Matryoshka");
    llm_model_free(&m);
    rc = st_dir(&m, ST_MODULES(""), "{\"pooling_mode_mean_tokens\":true}",
                ",\"is_matryoshka\":true");
    ok(rc == 0 && m.cfg.pooling == LLM_POOL_MEAN && !m.cfg.pool_normalize
       && m.cfg.matryoshka, "mean, no Normalize, is_matryoshka");
    llm_model_free(&m);
    rc = st_dir(&m, ST_MODULES(",{\"idx\":2,\"name\":\"2\",\"path\":"
                "\"2_Dense\",\"type\":"
                "\"sentence_transformers.models.Dense\"}"), LAST_POOL, "");
    ok(rc == -1 && strstr(m.err, "module Dense (2_Dense) is not supported"),
       "a Dense module refused by name");
    llm_model_free(&m);
    rc = st_dir(&m, ST_MODULES(""), "{\"pooling_mode_max_tokens\":true}",
                "");
    ok(rc == -1 && strstr(m.err, "pooling_mode_max_tokens is not supported"),
       "max pooling refused by name");
    llm_model_free(&m);
    rc = st_dir(&m, ST_MODULES(""), "{\"pooling_mode_lasttoken\":true,"
                "\"include_prompt\":false}", "");
    ok(rc == -1 && strstr(m.err, "include_prompt false is not supported"),
       "include_prompt false refused by name");
    llm_model_free(&m);
}


/* ---- 6. the batcher ----------------------------------------------------- */

typedef struct {
    float    vec[4096];
    int      dims;
    int      n_emb;             /* on_embedding calls */
    int      n_fin;
    int      finish;
    int32_t  out[16];
    int      n_out;
} rec;


static void
on_token(void *user, int32_t token, const llm_sample_out *lp)
{
    rec  *r = user;

    (void) lp;
    if (r->n_out < 16) {
        r->out[r->n_out++] = token;
    }
}


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

    r->n_fin++;
    r->finish = res->finish;
}


/* n requests (embed[i]: an embedding of dims[i], else 4 greedy tokens)
   through one scheduler, 8 tokens a step; 0 when every one finished once */
static int
run_sched(llm_model *m, const prompt *p, const int *embed, const int *dims,
    int n, rec *r)
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
    so.on_token = on_token;
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
        req.sampling.temperature = 0;
        req.max_tokens = 4;
        req.ignore_eos = 1;
        req.embed = embed[i];
        req.embed_dims = dims[i];
        req.user = &r[i];
        if (llm_sched_add(s, &req, &q, err, sizeof(err)) != LLM_SCHED_OK) {
            printf("# add %d: %s\n", i, err);
            rc = -1;
        }
    }
    while (llm_sched_has_work(s) && steps++ < 1000) {
        if (llm_sched_step(s) < 0) {
            rc = -1;
        }
    }
    for (i = 0; i < n; i++) {
        rc |= r[i].n_fin == 1 ? 0 : -1;
    }
    llm_sched_free(s);
    llm_backend_free(be);
    return rc;
}


static void
test_sched(llm_model *m, const prompt *p)
{
    static rec   r[4], alone;
    prompt       four[4];
    int          embed[4] = { 1, 1, 0, 1 }, dims[4] = { 0, 0, 0, 16 };
    int          i, dim = m->cfg.dim, pool, same;
    float       *h = malloc((size_t) MAX_IDS * dim * sizeof(float));
    float        v[4096];
    llm_backend_options   o;
    llm_backend          *be;
    llm_sched_options     so;
    llm_sched            *s;
    llm_request           req;
    llm_seq              *q;
    char                  err[512];

    four[0] = p[0];
    four[1] = p[1];
    four[2] = p[0];
    four[3] = p[2];
    for (pool = LLM_POOL_MEAN; pool <= LLM_POOL_LAST; pool += 2) {
        m->cfg.pooling = pool;
        m->cfg.pool_normalize = 1;
        if (!ok(run_sched(m, four, embed, dims, 4, r) == 0,
                "%s: 3 embeddings and a generation, 8 tokens a step: all "
                "finished once", llm_pool_type_name(pool)))
        {
            continue;
        }
        for (i = 0; i < 4; i++) {
            if (!embed[i]) {
                continue;
            }
            same = forward_all(m, 0, &four[i], 1, h, NULL) == 0;
            llm_pool(h, four[i].n, dim, pool, 1, dims[i] ? dims[i] : dim, v);
            same &= r[i].n_emb == 1 && r[i].finish == LLM_SEQ_STOP
                    && r[i].dims == (dims[i] ? dims[i] : dim)
                    && memcmp(v, r[i].vec, r[i].dims * sizeof(float)) == 0
                    && r[i].n_out == 0;
            ok(same, "%s: embedding %d (%d tokens, %d dims) == its prompt "
               "alone in one forward, bit for bit", llm_pool_type_name(pool),
               i, four[i].n, r[i].dims);
        }
        ok(run_sched(m, &four[2], &embed[2], &dims[2], 1, &alone) == 0
           && alone.n_out == 4 && r[2].n_out == 4
           && memcmp(alone.out, r[2].out, sizeof(alone.out)) == 0
           && r[2].n_emb == 0,
           "%s: the generation beside them gives its tokens alone",
           llm_pool_type_name(pool));
    }

    m->cfg.pooling = LLM_POOL_NONE;
    llm_backend_options_default(&o, m);
    be = llm_backend_create("cpu", m, &o, err, sizeof(err));
    llm_sched_options_default(&so);
    so.on_finish = on_finish;
    s = be ? llm_sched_create(be, &so, err, sizeof(err)) : NULL;
    memset(&req, 0, sizeof(req));
    req.prompt = p[0].ids;
    req.n_prompt = p[0].n;
    llm_sampling_params_default(&req.sampling);
    req.embed = 1;
    ok(s != NULL && llm_sched_add(s, &req, &q, err, sizeof(err))
                    == LLM_SCHED_BAD_REQUEST
       && strstr(err, "not an embedding model"),
       "a generation model refuses an embedding (%s)", err);
    llm_sched_free(s);
    llm_backend_free(be);
    free(h);
}


int
main(void)
{
    llm_model      m;
    char          *text;
    cJSON         *root, *c;
    prompt         p[MAX_CASES];
    int            n_p = 0, dim, tdim, s, i, off, total, same;
    double         tol, d, worst = 0;
    float         *h_exact, *h_one, *h_all, *lg_a, *lg_b;
    float          v[4096], w[4096];

    text = tap_slurp(GOLDEN, NULL);
    root = text ? cJSON_Parse(text) : NULL;
    if (!ok(root != NULL, "golden %s parses", GOLDEN)
        || !ok(llm_model_load(&m, MODEL, 0, 1) == 0, "%s loads", MODEL))
    {
        return tap_done();
    }
    dim = m.cfg.dim;
    tdim = cJSON_GetObjectItem(root, "truncate_dim")->valueint;
    tol = cJSON_GetObjectItem(root, "tolerance")->valuedouble;
    is_int(dim, cJSON_GetObjectItem(root, "hidden_size")->valueint,
           "hidden size as the golden's");

    total = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        const cJSON *id;
        p[n_p].n = 0;
        cJSON_ArrayForEach(id, cJSON_GetObjectItem(c, "prompt_ids")) {
            p[n_p].ids[p[n_p].n++] = (int32_t) id->valuedouble;
        }
        total += p[n_p].n;
        if (++n_p == MAX_CASES) {
            break;
        }
    }
    ok(n_p == 3, "3 golden cases");

    /* 1. the oracle, one prompt per forward, exact numerics */
    h_exact = malloc((size_t) MAX_IDS * dim * sizeof(float));
    s = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        if (!ok(forward_all(&m, 1, &p[s], 1, h_exact, NULL) == 0,
                "case %d: exact forward, hidden states only", s))
        {
            break;
        }
        llm_pool(h_exact, p[s].n, dim, LLM_POOL_LAST, 0, dim, v);
        d = max_diff(v, cJSON_GetObjectItem(c, "last_raw"), dim);
        worst = d > worst ? d : worst;
        ok(d <= tol, "case %d: last hidden state within %g (%.3g)", s, tol, d);
        llm_pool(h_exact, p[s].n, dim, LLM_POOL_LAST, 1, dim, v);
        d = max_diff(v, cJSON_GetObjectItem(c, "last"), dim);
        worst = d > worst ? d : worst;
        ok(d <= tol, "case %d: last-token pooling within %g (%.3g)",
           s, tol, d);
        llm_pool(h_exact, p[s].n, dim, LLM_POOL_MEAN, 1, dim, v);
        d = max_diff(v, cJSON_GetObjectItem(c, "mean"), dim);
        worst = d > worst ? d : worst;
        ok(d <= tol, "case %d: mean pooling within %g (%.3g)", s, tol, d);
        llm_pool(h_exact, p[s].n, dim, LLM_POOL_LAST, 1, tdim, v);
        d = max_diff(v, cJSON_GetObjectItem(c, "last_truncated"), tdim);
        worst = d > worst ? d : worst;
        ok(d <= tol, "case %d: truncated to %d within %g (%.3g)",
           s, tdim, tol, d);
        s++;
    }
    printf("# oracle: max |engine - transformers| = %.3g\n", worst);

    /* 2. batched == alone, bit for bit, fast numerics */
    h_one = malloc((size_t) MAX_IDS * dim * sizeof(float));
    h_all = malloc((size_t) total * dim * sizeof(float));
    ok(forward_all(&m, 0, p, n_p, h_all, NULL) == 0, "3 prompts, one batch");
    off = 0;
    for (s = 0; s < n_p; s++) {
        ok(forward_all(&m, 0, &p[s], 1, h_one, NULL) == 0, "case %d alone",
           s);
        same = memcmp(h_one, h_all + (size_t) off * dim,
                      (size_t) p[s].n * dim * sizeof(float)) == 0;
        for (i = LLM_POOL_MEAN; i <= LLM_POOL_LAST; i++) {
            llm_pool(h_one, p[s].n, dim, i, 1, dim, v);
            llm_pool(h_all + (size_t) off * dim, p[s].n, dim, i, 1, dim, w);
            same &= memcmp(v, w, (size_t) dim * sizeof(float)) == 0;
        }
        ok(same, "case %d: batched == alone bit for bit (hidden, 3 poolings)",
           s);
        off += p[s].n;
    }

    /* 3. hidden beside logits changes no logit */
    lg_a = malloc((size_t) p[0].n * m.cfg.vocab_size * sizeof(float));
    lg_b = malloc((size_t) p[0].n * m.cfg.vocab_size * sizeof(float));
    ok(forward_all(&m, 0, p, 1, NULL, lg_a) == 0
       && forward_all(&m, 0, p, 1, h_one, lg_b) == 0
       && memcmp(lg_a, lg_b, (size_t) p[0].n * m.cfg.vocab_size
                 * sizeof(float)) == 0
       && memcmp(h_one, h_all, (size_t) p[0].n * dim * sizeof(float)) == 0,
       "logits with hidden == logits without; hidden the same");

    {
        llm_batch_limits  l = { 64, 605, 256, 16, 64, 1, 0 };
        llm_batch         b;
        int32_t           t = 1, ps = 0, sq = 0, bad = 1, tb[1] = { 0 };
        int32_t           nb = 1;
        const int32_t    *tbs[1] = { tb };
        char              err[256];

        memset(&b, 0, sizeof(b));
        b = (llm_batch) { 1, &t, &ps, &sq, 1, tbs, &nb, 0, NULL, NULL, 1,
                          &bad, v, NULL, 0, NULL };
        ok(llm_batch_check(&b, &l, err, sizeof(err)) == -1
           && strstr(err, "hidden row 0: token index 1"),
           "a hidden row outside the batch refused (%s)", err);
        b.hidden_idx = &sq;
        b.hidden = NULL;
        ok(llm_batch_check(&b, &l, err, sizeof(err)) == -1,
           "hidden rows without a buffer refused");
        b.hidden = v;
        ok(llm_batch_check(&b, &l, err, sizeof(err)) == 0,
           "one hidden row, no logits: accepted");
    }

    /* 4. pool types */
    ok(llm_pool(h_one, 1, dim, LLM_POOL_NONE, 1, dim, v) == -1
       && llm_pool(h_one, 1, dim, LLM_POOL_RANK, 1, dim, v) == -1,
       "none and rank are not poolings");
    i = -1;
    ok(llm_pool_type_parse("lasttoken", &i) == 0 && i == LLM_POOL_LAST
       && llm_pool_type_parse("mean", &i) == 0 && i == LLM_POOL_MEAN
       && llm_pool_type_parse("cls", &i) == 0 && i == LLM_POOL_CLS
       && llm_pool_type_parse("max", &i) == -1
       && llm_pool_type_parse("weightedmean", &i) == -1,
       "pooling names: lasttoken/mean/cls parsed, max/weightedmean refused");
    llm_pool(h_one, p[0].n, dim, LLM_POOL_CLS, 0, dim, v);
    ok(memcmp(v, h_one, (size_t) dim * sizeof(float)) == 0,
       "cls is the first token's state");

    test_sched(&m, p);
    test_pool_config();

    free(h_exact);
    free(h_one);
    free(h_all);
    free(lg_a);
    free(lg_b);
    llm_model_free(&m);
    cJSON_Delete(root);
    free(text);
    return tap_done();
}
