/*
 * Causal attention over a paged KV cache (attention.h): the scalar
 * definition, and AVX-512 and AVX2 kernels that compute the same
 * operations lane for lane for up to LLM_ATT_MAX_Q (AVX2: 3) queries at
 * once.
 *
 * The AVX-512 kernel's lanes are the 16 positions of a tile: K is stored
 * transposed, so one load gives dimension d of all 16 keys and a score
 * needs no horizontal sum; each loaded K (and V) vector serves every
 * query of the call (a prefill's consecutive tokens times the heads that
 * share the kv head), which is what makes prefill attention cheap.
 */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "isa.h"
#include "quant.h"

#include "exp_neg.h"

/*
 * Under AddressSanitizer (the fuzz tree, make test-asan) the AVX-512
 * kernel's counts are runtime bounds: the queries of each group (NA, NB)
 * and the 16-dim vectors of o a pass (NK), and no loop is unrolled by
 * ATT_UNROLL. One att_avx512 per cache type then, where the optimized
 * build makes 12 (one per query count, each with 8 tile_values_k) so that
 * the counts unroll into registers: compiling this file under the
 * sanitizers took 280 s of CPU with clang, 55 with gcc, 7 now
 * (docs/testing.md). The same functions, so the same K and V loads and o
 * stores for the sanitizers to check, and the same operations per lane
 * (the same bits, test_attention); only registers become stack arrays.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ATT_SAN  1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATT_SAN  1
#endif
#endif

#ifdef ATT_SAN
#define ATT_UNROLL(n)
#else
#define ATT_PRAGMA(x)  _Pragma(#x)
#define ATT_UNROLL(n)  ATT_PRAGMA(GCC unroll n)
#endif


float
llm_att_exp(float x)
{
    return att_exp1(x);
}


/* the fixed pairwise tree of 16 lanes: halves, quarters, eighths, pair */
static float
hsum16_ref(const float v[16])
{
    float  s8[8], s4[4], s2[2];
    int    i;

    for (i = 0; i < 8; i++) s8[i] = v[i] + v[i + 8];
    for (i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
    for (i = 0; i < 2; i++) s2[i] = s4[i] + s4[i + 2];
    return s2[0] + s2[1];
}


static float
cache_val(const uint8_t *base, size_t i, int f16)
{
    if (f16) {
        uint16_t h;
        memcpy(&h, base + 2 * i, 2);
        return llm_fp16_to_fp32(h);
    }
    float f;
    memcpy(&f, base + 4 * i, 4);
    return f;
}


/* the block holding tile c: K and V bases, and the tile's first slot */
static void
tile_at(const llm_att_seq *s, int c, const uint8_t **kb, const uint8_t **vb,
    int *slot0)
{
    int            t = c * LLM_ATT_TILE;
    const uint8_t *blk = s->pool + (size_t) s->table[t / s->block_size]
                                   * s->block_bytes;

    *kb = blk + s->k_off;
    *vb = blk + s->v_off;
    *slot0 = t % s->block_size;
}


/* first and last tile of span k that hold a position of t0..p (the
 * first > the last when none does) */
static void
span_tiles(int t0, int p, int k, int *c_lo, int *c_hi)
{
    int lo = k * LLM_ATT_SPAN, hi = lo + LLM_ATT_SPAN - 1;

    *c_lo = (t0 > lo ? t0 : lo) / LLM_ATT_TILE;
    *c_hi = (p < hi ? p : hi) / LLM_ATT_TILE;
    if (p < lo || t0 > hi) {
        *c_hi = *c_lo - 1;
    }
}


/* one query over span k: part = o[hd], m, l */
static void
att_ref_span(const llm_att_seq *s, const llm_att_query *q, float scale,
    int k, float *part)
{
    float           *o = part, sc[16], pr[16], a[4];
    float           m = -INFINITY, l = 0.0f, tmax, mn, alpha;
    int             c, c_lo, c_hi, j, d, t, slot0, hd = s->hd;
    const uint8_t  *kb, *vb;

    memset(o, 0, sizeof(float) * hd);
    span_tiles(q->t0, q->p, k, &c_lo, &c_hi);
    for (c = c_lo; c <= c_hi; c++) {
        tile_at(s, c, &kb, &vb, &slot0);
        tmax = -INFINITY;
        for (j = 0; j < 16; j++) {
            t = c * LLM_ATT_TILE + j;
            sc[j] = -INFINITY;
            if (t < q->t0 || t > q->p) {
                continue;
            }
            a[0] = a[1] = a[2] = a[3] = 0.0f;
            for (d = 0; d < hd; d++) {
                size_t i = (size_t) (s->head_off + d) * s->block_size
                           + slot0 + j;
                a[d % 4] = fmaf(q->q[d], cache_val(kb, i, s->f16), a[d % 4]);
            }
            sc[j] = ((a[0] + a[1]) + (a[2] + a[3])) * scale;
            tmax = sc[j] > tmax ? sc[j] : tmax;
        }
        mn = m > tmax ? m : tmax;
        alpha = llm_att_exp(m - mn);
        for (j = 0; j < 16; j++) {
            pr[j] = llm_att_exp(sc[j] - mn);
        }
        l = fmaf(l, alpha, hsum16_ref(pr));
        for (d = 0; d < hd; d++) {
            o[d] *= alpha;
            for (j = 0; j < 16; j++) {
                t = c * LLM_ATT_TILE + j;
                if (t >= q->t0 && t <= q->p) {
                    size_t i = (size_t) (slot0 + j) * s->kv_dim
                               + s->head_off + d;
                    o[d] = fmaf(pr[j], cache_val(vb, i, s->f16), o[d]);
                }
            }
        }
        m = mn;
    }
    part[hd] = m;
    part[hd + 1] = l;
}


int
llm_att_span_used(const llm_att_query *q, int k)
{
    return q->t0 / LLM_ATT_SPAN <= k && k <= q->p / LLM_ATT_SPAN;
}


/* acc = fmaf(acc, a, part * b) over o, then m and l: written once, made
 * twice (below: one compiled for FMA, where fmaf is one instruction and
 * loops run 8 lanes at a time; the same roundings either way) */
static inline __attribute__((always_inline)) void
merge_body(float *acc, const float *part, int hd)
{
    float  m = acc[hd], mn = m > part[hd] ? m : part[hd];
    float  a = att_exp1(m - mn), b = att_exp1(part[hd] - mn);

    for (int d = 0; d < hd; d++) {
        acc[d] = fmaf(acc[d], a, part[d] * b);
    }
    acc[hd] = mn;
    acc[hd + 1] = fmaf(acc[hd + 1], a, part[hd + 1] * b);
}


static inline __attribute__((always_inline)) void
finish_body(const float *acc, float *out, int hd)
{
    for (int d = 0; d < hd; d++) {
        out[d] = acc[d] / acc[hd + 1];
    }
}


#if defined(__x86_64__)

/* the same operations 8 lanes at a time (through libm's fmaf the merge
 * was 25% of a prefill's attention calls) */
__attribute__((target("avx2,fma")))
static void
merge_fma(float *acc, const float *part, int hd)
{
    float   m = acc[hd], mn = m > part[hd] ? m : part[hd];
    float   a = att_exp1(m - mn), b = att_exp1(part[hd] - mn);
    __m256  va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int     d;

    for (d = 0; d + 8 <= hd; d += 8) {
        _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(
                             _mm256_loadu_ps(acc + d), va,
                             _mm256_mul_ps(_mm256_loadu_ps(part + d), vb)));
    }
    for ( /* void */ ; d < hd; d++) {
        acc[d] = fmaf(acc[d], a, part[d] * b);
    }
    acc[hd] = mn;
    acc[hd + 1] = fmaf(acc[hd + 1], a, part[hd + 1] * b);
}


