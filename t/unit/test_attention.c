/*
 * kernels/attention: the exponential, the reference against a plain
 * double-precision softmax attention, the AVX-512 kernel against the
 * reference bit for bit, and a query's result independent of the other
 * queries of its call (prefill == decode), over f16 and f32 caches,
 * head sizes with and without a 16-value tail, two block sizes, sliding
 * windows, and garbage (NaN) in the cache slots no query may read.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "isa.h"
#include "matmul.h"
#include "quant.h"
#include "tap.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float
frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float) ((rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}


/* a paged cache of n_blocks blocks, one layer, laid out as the CPU
 * backend does; the sequence's table scrambled; every slot NaN until
 * written */
typedef struct {
    llm_att_seq  s;
    uint8_t     *pool;
    int32_t      table[64];
    int          n_pos;
} test_cache;


static void
cache_put(test_cache *c, int t, int e, float k, float v)
{
    const llm_att_seq *s = &c->s;
    uint8_t *blk = c->pool + (size_t) s->table[t / s->block_size]
                             * s->block_bytes;
    size_t  ki = (size_t) e * s->block_size + t % s->block_size;
    size_t  vi = (size_t) (t % s->block_size) * s->kv_dim + e;

    if (s->f16) {
        uint16_t hk = llm_fp32_to_fp16(k), hv = llm_fp32_to_fp16(v);
        memcpy(blk + s->k_off + 2 * ki, &hk, 2);
        memcpy(blk + s->v_off + 2 * vi, &hv, 2);
    } else {
        memcpy(blk + s->k_off + 4 * ki, &k, 4);
        memcpy(blk + s->v_off + 4 * vi, &v, 4);
    }
}


static float
cache_get(const test_cache *c, int t, int e, int want_v)
{
    const llm_att_seq *s = &c->s;
    const uint8_t *blk = c->pool + (size_t) s->table[t / s->block_size]
                                   * s->block_bytes;
    size_t  i = want_v ? (size_t) (t % s->block_size) * s->kv_dim + e
                       : (size_t) e * s->block_size + t % s->block_size;
    const uint8_t *base = blk + (want_v ? s->v_off : s->k_off);

    if (s->f16) {
        uint16_t h;
        memcpy(&h, base + 2 * i, 2);
        return llm_fp16_to_fp32(h);
    }
    float f;
    memcpy(&f, base + 4 * i, 4);
    return f;
}


static void
cache_make(test_cache *c, int hd, int n_kv, int bs, int f16, int n_pos)
{
    int     n_blocks = (n_pos + bs - 1) / bs + 3, b, t, e;
    size_t  half;

    memset(c, 0, sizeof(*c));
    c->s.block_size = bs;
    c->s.kv_dim = n_kv * hd;
    c->s.f16 = f16;
    c->s.hd = hd;
    half = (size_t) bs * c->s.kv_dim * (f16 ? 2 : 4);
    c->s.k_off = 64;                       /* as if a layer came first */
    c->s.v_off = 64 + half;
    c->s.block_bytes = 64 + 2 * half + 64;
    c->pool = malloc(c->s.block_bytes * n_blocks);
    /* NaN everywhere: slots past p and before t0 must never count */
    if (f16) {
        uint16_t nan16 = 0x7e00;
        for (size_t i = 0; i < c->s.block_bytes * n_blocks / 2; i++) {
            memcpy(c->pool + 2 * i, &nan16, 2);
        }
    } else {
        float nan32 = NAN;
        for (size_t i = 0; i < c->s.block_bytes * n_blocks / 4; i++) {
            memcpy(c->pool + 4 * i, &nan32, 4);
        }
    }
    c->s.pool = c->pool;
    for (b = 0; b * bs < n_pos; b++) {
        c->table[b] = (int32_t) ((b * 7 + 2) % n_blocks);   /* scrambled */
    }
    c->s.table = c->table;
    c->n_pos = n_pos;
    for (t = 0; t < n_pos; t++) {
        for (e = 0; e < c->s.kv_dim; e++) {
            cache_put(c, t, e, 2.0f * frand(), frand());
        }
    }
}


