/*
 * Pooling of final hidden states into one embedding (pool.h).
 *
 * defines: llm_pool_type_name, llm_pool_type_parse, llm_pool
 */
#include <math.h>
#include <string.h>

#include "model/pool.h"


static const char *pool_names[] = { "none", "mean", "cls", "last", "rank" };


const char *
llm_pool_type_name(int type)
{
    if (type < 0 || type >= (int) (sizeof(pool_names) / sizeof(*pool_names))) {
        return "unknown";
    }
    return pool_names[type];
}


int
llm_pool_type_parse(const char *name, int *type)
{
    if (strcmp(name, "lasttoken") == 0) {     /* sentence-transformers */
        *type = LLM_POOL_LAST;
        return 0;
    }
    for (int t = LLM_POOL_NONE; t <= LLM_POOL_LAST; t++) {
        if (strcmp(name, pool_names[t]) == 0) {
            *type = t;
            return 0;
        }
    }
    return -1;
}


int
llm_pool(const float *hidden, int n, int dim, int type, int normalize,
    int dims, float *out)
{
    int     i, e;
    double  ss;

    switch (type) {
    case LLM_POOL_MEAN:
        /* sum in float, token order, then divide: torch's
           sum(h * mask, 1) / mask.sum() */
        for (e = 0; e < dims; e++) {
            float s = 0.0f;
            for (i = 0; i < n; i++) {
                s += hidden[(size_t) i * dim + e];
            }
            out[e] = s / (float) n;
        }
        break;
    case LLM_POOL_CLS:
        memcpy(out, hidden, (size_t) dims * sizeof(float));
        break;
    case LLM_POOL_LAST:
        memcpy(out, hidden + (size_t) (n - 1) * dim,
               (size_t) dims * sizeof(float));
        break;
    default:
        return -1;
    }

    if (normalize) {
        ss = 0.0;
        for (e = 0; e < dims; e++) {
            ss += (double) out[e] * out[e];
        }
        ss = sqrt(ss);
        if (ss < 1e-12) {
            ss = 1e-12;
        }
        for (e = 0; e < dims; e++) {
            out[e] = (float) (out[e] / ss);
        }
    }
    return 0;
}