__attribute__((target("avx2,fma")))
static void
finish_fma(const float *acc, float *out, int hd)
{
    __m256  l = _mm256_set1_ps(acc[hd + 1]);
    int     d;

    for (d = 0; d + 8 <= hd; d += 8) {
        _mm256_storeu_ps(out + d, _mm256_div_ps(_mm256_loadu_ps(acc + d), l));
    }
    for ( /* void */ ; d < hd; d++) {
        out[d] = acc[d] / acc[hd + 1];
    }
}

#endif


void
llm_att_merge(float *acc, const float *part, int hd, int first)
{
    if (first) {
        memcpy(acc, part, sizeof(float) * LLM_ATT_PART(hd));
        return;
    }
#if defined(__x86_64__)
    if (llm_kernels_isa() >= LLM_ISA_AVX2) {
        merge_fma(acc, part, hd);
        return;
    }
#endif
    merge_body(acc, part, hd);
}


void
llm_att_sink(float *acc, float sink, int hd)
{
    float  m = acc[hd], mn = m > sink ? m : sink;
    float  a = att_exp1(m - mn);

    for (int d = 0; d < hd; d++) {
        acc[d] *= a;
    }
    acc[hd] = mn;
    acc[hd + 1] = fmaf(acc[hd + 1], a, att_exp1(sink - mn));
}


void
llm_att_finish(const float *acc, float *out, int hd)
{
#if defined(__x86_64__)
    if (llm_kernels_isa() >= LLM_ISA_AVX2) {
        finish_fma(acc, out, hd);
        return;
    }
#endif
    finish_body(acc, out, hd);
}


typedef void (*att_span_fn)(const llm_att_seq *s, const llm_att_query *q,
    int nq, float scale, int k, float *part);

/* up to max_q queries at a time: their spans in turn, merged */
static void
att_spans(att_span_fn fn, int max_q, const llm_att_seq *s,
    const llm_att_query *q, int nq, float scale)
{
    float  part[LLM_ATT_MAX_Q * LLM_ATT_PART(LLM_ATT_MAX_HD)];
    float  acc[LLM_ATT_MAX_Q * LLM_ATT_PART(LLM_ATT_MAX_HD)];
    int    i, k, lo, hi, n, hd = s->hd, P = LLM_ATT_PART(hd);

    for ( /* void */ ; nq > 0; q += n, nq -= n) {
        n = nq < max_q ? nq : max_q;
        lo = q[0].t0;
        hi = q[0].p;
        for (i = 1; i < n; i++) {
            lo = q[i].t0 < lo ? q[i].t0 : lo;
            hi = q[i].p > hi ? q[i].p : hi;
        }
        for (k = lo / LLM_ATT_SPAN; k <= hi / LLM_ATT_SPAN; k++) {
            fn(s, q, n, scale, k, part);
            for (i = 0; i < n; i++) {
                if (llm_att_span_used(&q[i], k)) {
                    llm_att_merge(acc + i * P, part + i * P, hd,
                                  k == q[i].t0 / LLM_ATT_SPAN);
                }
            }
        }
        for (i = 0; i < n; i++) {
            if (q[i].sink != NULL) {
                llm_att_sink(acc + i * P, *q[i].sink, hd);
            }
            llm_att_finish(acc + i * P, q[i].out, hd);
        }
    }
}


