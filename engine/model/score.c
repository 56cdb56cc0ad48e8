/*
 * Score models' heads and llm_engine's task (score.h).
 *
 * defines: llm_score_type_name, llm_task_parse, llm_model_task, llm_score
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "quant.h"
#include "model/pool.h"
#include "model/score.h"


static const char *score_names[] = { "none", "yes_no", "classifier" };


const char *
llm_score_type_name(int type)
{
    if (type < 0
        || type >= (int) (sizeof(score_names) / sizeof(*score_names)))
    {
        return "unknown";
    }
    return score_names[type];
}


int
llm_task_parse(const char *name, int *task)
{
    for (int t = LLM_TASK_AUTO; t <= LLM_TASK_SCORE; t++) {
        if (strcmp(name, llm_task_name(t)) == 0) {
            *task = t;
            return 0;
        }
    }
    return -1;
}


/* a vocabulary token by its text ("yes"), or -1 */
static int32_t
task_token(const llm_tokenizer *tok, const char *text, int vocab)
{
    int32_t  id;

    id = llm_token_lookup(tok, text, strlen(text));
    return id >= 0 && id < vocab ? id : -1;
}


int
llm_model_task(llm_model *m, int task, const llm_tokenizer *tok)
{
    llm_config  *c = &m->cfg;

    switch (task) {

    case LLM_TASK_AUTO:
        return 0;

    case LLM_TASK_GENERATE:
        if (c->score != LLM_SCORE_NONE && c->score != LLM_SCORE_YES_NO) {
            return llm_model_fail(m, "task generate: the model is a "
                                  "cross-encoder (no output layer)");
        }
        c->pooling = LLM_POOL_NONE;
        c->pool_normalize = 0;
        c->matryoshka = 0;
        c->score = LLM_SCORE_NONE;
        return 0;

    case LLM_TASK_EMBED:
        if (c->score != LLM_SCORE_NONE) {
            return llm_model_fail(m, "task embed: the model is a reranker "
                                  "(task score)");
        }
        if (c->pooling == LLM_POOL_NONE) {
            c->pooling = LLM_POOL_LAST;
            c->pool_normalize = 1;
        }
        return 0;

    case LLM_TASK_SCORE:
        if (c->score != LLM_SCORE_NONE) {
            return 0;
        }
        if (c->pooling != LLM_POOL_NONE) {
            return llm_model_fail(m, "task score: the model is an embedder "
                                  "(its sentence-transformers files say %s "
                                  "pooling), not a reranker",
                                  llm_pool_type_name(c->pooling));
        }
        if (tok == NULL) {
            return llm_model_fail(m, "task score: no tokenizer to find the "
                                  "\"yes\" and \"no\" tokens");
        }
        c->score_yes = task_token(tok, "yes", c->vocab_size);
        c->score_no = task_token(tok, "no", c->vocab_size);
        if (c->score_yes < 0 || c->score_no < 0) {
            return llm_model_fail(m, "task score: the vocabulary has no "
                                  "\"yes\" or no \"no\" token (a yes/no "
                                  "reranker needs both)");
        }
        c->score = LLM_SCORE_YES_NO;
        c->pooling = LLM_POOL_LAST;
        c->pool_normalize = 0;
        c->matryoshka = 0;
        return 0;

    default:
        return llm_model_fail(m, "task %d is not a task", task);
    }
}


/* logit = output row id . h, summed in double (the logits' 1e-3 budget
   is the forward's, not this dot's) */
static float
score_logit(const llm_model *m, int32_t id, const float *h, float *row)
{
    int     e, dim = m->cfg.dim;
    double  acc = 0.0;

    llm_dequant_row(m->output.type,
                    (const uint8_t *) m->output.data
                    + (size_t) id * m->output.row_stride, row, dim);
    for (e = 0; e < dim; e++) {
        acc += (double) row[e] * h[e];
    }
    return (float) acc;
}


int
llm_score(const llm_model *m, const float *h, float *score)
{
    float   l_yes, l_no, logit;
    float   row[LLM_SCORE_MAX_DIM];

    switch (m->cfg.score) {

    case LLM_SCORE_YES_NO:
        if (m->cfg.dim > LLM_SCORE_MAX_DIM) {
            return -1;
        }
        l_yes = score_logit(m, m->cfg.score_yes, h, row);
        l_no = score_logit(m, m->cfg.score_no, h, row);
        /* softmax([no, yes])[yes] = 1 / (1 + e^(no - yes)) */
        *score = (float) (1.0 / (1.0 + exp((double) l_no - l_yes)));
        return 0;

    case LLM_SCORE_CLASSIFIER:
        if (m->score_head == NULL || m->score_head(m, h, &logit) != 0) {
            return -1;
        }
        *score = (float) (1.0 / (1.0 + exp(-(double) logit)));
        return 0;

    default:
        return -1;
    }
}
