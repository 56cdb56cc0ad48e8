/*
 * Packed weights (matmul.h, llm_pack): 16 rows of a Q4_0, Q4_1 or Q8_0
 * matrix interleaved block by block, made once when a backend loads the
 * model, and the scalar kernels that read them (the canonical order of
 * simd.h, like matmul.c's; the AVX-512 ones are in simd_avx512.c).
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

#include "matmul.h"
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


/* --- scalar kernels for packed weights: dot_q32's order --------------- */

static int
packed_q(uint32_t type, const uint8_t *blk, int l, int j)
{
    const uint8_t *q;

    if (type == GGML_TYPE_Q8_0) {
        q = blk + 32 + 64 * (j / 4) + 4 * l + j % 4;
        return (int) *q - 128;
    }
    q = blk + quants_at(type) + 64 * ((j % 16) / 4) + 4 * l + j % 4;
    return (j < 16 ? *q & 0xf : *q >> 4) - (type == GGML_TYPE_Q4_0 ? 8 : 0);
}


static float
packed_half(const uint8_t *p, int l)
{
    uint16_t h;

    memcpy(&h, p + 2 * l, 2);
    return llm_fp16_to_fp32(h);
}


static void
tile_packed_scalar(uint32_t type, const llm_tile *t)
{
    int      nb = t->n / LLM_QK;
    size_t   pb = llm_pack_block_bytes(llm_quant_block_bytes(type));

    for (int l = 0; l < t->n_w; l++) {
        for (int i = 0; i < t->n_x; i++) {
            const llm_act_p *x = (const llm_act_p *) (t->act
                                                      + i * t->act_stride);
            float acc[8] = { 0 }, msum[8] = { 0 };
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = t->w + b * pb;
                int isum = 0;
                for (int j = 0; j < LLM_QK; j++) {
                    isum += packed_q(type, blk, l, j) * x[b].qs[j];
                }
                acc[b % 8] = fmaf(packed_half(blk, l) * x[b].d, (float) isum,
                                  acc[b % 8]);
                if (type == GGML_TYPE_Q4_1) {
                    msum[b % 8] = fmaf(packed_half(blk + 32, l), x[b].s,
                                       msum[b % 8]);
                }
            }
            t->out[i * t->ld_out + l] = type == GGML_TYPE_Q4_1
                                        ? llm_hsum8(acc) + llm_hsum8(msum)
                                        : llm_hsum8(acc);
        }
    }
}


void
llm_tile_q4_0p_scalar(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_Q4_0, t);
}


void
llm_tile_q4_1p_scalar(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_Q4_1, t);
}


void
llm_tile_q8_0p_scalar(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_Q8_0, t);
}