static void
att_ref_spans(const llm_att_seq *s, const llm_att_query *q, int nq,
    float scale, int k, float *part)
{
    for (int i = 0; i < nq; i++) {
        att_ref_span(s, &q[i], scale, k, part + i * LLM_ATT_PART(s->hd));
    }
}


void
llm_attention_ref(const llm_att_seq *s, const llm_att_query *q, int nq,
    float scale)
{
    att_spans(att_ref_spans, 1, s, q, nq, scale);
}


#if defined(__x86_64__)

#include <immintrin.h>

#define TGT __attribute__((target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline

/* queries one register pass of the AVX-512 kernel takes (6 x 4 score
   chains, 6 x 4 output vectors); a call takes two such groups */
#define ATT_GROUP  6


TGT static INLINE __m512
ld16(const uint8_t *base, size_t i, const int f16)
{
    if (f16) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(
                   (const __m256i *) (base + 2 * i)));
    }
    return _mm512_loadu_ps((const float *) base + i);
}


TGT static INLINE __m512
ld16_mask(const uint8_t *base, size_t i, const int f16, __mmask16 k)
{
    if (f16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, base + 2 * i));
    }
    return _mm512_maskz_loadu_ps(k, (const float *) base + i);
}


/* hsum16_ref's tree */
TGT static INLINE float
hsum16(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a),
                          _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));

    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}


/*
 * Eight 16-lane vectors reduced at once, result k in lane k (k < 8): a
 * transposing tree whose levels pair the lanes exactly as hsum16_ref does
 * (i with i + 8, then i + 4, i + 2, i + 1), so a sum equals hsum16's bit
 * for bit; a max is exact in any order. 24 operations for 8 vectors
 * where one reduction each costs 8 and a move to a scalar.
 */
#define RED8(name, OP)                                                       \
TGT static INLINE __m512                                                     \
name(const __m512 v[8])                                                      \
{                                                                            \
    __m512 a[4], b[2], c, d;                                                 \
    int    k;                                                                \
                                                                             \
    for (k = 0; k < 4; k++) { /* lane i + lane i + 8: two vectors a half */  \
        a[k] = OP(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),        \
                  _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xee));       \
    }                                                                        \
    for (k = 0; k < 2; k++) { /* + lane i + 4: one vector a quarter */       \
        b[k] = OP(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x88),        \
                  _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xdd));       \
    }                                                                        \
    /* + lane i + 2: quarter q holds vectors q (lanes 0-1) and q + 4 */      \
    c = OP(_mm512_shuffle_ps(b[0], b[1], 0x44),                              \
           _mm512_shuffle_ps(b[0], b[1], 0xee));                             \
    d = OP(c, _mm512_shuffle_ps(c, c, 0xb1));     /* + lane i + 1 */         \
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10,    \
                                     14, 0, 0, 0, 0, 0, 0, 0, 0), d);        \
}

RED8(hsum8x16, _mm512_add_ps)
RED8(hmax8x16, _mm512_max_ps)


/* N queries' 16 scores of tile c: four chains over d per query */
TGT static INLINE void
tile_scores(const llm_att_seq *s, const llm_att_query *q, const int N,
    const int F16, const uint8_t *kb, int slot0, __m512 sc[],
    float scale)
{
    __m512  a[ATT_GROUP][4], kv;
    int     d, i, r, hd = s->hd, bs = s->block_size;
    const uint8_t *col = kb + ((size_t) s->head_off * bs + slot0)
                              * (F16 ? 2 : 4);

ATT_UNROLL(8)
    for (i = 0; i < N; i++) {
        a[i][0] = a[i][1] = a[i][2] = a[i][3] = _mm512_setzero_ps();
    }
    for (d = 0; d + 4 <= hd; d += 4) {
ATT_UNROLL(4)
        for (r = 0; r < 4; r++) {
            kv = ld16(col, (size_t) (d + r) * bs, F16);
ATT_UNROLL(8)
            for (i = 0; i < N; i++) {
                a[i][r] = _mm512_fmadd_ps(_mm512_set1_ps(q[i].q[d + r]), kv,
                                          a[i][r]);
            }
        }
    }
    for (r = 0; d < hd; d++, r++) {
        kv = ld16(col, (size_t) d * bs, F16);
ATT_UNROLL(8)
        for (i = 0; i < N; i++) {
            a[i][r] = _mm512_fmadd_ps(_mm512_set1_ps(q[i].q[d]), kv, a[i][r]);
        }
    }
ATT_UNROLL(8)
    for (i = 0; i < N; i++) {
        sc[i] = _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(a[i][0], a[i][1]),
                                            _mm512_add_ps(a[i][2], a[i][3])),
                              _mm512_set1_ps(scale));
    }
}


