/*
 * libFuzzer harness for the GGUF header parser.
 *
 *   make fuzz-smoke            (every harness, FUZZ_SECS=30 each)
 *   build/fuzz/fuzz_gguf -max_total_time=60 fuzz/corpus/gguf
 *
 * Beyond "no crash", it checks the parser's promises on success: every
 * tensor's bytes lie inside the buffer and every string array element can be
 * read.
 */
#include "format/gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file    g;
    const char  *s;
    uint64_t     i, j, len;

    if (gguf_parse(&g, data, size, "fuzz.gguf") == 0) {
        for (i = 0; i < g.n_tensors; i++) {
            const gguf_tensor *t = &g.tensors[i];
            const uint8_t     *p = t->data;

            if (p < data || p > data + size
                || t->nbytes > (uint64_t) (data + size - p))
            {
                abort();
            }
        }
        for (i = 0; i < g.n_kv; i++) {
            for (j = 0; j < g.kv[i].n && gguf_arr_str(&g.kv[i], j, &s, &len)
                        == 0; j++)
            {
                if ((const uint8_t *) s + len > data + size) {
                    abort();
                }
            }
        }
    } else if (g.err[0] == '\0') {
        abort();    /* every failure must say why */
    }
    gguf_close(&g);
    return 0;
}
