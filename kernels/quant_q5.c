/*
 * Q5_0 and Q5_1 (ggml-common.h's block_q5_0, block_q5_1): unpacking to
 * integers (quant_vals.h) and round-to-nearest quantization as ggml's
 * reference quantizers do it.
 *
 * defines: llm_unpack_q5, llm_quantize_q5
 */
#include <math.h>
#include <string.h>

#include "quant_vals.h"
#include "tensor_type.h"


/* element j's 5-bit value: nibble j % 16 of qs (low for j < 16), bit 4 in
 * bit j of the little-endian qh */
static int
q5_value(const uint8_t qs[16], const uint8_t qh[4], int j)
{
    uint32_t h = (uint32_t) qh[0] | (uint32_t) qh[1] << 8
                 | (uint32_t) qh[2] << 16 | (uint32_t) qh[3] << 24;
    int lo = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;

    return lo | (int) ((h >> j) & 1) << 4;
}


void
llm_unpack_q5(uint32_t type, const void *blk, llm_q32_vals *v)
{
    if (type == GGML_TYPE_Q5_0) {
        const llm_block_q5_0 *b = blk;
        for (int j = 0; j < LLM_QK; j++) {
            v->q[j] = (int8_t) (q5_value(b->qs, b->qh, j) - 16);
        }
        v->d = llm_fp16_to_fp32(b->d);
        v->m = 0.0f;
        v->has_min = 0;
    } else {
        const llm_block_q5_1 *b = blk;
        for (int j = 0; j < LLM_QK; j++) {
            v->q[j] = (int8_t) q5_value(b->qs, b->qh, j);
        }
        v->d = llm_fp16_to_fp32(b->d);
        v->m = llm_fp16_to_fp32(b->m);
        v->has_min = 1;
    }
}


static void
pack5(const int q[LLM_QK], uint8_t qs[16], uint8_t qh[4])
{
    uint32_t h = 0;

    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t) ((q[j] & 0xf) | (q[j + 16] & 0xf) << 4);
    }
    for (int j = 0; j < LLM_QK; j++) {
        h |= (uint32_t) (q[j] >> 4) << j;
    }
    for (int k = 0; k < 4; k++) {
        qh[k] = (uint8_t) (h >> (8 * k));
    }
}


/* Q5_0: the value of largest magnitude maps to -16 (as ggml, like Q4_0);
 * Q5_1: min and (max - min) / 31 */
void
llm_quantize_q5(uint32_t type, const float *x, void *row, int64_t nb)
{
    int q[LLM_QK];

    for (int64_t i = 0; i < nb; i++, x += LLM_QK) {
        float min = x[0], max = x[0], amax = 0.0f, d, id;

        for (int j = 0; j < LLM_QK; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (type == GGML_TYPE_Q5_0) {
            llm_block_q5_0 *b = (llm_block_q5_0 *) row + i;
            d = max / -16.0f;
            id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < LLM_QK; j++) {
                q[j] = (int) fminf(31.0f, floorf(x[j] * id + 16.5f));
            }
            b->d = llm_fp32_to_fp16(d);
            pack5(q, b->qs, b->qh);
            continue;
        }
        llm_block_q5_1 *b = (llm_block_q5_1 *) row + i;
        min = max = x[0];
        for (int j = 1; j < LLM_QK; j++) {
            min = fminf(min, x[j]);
            max = fmaxf(max, x[j]);
        }
        d = (max - min) / 31.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < LLM_QK; j++) {
            q[j] = (int) fminf(31.0f, floorf((x[j] - min) * id + 0.5f));
        }
        b->d = llm_fp32_to_fp16(d);
        b->m = llm_fp32_to_fp16(min);
        pack5(q, b->qs, b->qh);
    }
}
