/*
 * Scalar reference for the quantized formats: dequantization
 * and quantization. Readable on purpose; matmul.c has the fast paths and
 * t/unit/test_kernels.c holds them against these functions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "quant_vals.h"
#include "tensor_type.h"


int
llm_quant_block(uint32_t type)
{
    return (int) ggml_type_block(type);
}


int
llm_quant_block_bytes(uint32_t type)
{
    return (int) ggml_type_size(type);
}


/* --- dequantization ------------------------------------------------------ */

static void
dequant_q4_0(const llm_block_q4_0 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += LLM_QK) {
        float d = llm_fp16_to_fp32(b[i].d);
        for (int j = 0; j < LLM_QK / 2; j++) {
            y[j] = d * (float) ((b[i].qs[j] & 0xf) - 8);
            y[j + LLM_QK / 2] = d * (float) ((b[i].qs[j] >> 4) - 8);
        }
    }
}


static void
dequant_q4_1(const llm_block_q4_1 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += LLM_QK) {
        float d = llm_fp16_to_fp32(b[i].d);
        float m = llm_fp16_to_fp32(b[i].m);
        for (int j = 0; j < LLM_QK / 2; j++) {
            y[j] = d * (float) (b[i].qs[j] & 0xf) + m;
            y[j + LLM_QK / 2] = d * (float) (b[i].qs[j] >> 4) + m;
        }
    }
}


static void
dequant_q8_0(const llm_block_q8_0 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += LLM_QK) {
        float d = llm_fp16_to_fp32(b[i].d);
        for (int j = 0; j < LLM_QK; j++) {
            y[j] = d * (float) b[i].qs[j];
        }
    }
}


static void
dequant_q4_K(const llm_block_q4_K *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = llm_fp16_to_fp32(b[i].d);
        float dmin = llm_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;

        /* each 32 bytes of qs carry sub-block 2k (low nibbles) and
         * sub-block 2k+1 (high nibbles) */
        for (int k = 0; k < 4; k++, q += 32) {
            int sc0, m0, sc1, m1;
            llm_q4k_scale_min(b[i].scales, 2 * k, &sc0, &m0);
            llm_q4k_scale_min(b[i].scales, 2 * k + 1, &sc1, &m1);
            float d0 = d * (float) sc0, min0 = dmin * (float) m0;
            float d1 = d * (float) sc1, min1 = dmin * (float) m1;
            for (int l = 0; l < 32; l++) {
                *y++ = d0 * (float) (q[l] & 0xf) - min0;
            }
            for (int l = 0; l < 32; l++) {
                *y++ = d1 * (float) (q[l] >> 4) - min1;
            }
        }
    }
}


/* element e (0..255) of a Q6_K block as its signed 6-bit value: each half
 * of 128 uses 64 bytes of ql and 32 of qh; within a half, element
 * 32g + l takes nibble (g >= 2) of ql[l + 32 (g & 1)] and bits 2g..2g+1
 * of qh[l] */
static int
q6k_value(const llm_block_q6_K *b, int e)
{
    int half = e / 128, g = (e % 128) / 32, l = e % 32;
    const uint8_t *ql = b->ql + 64 * half;
    const uint8_t *qh = b->qh + 32 * half;
    int lo = ql[l + 32 * (g & 1)];

    lo = (g >= 2) ? lo >> 4 : lo & 0xf;
    return (lo | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
}


static void
dequant_q6_K(const llm_block_q6_K *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = llm_fp16_to_fp32(b[i].d);
        for (int e = 0; e < LLM_QK_K; e++) {
            *y++ = d * (float) b[i].scales[e / 16] * (float) q6k_value(&b[i], e);
        }
    }
}


void
llm_dequant_row(uint32_t type, const void *row, float *out, int64_t n)
{
    const uint16_t *h = row;
    int64_t blk = llm_quant_block(type);

    if (blk == 0 || n % blk != 0) {
        fprintf(stderr, "llm_dequant_row: type %u (%s) with %lld elements "
                "is not supported\n", type, ggml_type_name(type),
                (long long) n);
        abort();
    }
    switch (type) {
    case GGML_TYPE_F32:
        memcpy(out, row, n * sizeof(float));
        break;
    case GGML_TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            out[i] = llm_fp16_to_fp32(h[i]);
        }
        break;
    case GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            out[i] = llm_bf16_to_fp32(h[i]);
        }
        break;
    case GGML_TYPE_Q4_0: dequant_q4_0(row, out, n / blk); break;
    case GGML_TYPE_Q4_1: dequant_q4_1(row, out, n / blk); break;
    case GGML_TYPE_Q8_0: dequant_q8_0(row, out, n / blk); break;
    case GGML_TYPE_Q4_K: dequant_q4_K(row, out, n / blk); break;
    case GGML_TYPE_Q6_K: dequant_q6_K(row, out, n / blk); break;
    default:             llm_dequant_ext(type, row, out, n / blk); break;
    }
}