/* softmax(q k / sqrt(hd)) v in double over the values as stored */
static void
naive(const test_cache *c, const float *q, int t0, int p, const float *sink,
    double *out)
{
    const llm_att_seq *s = &c->s;
    double  sc[1024], max = sink ? *sink : -INFINITY, sum = 0.0;
    int     t, d;

    for (t = t0; t <= p; t++) {
        double a = 0.0;
        for (d = 0; d < s->hd; d++) {
            a += (double) q[d] * cache_get(c, t, s->head_off + d, 0);
        }
        sc[t] = a / sqrt((double) s->hd);
        max = sc[t] > max ? sc[t] : max;
    }
    for (t = t0; t <= p; t++) {
        sc[t] = exp(sc[t] - max);
        sum += sc[t];
    }
    sum += sink ? exp(*sink - max) : 0.0;
    for (d = 0; d < s->hd; d++) {
        double o = 0.0;
        for (t = t0; t <= p; t++) {
            o += sc[t] * cache_get(c, t, s->head_off + d, 1);
        }
        out[d] = o / sum;
    }
}


static void
test_exp(void)
{
    double  worst = 0.0;
    int     i, bad = 0;

    for (i = 0; i <= 200000; i++) {
        float  x = -87.0f * (float) i / 200000.0f;
        double want = exp((double) x), got = llm_att_exp(x);
        double rel = fabs(got - want) / want;
        worst = rel > worst ? rel : worst;
        bad += !(rel < 3e-7);
    }
    ok(bad == 0, "llm_att_exp on [-87, 0]: worst relative error %.2e", worst);
    ok(llm_att_exp(0.0f) == 1.0f && llm_att_exp(-INFINITY) == 0.0f
       && llm_att_exp(-88.0f) == 0.0f && llm_att_exp(-1000.0f) == 0.0f,
       "llm_att_exp: e^0 = 1, 0 from -87 on and for -inf");
}


/* one cache configuration: every check of the file header; with sinks,
 * a sink logit per query head (gpt-oss) around the scores' own range */