/*
 * acc + v * p[0] with p[0] a memory operand broadcast by the FMA itself
 * ({1to16}): GCC hoists a _mm512_set1_ps used by NK FMAs into one
 * vbroadcastss, a uop per weight that this form does without (attention
 * calls 1-3% faster on Zen 4, docs/kernels.md). The same product and
 * rounding as _mm512_fmadd_ps(_mm512_set1_ps(p[0]), v, acc).
 */
TGT static INLINE __m512
fma_bcast(__m512 v, const float *p, __m512 acc)
{
    __asm__("vfmadd231ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(v), "m"(*p));
    return acc;
}


/*
 * o[i] = o[i] * alpha[i] + sum_j p[i][j] v_j over the lanes of vm[i], for
 * NK vectors (16 dims each) of o from dimension k: N x NK accumulators
 * stay in registers for the tile's 16 positions (6 x 4 = 24 of the 32),
 * so each V vector is loaded once for all queries and the FMA chains are
 * N x NK long enough apart to hide the FMA latency. Per o[d] the order is
 * the definition's: the product by alpha, then j ascending.
 */
TGT static INLINE void
tile_values_k(const llm_att_seq *s, const int N, const int F16, const int NK,
    const uint8_t *vb, int slot0, int k, float (*o)[LLM_ATT_MAX_HD],
    float (*pr)[16], const float *alpha, const __mmask16 *vm, int full)
{
    int        i, j, kk, hd = s->hd;
    __m512     ov[ATT_GROUP][4], vv[4];
    __mmask16  km[4];
    const uint8_t *row = vb + ((size_t) slot0 * s->kv_dim + s->head_off + k)
                              * (F16 ? 2 : 4);

ATT_UNROLL(4)
    for (kk = 0; kk < NK; kk++) {
        int left = hd - k - 16 * kk;
        km[kk] = left >= 16 ? 0xffff : (__mmask16) ((1u << left) - 1);
    }
ATT_UNROLL(8)
    for (i = 0; i < N; i++) {
ATT_UNROLL(4)
        for (kk = 0; kk < NK; kk++) {
            ov[i][kk] = _mm512_mul_ps(
                            _mm512_maskz_loadu_ps(km[kk], o[i] + k + 16 * kk),
                            _mm512_set1_ps(alpha[i]));
        }
    }
    for (j = 0; j < 16; j++) {
ATT_UNROLL(4)
        for (kk = 0; kk < NK; kk++) {
            vv[kk] = ld16_mask(row, (size_t) j * s->kv_dim + 16 * kk, F16,
                               km[kk]);
        }
ATT_UNROLL(8)
        for (i = 0; i < N; i++) {
            if (!full && !(vm[i] >> j & 1)) {
                continue;
            }
ATT_UNROLL(4)
            for (kk = 0; kk < NK; kk++) {
                ov[i][kk] = fma_bcast(vv[kk], &pr[i][j], ov[i][kk]);
            }
        }
    }
ATT_UNROLL(8)
    for (i = 0; i < N; i++) {
        if (vm[i] == 0) {
            continue;
        }
ATT_UNROLL(4)
        for (kk = 0; kk < NK; kk++) {
            _mm512_mask_storeu_ps(o[i] + k + 16 * kk, km[kk], ov[i][kk]);
        }
    }
}


/* tile_values_k over the head's dimensions, 64 at a time */
TGT static INLINE void
tile_values(const llm_att_seq *s, const int N, const int F16,
    const uint8_t *vb, int slot0, float (*o)[LLM_ATT_MAX_HD],
    float (*pr)[16], const float *alpha, const __mmask16 *vm)
{
    int  i, k, full = 1, hd = s->hd;

ATT_UNROLL(8)
    for (i = 0; i < N; i++) {
        full &= vm[i] == 0xffff;
    }
    for (k = 0; k < hd; k += 64) {
#ifdef ATT_SAN
        int nk = (hd - k + 15) / 16;

        tile_values_k(s, N, F16, nk < 4 ? nk : 4, vb, slot0, k, o, pr, alpha,
                      vm, full);
#else
        switch ((hd - k + 15) / 16) {
        case 1:
            tile_values_k(s, N, F16, 1, vb, slot0, k, o, pr, alpha, vm, full);
            break;
        case 2:
            tile_values_k(s, N, F16, 2, vb, slot0, k, o, pr, alpha, vm, full);
            break;
        case 3:
            tile_values_k(s, N, F16, 3, vb, slot0, k, o, pr, alpha, vm, full);
            break;
        default:
            tile_values_k(s, N, F16, 4, vb, slot0, k, o, pr, alpha, vm, full);
            break;
        }
#endif
    }
}


/*
 * A tile's online-softmax step for the N queries of a call, lane i of mv
 * (m), lv (l) and alpha for query i; pr[i] gets the 16 weights p_j.
 * softmax_all takes every query's step at once (one max tree and one sum
 * tree over 8 vectors, alpha as one vector exponential); a query with no
 * position in the tile gets alpha 1 and adds 0. softmax_each reduces each
 * query's vector on its own: cheaper for one or two queries (decode), where
 * the 8-vector trees would be mostly padding. The same operations per
 * query either way (the definition's), so the same bits.
 */
TGT static INLINE void
softmax_all(const int N, const __m512 sc[8], const __mmask16 *vm,
    float (*pr)[16], __m512 *mv, __m512 *lv, float *alpha)
{
    __m512  mn, av, p[8];
    int     i;

    mn = _mm512_max_ps(*mv, hmax8x16(sc));
    av = exp16(_mm512_sub_ps(*mv, mn));
    *mv = mn;
ATT_UNROLL(8)
    for (i = 0; i < 8; i++) {
        p[i] = _mm512_setzero_ps();
        if (i < N && vm[i]) {
            p[i] = exp16(_mm512_sub_ps(sc[i], _mm512_permutexvar_ps(
                                          _mm512_set1_epi32(i), mn)));
        }
        if (i < N) {
            _mm512_store_ps(pr[i], p[i]);
        }
    }
    *lv = _mm512_fmadd_ps(*lv, av, hsum8x16(p));
    _mm512_store_ps(alpha, av);
}


TGT static INLINE void
softmax_each(const int N, const __m512 sc[8], const __mmask16 *vm,
    float (*pr)[16], __m512 *mv, __m512 *lv, float *alpha)
{
    float   m[16] __attribute__((aligned(64)));
    float   l[16] __attribute__((aligned(64)));
    float   tmax, mn;
    __m512  p;
    int     i;

    _mm512_store_ps(m, *mv);
    _mm512_store_ps(l, *lv);
ATT_UNROLL(2)
    for (i = 0; i < N; i++) {
        if (vm[i] == 0) {
            continue;
        }
        tmax = _mm512_reduce_max_ps(sc[i]);
        mn = m[i] > tmax ? m[i] : tmax;
        alpha[i] = att_exp1(m[i] - mn);
        p = exp16(_mm512_sub_ps(sc[i], _mm512_set1_ps(mn)));
        l[i] = fmaf(l[i], alpha[i], hsum16(p));
        _mm512_store_ps(pr[i], p);
        m[i] = mn;
    }
    *mv = _mm512_load_ps(m);
    *lv = _mm512_load_ps(l);
}


/* span k's tiles from the first to the last that holds a position of
 * any of the N queries */
static void
union_tiles(const llm_att_query *q, int N, int k, int *c_lo, int *c_hi)
{
    int lo = q[0].t0, hi = q[0].p;

    for (int i = 1; i < N; i++) {
        lo = q[i].t0 < lo ? q[i].t0 : lo;
        hi = q[i].p > hi ? q[i].p : hi;
    }
    span_tiles(lo, hi, k, c_lo, c_hi);
}


/*
 * A decode call (up to ATT_PF_MAX_Q queries: one token's heads of a kv
 * head) streams its cache from DRAM, a block per tile: the next tile's
 * block is anywhere in the pool, so the hardware prefetcher never gets
 * ahead of the reads; ask for its K and V lines a tile ahead. Decode
 * after 4096 tokens 70.8 -> 140.1 tokens/s, after 1024 182.6 -> 271.4
 * (docs/kernels.md). Prefill calls (6-12 queries, their cache mostly in
 * L2/L3 and reread by the next item) ran 2-6% slower with it.
 */
#define ATT_PF_MAX_Q  3

TGT static INLINE void
prefetch_tile(const llm_att_seq *s, int c, const int F16)
{
    const uint8_t *kb, *vb;
    int            slot0, esz = F16 ? 2 : 4;
    size_t         klen = (size_t) LLM_ATT_TILE * esz;    /* a K row's tile */
    size_t         vlen = (size_t) s->hd * esz;           /* a V row's head */

    tile_at(s, c, &kb, &vb, &slot0);
    kb += ((size_t) s->head_off * s->block_size + slot0) * esz;
    vb += ((size_t) slot0 * s->kv_dim + s->head_off) * esz;
    if (s->block_size == LLM_ATT_TILE) {         /* K rows back to back */
        for (size_t o = 0; o < (size_t) s->hd * klen; o += 64) {
            _mm_prefetch((const char *) kb + o, _MM_HINT_T0);
        }
        _mm_prefetch((const char *) kb + (size_t) s->hd * klen - 1,
                     _MM_HINT_T0);
    } else {
        for (int d = 0; d < s->hd; d++) {
            const uint8_t *p = kb + (size_t) d * s->block_size * esz;
            _mm_prefetch((const char *) p, _MM_HINT_T0);
            _mm_prefetch((const char *) p + klen - 1, _MM_HINT_T0);
        }
    }
    for (int j = 0; j < LLM_ATT_TILE; j++) {
        const uint8_t *p = vb + (size_t) j * s->kv_dim * esz;
        for (size_t o = 0; o < vlen; o += 64) {
            _mm_prefetch((const char *) p + o, _MM_HINT_T0);
        }
        _mm_prefetch((const char *) p + vlen - 1, _MM_HINT_T0);
    }
}


/* one tile for one group of N <= ATT_GROUP queries: scores, mask,
 * softmax step, values */
TGT static INLINE void
group_tile(const llm_att_seq *s, const llm_att_query *q, const int N,
    const int F16, const uint8_t *kb, const uint8_t *vb, int slot0,
    __m512i pos, float scale, float (*o)[LLM_ATT_MAX_HD], float (*pr)[16],
    float *alpha, __mmask16 *vm, __m512 *mv, __m512 *lv)
{
    __m512  sc[8];
    int     i;

ATT_UNROLL(8)
    for (i = N; i < 8; i++) {
        sc[i] = _mm512_set1_ps(-INFINITY);
    }
    tile_scores(s, q, N, F16, kb, slot0, sc, scale);
ATT_UNROLL(8)
    for (i = 0; i < N; i++) {
        vm[i] = _mm512_cmp_epi32_mask(pos, _mm512_set1_epi32(q[i].t0),
                                      _MM_CMPINT_NLT)
                & _mm512_cmp_epi32_mask(pos, _mm512_set1_epi32(q[i].p),
                                        _MM_CMPINT_LE);
        sc[i] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), vm[i], sc[i]);
    }
    if (N >= 3) {
        softmax_all(N, sc, vm, pr, mv, lv, alpha);
    } else {
        softmax_each(N, sc, vm, pr, mv, lv, alpha);
    }
    tile_values(s, N, F16, vb, slot0, o, pr, alpha, vm);
}


