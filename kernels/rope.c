/*
 * Rotary position embedding (rope.h): the scalar definition and an
 * AVX-512 kernel, 8 pairs at a time.
 */
#include "isa.h"
#include "rope.h"


/* pairs i0 .. half - 1 */
static void
rope_from(float *x, const float *cs, const float *sn, int half, int neox,
    int i0)
{
    int    i, a, b;
    float  x0, x1;

    for (i = i0; i < half; i++) {
        a = neox ? i : 2 * i;
        b = neox ? i + half : 2 * i + 1;
        x0 = x[a];
        x1 = x[b];
        x[a] = x0 * cs[i] - x1 * sn[i];
        x[b] = x0 * sn[i] + x1 * cs[i];
    }
}


void
llm_rope_head_ref(float *x, const float *cs, const float *sn, int rope_dim,
    int neox)
{
    rope_from(x, cs, sn, rope_dim / 2, neox, 0);
}


#if defined(__x86_64__)

#include <immintrin.h>

#define TGT __attribute__((target("avx512f,avx512dq,avx2,fma")))

TGT static void
rope_avx512(float *x, const float *cs, const float *sn, int rope_dim,
    int neox)
{
    int  i, half = rope_dim / 2;

    if (neox) {
        for (i = 0; i + 16 <= half; i += 16) {
            __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + half + i);
            __m512 c = _mm512_loadu_ps(cs + i), s = _mm512_loadu_ps(sn + i);
            _mm512_storeu_ps(x + i, _mm512_sub_ps(_mm512_mul_ps(x0, c),
                                                  _mm512_mul_ps(x1, s)));
            _mm512_storeu_ps(x + half + i, _mm512_add_ps(_mm512_mul_ps(x0, s),
                                                         _mm512_mul_ps(x1, c)));
        }
    } else {
        /* lanes 2j, 2j + 1 hold pair j: p = x * cs, q = swapped x * sn;
           even lanes p - q, odd lanes q + p (= p + q) */
        const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4,
                                              5, 5, 6, 6, 7, 7);
        const __m512i swap = _mm512_setr_epi32(1, 0, 3, 2, 5, 4, 7, 6, 9,
                                               8, 11, 10, 13, 12, 15, 14);
        for (i = 0; i + 8 <= half; i += 8) {
            __m512 v = _mm512_loadu_ps(x + 2 * i);
            __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(
                                                 _mm256_loadu_ps(cs + i)));
            __m512 s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(
                                                 _mm256_loadu_ps(sn + i)));
            __m512 p = _mm512_mul_ps(v, c);
            __m512 q = _mm512_mul_ps(_mm512_permutexvar_ps(swap, v), s);
            _mm512_storeu_ps(x + 2 * i, _mm512_mask_blend_ps(
                                 0xaaaa, _mm512_sub_ps(p, q),
                                 _mm512_add_ps(p, q)));
        }
    }
    rope_from(x, cs, sn, half, neox, i);
}

#endif


void
llm_rope_head(float *x, const float *cs, const float *sn, int rope_dim,
    int neox)
{
#if defined(__x86_64__)
    if (llm_kernels_isa() == LLM_ISA_AVX512) {
        rope_avx512(x, cs, sn, rope_dim, neox);
        return;
    }
#endif
    llm_rope_head_ref(x, cs, sn, rope_dim, neox);
}
