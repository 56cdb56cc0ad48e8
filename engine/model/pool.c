/*
 * Pooling of final hidden states into one embedding (pool.h).
 *
 * defines: llm_pool_type_name, llm_pool_type_parse, llm_pool_wants,
 *          llm_pool_add, llm_pool_finish, llm_pool
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


/* which tokens a pooling reads: all (mean), the first, the last */
int
llm_pool_wants(int type, int pos, int n)
{
    return type == LLM_POOL_MEAN || (type == LLM_POOL_CLS && pos == 0)
           || (type == LLM_POOL_LAST && pos == n - 1);
}


/* mean: a float sum in token order (torch's sum(h * mask, 1)); cls and
   last: the one row wanted */
void
llm_pool_add(int type, float *acc, const float *row, int dim)
{
    int  e;

    if (type != LLM_POOL_MEAN) {
        memcpy(acc, row, (size_t) dim * sizeof(float));
        return;
    }
    for (e = 0; e < dim; e++) {
        acc[e] += row[e];
    }
}


/* mean: / n (torch: sum / mask.sum()); the first dims kept (Matryoshka),
   then / max(||v||_2, 1e-12) (F.normalize) */
void
llm_pool_finish(float *acc, int n, int type, int normalize, int dims)
{
    int     e;
    double  ss;

    if (type == LLM_POOL_MEAN) {
        for (e = 0; e < dims; e++) {
            acc[e] = acc[e] / (float) n;
        }
    }
    if (!normalize) {
        return;
    }
    ss = 0.0;
    for (e = 0; e < dims; e++) {
        ss += (double) acc[e] * acc[e];
    }
    ss = sqrt(ss);
    if (ss < 1e-12) {
        ss = 1e-12;
    }
    for (e = 0; e < dims; e++) {
        acc[e] = (float) (acc[e] / ss);
    }
}


/* the whole prompt's rows at once: the same adds and finish */
int
llm_pool(const float *hidden, int n, int dim, int type, int normalize,
    int dims, float *out)
{
    int  i;

    if (type != LLM_POOL_MEAN && type != LLM_POOL_CLS
        && type != LLM_POOL_LAST)
    {
        return -1;
    }
    memset(out, 0, (size_t) dims * sizeof(float));
    for (i = 0; i < n; i++) {
        if (llm_pool_wants(type, i, n)) {
            llm_pool_add(type, out, hidden + (size_t) i * dim, dims);
        }
    }
    llm_pool_finish(out, n, type, normalize, dims);
    return 0;
}
