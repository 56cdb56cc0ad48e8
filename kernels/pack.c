/*
 * Packed weights (tensor.h, llm_pack): 16 rows of a Q4_0, Q4_1, Q8_0, Q5_0,
 * IQ4_NL or MXFP4 matrix interleaved block by block, made once when a backend loads the
 * model (the kernels that read them: matmul.c's scalar ones, the
 * canonical order of simd.h, and simd_avx512.c's).
 *
 * Layout of block b of a group of 16 rows (llm_pack_block_bytes: 16
 * times the type's block):
 *   Q4_0:  d[16] f16 | q[4][16] dwords                   (32 + 256 bytes)
 *   Q4_1:  d[16] f16 | m[16] f16 | q[4][16] dwords       (64 + 256)
 *   Q8_0:  d[16] f16 | q[8][16] dwords, bytes w + 128    (32 + 512)
 *   Q5_0:  d[16] f16 | hm[8] u64 | q[4][16] dwords       (32 + 64 + 256)
 *   IQ4_NL: as Q4_0 (the nibbles index llm_kvalues_iq4nl)
 *   MXFP4: e[16] E8M0 bytes as stored | q[4][16] dwords      (16 + 256;
 *          the nibbles index llm_kvalues_mxfp4; an E8M0 scale has no
 *          f16, the kernels make llm_e8m0_half of the bytes)
 * q[k][l] holds bytes 4k..4k+3 of row l's quants as stored in GGUF (for
 * the 4-bit types: low nibbles elements 4k.., high nibbles 16 + 4k..).
 * Q5_0's fifth bits are regrouped as the kernels use them: byte e of
 * row l in quant vector k (k < 4: low nibbles, else high) is element
 * 4k + e, and bit 4l + e of hm[k] is that element's fifth bit, so hm[k]
 * is the 64-bit byte mask that puts 16 into vector k.
 *
 * Q4_K, per super-block of a group of 16 rows (16 x 144 bytes):
 *   d[16] f16 | dmin[16] f16 | sc[3][16] dwords | q[32][16] dwords
 *   (32 + 32 + 192 + 2048)
 * sc[t][l]: bytes 4t..4t+3 of row l's 12 scale bytes as stored; q[k][l]:
 * bytes 4k..4k+3 of row l's 128 quant bytes (low nibbles: sub-block
 * 2 (k / 8), high nibbles: the next one, elements 4 (k % 8) ..).
 *
 * Q6_K, per super-block of a group (16 x 210 bytes):
 *   d[16] f16 | sc[4][16] dwords | ql[32][16] dwords | qh[16][16] dwords
 *   (32 + 256 + 2048 + 1024)
 * each the same 4 bytes of every row's scales, ql, qh as stored.
 *
 * Q5_K (16 x 176): Q4_K's, with qh[8][16] dwords before the quants
 *   d | dmin | sc[3][16] | qh[8][16] | q[32][16]   (32 + 32 + 192 + 512 + 2048)
 * IQ4_XS (16 x 136):
 *   d[16] f16 | scales_h[16] u16 | scales_l[16] dwords | q[32][16] dwords
 *   (32 + 32 + 64 + 2048); q vector k: sub-block k / 4, low nibbles its
 *   elements 4 (k % 4) .., high nibbles 16 + 4 (k % 4) ..
 * Every layout takes the bytes of the rows it packs (16 times the block).
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
               || w->type == GGML_TYPE_Q8_0 || w->type == GGML_TYPE_Q5_0
               || w->type == GGML_TYPE_IQ4_NL || w->type == GGML_TYPE_Q4_K
               || w->type == GGML_TYPE_Q6_K || w->type == GGML_TYPE_Q5_K
               || w->type == GGML_TYPE_IQ4_XS || w->type == GGML_TYPE_MXFP4);
}


size_t
llm_pack_size(const llm_tensor *w)
{
    size_t groups = (size_t) (w->rows + LLM_PACK_ROWS - 1) / LLM_PACK_ROWS;

    return groups * (size_t) (w->cols / llm_quant_block(w->type))
           * llm_pack_block_bytes(llm_quant_block_bytes(w->type));
}


/* bytes before the quants in a packed block */
size_t
llm_pack_quants_at(uint32_t type)
{
    return type == GGML_TYPE_Q4_1 ? 64 : type == GGML_TYPE_Q5_0 ? 96
           : type == GGML_TYPE_MXFP4 ? 16 : 32;
}


