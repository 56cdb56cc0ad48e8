/*
 * What every loader file (model.c, bert.c, gpt_oss.c, moe.c, ...) shares,
 * in a file of its own so that none calls back into model.c: memory a
 * model owns beside its file mapping (tensors a loader makes: repacked,
 * dequantized or de-interleaved weights), freed with the model by
 * llm_model_free, and the loaders' one way to fail.
 *
 * defines: llm_model_own, llm_model_fail
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/fail.h"
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


/* m->err = "<path>: <fault>" (the fault as printf formats it); -1 */
int
llm_model_fail(llm_model *m, const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    llm_vfail(m->err, sizeof(m->err), m->path, "(model)", fmt, ap);
    va_end(ap);
    return -1;
}