/* --- quantization -------------------------------------------------------- */

static float
abs_max(const float *x, int n)
{
    float amax = 0.0f;

    for (int j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        amax = a > amax ? a : amax;
    }
    return amax;
}


/* roundf (half away from zero) for |v| < 2^23 without the libm call
 * (baseline x86-64 has no rounding instruction): v - trunc(v) is exact */
static inline int
round_int(float v)
{
    int r = (int) v;
    float frac = v - (float) r;

    return r + (frac >= 0.5f) - (frac <= -0.5f);
}


static void
quantize_q8_0(const float *x, llm_block_q8_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += LLM_QK) {
        float d = abs_max(x, LLM_QK) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm_fp32_to_fp16(d);
        for (int j = 0; j < LLM_QK; j++) {
            y[i].qs[j] = (int8_t) roundf(x[j] * id);
        }
    }
}


/* Q4_0 as ggml: the value of largest magnitude maps to -8, so d may be
 * negative and the full range -8..7 is used on one side */
static void
quantize_q4_0(const float *x, llm_block_q4_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += LLM_QK) {
        float max = 0.0f;
        for (int j = 0; j < LLM_QK; j++) {
            if (fabsf(x[j]) > fabsf(max)) {
                max = x[j];
            }
        }
        float d = max / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm_fp32_to_fp16(d);
        for (int j = 0; j < LLM_QK / 2; j++) {
            int q0 = (int) fminf(15.0f, floorf(x[j] * id + 8.5f));
            int q1 = (int) fminf(15.0f, floorf(x[j + 16] * id + 8.5f));
            y[i].qs[j] = (uint8_t) (q0 | (q1 << 4));
        }
    }
}


static void
quantize_q4_1(const float *x, llm_block_q4_1 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += LLM_QK) {
        float min = x[0], max = x[0];
        for (int j = 1; j < LLM_QK; j++) {
            min = fminf(min, x[j]);
            max = fmaxf(max, x[j]);
        }
        float d = (max - min) / 15.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm_fp32_to_fp16(d);
        y[i].m = llm_fp32_to_fp16(min);
        for (int j = 0; j < LLM_QK / 2; j++) {
            int q0 = (int) fminf(15.0f, floorf((x[j] - min) * id + 0.5f));
            int q1 = (int) fminf(15.0f, floorf((x[j + 16] - min) * id + 0.5f));
            y[i].qs[j] = (uint8_t) (q0 | (q1 << 4));
        }
    }
}


int
llm_quantize_row(uint32_t type, const float *x, void *row, int64_t n)
{
    uint16_t *h = row;

    if (llm_quant_block(type) == 0 || n % llm_quant_block(type) != 0) {
        return -1;
    }
    switch (type) {
    case GGML_TYPE_F32:
        memcpy(row, x, n * sizeof(float));
        return 0;
    case GGML_TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            h[i] = llm_fp32_to_fp16(x[i]);
        }
        return 0;
    case GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &x[i], 4);
            b += 0x7fff + ((b >> 16) & 1);     /* nearest even */
            h[i] = (uint16_t) (b >> 16);
        }
        return 0;
    case GGML_TYPE_Q8_0: quantize_q8_0(x, row, n / LLM_QK); return 0;
    case GGML_TYPE_Q4_0: quantize_q4_0(x, row, n / LLM_QK); return 0;
    case GGML_TYPE_Q4_1: quantize_q4_1(x, row, n / LLM_QK); return 0;
    default:
        return llm_quantize_ext(type, x, row, n);
    }
}


/* activations: every matmul path uses these same functions, so the
 * quantized activations never depend on the instruction set (the AVX2
 * twin below does the same IEEE operations, lane by lane) */
void
llm_quantize_row_q8a_ref(const float *x, llm_block_q8a *y, int64_t n)
{
    for (int64_t i = 0; i < n / LLM_QK; i++, x += LLM_QK) {
        float d = abs_max(x, LLM_QK) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < LLM_QK; j++) {
            int q = round_int(x[j] * id);
            y[i].qs[j] = (int8_t) q;
            sum += q;
        }
        y[i].d = d;
        y[i].s = d * (float) sum;
    }
}


#if defined(__x86_64__)
#include <immintrin.h>

/* quantize_q8a_avx2 and quantize_q8k_avx2 below do their references'
 * IEEE operations lane by lane, so give the same bits (test_kernels);
 * their common steps: */
#define AVX2_INLINE __attribute__((target("avx2"), always_inline)) inline

/* abs_max of 8 n8 floats: max(a, m) is a > m ? a : m as in abs_max */
static AVX2_INLINE float
abs_max_avx2(const float *x, int n8)
{
    const __m256  sign = _mm256_set1_ps(-0.0f);
    __m256        m = _mm256_setzero_ps();
    __m128        h;

    for (int k = 0; k < n8; k++) {
        m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)),
                          m);
    }
    h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}