/*
 * NA + NB queries (NA <= ATT_GROUP, NB <= ATT_GROUP) over span k's tiles:
 * two register groups take each tile in turn, the second reading its K
 * and V from L1 where the first brought them, so a prefill item of 12
 * queries streams its cache once instead of twice.
 */
TGT static INLINE void
att_avx512(const llm_att_seq *s, const llm_att_query *q, const int NA,
    const int NB, const int F16, float scale, int k, float *part)
{
    float      o[LLM_ATT_MAX_Q][LLM_ATT_MAX_HD] __attribute__((aligned(64)));
    float      pr[LLM_ATT_MAX_Q][16] __attribute__((aligned(64)));
    float      alpha[2][16] __attribute__((aligned(64)));
    float      l[2][16] __attribute__((aligned(64)));
    float      m[2][16] __attribute__((aligned(64)));
    __mmask16  vm[LLM_ATT_MAX_Q];
    __m512     mv[2], lv[2];
    __m512i    pos;
    int        i, g, c, c_lo, c_hi, slot0, hd = s->hd;
    const uint8_t *kb, *vb;
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                           10, 11, 12, 13, 14, 15);

    for (i = 0; i < NA + NB; i++) {
        memset(o[i], 0, sizeof(float) * hd);
    }
    for (g = 0; g < 2; g++) {
        mv[g] = _mm512_set1_ps(-INFINITY);
        lv[g] = _mm512_setzero_ps();
        _mm512_store_ps(alpha[g], _mm512_set1_ps(1.0f));
    }
    union_tiles(q, NA + NB, k, &c_lo, &c_hi);

    for (c = c_lo; c <= c_hi; c++) {
        tile_at(s, c, &kb, &vb, &slot0);
        if (NA + NB <= ATT_PF_MAX_Q && c < c_hi) {
            prefetch_tile(s, c + 1, F16);
        }
        pos = _mm512_add_epi32(_mm512_set1_epi32(c * LLM_ATT_TILE), iota);
        group_tile(s, q, NA, F16, kb, vb, slot0, pos, scale, o, pr,
                   alpha[0], vm, &mv[0], &lv[0]);
        if (NB > 0) {
            group_tile(s, q + ATT_GROUP, NB, F16, kb, vb, slot0, pos, scale,
                       o + ATT_GROUP, pr + ATT_GROUP, alpha[1],
                       vm + ATT_GROUP, &mv[1], &lv[1]);
        }
    }
    for (g = 0; g < 2; g++) {
        _mm512_store_ps(l[g], lv[g]);
        _mm512_store_ps(m[g], mv[g]);
    }
    for (i = 0; i < NA + NB; i++) {
        float *pt = part + i * LLM_ATT_PART(hd);
        memcpy(pt, o[i], sizeof(float) * hd);
        pt[hd] = m[i / ATT_GROUP][i % ATT_GROUP];
        pt[hd + 1] = l[i / ATT_GROUP][i % ATT_GROUP];
    }
}