static void
test_config(int hd, int n_kv, int bs, int f16, int window, int N_POS,
    int sinks)
{
    static const float  sink_of[9] = { 2.5f, -1.0f, 0.0f, 6.0f, -30.0f,
                                       0.75f, 1.5f, -3.0f, 4.0f };
    const int   N_Q = N_POS > 100 ? 4 : 9;   /* long: less time */
    test_cache  c;
    float      *q = malloc(sizeof(float) * N_Q * N_POS * hd);
    float      *ref = malloc(sizeof(float) * N_Q * N_POS * hd);
    float      *got = malloc(sizeof(float) * N_Q * N_POS * hd);
    double      o[LLM_ATT_MAX_HD], worst = 0.0;
    int         h, p, d, k, n, same_single = 1, same_group = 1, acc = 1;
    float       scale = 1.0f / sqrtf((float) hd);
    char        what[128];

    cache_make(&c, hd, n_kv, bs, f16, N_POS);
    c.s.head_off = (n_kv - 1) * hd;           /* the last kv head */
    snprintf(what, sizeof(what), "hd %d, block %d, %s, window %d, %d "
             "positions%s", hd, bs, f16 ? "f16" : "f32", window, N_POS,
             sinks ? ", sinks" : "");
    for (size_t i = 0; i < (size_t) N_Q * N_POS * hd; i++) {
        q[i] = frand();
    }

#define Q(h, p)   (q + ((size_t) (h) * N_POS + (p)) * hd)
#define AT(a, h, p) ((a) + ((size_t) (h) * N_POS + (p)) * hd)
#define T0(p)     (window > 0 && (p) >= window ? (p) - window + 1 : 0)
#define SK(h)     (sinks ? &sink_of[h] : NULL)

    /* the reference, one query at a time, against double precision */
    for (h = 0; h < N_Q; h++) {
        for (p = 0; p < N_POS; p++) {
            llm_att_query one = { Q(h, p), AT(ref, h, p), T0(p), p, SK(h) };
            llm_attention_ref(&c.s, &one, 1, scale);
            naive(&c, Q(h, p), T0(p), p, SK(h), o);
            for (d = 0; d < hd; d++) {
                double e = fabs(AT(ref, h, p)[d] - o[d]);
                worst = e > worst ? e : worst;
                acc &= e <= 1e-5;
            }
        }
    }
    ok(acc, "%s: reference within 1e-5 of double precision (worst %.2e)",
       what, worst);

    /* the dispatching kernel, one query per call, equals the reference */
    for (h = 0; h < N_Q; h++) {
        for (p = 0; p < N_POS; p++) {
            llm_att_query one = { Q(h, p), AT(got, h, p), T0(p), p, SK(h) };
            llm_attention(&c.s, &one, 1, scale);
            same_single &= memcmp(AT(got, h, p), AT(ref, h, p),
                                  sizeof(float) * hd) == 0;
        }
    }
    ok(same_single, "%s: %s kernel, one query a call == reference, bit for "
       "bit", what, llm_kernels_isa_name(llm_kernels_isa()));

    /* a decode split over threads: every span on its own (the heads of
     * a kv head a call), merged in order, == the whole call */
    {
        float  part[3 * LLM_ATT_PART(LLM_ATT_MAX_HD)];
        float  acc[3 * LLM_ATT_PART(LLM_ATT_MAX_HD)];
        int    same = 1, spans = 0, P = LLM_ATT_PART(hd);

        for (p = 0; p < N_POS; p += 1 + p % 7) {
            llm_att_query qs[3];
            float out[LLM_ATT_MAX_HD];
            for (h = 0; h < 3; h++) {
                qs[h] = (llm_att_query) { Q(h, p), NULL, T0(p), p, SK(h) };
            }
            for (k = 0; k <= p / LLM_ATT_SPAN; k++) {
                if (!llm_att_span_used(&qs[0], k)) {
                    continue;
                }
                llm_attention_span(&c.s, qs, 3, scale, k, part);
                for (h = 0; h < 3; h++) {
                    llm_att_merge(acc + h * P, part + h * P, hd,
                                  k == T0(p) / LLM_ATT_SPAN);
                }
                spans++;
            }
            for (h = 0; h < 3; h++) {
                if (sinks) {
                    llm_att_sink(acc + h * P, sink_of[h], hd);
                }
                llm_att_finish(acc + h * P, out, hd);
                same &= memcmp(out, AT(ref, h, p), sizeof(float) * hd) == 0;
            }
        }
        ok(same && spans > 0, "%s: spans one at a time, merged == one call, "
           "bit for bit (%d spans)", what, spans);
    }

    /* prefill shapes: n consecutive positions times k heads a call, every
     * size 1..LLM_ATT_MAX_Q, from every start position */
    memset(got, 0, sizeof(float) * N_Q * N_POS * hd);
    for (k = 1; k <= 3; k++) {
        for (n = 1; n * k <= LLM_ATT_MAX_Q; n++) {
            for (p = 0; p + n <= N_POS; p += 1 + p % 5) {
                llm_att_query qs[LLM_ATT_MAX_Q];
                int nq = 0;
                for (int t = p; t < p + n; t++) {
                    for (h = 0; h < k; h++) {
                        qs[nq].q = Q(h, t);
                        qs[nq].out = AT(got, h, t);
                        qs[nq].t0 = T0(t);
                        qs[nq].p = t;
                        qs[nq].sink = SK(h);
                        nq++;
                    }
                }
                llm_attention(&c.s, qs, nq, scale);
                for (int i = 0; i < nq; i++) {
                    same_group &= memcmp(qs[i].out,
                                         AT(ref, (int) (i % k), qs[i].p),
                                         sizeof(float) * hd) == 0;
                }
            }
        }
    }
    ok(same_group, "%s: calls of 1..%d queries (tokens x heads) == one "
       "query a call, bit for bit", what, LLM_ATT_MAX_Q);

    /* a call of queries far apart (one sequence, mixed positions) */
    {
        llm_att_query qs[4] = {
            { Q(0, 3), AT(got, 0, 3), T0(3), 3, SK(0) },
            { Q(1, 80), AT(got, 1, 80), T0(80), 80, SK(1) },
            { Q(2, 16), AT(got, 2, 16), T0(16), 16, SK(2) },
            { Q(3, 47), AT(got, 3, 47), T0(47), 47, SK(3) },
        };
        int same = 1;
        llm_attention(&c.s, qs, 4, scale);
        for (int i = 0; i < 4; i++) {
            same &= memcmp(qs[i].out, AT(ref, i, qs[i].p),
                           sizeof(float) * hd) == 0;
        }
        ok(same, "%s: one call, positions 3, 80, 16, 47 == alone", what);
    }
#undef Q
#undef AT
#undef T0
#undef SK
    free(c.pool);
    free(q);
    free(ref);
    free(got);
}


