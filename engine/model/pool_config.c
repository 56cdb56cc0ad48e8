/*
 * Whether a model is an embedder, and how it pools (issue 32): GGUF's
 * <arch>.pooling_type (llama.cpp's numbers, model/pool.h), or a
 * sentence-transformers directory's modules.json (Transformer, Pooling,
 * Normalize) and <pooling path>/config.json. What we do not compute is
 * refused by name (a Dense module, max / weighted-mean / sqrt-length
 * pooling, include_prompt false, a reranker's rank pooling), never run
 * as something else. Matryoshka (the dimensions parameter) only where the
 * config says the model was trained for it (config.json is_matryoshka or
 * matryoshka_dimensions, as vLLM reads it).
 *
 * defines: llm_model_pooling_gguf, llm_model_pooling_hf
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/model.h"
#include "model/pool.h"
#include "model/score.h"
#include "format/hf_config.h"


int
llm_model_pooling_gguf(llm_model *m)
{
    char      key[LLM_ARCH_MAX + 32];
    uint32_t  t;

    snprintf(key, sizeof(key), "%s.pooling_type", m->cfg.arch);
    if (gguf_find_kv(&m->gguf, key) == NULL) {
        return 0;
    }
    if (gguf_get_u32(&m->gguf, key, &t) != 0) {
        return llm_model_fail(m, "%s is not an integer", key);
    }
    if (t == LLM_POOL_RANK) {
        /* a reranker: its loader read the head (cls.output) and set the
           pooling and the score hook (model/score.h) */
        if (m->cfg.score != LLM_SCORE_NONE) {
            return 0;
        }
        return llm_model_fail(m, "%s is rank (a reranker) but the file has no "
                              "head we read (a BERT cross-encoder's "
                              "cls.output, a qwen3 reranker's yes/no rows)",
                              key);
    }
    if (t > LLM_POOL_RANK) {
        return llm_model_fail(m, "%s %u is not a pooling we know", key, t);
    }
    /* llama.cpp's embeddings are L2-normalised by default */
    m->cfg.pooling = (int) t;
    m->cfg.pool_normalize = t != LLM_POOL_NONE;
    return 0;
}


static cJSON *
read_json(llm_model *m, int dirfd, const char *name, int *fault)
{
    char    err[512];
    char   *text;
    size_t  len;
    cJSON  *j;

    *fault = 0;
    text = llm_hf_read_at(dirfd, m->path, name, 0, &len, err, sizeof(err));
    if (text == NULL) {
        if (err[0] != '\0') {
            *fault = 1;
            snprintf(m->err, sizeof(m->err), "%s", err);
        }
        return NULL;
    }
    j = cJSON_ParseWithLength(text, len);
    free(text);
    if (j == NULL) {
        *fault = 1;
        llm_model_fail(m, "%s is not JSON", name);
    }
    return j;
}