/* round_int(x[k] * id), k = 0..7: x * id and v - (float) trunc(v) are
 * the same single roundings, the +-0.5 comparisons round_int's */
static AVX2_INLINE __m256i
round_avx2(const float *x, __m256 vid)
{
    const __m256  half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f);
    __m256        t = _mm256_mul_ps(_mm256_loadu_ps(x), vid);
    __m256i       r = _mm256_cvttps_epi32(t);
    __m256        frac = _mm256_sub_ps(t, _mm256_cvtepi32_ps(r));
    __m256i       ge = _mm256_castps_si256(_mm256_cmp_ps(frac, half,
                                                         _CMP_GE_OQ));
    __m256i       le = _mm256_castps_si256(_mm256_cmp_ps(frac, mhalf,
                                                         _CMP_LE_OQ));

    return _mm256_add_epi32(_mm256_sub_epi32(r, ge), le);
}


/* 32 int32 -> 32 int8 in order: the packs interleave 128-bit lanes, the
 * permutation undoes it */
static AVX2_INLINE __m256i
pack_avx2(const __m256i q[4])
{
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(
               _mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
               _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}


/* llm_quantize_row_q8a_ref on 8 lanes */
__attribute__((target("avx2")))
static void
quantize_q8a_avx2(const float *x, llm_block_q8a *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += LLM_QK) {
        __m256i  q[4], sum = _mm256_setzero_si256();
        __m256   vid;
        __m128i  s4;
        float    d, id;

        d = abs_max_avx2(x, 4) / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        vid = _mm256_set1_ps(id);
        for (int k = 0; k < 4; k++) {
            q[k] = round_avx2(x + 8 * k, vid);
            sum = _mm256_add_epi32(sum, q[k]);
        }
        _mm256_storeu_si256((__m256i *) y[i].qs, pack_avx2(q));

        s4 = _mm_add_epi32(_mm256_castsi256_si128(sum),
                           _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        y[i].d = d;
        y[i].s = d * (float) _mm_cvtsi128_si32(s4);
    }
}
#endif


void
llm_quantize_row_q8a(const float *x, llm_block_q8a *y, int64_t n)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        quantize_q8a_avx2(x, y, n / LLM_QK);
        return;
    }
#endif
    llm_quantize_row_q8a_ref(x, y, n);
}


void
llm_quantize_row_q8k_ref(const float *x, llm_block_q8k *y, int64_t n)
{
    for (int64_t i = 0; i < n / LLM_QK_K; i++, x += LLM_QK_K) {
        float d = abs_max(x, LLM_QK_K) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < LLM_QK_K; j++) {
            y[i].qs[j] = (int8_t) round_int(x[j] * id);
        }
        for (int g = 0; g < LLM_QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) {
                sum += y[i].qs[16 * g + j];
            }
            y[i].bsums[g] = (int16_t) sum;
        }
        y[i].d = d;
    }
}


#if defined(__x86_64__)
/* llm_quantize_row_q8k_ref on 8 lanes; bsums by vpsadbw of the bytes +
 * 128 (sums of 8 unsigned bytes), less 16 * 128 */
__attribute__((target("avx2")))
static void
quantize_q8k_avx2(const float *x, llm_block_q8k *y, int64_t nb)
{
    const __m256i  bias = _mm256_set1_epi8((char) 0x80);

    for (int64_t i = 0; i < nb; i++, x += LLM_QK_K) {
        __m256   vid;
        float    d, id;

        d = abs_max_avx2(x, 32) / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        vid = _mm256_set1_ps(id);
        for (int c = 0; c < 8; c++) {                  /* 32 elements */
            __m256i q[4], p, s;
            for (int k = 0; k < 4; k++) {
                q[k] = round_avx2(x + 32 * c + 8 * k, vid);
            }
            p = pack_avx2(q);
            _mm256_storeu_si256((__m256i *) (y[i].qs + 32 * c), p);
            /* 64-bit lanes: sums of bytes 8j..8j+7 + 128 each */
            s = _mm256_sad_epu8(_mm256_xor_si256(p, bias),
                                _mm256_setzero_si256());
            s = _mm256_add_epi64(s, _mm256_shuffle_epi32(s, 0x4e));
            y[i].bsums[2 * c] = (int16_t) (_mm256_cvtsi256_si32(s) - 2048);
            y[i].bsums[2 * c + 1] = (int16_t) (_mm_cvtsi128_si32(
                _mm256_extracti128_si256(s, 1)) - 2048);
        }
        y[i].d = d;
    }
}
#endif


void
llm_quantize_row_q8k(const float *x, llm_block_q8k *y, int64_t n)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        quantize_q8k_avx2(x, y, n / LLM_QK_K);
        return;
    }
#endif
    llm_quantize_row_q8k_ref(x, y, n);
}