#ifdef ATT_SAN

#define ATT_VARIANT(name, F16)                                               \
TGT static void                                                              \
name(const llm_att_seq *s, const llm_att_query *q, int nq, float scale,    \
    int k, float *part)                                                      \
{                                                                            \
    int na = nq < ATT_GROUP ? nq : ATT_GROUP;                                \
    int nb = nq - na < ATT_GROUP ? nq - na : ATT_GROUP;                      \
                                                                             \
    att_avx512(s, q, na, nb, F16, scale, k, part);                           \
}

#else

#define ATT_VARIANT(name, F16)                                               \
TGT static void                                                              \
name(const llm_att_seq *s, const llm_att_query *q, int nq, float scale,    \
    int k, float *part)                                                      \
{                                                                            \
    switch (nq) {                                                            \
    case 1: att_avx512(s, q, 1, 0, F16, scale, k, part); break;              \
    case 2: att_avx512(s, q, 2, 0, F16, scale, k, part); break;              \
    case 3: att_avx512(s, q, 3, 0, F16, scale, k, part); break;              \
    case 4: att_avx512(s, q, 4, 0, F16, scale, k, part); break;              \
    case 5: att_avx512(s, q, 5, 0, F16, scale, k, part); break;              \
    case 6: att_avx512(s, q, 6, 0, F16, scale, k, part); break;              \
    case 7: att_avx512(s, q, 6, 1, F16, scale, k, part); break;              \
    case 8: att_avx512(s, q, 6, 2, F16, scale, k, part); break;              \
    case 9: att_avx512(s, q, 6, 3, F16, scale, k, part); break;              \
    case 10: att_avx512(s, q, 6, 4, F16, scale, k, part); break;             \
    case 11: att_avx512(s, q, 6, 5, F16, scale, k, part); break;             \
    default: att_avx512(s, q, 6, 6, F16, scale, k, part); break;             \
    }                                                                        \
}