int
main(void)
{
    printf("# kernels: %s\n", llm_kernels_isa_name(llm_kernels_isa()));
    test_exp();
    test_config(64, 3, 16, 1, 0, 83, 0);  /* SmolLM2 */
    test_config(64, 3, 16, 0, 0, 83, 0);
    test_config(128, 2, 32, 1, 0, 83, 0); /* llama 8B head, bigger blocks */
    test_config(8, 8, 16, 1, 0, 83, 0);   /* tiny260K: only a tail */
    test_config(20, 2, 16, 0, 0, 83, 0);  /* 16 + a tail of 4, hd % 4 == 0 */
    test_config(18, 2, 16, 1, 0, 83, 0);  /* a tail of 2 in d chains too */
    test_config(64, 2, 16, 1, 21, 83, 0); /* sliding window */
    test_config(64, 2, 32, 0, 40, 83, 0);
    /* three spans of LLM_ATT_SPAN; a window across span edges */
    test_config(64, 3, 16, 1, 0, 600, 0);
    test_config(64, 2, 32, 0, 300, 600, 0);
    /* gpt-oss: a sink per head, on full and windowed layers, over spans */
    test_config(64, 3, 16, 1, 0, 83, 1);
    test_config(64, 2, 16, 0, 21, 83, 1);
    test_config(64, 2, 32, 1, 300, 600, 1);

    /* the same through the AVX2 kernel and the reference path (as
     * LLM_ISA=avx2 or scalar choose them) */
    if (llm_kernels_isa() > LLM_ISA_AVX2
        && llm_kernels_set_isa(LLM_ISA_AVX2) == 0)
    {
        test_config(64, 3, 16, 1, 0, 83, 0);
        test_config(128, 2, 32, 1, 0, 83, 0);
        test_config(8, 8, 16, 1, 0, 83, 0);
        test_config(18, 2, 16, 1, 0, 83, 0);
        test_config(20, 2, 16, 0, 0, 83, 0);
        test_config(64, 2, 16, 1, 21, 83, 0);
        test_config(64, 2, 32, 0, 300, 600, 0);
        test_config(64, 2, 16, 0, 21, 83, 1);
    }
    if (llm_kernels_set_isa(LLM_ISA_SCALAR) == 0) {
        test_config(64, 3, 16, 1, 0, 83, 0);
        test_config(64, 3, 16, 1, 0, 600, 0);
        test_config(64, 2, 32, 1, 300, 600, 1);
    }
    return tap_done();
}
