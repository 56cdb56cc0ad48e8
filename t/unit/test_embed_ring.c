/*
 * Embeddings through the ring (version 8), without nginx: an engine
 * serving t/data/models/hf-qwen3-embed (hf-qwen3's weights with a
 * sentence-transformers modules.json: last token, Normalize, not
 * Matryoshka) answers EMBED slots with the vector over prompt[]:
 *   - the model facts say pooling last, no Matryoshka;
 *   - a golden prompt's vector within 1e-4 of transformers'
 *     (t/data/embed/hf-qwen3.json, fast numerics);
 *   - three EMBED slots submitted at once == each alone, bit for bit;
 *   - refused, each alone, the engine staying up: dimensions on a model
 *     not trained for them, dimensions past the model's, no input, and a
 *     GENERATE slot (an embedding engine serves embeddings only).
 */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "tap.h"
#include "ring_fixture.h"

#define MODEL   "t/data/models/hf-qwen3-embed"
#define GOLDEN  "t/data/embed/hf-qwen3.json"

/* an EMBED slot of the golden case's ids (not yet submitted) */
static llm_slot *
embed_slot(llm_ring_header *h, uint32_t id, const cJSON *c, uint32_t dims)
{
    llm_slot     *sl = claim(h, id, LLM_KIND_EMBED);
    const cJSON  *v;

    if (sl == NULL) {
        return NULL;
    }
    sl->sampling.max_tokens = 2;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(c, "prompt_ids")) {
        sl->prompt[sl->n_prompt++] = (int32_t) v->valuedouble;
    }
    sl->embed_dims = dims;
    return sl;
}


static int
refused(int fd, llm_slot *sl, const char *what)
{
    int  r;

    submit(fd, sl);
    r = wait_done(sl, 10) && sl->finish == LLM_FINISH_ERROR
        && sl->error == LLM_ERR_BAD_REQUEST && strstr(sl->message, what);
    if (!r) {
        printf("# finish %u error %u: %s\n", sl->finish, sl->error,
               sl->message);
    }
    release(sl);
    return r;
}


int
main(void)
{
    int               fd, status, i, n, same;
    char              sockname[64];
    char             *text;
    double            d, worst;
    pid_t             pid;
    uint32_t          id = 0;
    cJSON            *root, *cases, *c;
    llm_slot         *sl, *many[3];
    llm_ring_header  *h;
    float             alone[3][64];

    text = tap_slurp(GOLDEN, NULL);
    root = text ? cJSON_Parse(text) : NULL;
    cases = cJSON_GetObjectItem(root, "cases");
    if (!ok(cJSON_GetArraySize(cases) == 3, "golden %s: 3 cases", GOLDEN)) {
        return tap_done();
    }

    pid = engine_spawn(MODEL, "test_embed", sockname, sizeof(sockname));

    fd = llm_ring_connect(sockname, 500);
    h = fd != -1 ? llm_ring_hello(fd, &id) : NULL;
    if (!ok(h != NULL, "connected, ring version %d", LLM_RING_VERSION)) {
        kill(pid, SIGKILL);
        return tap_done();
    }
    ok(engine_ready(h, 60), "engine ready");
    ok(h->model.pooling == 3 && h->model.matryoshka == 0
       && h->model.dim == 64,
       "facts: pooling last (%u), no Matryoshka, dim 64", h->model.pooling);

    /* the golden, through the ring */
    sl = embed_slot(h, id, cJSON_GetArrayItem(cases, 0), 0);
    submit(fd, sl);
    ok(wait_done(sl, 10) && sl->finish == LLM_FINISH_STOP
       && sl->n_vector == 64 && atomic_load(&sl->out_head) == 0,
       "an EMBED slot: STOP, 64 floats, no tokens (%s)", sl->message);
    worst = 0;
    c = cJSON_GetObjectItem(cJSON_GetArrayItem(cases, 0), "last");
    for (i = 0; i < 64 && sl->n_vector == 64; i++) {
        d = fabs(llm_slot_vector(sl)[i]
                 - cJSON_GetArrayItem(c, i)->valuedouble);
        worst = d > worst ? d : worst;
    }
    ok(sl->n_vector == 64 && worst <= 1e-4,
       "the vector within 1e-4 of transformers' (%.3g)", worst);
    release(sl);

    /* three at once == each alone */
    for (n = 0; n < 3; n++) {
        sl = embed_slot(h, id, cJSON_GetArrayItem(cases, n), 0);
        submit(fd, sl);
        ok(wait_done(sl, 10) && sl->n_vector == 64, "case %d alone", n);
        memcpy(alone[n], llm_slot_vector(sl), sizeof(alone[n]));
        release(sl);
    }
    for (n = 0; n < 3; n++) {
        many[n] = embed_slot(h, id, cJSON_GetArrayItem(cases, n), 0);
        many[n]->t_submit_ns = 0;
        atomic_store(&many[n]->state, LLM_SLOT_SUBMITTED);
    }
    kick(fd);
    same = 1;
    for (n = 0; n < 3; n++) {
        same &= wait_done(many[n], 10) && many[n]->n_vector == 64
                && memcmp(alone[n], llm_slot_vector(many[n]),
                          sizeof(alone[n])) == 0;
        release(many[n]);
    }
    ok(same, "3 EMBED slots in one kick == each alone, bit for bit");

    /* refusals, each alone */
    ok(refused(fd, embed_slot(h, id, cJSON_GetArrayItem(cases, 0), 16),
               "matryoshka"),
       "dimensions 16 on a model not trained for them: bad request");
    ok(refused(fd, embed_slot(h, id, cJSON_GetArrayItem(cases, 0), 65),
               "invalid request"),
       "dimensions past the model's: bad request");
    sl = embed_slot(h, id, cJSON_GetArrayItem(cases, 0), 0);
    sl->n_prompt = 0;
    ok(refused(fd, sl, "invalid request"), "no input: bad request");
    sl = embed_slot(h, id, cJSON_GetArrayItem(cases, 0), 0);
    sl->n_prompt = LLM_RING_MAX_PROMPT + 1;
    ok(refused(fd, sl, "invalid request"), "input count out of bounds");
    sl = claim(h, id, LLM_KIND_GENERATE);
    sl->prompt[0] = 1;
    sl->n_prompt = 1;
    ok(refused(fd, sl, "embedding model"),
       "a generation on an embedding engine: bad request");
    sl = embed_slot(h, id, cJSON_GetArrayItem(cases, 1), 64);
    submit(fd, sl);
    ok(wait_done(sl, 10) && sl->n_vector == 64
       && memcmp(alone[1], llm_slot_vector(sl), sizeof(alone[1])) == 0,
       "still up: dimensions 64 (its own) answered as before");
    release(sl);

    kill(pid, SIGQUIT);
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status), "engine exits on SIGQUIT");
    cJSON_Delete(root);
    free(text);
    return tap_done();
}