/* bytes before the quants in a GGUF block of a 32-element packed type */
static size_t
qs_at(uint32_t type)
{
    return type == GGML_TYPE_Q4_1 ? 4 : type == GGML_TYPE_Q5_0 ? 6
           : type == GGML_TYPE_MXFP4 ? 1 : 2;
}


/* Q5_0's fifth bits of row l (qh as stored) into hm (pack.c's layout) */
static void
pack_qh(const uint8_t *qh4, int l, uint8_t *hm)
{
    uint32_t qh;

    memcpy(&qh, qh4, 4);
    for (int k = 0; k < 8; k++) {
        for (int e = 0; e < 4; e++) {
            if (qh >> (4 * k + e) & 1) {
                hm[8 * k + (4 * l + e) / 8] |= (uint8_t) (1u << ((4 * l + e)
                                                               % 8));
            }
        }
    }
}


/* where each part of a super-block goes: per row, `bytes` from `src` in
 * the GGUF block to `dst` in the packed one, as 2-byte halves (d, dmin,
 * IQ4_XS's scales_h: row l at dst + 2l) or as dwords (dword k of row l
 * at dst + 64k + 4l) */
typedef struct {
    uint16_t  src, bytes, dst;
} pack_part;

static const pack_part parts_q4_K[] = {
    { 0, 2, 0 }, { 2, 2, 32 }, { 4, 12, LLM_PACK_Q4K_SC },
    { 16, 128, LLM_PACK_Q4K_QS }, { 0, 0, 0 },
};
static const pack_part parts_q5_K[] = {
    { 0, 2, 0 }, { 2, 2, 32 }, { 4, 12, LLM_PACK_Q4K_SC },
    { 16, 32, LLM_PACK_Q5K_QH }, { 48, 128, LLM_PACK_Q5K_QS }, { 0, 0, 0 },
};
static const pack_part parts_q6_K[] = {
    { 208, 2, 0 }, { 192, 16, LLM_PACK_Q6K_SC }, { 0, 128, LLM_PACK_Q6K_QL },
    { 128, 64, LLM_PACK_Q6K_QH }, { 0, 0, 0 },
};
static const pack_part parts_iq4_xs[] = {
    { 0, 2, 0 }, { 2, 2, 32 }, { 4, 4, LLM_PACK_IQ4XS_SL },
    { 8, 128, LLM_PACK_IQ4XS_QS }, { 0, 0, 0 },
};


static const pack_part *
k_parts(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_Q4_K:   return parts_q4_K;
    case GGML_TYPE_Q5_K:   return parts_q5_K;
    case GGML_TYPE_Q6_K:   return parts_q6_K;
    default:               return parts_iq4_xs;
    }
}


/* row l of a packed K-quant super-block into (dir 0) or out of (dir 1)
 * its GGUF block */
void
llm_pack_k_row(uint32_t type, uint8_t *packed, int l, uint8_t *blk, int dir)
{
    for (const pack_part *pp = k_parts(type); pp->bytes; pp++) {
        if (pp->bytes == 2) {
            if (dir == 0) {
                memcpy(packed + pp->dst + 2 * l, blk + pp->src, 2);
            } else {
                memcpy(blk + pp->src, packed + pp->dst + 2 * l, 2);
            }
            continue;
        }
        for (int k = 0; k < pp->bytes / 4; k++) {
            if (dir == 0) {
                memcpy(packed + pp->dst + 64 * k + 4 * l,
                       blk + pp->src + 4 * k, 4);
            } else {
                memcpy(blk + pp->src + 4 * k,
                       packed + pp->dst + 64 * k + 4 * l, 4);
            }
        }
    }
}


/* the K-quants: the layouts above */
static void
pack_k(const llm_tensor *w, uint8_t *p)
{
    int      nb = w->cols / LLM_QK_K, g, b, l, r;
    size_t   bb = llm_quant_block_bytes(w->type);
    size_t   pb = llm_pack_block_bytes(bb);

    for (g = 0; g * LLM_PACK_ROWS < w->rows; g++) {
        for (b = 0; b < nb; b++, p += pb) {
            for (l = 0; l < LLM_PACK_ROWS; l++) {
                r = g * LLM_PACK_ROWS + l;
                if (r >= w->rows) {
                    break;
                }
                llm_pack_k_row(w->type, p, l, (uint8_t *) w->data
                               + (size_t) r * w->row_stride + b * bb, 0);
            }
        }
    }
}


