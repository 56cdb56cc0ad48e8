/*
 * Packed weights (tensor.h, llm_pack): 16 rows of a Q4_0, Q4_1 or Q8_0
 * matrix interleaved block by block, made once when a backend loads the
 * model (the kernels that read them: matmul.c's scalar ones, the
 * canonical order of simd.h, and simd_avx512.c's).
 *
 * Layout of block b of a group of 16 rows (llm_pack_block_bytes: 16
 * times the type's block):
 *   Q4_0:  d[16] f16 | q[4][16] dwords                   (32 + 256 bytes)
 *   Q4_1:  d[16] f16 | m[16] f16 | q[4][16] dwords       (64 + 256)
 *   Q8_0:  d[16] f16 | q[8][16] dwords, bytes w + 128    (32 + 512)
 * q[k][l] holds bytes 4k..4k+3 of row l's quants as stored in GGUF (for
 * the 4-bit types: low nibbles elements 4k.., high nibbles 16 + 4k..).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "tensor.h"
#include "quant.h"
#include "simd.h"
#include "tensor_type.h"


int
llm_pack_useful(const llm_tensor *w)
{
    return w->pack == 0 && llm_kernels_isa() == LLM_ISA_AVX512
           && (w->type == GGML_TYPE_Q4_0 || w->type == GGML_TYPE_Q4_1
               || w->type == GGML_TYPE_Q8_0);
}


size_t
llm_pack_size(const llm_tensor *w)
{
    size_t groups = (size_t) (w->rows + LLM_PACK_ROWS - 1) / LLM_PACK_ROWS;

    return groups * (size_t) (w->cols / LLM_QK)
           * llm_pack_block_bytes(llm_quant_block_bytes(w->type));
}


/* bytes before the quants in a packed block */
static size_t
quants_at(uint32_t type)
{
    return type == GGML_TYPE_Q4_1 ? 64 : 32;
}


void
llm_pack(const llm_tensor *w, void *dst, llm_tensor *out)
{
    int       nb = w->cols / LLM_QK, g, b, l, k, r;
    size_t    bb = llm_quant_block_bytes(w->type);
    size_t    pb = llm_pack_block_bytes(bb), qa = quants_at(w->type);
    int       n_dw = w->type == GGML_TYPE_Q8_0 ? 8 : 4;
    uint8_t  *p = dst;

    memset(dst, 0, llm_pack_size(w));
    for (g = 0; g * LLM_PACK_ROWS < w->rows; g++) {
        for (b = 0; b < nb; b++, p += pb) {
            for (l = 0; l < LLM_PACK_ROWS; l++) {
                r = g * LLM_PACK_ROWS + l;
                if (r >= w->rows) {
                    break;
                }
                const uint8_t *src = (const uint8_t *) w->data
                                     + (size_t) r * w->row_stride + b * bb;
                memcpy(p + 2 * l, src, 2);                        /* d */
                if (w->type == GGML_TYPE_Q4_1) {
                    memcpy(p + 32 + 2 * l, src + 2, 2);           /* m */
                }
                const uint8_t *qs = src + (w->type == GGML_TYPE_Q4_1 ? 4 : 2);
                for (k = 0; k < n_dw; k++) {
                    uint8_t *q = p + qa + 64 * k + 4 * l;
                    memcpy(q, qs + 4 * k, 4);
                    if (w->type == GGML_TYPE_Q8_0) {
                        for (int e = 0; e < 4; e++) {
                            q[e] ^= 0x80;
                        }
                    }
                }
            }
        }
    }
    *out = *w;
    out->data = dst;
    out->pack = LLM_PACK_ROWS;
    out->row_stride = (size_t) nb * pb;
}


/* the inverse of llm_pack for one row: row r of packed matrix p as stored
 * in GGUF, into dst (cols / 32 blocks). A tied embedding whose packed
 * copy is the classifier reads its rows here, so its file pages need not
 * come back (the backend let them go when it packed). */
void
llm_pack_row(const llm_tensor *p, int r, void *dst)
{
    int             nb = p->cols / LLM_QK, b, k, e;
    int             l = r % LLM_PACK_ROWS;
    int             n_dw = p->type == GGML_TYPE_Q8_0 ? 8 : 4;
    size_t          bb = llm_quant_block_bytes(p->type);
    size_t          pb = llm_pack_block_bytes(bb), qa = quants_at(p->type);
    const uint8_t  *g = (const uint8_t *) p->data
                        + (size_t) (r / LLM_PACK_ROWS) * p->row_stride;
    uint8_t        *out = dst;

    for (b = 0; b < nb; b++, g += pb, out += bb) {
        memcpy(out, g + 2 * l, 2);                               /* d */
        if (p->type == GGML_TYPE_Q4_1) {
            memcpy(out + 2, g + 32 + 2 * l, 2);                  /* m */
        }
        uint8_t *qs = out + (p->type == GGML_TYPE_Q4_1 ? 4 : 2);
        for (k = 0; k < n_dw; k++) {
            memcpy(qs + 4 * k, g + qa + 64 * k + 4 * l, 4);
            for (e = 0; p->type == GGML_TYPE_Q8_0 && e < 4; e++) {
                qs[4 * k + e] ^= 0x80;
            }
        }
    }
}