/* sentence-transformers' Pooling config.json: one supported mode */
static int
pooling_mode(llm_model *m, const cJSON *cfg, const char *name)
{
    static const struct { const char *key; int type; } modes[] = {
        { "pooling_mode_cls_token", LLM_POOL_CLS },
        { "pooling_mode_mean_tokens", LLM_POOL_MEAN },
        { "pooling_mode_lasttoken", LLM_POOL_LAST },
        { "pooling_mode_max_tokens", -1 },
        { "pooling_mode_mean_sqrt_len_tokens", -1 },
        { "pooling_mode_weightedmean_tokens", -1 },
    };
    size_t        i;
    int           type = LLM_POOL_NONE;
    const cJSON  *v;

    if (!cJSON_IsObject(cfg)) {
        return llm_model_fail(m, "%s is not a JSON object", name);
    }
    v = cJSON_GetObjectItemCaseSensitive(cfg, "include_prompt");
    if (cJSON_IsFalse(v)) {
        return llm_model_fail(m, "%s: include_prompt false is not supported",
                              name);
    }
    /* sentence-transformers 5+: "pooling_mode": "cls" */
    v = cJSON_GetObjectItemCaseSensitive(cfg, "pooling_mode");
    if (cJSON_IsString(v)) {
        if (llm_pool_type_parse(v->valuestring, &type) != 0
            || type == LLM_POOL_NONE || type == LLM_POOL_RANK)
        {
            return llm_model_fail(m, "%s: pooling_mode \"%s\" is not supported",
                                  name, v->valuestring);
        }
        m->cfg.pooling = type;
        return 0;
    }
    for (i = 0; i < sizeof(modes) / sizeof(*modes); i++) {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg,
                                                           modes[i].key)))
        {
            continue;
        }
        if (modes[i].type < 0) {
            return llm_model_fail(m, "%s: %s is not supported", name,
                                  modes[i].key);
        }
        if (type != LLM_POOL_NONE) {
            return llm_model_fail(m, "%s: more than one pooling mode is not "
                                  "supported", name);
        }
        type = modes[i].type;
    }
    if (type == LLM_POOL_NONE) {
        return llm_model_fail(m, "%s names no pooling mode", name);
    }
    m->cfg.pooling = type;
    return 0;
}


static int
st_module(llm_model *m, int dirfd, const cJSON *mod)
{
    const char  *type, *path, *tail;
    char         name[512];
    cJSON       *cfg;
    int          rc, fault;

    type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(mod, "type"));
    path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(mod, "path"));
    if (type == NULL || path == NULL) {
        return llm_model_fail(m, "modules.json: a module without type or path");
    }
    tail = strrchr(type, '.') ? strrchr(type, '.') + 1 : type;
    if (strcmp(tail, "Transformer") == 0) {
        return 0;
    }
    if (strcmp(tail, "Normalize") == 0) {
        m->cfg.pool_normalize = 1;
        return 0;
    }
    if (strcmp(tail, "Pooling") != 0) {
        return llm_model_fail(m, "modules.json: the sentence-transformers "
                              "module %s (%s) is not supported", tail, path);
    }
    if (strchr(path, '/') != NULL || strstr(path, "..") != NULL
        || snprintf(name, sizeof(name), "%s/config.json", path)
           >= (int) sizeof(name))
    {
        return llm_model_fail(m, "modules.json: a pooling path outside the "
                              "directory");
    }
    cfg = read_json(m, dirfd, name, &fault);
    if (cfg == NULL) {
        return fault ? -1 : llm_model_fail(m, "%s is missing", name);
    }
    rc = pooling_mode(m, cfg, name);
    cJSON_Delete(cfg);
    return rc;
}


int
llm_model_pooling_hf(llm_model *m, int dirfd)
{
    cJSON        *mods, *cfg;
    const cJSON  *mod, *md;
    int           fault, rc = 0;

    mods = read_json(m, dirfd, "modules.json", &fault);
    if (mods == NULL) {
        return fault ? -1 : 0;
    }
    if (!cJSON_IsArray(mods)) {
        cJSON_Delete(mods);
        return llm_model_fail(m, "modules.json is not a JSON array");
    }
    cJSON_ArrayForEach(mod, mods) {
        if (rc == 0) {
            rc = st_module(m, dirfd, mod);
        }
    }
    cJSON_Delete(mods);
    if (rc != 0) {
        return -1;
    }
    if (m->cfg.pooling == LLM_POOL_NONE) {
        return llm_model_fail(m, "modules.json has no Pooling module");
    }
    cfg = read_json(m, dirfd, "config.json", &fault);
    md = cJSON_GetObjectItemCaseSensitive(cfg, "matryoshka_dimensions");
    m->cfg.matryoshka = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                         cfg, "is_matryoshka"))
                        || (cJSON_IsArray(md) && cJSON_GetArraySize(md) > 0);
    cJSON_Delete(cfg);
    return 0;
}