#endif

ATT_VARIANT(att_avx512_f16, 1)
ATT_VARIANT(att_avx512_f32, 0)


/* --- AVX2: the same operations on pairs of 8-lane vectors ---------------- */

#define TGT2 __attribute__((target("avx2,fma,f16c")))
#define ATT2_MAX_Q  3        /* 16 ymm registers: 3 queries x 4 chains */

TGT2 static INLINE __m256
ld8(const uint8_t *base, size_t i, const int f16)
{
    if (f16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(
                   (const __m128i *) (base + 2 * i)));
    }
    return _mm256_loadu_ps((const float *) base + i);
}


/* the last n < 8 values, zero beyond */
TGT2 static INLINE __m256
ld8_tail(const uint8_t *base, size_t i, const int f16, int n)
{
    float  f[8] = { 0 };
    int    e;

    for (e = 0; e < n; e++) {
        f[e] = f16 ? llm_fp16_to_fp32(((const uint16_t *) base)[i + e])
                   : ((const float *) base)[i + e];
    }
    return _mm256_loadu_ps(f);
}




/* hsum16_ref's tree over lanes lo[0..7], hi[0..7] */
TGT2 static INLINE float
hsum16_2(__m256 lo, __m256 hi)
{
    __m256 a = _mm256_add_ps(lo, hi);
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a),
                          _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));

    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}


TGT2 static INLINE float
max16_2(__m256 lo, __m256 hi)
{
    __m256 a = _mm256_max_ps(lo, hi);
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(a),
                          _mm256_extractf128_ps(a, 1));

    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_max_ss(b, _mm_shuffle_ps(b, b, 1)));
}


/* scores of one half (lanes 8h..8h+7) of tile c for N queries */
TGT2 static INLINE void
half_scores(const llm_att_seq *s, const llm_att_query *q, const int N,
    const int F16, const uint8_t *col, __m256 sc[], float scale)
{
    __m256  a[ATT2_MAX_Q][4], kv;
    int     d, i, r, hd = s->hd, bs = s->block_size;

ATT_UNROLL(4)
    for (i = 0; i < N; i++) {
        a[i][0] = a[i][1] = a[i][2] = a[i][3] = _mm256_setzero_ps();
    }
    for (d = 0; d + 4 <= hd; d += 4) {
ATT_UNROLL(4)
        for (r = 0; r < 4; r++) {
            kv = ld8(col, (size_t) (d + r) * bs, F16);
ATT_UNROLL(4)
            for (i = 0; i < N; i++) {
                a[i][r] = _mm256_fmadd_ps(_mm256_set1_ps(q[i].q[d + r]), kv,
                                          a[i][r]);
            }
        }
    }
    for (r = 0; d < hd; d++, r++) {
        kv = ld8(col, (size_t) d * bs, F16);
ATT_UNROLL(4)
        for (i = 0; i < N; i++) {
            a[i][r] = _mm256_fmadd_ps(_mm256_set1_ps(q[i].q[d]), kv, a[i][r]);
        }
    }
ATT_UNROLL(4)
    for (i = 0; i < N; i++) {
        sc[i] = _mm256_mul_ps(_mm256_add_ps(_mm256_add_ps(a[i][0], a[i][1]),
                                            _mm256_add_ps(a[i][2], a[i][3])),
                              _mm256_set1_ps(scale));
    }
}


/* lanes of positions base..base+7 inside t0..p, as a float mask */
TGT2 static INLINE __m256
valid8(int base, int t0, int p)
{
    __m256i pos = _mm256_add_epi32(_mm256_set1_epi32(base),
                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(t0), pos);
    __m256i hi = _mm256_cmpgt_epi32(pos, _mm256_set1_epi32(p));

    return _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_or_si256(lo, hi),
                                                   _mm256_set1_epi32(-1)));
}