/* the 32-element types: the layouts above */
static void
pack_q32(const llm_tensor *w, uint8_t *p)
{
    int       nb = w->cols / LLM_QK, g, b, l, k, r;
    size_t    bb = llm_quant_block_bytes(w->type);
    size_t    pb = llm_pack_block_bytes(bb), qa = llm_pack_quants_at(w->type);
    int       n_dw = w->type == GGML_TYPE_Q8_0 ? 8 : 4;

    for (g = 0; g * LLM_PACK_ROWS < w->rows; g++) {
        for (b = 0; b < nb; b++, p += pb) {
            for (l = 0; l < LLM_PACK_ROWS; l++) {
                r = g * LLM_PACK_ROWS + l;
                if (r >= w->rows) {
                    break;
                }
                const uint8_t *src = (const uint8_t *) w->data
                                     + (size_t) r * w->row_stride + b * bb;
                if (w->type == GGML_TYPE_MXFP4) {
                    p[l] = src[0];                                /* e */
                } else {
                    memcpy(p + 2 * l, src, 2);                    /* d */
                }
                if (w->type == GGML_TYPE_Q4_1) {
                    memcpy(p + 32 + 2 * l, src + 2, 2);           /* m */
                }
                if (w->type == GGML_TYPE_Q5_0) {
                    pack_qh(src + 2, l, p + 32);
                }
                const uint8_t *qs = src + qs_at(w->type);
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
}


void
llm_pack(const llm_tensor *w, void *dst, llm_tensor *out)
{
    int  nb = w->cols / llm_quant_block(w->type);

    memset(dst, 0, llm_pack_size(w));
    if (llm_quant_block(w->type) == LLM_QK_K) {
        pack_k(w, dst);
    } else {
        pack_q32(w, dst);
    }
    *out = *w;
    out->data = dst;
    out->pack = LLM_PACK_ROWS;
    out->row_stride = (size_t) nb
                      * llm_pack_block_bytes(llm_quant_block_bytes(w->type));
}


/* Q5_0's fifth bits of row l back from hm into qh (the inverse of
   pack_qh) */
static void
unpack_qh(const uint8_t *hm, int l, uint8_t *qh4)
{
    uint32_t qh = 0;

    for (int k = 0; k < 8; k++) {
        for (int e = 0; e < 4; e++) {
            if (hm[8 * k + (4 * l + e) / 8] >> ((4 * l + e) % 8) & 1) {
                qh |= 1u << (4 * k + e);
            }
        }
    }
    memcpy(qh4, &qh, 4);
}


/* the inverse of llm_pack for one row: row r of packed matrix p as stored
 * in GGUF, into dst (its blocks, any packed type). A tied embedding whose
 * packed copy is the classifier reads its rows here, so its file pages
 * need not come back (the backend let them go when it packed). */
void
llm_pack_row(const llm_tensor *p, int r, void *dst)
{
    int             qk = llm_quant_block(p->type), nb = p->cols / qk, b, k;
    int             l = r % LLM_PACK_ROWS;
    int             n_dw = p->type == GGML_TYPE_Q8_0 ? 8 : 4;
    size_t          bb = llm_quant_block_bytes(p->type);
    size_t          pb = llm_pack_block_bytes(bb);
    size_t          qa = llm_pack_quants_at(p->type);
    const uint8_t  *g = (const uint8_t *) p->data
                        + (size_t) (r / LLM_PACK_ROWS) * p->row_stride;
    uint8_t        *out = dst, *qs;

    for (b = 0; b < nb; b++, g += pb, out += bb) {
        if (qk == LLM_QK_K) {
            llm_pack_k_row(p->type, (uint8_t *) g, l, out, 1);
            continue;
        }
        if (p->type == GGML_TYPE_MXFP4) {
            out[0] = g[l];                                       /* e */
        } else {
            memcpy(out, g + 2 * l, 2);                           /* d */
        }
        if (p->type == GGML_TYPE_Q4_1) {
            memcpy(out + 2, g + 32 + 2 * l, 2);                  /* m */
        }
        if (p->type == GGML_TYPE_Q5_0) {
            unpack_qh(g + 32, l, out + 2);
        }
        qs = out + qs_at(p->type);
        for (k = 0; k < n_dw; k++) {
            memcpy(qs + 4 * k, g + qa + 64 * k + 4 * l, 4);
            for (int e = 0; p->type == GGML_TYPE_Q8_0 && e < 4; e++) {
                qs[4 * k + e] ^= 0x80;
            }
        }
    }
}
