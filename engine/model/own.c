/*
 * Memory a model owns beside its file mapping (tensors a loader makes:
 * repacked, dequantized or de-interleaved weights), freed with the model
 * by llm_model_free. Its own file so that every loader file (model.c,
 * gpt_oss.c, ...) can call it without calling back into model.c.
 *
 * defines: llm_model_own
 */
#include <stdlib.h>

#include "model/model.h"


/* n bytes owned by m (NULL: no memory) */
void *
llm_model_own(llm_model *m, size_t n)
{
    float  **list, *p;

    list = realloc(m->owned, (m->n_owned + 1) * sizeof(float *));
    if (list == NULL) {
        return NULL;
    }
    m->owned = list;
    p = malloc(n ? n : 1);
    if (p != NULL) {
        m->owned[m->n_owned++] = p;
    }
    return p;
}