TGT2 static INLINE void
att_avx2(const llm_att_seq *s, const llm_att_query *q, const int N,
    const int F16, float scale, int kspan, float *part)
{
    float      o[ATT2_MAX_Q][LLM_ATT_MAX_HD] __attribute__((aligned(32)));
    float      pr[ATT2_MAX_Q][16] __attribute__((aligned(32)));
    float      m[ATT2_MAX_Q], l[ATT2_MAX_Q], alpha[ATT2_MAX_Q], tmax, mn;
    unsigned   vm[ATT2_MAX_Q];
    __m256     lo[ATT2_MAX_Q], hi[ATT2_MAX_Q], ov[ATT2_MAX_Q], vv, ml, mh;
    __m256     ninf = _mm256_set1_ps(-INFINITY);
    int        i, j, k, c, c_lo, c_hi, slot0, hd = s->hd, full;
    size_t     esz = F16 ? 2 : 4;
    const uint8_t *kb, *vb, *col, *row;

    for (i = 0; i < N; i++) {
        memset(o[i], 0, sizeof(float) * hd);
        m[i] = -INFINITY;
        l[i] = 0.0f;
        alpha[i] = 1.0f;
    }
    union_tiles(q, N, kspan, &c_lo, &c_hi);

    for (c = c_lo; c <= c_hi; c++) {
        tile_at(s, c, &kb, &vb, &slot0);
        col = kb + ((size_t) s->head_off * s->block_size + slot0) * esz;
        half_scores(s, q, N, F16, col, lo, scale);
        half_scores(s, q, N, F16, col + 8 * esz, hi, scale);
        full = 1;
        for (i = 0; i < N; i++) {
            ml = valid8(c * LLM_ATT_TILE, q[i].t0, q[i].p);
            mh = valid8(c * LLM_ATT_TILE + 8, q[i].t0, q[i].p);
            vm[i] = (unsigned) _mm256_movemask_ps(ml)
                    | (unsigned) _mm256_movemask_ps(mh) << 8;
            full &= vm[i] == 0xffff;
            if (vm[i] == 0) {
                continue;
            }
            lo[i] = _mm256_blendv_ps(ninf, lo[i], ml);
            hi[i] = _mm256_blendv_ps(ninf, hi[i], mh);
            tmax = max16_2(lo[i], hi[i]);
            mn = m[i] > tmax ? m[i] : tmax;
            alpha[i] = att_exp1(m[i] - mn);
            lo[i] = exp8(_mm256_sub_ps(lo[i], _mm256_set1_ps(mn)));
            hi[i] = exp8(_mm256_sub_ps(hi[i], _mm256_set1_ps(mn)));
            l[i] = fmaf(l[i], alpha[i], hsum16_2(lo[i], hi[i]));
            _mm256_store_ps(pr[i], lo[i]);
            _mm256_store_ps(pr[i] + 8, hi[i]);
            m[i] = mn;
        }
        for (k = 0; k < hd; k += 8) {
            int n = hd - k < 8 ? hd - k : 8;
            row = vb + ((size_t) slot0 * s->kv_dim + s->head_off + k) * esz;
            for (i = 0; i < N; i++) {
                ov[i] = _mm256_mul_ps(_mm256_loadu_ps(o[i] + k),
                                      _mm256_set1_ps(alpha[i]));
            }
            for (j = 0; j < 16; j++) {
                vv = n == 8 ? ld8(row, (size_t) j * s->kv_dim, F16)
                            : ld8_tail(row, (size_t) j * s->kv_dim, F16, n);
ATT_UNROLL(4)
                for (i = 0; i < N; i++) {
                    if (full || (vm[i] >> j & 1)) {
                        ov[i] = _mm256_fmadd_ps(_mm256_set1_ps(pr[i][j]), vv,
                                                ov[i]);
                    }
                }
            }
            for (i = 0; i < N; i++) {
                if (vm[i]) {
                    float t[8];
                    _mm256_storeu_ps(t, ov[i]);
                    memcpy(o[i] + k, t, sizeof(float) * n);
                }
            }
        }
    }
    for (i = 0; i < N; i++) {
        float *pt = part + i * LLM_ATT_PART(hd);
        memcpy(pt, o[i], sizeof(float) * hd);
        pt[hd] = m[i];
        pt[hd + 1] = l[i];
    }
}


#define ATT2_VARIANT(name, F16)                                              \
TGT2 static void                                                             \
name(const llm_att_seq *s, const llm_att_query *q, int nq, float scale,    \
    int k, float *part)                                                      \
{                                                                            \
    switch (nq) {                                                            \
    case 1: att_avx2(s, q, 1, F16, scale, k, part); break;                   \
    case 2: att_avx2(s, q, 2, F16, scale, k, part); break;                   \
    default: att_avx2(s, q, 3, F16, scale, k, part); break;                  \
    }                                                                        \
}

ATT2_VARIANT(att_avx2_f16, 1)
ATT2_VARIANT(att_avx2_f32, 0)

#endif


/* the best kernel for this CPU and cache type, and the queries it takes
 * at once */
static att_span_fn
att_kernel(const llm_att_seq *s, int *max_q)
{
#if defined(__x86_64__)
    if (llm_kernels_isa() == LLM_ISA_AVX512) {
        *max_q = LLM_ATT_MAX_Q;
        return s->f16 ? att_avx512_f16 : att_avx512_f32;
    }
    if (llm_kernels_isa() == LLM_ISA_AVX2) {
        *max_q = ATT2_MAX_Q;
        return s->f16 ? att_avx2_f16 : att_avx2_f32;
    }
#endif
    *max_q = 1;
    return att_ref_spans;
}


void
llm_attention(const llm_att_seq *s, const llm_att_query *q, int nq,
    float scale)
{
    att_span_fn  fn;
    int          max_q;

    fn = att_kernel(s, &max_q);
    att_spans(fn, max_q, s, q, nq, scale);
}


void
llm_attention_span(const llm_att_seq *s, const llm_att_query *q, int nq,
    float scale, int k, float *part)
{
    att_span_fn  fn;
    int          max_q, n;

    fn = att_kernel(s, &max_q);
    for ( /* void */ ; nq > 0; q += n, nq -= n) {
        n = nq < max_q ? nq : max_q;
        fn(s, q, n, scale, k, part);
        part += n * LLM_ATT_PART(s->hd);
    }
}
