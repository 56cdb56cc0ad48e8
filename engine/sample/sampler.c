/*
 * Token sampling (see sampler.h for the order of operations and
 * docs/sampling.md for the reasons).
 *
 * Cost per token for a vocabulary of n at temperature > 0 is two or three
 * vector passes over the row and no sort of it:
 *   - bias and penalties touch only the listed / seen tokens, and are undone
 *     before returning, so the caller's logits come back unchanged;
 *   - min_p is a threshold (p >= min_p * p_max <=> x >= log min_p): one
 *     pass of x, exp only for the tokens above it;
 *   - top_k keeps a bounded buffer whose cut rises as it fills: one pass
 *     of x, exp only for the k kept;
 *   - top_p alone needs the mass of the whole row (one exp pass), then
 *     selects within a window of the maximum, widened if too narrow;
 *   - selection is by quickselect-style partitions (by count, by mass);
 *   - the draw walks the kept tokens once (inverse CDF); without any
 *     truncation it finds the block by its mass and re-evaluates only it.
 */
#include "sample/sampler.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#ifdef __x86_64__
#include <immintrin.h>
#elif defined(__SSE__)
#include <xmmintrin.h>
#endif

/* which vector code the row passes use, chosen once (CPUID) */
static int             use_avx2;
static pthread_once_t  isa_once = PTHREAD_ONCE_INIT;

static void pick_isa(void);


/* ------------------------------------------------------------------------
 * errors
 * ------------------------------------------------------------------------ */

static int
sampler_fail(llm_sampler *s, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
    return -1;
}


/* ------------------------------------------------------------------------
 * RNG: xoshiro256** seeded through splitmix64 (both public domain designs
 * by Vigna); one 53-bit uniform per sampled token.
 * ------------------------------------------------------------------------ */

static uint64_t
splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}


static uint64_t
rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}


static uint64_t
rng_next(uint64_t st[4])
{
    uint64_t result = rotl64(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;

    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return result;
}


static void
rng_seed(uint64_t st[4], uint64_t seed)
{
    uint64_t x = seed;

    for (int i = 0; i < 4; i++) {
        st[i] = splitmix64(&x);
    }
}


/* uniform in [0, 1) */
static double
rng_uniform(uint64_t st[4])
{
    return (double) (rng_next(st) >> 11) * 0x1.0p-53;
}


static uint64_t
random_seed(void)
{
    uint64_t seed;
    struct timespec ts;

    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == sizeof(seed)) {
        return seed;
    }

    /* no entropy yet (early boot): the request asked for no
       reproducibility, so the clock is good enough */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000007ULL ^ (uint64_t) ts.tv_nsec;
}


/* ------------------------------------------------------------------------
 * token counts: open addressing, linear probing, grows at half full
 * ------------------------------------------------------------------------ */

/* multiply, then fold the high bits down: the low bits of a product
   alone would collide for ids that share their low bits */
static uint32_t
count_hash(int32_t token, uint32_t cap)
{
    uint32_t h = (uint32_t) token * 0x9e3779b1u;

    return (h ^ (h >> 16)) & (cap - 1);
}


static llm_token_count *
count_find(const llm_sampler *s, int32_t token)
{
    uint32_t i;

    if (s->counts_cap == 0) {
        return NULL;
    }

    i = count_hash(token, s->counts_cap);
    while (s->counts[i].token != token) {
        if (s->counts[i].token < 0) {
            return NULL;
        }
        i = (i + 1) & (s->counts_cap - 1);
    }
    return &s->counts[i];
}


static int
count_grow(llm_sampler *s)
{
    uint32_t cap = s->counts_cap ? s->counts_cap * 2 : 64;
    llm_token_count *old = s->counts, *t;
    uint32_t old_cap = s->counts_cap, i, j;

    t = malloc((size_t) cap * sizeof(*t));
    if (t == NULL) {
        return sampler_fail(s, "sampler: out of memory for %u token counts",
                            cap);
    }
    for (i = 0; i < cap; i++) {
        t[i].token = -1;
    }

    for (i = 0; i < old_cap; i++) {
        if (old[i].token < 0) {
            continue;
        }
        for (j = count_hash(old[i].token, cap); t[j].token >= 0;
             j = (j + 1) & (cap - 1))
        {
            /* probe */
        }
        t[j] = old[i];
    }

    free(old);
    s->counts = t;
    s->counts_cap = cap;
    return 0;
}


/* the entry of token, created with zero counts if new */
static llm_token_count *
count_get(llm_sampler *s, int32_t token)
{
    llm_token_count *c = count_find(s, token);
    uint32_t i;

    if (c != NULL) {
        return c;
    }

    if ((s->counts_used + 1) * 2 > s->counts_cap && count_grow(s) != 0) {
        return NULL;
    }

    for (i = count_hash(token, s->counts_cap); s->counts[i].token >= 0;
         i = (i + 1) & (s->counts_cap - 1))
    {
        /* probe */
    }
    s->counts[i].token = token;
    s->counts[i].n_output = 0;
    s->counts[i].in_prompt = 0;
    s->counts_used++;
    return &s->counts[i];
}


static int
check_token(llm_sampler *s, int32_t id, const char *what)
{
    if (id < 0 || id >= s->n_vocab) {
        return sampler_fail(s, "%s token id %d is outside the "
                            "vocabulary (0..%d)", what, id, s->n_vocab - 1);
    }
    return 0;
}


int
llm_sampler_add_prompt(llm_sampler *s, const int32_t *ids, int n)
{
    llm_token_count *c;

    for (int i = 0; i < n; i++) {
        if (check_token(s, ids[i], "prompt") != 0) {
            return -1;
        }
        c = count_get(s, ids[i]);
        if (c == NULL) {
            return -1;
        }
        c->in_prompt = 1;
    }
    return 0;
}


int
llm_sampler_accept(llm_sampler *s, int32_t id)
{
    llm_token_count *c;

    if (check_token(s, id, "output") != 0) {
        return -1;
    }
    c = count_get(s, id);
    if (c == NULL) {
        return -1;
    }
    c->n_output++;
    return 0;
}


uint32_t
llm_sampler_count(const llm_sampler *s, int32_t id)
{
    const llm_token_count *c = count_find(s, id);

    return c ? c->n_output : 0;
}


int
llm_is_stop_token(int32_t id, const int32_t *stop_ids, int n_stop)
{
    for (int i = 0; i < n_stop; i++) {
        if (stop_ids[i] == id) {
            return 1;
        }
    }
    return 0;
}


/* ------------------------------------------------------------------------
 * set-up
 * ------------------------------------------------------------------------ */

static int
check_params(llm_sampler *s, const llm_sampling_params *p)
{
    char  err[128];

    return llm_sampling_check(p, err, sizeof(err)) == 0
           ? 0 : sampler_fail(s, "%s", err);
}


static int
bias_by_token(const void *a, const void *b)
{
    const llm_logit_bias *x = a, *y = b;

    return (x->token > y->token) - (x->token < y->token);
}


static int
copy_bias(llm_sampler *s, const llm_sampling_params *p)
{
    int i;

    if (p->n_logit_bias == 0) {
        return 0;
    }

    s->bias = malloc((size_t) p->n_logit_bias * sizeof(*s->bias));
    if (s->bias == NULL) {
        return sampler_fail(s, "logit_bias: out of memory");
    }
    memcpy(s->bias, p->logit_bias, (size_t) p->n_logit_bias * sizeof(*s->bias));
    s->n_bias = p->n_logit_bias;
    qsort(s->bias, (size_t) s->n_bias, sizeof(*s->bias), bias_by_token);

    for (i = 0; i < s->n_bias; i++) {
        if (check_token(s, s->bias[i].token, "logit_bias") != 0) {
            return -1;
        }
        if (!(s->bias[i].bias >= -LLM_LOGIT_BIAS_MAX
              && s->bias[i].bias <= LLM_LOGIT_BIAS_MAX))
        {
            return sampler_fail(s, "logit_bias for token %d must be in "
                                "[-100, 100], got %g", s->bias[i].token,
                                s->bias[i].bias);
        }
        if (i > 0 && s->bias[i].token == s->bias[i - 1].token) {
            return sampler_fail(s, "logit_bias lists token %d twice",
                                s->bias[i].token);
        }
    }
    return 0;
}


int
llm_sampler_init(llm_sampler *s, const llm_sampling_params *p, int n_vocab,
    char *err, size_t err_len)
{
    pthread_once(&isa_once, pick_isa);
    memset(s, 0, sizeof(*s));
    s->n_vocab = n_vocab;

    if (n_vocab <= 0) {
        sampler_fail(s, "sampler: vocabulary size %d", n_vocab);
    } else if (check_params(s, p) == 0 && copy_bias(s, p) == 0) {
        s->params = *p;
        s->params.logit_bias = s->bias;
        s->seed = p->has_seed ? p->seed : random_seed();
        rng_seed(s->rng, s->seed);
        return 0;
    }

    if (err && err_len) {
        snprintf(err, err_len, "%s", s->err);
    }
    free(s->bias);
    s->bias = NULL;
    s->n_bias = 0;
    return -1;
}


void
llm_sampler_free(llm_sampler *s)
{
    free(s->bias);
    free(s->counts);
    free(s->cand);
    free(s->blocks);
    free(s->undo);
    memset(s, 0, sizeof(*s));
}


/* ------------------------------------------------------------------------
 * logit edits: bias, then penalties; each original value is kept so that
 * restore_logits() gives the caller back the logits it passed
 * ------------------------------------------------------------------------ */

static int
reserve_undo(llm_sampler *s, size_t n)
{
    llm_logit_bias *u;

    s->n_undo = 0;
    if (n <= s->undo_cap) {
        return 0;
    }
    u = realloc(s->undo, n * sizeof(*u));
    if (u == NULL) {
        return sampler_fail(s, "sampler: out of memory");
    }
    s->undo = u;
    s->undo_cap = n;
    return 0;
}


static void
edit_logit(llm_sampler *s, float *logits, int32_t id, float value)
{
    s->undo[s->n_undo].token = id;
    s->undo[s->n_undo].bias = logits[id];
    s->n_undo++;
    logits[id] = value;
}


/* reverse order, so a token edited twice gets its first saved value */
static void
restore_logits(llm_sampler *s, float *logits)
{
    while (s->n_undo > 0) {
        s->n_undo--;
        logits[s->undo[s->n_undo].token] = s->undo[s->n_undo].bias;
    }
}


static float
penalized(const llm_sampling_params *p, const llm_token_count *c, float l)
{
    if (p->repetition_penalty != 1.0f) {
        l = l > 0.0f ? l / p->repetition_penalty : l * p->repetition_penalty;
    }
    if (c->n_output > 0) {
        l -= (float) c->n_output * p->frequency_penalty;
        l -= p->presence_penalty;
    }
    return l;
}


static int
apply_edits(llm_sampler *s, float *logits)
{
    const llm_sampling_params *p = &s->params;
    int penalties;
    uint32_t i;

    if (reserve_undo(s, (size_t) s->n_bias + s->counts_used) != 0) {
        return -1;
    }

    for (int b = 0; b < s->n_bias; b++) {
        edit_logit(s, logits, s->bias[b].token,
                   logits[s->bias[b].token] + s->bias[b].bias);
    }

    penalties = p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f
                || p->frequency_penalty != 0.0f;
    if (!penalties) {
        return 0;
    }

    for (i = 0; i < s->counts_cap; i++) {
        const llm_token_count *c = &s->counts[i];

        if (c->token >= 0) {
            edit_logit(s, logits, c->token,
                       penalized(p, c, logits[c->token]));
        }
    }
    return 0;
}


/* ------------------------------------------------------------------------
 * vector passes over a row, a block of 256 tokens at a time
 *
 * GCC/clang vector extensions (4 floats: one SSE register on any x86-64,
 * one NEON register on arm64), because -O2 does not vectorize loops with
 * conditions. exp is Cephes' single-precision one: range reduction by
 * ln 2 and a degree-6 polynomial, about 1 ulp, for x <= 0; NaN and
 * x < -87 give 0. All sums run in a fixed order, so results depend on
 * nothing but the row.
 * ------------------------------------------------------------------------ */

#define BLOCK  256

typedef float   v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f
splat(float f)
{
    return (v4f) { f, f, f, f };
}


/* a > b ? a : b per lane, so NaN in a gives b: maxps has exactly this
   rule (one instruction instead of three) */
static inline v4f
max_v(v4f a, v4f b)
{
#ifdef __SSE__
    return (v4f) _mm_max_ps((__m128) a, (__m128) b);
#else
    v4i mask = a > b;

    return (v4f) (((v4i) a & mask) | ((v4i) b & ~mask));
#endif
}


static inline v4f
load_v(const float *p)
{
    v4f v;

    memcpy(&v, p, sizeof(v));
    return v;
}


static inline v4f
exp_v(v4f x)
{
    v4i in_range = x >= splat(-87.0f);     /* false for NaN */
    v4f n, r, r2, p;
    v4i bits;

    /* x <= 0 here; lanes out of range compute garbage that the final
       mask clears (no FP exceptions are enabled) */
    n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    r2 = r * r;
    p = splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    bits = (__builtin_convertvector(n, v4i) + 127) << 23;
    return (v4f) ((v4i) (p * (v4f) bits) & in_range);
}


static inline float
hsum(v4f v)
{
    float s = 0.0f;

    for (int i = 0; i < 4; i++) {
        s += v[i];
    }
    return s;
}


static inline float
hmax(v4f v)
{
    float m = v[0];

    for (int i = 1; i < 4; i++) {
        m = v[i] > m ? v[i] : m;
    }
    return m;
}


/*
 * x[j] = (l[j] - max) / T and e[j] = exp(x[j]), 0 where x < lo or NaN.
 * Returns the block's mass; *x_top gets its largest x.
 */
static float
exp_block_generic(const float *l, float max, float inv_t, float lo,
    float *x, float *e, float *x_top)
{
    v4f sum = splat(0.0f), top = splat(-INFINITY);

    for (int j = 0; j < BLOCK; j += 4) {
        v4f xv = (load_v(l + j) - max) * inv_t;
        v4f ev = exp_v(xv);

        ev = (v4f) ((v4i) ev & (xv >= lo));
        memcpy(x + j, &xv, sizeof(xv));
        memcpy(e + j, &ev, sizeof(ev));
        sum += ev;
        top = max_v(xv, top);
    }
    *x_top = hmax(top);
    return hsum(sum);
}


#ifdef __x86_64__

/* exp_v's polynomial, highest degree first */
static const float exp_poly[6] = {
    1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
    1.6666665459e-1f, 5.0000001201e-1f
};

/*
 * The same with 8 lanes, the hot pass of sampling with no truncation or
 * top_p alone. Every lane does the generic version's operations in the
 * same order (AVX2 without FMA: nothing is contracted), and the two halves
 * are added into a 4-lane sum one after the other as the generic loop
 * does, so both give bit-identical x, e, mass and maximum.
 */
__attribute__((target("avx2")))
static float
exp_block_avx2(const float *l, float max, float inv_t, float lo, float *x,
    float *e, float *x_top)
{
    const __m256 c1 = _mm256_set1_ps(0.693359375f);
    const __m256 c2 = _mm256_set1_ps(-2.12194440e-4f);
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    __m256 vmax = _mm256_set1_ps(max), vinv = _mm256_set1_ps(inv_t);
    __m256 vlo = _mm256_set1_ps(lo), top = _mm256_set1_ps(-INFINITY);
    __m128 sum = _mm_setzero_ps();
    v4f sum_v, top_v;

    for (int j = 0; j < BLOCK; j += 8) {
        __m256 xv = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(l + j), vmax),
                                  vinv);
        __m256 ok = _mm256_and_ps(
            _mm256_cmp_ps(xv, _mm256_set1_ps(-87.0f), _CMP_GE_OQ),
            _mm256_cmp_ps(xv, vlo, _CMP_GE_OQ));
        __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(xv,
                       _mm256_set1_ps(1.44269504088896341f)), magic), magic);
        __m256 r = _mm256_sub_ps(xv, _mm256_mul_ps(n, c1));
        __m256 r2, p, ev;
        __m256i bits;

        r = _mm256_sub_ps(r, _mm256_mul_ps(n, c2));
        r2 = _mm256_mul_ps(r, r);
        p = _mm256_set1_ps(exp_poly[0]);
        for (int i = 1; i < 6; i++) {
            p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(exp_poly[i]));
        }
        p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, r2), r),
                          _mm256_set1_ps(1.0f));
        bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n),
                                 _mm256_set1_epi32(127)), 23);
        ev = _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), ok);

        _mm256_storeu_ps(x + j, xv);
        _mm256_storeu_ps(e + j, ev);
        sum = _mm_add_ps(sum, _mm256_castps256_ps128(ev));
        sum = _mm_add_ps(sum, _mm256_extractf128_ps(ev, 1));
        top = _mm256_max_ps(xv, top);
    }
    memcpy(&sum_v, &sum, sizeof(sum_v));
    top_v = (v4f) _mm_max_ps(_mm256_extractf128_ps(top, 1),
                             _mm256_castps256_ps128(top));
    *x_top = hmax(top_v);
    return hsum(sum_v);
}

#endif


static void
pick_isa(void)
{
#ifdef __x86_64__
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2");
#endif
}


static float
exp_block(const float *l, float max, float inv_t, float lo, float *x,
    float *e, float *x_top)
{
#ifdef __x86_64__
    if (use_avx2) {
        return exp_block_avx2(l, max, inv_t, lo, x, e, x_top);
    }
#endif
    return exp_block_generic(l, max, inv_t, lo, x, e, x_top);
}


#define GROUP  16      /* tokens per maximum kept by x_block */

/* exp_block without the exp: x[j], the largest x of each GROUP in
   gmax[BLOCK / GROUP], and of the block (returned) */
static float
x_block(const float *l, float max, float inv_t, float *x, float *gmax)
{
    v4f top = splat(-INFINITY);

    for (int g = 0; g < BLOCK; g += GROUP) {
        v4f m = splat(-INFINITY);

        for (int j = g; j < g + GROUP; j += 4) {
            v4f xv = (load_v(l + j) - max) * inv_t;

            memcpy(x + j, &xv, sizeof(xv));
            m = max_v(xv, m);
        }
        gmax[g / GROUP] = hmax(m);
        top = max_v(m, top);
    }
    return hmax(top);
}


/* one block of the row, padded with -inf past its end */
static const float *
row_block(const float *l, int n, int start, float *pad)
{
    int len = n - start;

    if (len >= BLOCK) {
        return l + start;
    }
    for (int j = 0; j < BLOCK; j++) {
        pad[j] = j < len ? l[start + j] : -INFINITY;
    }
    return pad;
}


/* largest value; NaN is skipped */
static float
row_max(const float *l, int n)
{
    v4f hi = splat(-INFINITY);
    float max;
    int i = 0;

    for ( ; i + 4 <= n; i += 4) {
        v4f v = load_v(l + i);

        hi = max_v(v, hi);
    }
    max = hmax(hi);
    for ( ; i < n; i++) {
        max = l[i] > max ? l[i] : max;
    }
    return max;
}


/* ------------------------------------------------------------------------
 * reductions over a row
 * ------------------------------------------------------------------------ */

/* first index of the largest value (NaN never wins); -1 if none */
static int
argmax(const float *l, int n)
{
    float max = row_max(l, n);

    if (!(max > -INFINITY)) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (l[i] == max) {
            return i;
        }
    }
    return -1;
}


/* log(sum(exp(l))) over the non-NaN values; max is the row's maximum */
static double
log_sum_exp(const float *l, int n, float max)
{
    float x[BLOCK], e[BLOCK], pad[BLOCK], top;
    double sum = 0.0;

    for (int b = 0; b < n; b += BLOCK) {
        sum += exp_block(row_block(l, n, b, pad), max, 1.0f, -INFINITY,
                         x, e, &top);
    }
    return log(sum) + max;
}


/* insert l[i] into the sorted top list if it belongs there */
static int
top_insert(llm_token_logprob *top, int filled, int k, int i, float v)
{
    int j;

    if (!(v > -INFINITY) || (filled == k && !(v > top[k - 1].logprob))) {
        return filled;
    }
    j = filled < k ? filled++ : k - 1;
    while (j > 0 && v > top[j - 1].logprob) {
        top[j] = top[j - 1];
        j--;
    }
    top[j].token = i;
    top[j].logprob = v;
    return filled;
}


/*
 * The k largest values, value desc then id asc, into top (k <= 20).
 * An ascending scan only replaces on a strictly larger value, so among
 * equal values the lower id stays. Chunks whose maximum cannot enter a
 * full list are skipped after one vector pass.
 */
static int
top_n(const float *l, int n, int k, llm_token_logprob *top)
{
    int filled = 0, i = 0;

    if (k <= 0) {
        return 0;
    }
    for ( ; i + 64 <= n; i += 64) {
        v4f hi = splat(-INFINITY);

        for (int j = 0; j < 64; j += 4) {
            v4f v = load_v(l + i + j);

            hi = max_v(v, hi);
        }
        if (filled == k && !(hmax(hi) > top[k - 1].logprob)) {
            continue;
        }
        for (int j = i; j < i + 64; j++) {
            filled = top_insert(top, filled, k, j, l[j]);
        }
    }
    for ( ; i < n; i++) {
        filled = top_insert(top, filled, k, i, l[i]);
    }
    return filled;
}


/* ------------------------------------------------------------------------
 * truncation: temperature, min_p, top_k, top_p
 *
 * x = (l - max) / T. Every rule keeps a prefix of the total order
 * "x desc, id asc". With no rule on, every token is kept and nothing is
 * listed (the draw uses the block masses). Otherwise the kept tokens are
 * listed in s->cand[0 .. n_kept), in no particular but deterministic
 * order: top_k and top_p are quickselect-style partitions (by count, by
 * probability mass), never a sort of the row.
 * ------------------------------------------------------------------------ */

typedef struct {
    float      max;        /* largest edited logit */
    float      inv_t;      /* 1 / temperature */
    float      lo;         /* min_p threshold on x, -inf if off */
    int        listed;     /* 1: kept = s->cand[0 .. n_kept) */
    size_t     n_kept;
    double     z;          /* sum of exp(x) over the kept tokens */
} kept_set;

#define WINDOW_START  8.0f   /* first gather: x >= -8, p >= 3e-4 p_max */
#define SMALL_RANGE   16     /* below this, selection sorts */


static int
reserve_cand(llm_sampler *s, size_t n)
{
    llm_candidate *c;

    if (n <= s->cand_cap) {
        return 0;
    }
    c = realloc(s->cand, n * sizeof(*c));
    if (c == NULL) {
        return sampler_fail(s, "sampler: out of memory for %zu candidates",
                            n);
    }
    s->cand = c;
    s->cand_cap = n;
    return 0;
}


/*
 * One pass over the row: the mass of every block (for the draw) and of
 * the whole row (x >= lo), and the candidates with x >= cut (none when cut
 * is +inf). Returns the candidate count, or -1.
 */
static long
scan(llm_sampler *s, const float *l, int n, const kept_set *k, float cut,
    double *z_all)
{
    float x[BLOCK], e[BLOCK], pad[BLOCK], top, block;
    size_t count = 0;
    double z = 0.0;

    for (int b = 0; b < n; b += BLOCK) {
        block = exp_block(row_block(l, n, b, pad), k->max, k->inv_t, k->lo,
                          x, e, &top);
        s->blocks[b / BLOCK] = block;
        z += block;
        if (!(top >= cut)) {
            continue;           /* most blocks: nothing near the top */
        }
        for (int j = 0; j < BLOCK; j++) {
            if (!(x[j] >= cut && e[j] > 0.0f)) {
                continue;
            }
            if (count == s->cand_cap
                && reserve_cand(s, s->cand_cap * 2 + 1024) != 0)
            {
                return -1;
            }
            s->cand[count].x = x[j];
            s->cand[count].e = e[j];
            s->cand[count].token = b + j;
            count++;
        }
    }
    *z_all = z;
    return (long) count;
}


/* a comes before b in the order x desc, id asc */
static int
before(const llm_candidate *a, const llm_candidate *b)
{
    return a->x > b->x || (a->x == b->x && a->token < b->token);
}


static void
swap_cand(llm_candidate *c, size_t i, size_t j)
{
    llm_candidate t = c[i];

    c[i] = c[j];
    c[j] = t;
}


static void
sort_range(llm_candidate *c, size_t lo, size_t hi)
{
    for (size_t i = lo + 1; i < hi; i++) {
        for (size_t j = i; j > lo && before(&c[j], &c[j - 1]); j--) {
            swap_cand(c, j, j - 1);
        }
    }
}


/* partitions c[lo .. hi) around a median-of-three pivot; returns the
   pivot's index: what comes before it is left of it */
static size_t
partition(llm_candidate *c, size_t lo, size_t hi)
{
    size_t mid = lo + (hi - lo) / 2, last = hi - 1, store = lo;

    if (before(&c[mid], &c[lo])) {
        swap_cand(c, mid, lo);
    }
    if (before(&c[last], &c[lo])) {
        swap_cand(c, last, lo);
    }
    if (before(&c[mid], &c[last])) {
        swap_cand(c, mid, last);
    }
    /* the median is now at last */
    for (size_t i = lo; i < last; i++) {
        if (before(&c[i], &c[last])) {
            swap_cand(c, i, store++);
        }
    }
    swap_cand(c, store, last);
    return store;
}


/* moves the first k in order to c[0 .. k), plus any tied with the k-th
   (vLLM and transformers keep ties); returns how many were kept and, in
   *kth, the k-th largest x */
static size_t
select_top_k(llm_candidate *c, size_t m, size_t k, float *kth_out)
{
    size_t lo = 0, hi = m, p, kept;
    float kth;

    if (k >= m) {
        return m;
    }
    while (hi - lo > SMALL_RANGE) {
        p = partition(c, lo, hi);
        if (p == k - 1 || p == k) {
            lo = hi = p;
            break;
        }
        if (p < k) {
            lo = p + 1;
        } else {
            hi = p;
        }
    }
    sort_range(c, lo, hi);

    kth = c[0].x;
    for (size_t i = 0; i < k; i++) {
        kth = c[i].x < kth ? c[i].x : kth;
    }
    kept = k;
    for (size_t i = k; i < m; i++) {
        if (c[i].x == kth) {
            swap_cand(c, i, kept++);
        }
    }
    *kth_out = kth;
    return kept;
}


/*
 * top_p: a token is kept when the mass of the tokens before it is still
 * below need (the first always is). Moves those to c[0 .. K), returns K.
 * Invariant: c[0 .. lo) are kept, hold mass acc, and precede c[lo .. m).
 */
static size_t
select_by_mass(llm_candidate *c, size_t m, double need)
{
    size_t lo = 0, hi = m, p;
    double acc = 0.0, left;

    while (hi - lo > SMALL_RANGE) {
        p = partition(c, lo, hi);
        left = 0.0;
        for (size_t i = lo; i < p; i++) {
            left += c[i].e;
        }
        if (p == 0 || acc + left < need) {
            acc += left + c[p].e;       /* the pivot and its left: kept */
            lo = p + 1;
        } else {
            hi = p;                     /* the pivot is not kept */
        }
    }

    sort_range(c, lo, hi);
    for (p = lo; p < hi; p++) {
        if (p > 0 && acc >= need) {
            break;
        }
        acc += c[p].e;
    }
    return p;
}


/*
 * top_k: one pass of x only (no exp), keeping a buffer of at most
 * 2k + 1024 candidates; when it fills, the top k stay and the cut rises to
 * the k-th x, so later blocks below it are skipped whole. Leaves the top k
 * (and ties) in s->cand[0 .. kept) with their exp; returns kept or -1.
 */
static long
gather_top_k(llm_sampler *s, const float *l, int n, const kept_set *k,
    size_t top_k)
{
    float x[BLOCK], gmax[BLOCK / GROUP], pad[BLOCK];
    float cut = k->lo > -FLT_MAX ? k->lo : -FLT_MAX;   /* never -inf */
    size_t count = 0, limit = 2 * top_k + 1024;

    if (reserve_cand(s, limit) != 0) {
        return -1;
    }
    for (int b = 0; b < n; b += BLOCK) {
        if (!(x_block(row_block(l, n, b, pad), k->max, k->inv_t, x, gmax)
              >= cut))
        {
            continue;
        }
        for (int j = 0; j < BLOCK; j++) {
            if (!(gmax[j / GROUP] >= cut)) {
                j += GROUP - 1;         /* the whole group is below */
                continue;
            }
            if (!(x[j] >= cut)) {
                continue;
            }
            if (count == limit) {
                count = select_top_k(s->cand, count, top_k, &cut);
                /* all tied: make room */
                if (count == limit && reserve_cand(s, limit *= 2) != 0) {
                    return -1;
                }
                if (!(x[j] >= cut)) {
                    continue;
                }
            }
            s->cand[count].x = x[j];
            s->cand[count].token = b + j;
            count++;
        }
    }

    count = select_top_k(s->cand, count, top_k, &cut);
    for (size_t i = 0; i < count; i++) {
        s->cand[i].e = expf(s->cand[i].x);
    }
    return (long) count;
}


/* min_p: every token with x >= lo, from one pass of x only; returns
   their count (with exp) or -1 */
static long
gather_above(llm_sampler *s, const float *l, int n, const kept_set *k)
{
    float x[BLOCK], gmax[BLOCK / GROUP], pad[BLOCK];
    size_t count = 0;

    for (int b = 0; b < n; b += BLOCK) {
        if (!(x_block(row_block(l, n, b, pad), k->max, k->inv_t, x, gmax)
              >= k->lo))
        {
            continue;
        }
        for (int j = 0; j < BLOCK; j++) {
            if (!(gmax[j / GROUP] >= k->lo)) {
                j += GROUP - 1;
                continue;
            }
            if (!(x[j] >= k->lo)) {
                continue;
            }
            if (count == s->cand_cap
                && reserve_cand(s, s->cand_cap * 2 + 1024) != 0)
            {
                return -1;
            }
            s->cand[count].x = x[j];
            s->cand[count].e = expf(x[j]);
            s->cand[count].token = b + j;
            count++;
        }
    }
    return (long) count;
}


/* top_p without min_p or top_k: candidates within a window of the
   maximum, widened until they hold top_p of the row's mass; past x = -88
   the window holds every token with a nonzero exp. Returns their count
   or -1 */
static long
gather_top_p(llm_sampler *s, const float *l, int n, const kept_set *k,
    double *z_all)
{
    float window = WINDOW_START;
    double z_cand;
    long count;

    for ( ;; ) {
        count = scan(s, l, n, k, -window, z_all);
        if (count < 0 || window > 88.0f) {
            return count;
        }
        z_cand = 0.0;
        for (long i = 0; i < count; i++) {
            z_cand += s->cand[i].e;
        }
        if (z_cand >= s->params.top_p * *z_all) {
            return count;
        }
        window *= 2.0f;
    }
}


/*
 * min_p, top_k, top_p: the kept tokens listed in s->cand. min_p bounds
 * every gather (x >= lo); top_k gathers its k; min_p alone (or with
 * top_p) gathers exactly its set, whose mass is then the whole mass; only
 * top_p alone needs the mass of the full row.
 */
static int
truncate_listed(llm_sampler *s, const float *l, int n, kept_set *k)
{
    const llm_sampling_params *p = &s->params;
    double z_all = 0.0;
    long count;
    size_t kept;

    if (p->top_k > 0) {
        count = gather_top_k(s, l, n, k, (size_t) p->top_k);
    } else if (p->min_p > 0.0f) {
        count = gather_above(s, l, n, k);
    } else {
        count = gather_top_p(s, l, n, k, &z_all);
    }
    if (count < 0) {
        return -1;
    }
    if (p->top_k > 0 || p->min_p > 0.0f) {
        for (long i = 0; i < count; i++) {
            z_all += s->cand[i].e;
        }
    }

    kept = (size_t) count;
    if (p->top_p < 1.0f) {
        kept = select_by_mass(s->cand, kept, p->top_p * z_all);
    }

    k->listed = 1;
    k->n_kept = kept;
    k->z = 0.0;
    for (size_t i = 0; i < kept; i++) {
        k->z += s->cand[i].e;
    }
    return 0;
}


/* the kept set of a non-greedy draw over the edited logits l */
static int
truncate(llm_sampler *s, const float *l, int n, kept_set *k)
{
    const llm_sampling_params *p = &s->params;
    float max;
    size_t n_blocks = (size_t) n / BLOCK + 1;
    long count;

    if (s->blocks == NULL) {
        s->blocks = malloc(n_blocks * sizeof(*s->blocks));
        if (s->blocks == NULL) {
            return sampler_fail(s, "sampler: out of memory");
        }
    }

    max = row_max(l, n);
    if (!isfinite(max)) {
        return sampler_fail(s, "sampler: the logits' maximum is %g, "
                            "nothing to sample from", max);
    }

    k->max = max;
    k->inv_t = 1.0f / p->temperature;
    k->lo = p->min_p > 0.0f ? logf(p->min_p) : -INFINITY;

    if (p->top_k > 0 || p->top_p < 1.0f || p->min_p > 0.0f) {
        return truncate_listed(s, l, n, k);
    }

    count = scan(s, l, n, k, INFINITY, &k->z);
    if (count < 0) {
        return -1;
    }
    k->listed = 0;
    k->n_kept = 0;      /* not needed to draw; counted by the caller */
    return 0;
}


/* inverse CDF over the kept set, in its own (deterministic) order, with
   token `exclude` (mass ex of the kept set's z; -1 and 0: none) left out:
   the residual of a rejected speculative draft */
static int
draw(llm_sampler *s, const float *l, int n, const kept_set *k, int exclude,
    double ex)
{
    float x[BLOCK], e[BLOCK], pad[BLOCK], top;
    double target = rng_uniform(s->rng) * (k->z - ex), acc = 0.0, mass;
    int b, last = -1;

    if (k->listed) {
        for (size_t i = 0; i < k->n_kept; i++) {
            if (s->cand[i].token == exclude) {
                continue;
            }
            acc += s->cand[i].e;
            last = s->cand[i].token;
            if (target < acc) {
                return last;
            }
        }
        return last;                /* rounding at the top end */
    }

    /* find the block by its mass, then the token inside it */
    for (b = 0; b < n; b += BLOCK) {
        mass = s->blocks[b / BLOCK]
               - (exclude >= 0 && exclude / BLOCK == b / BLOCK ? ex : 0.0);
        if (mass > 0.0) {
            last = b;
        }
        if (target < acc + mass) {
            break;
        }
        acc += mass;
    }
    b = b < n ? b : last;

    exp_block(row_block(l, n, b, pad), k->max, k->inv_t, k->lo, x, e, &top);
    last = -1;
    for (int j = 0; j < BLOCK; j++) {
        if (e[j] > 0.0f && b + j != exclude) {
            acc += e[j];
            last = b + j;
            if (target < acc) {
                return b + j;
            }
        }
    }
    return last;
}


/* exp(x) of token id in the kept set (0: dropped), as draw() weighs it */
static double
kept_mass(const llm_sampler *s, const float *l, int n, const kept_set *k,
    int32_t id)
{
    float x[BLOCK], e[BLOCK], pad[BLOCK], top;
    int b = id / BLOCK * BLOCK;

    if (k->listed) {
        for (size_t i = 0; i < k->n_kept; i++) {
            if (s->cand[i].token == id) {
                return s->cand[i].e;
            }
        }
        return 0.0;
    }
    exp_block(row_block(l, n, b, pad), k->max, k->inv_t, k->lo, x, e, &top);
    return e[id - b];
}


/*
 * Speculative sampling with a deterministic draft (its distribution is a
 * point mass on `draft`): accept it with probability p(draft), else draw
 * from p with draft removed, renormalised. The token that comes out is
 * distributed as p exactly; the RNG is read once on acceptance, twice on
 * rejection.
 */
static int
draw_speculative(llm_sampler *s, const float *l, int n, const kept_set *k,
    int32_t draft)
{
    double ex = kept_mass(s, l, n, k, draft);

    if (rng_uniform(s->rng) * k->z < ex || k->z - ex <= 0.0) {
        return draft;
    }
    return draw(s, l, n, k, draft, ex);
}


/* ------------------------------------------------------------------------
 * logprobs
 * ------------------------------------------------------------------------ */

static void
raw_logprobs_begin(const llm_sampler *s, const float *logits, int n,
    llm_sample_out *out, double *lse)
{
    float max = row_max(logits, n);

    *lse = max > -INFINITY ? log_sum_exp(logits, n, max) : 0.0;
    out->n_top = top_n(logits, n, s->params.top_logprobs, out->top);
    for (int i = 0; i < out->n_top; i++) {
        out->top[i].logprob = (float) (out->top[i].logprob - *lse);
    }
}


/* greedy: log_softmax of the edited logits (temperature does not apply) */
static void
processed_logprobs_greedy(const llm_sampler *s, const float *l, int n,
    int id, llm_sample_out *out)
{
    double lse = log_sum_exp(l, n, l[id]);

    out->logprob = (float) (l[id] - lse);
    out->n_top = top_n(l, n, s->params.top_logprobs, out->top);
    for (int i = 0; i < out->n_top; i++) {
        out->top[i].logprob = (float) (out->top[i].logprob - lse);
    }
}


/* the first `want` kept candidates in order, into out->top */
static int
top_listed(const llm_sampler *s, const kept_set *k, int want,
    llm_sample_out *out)
{
    llm_candidate best[LLM_MAX_TOP_LOGPROBS];
    int filled = 0, j;

    for (size_t i = 0; i < k->n_kept && want > 0; i++) {
        const llm_candidate *c = &s->cand[i];

        if (filled == want && !before(c, &best[want - 1])) {
            continue;
        }
        j = filled < want ? filled++ : want - 1;
        while (j > 0 && before(c, &best[j - 1])) {
            best[j] = best[j - 1];
            j--;
        }
        best[j] = *c;
    }
    for (j = 0; j < filled; j++) {
        out->top[j].token = best[j].token;
        out->top[j].logprob = best[j].x;
    }
    return filled;
}


/* sampled: log of the kept distribution; only kept tokens are listed */
static void
processed_logprobs_kept(const llm_sampler *s, const float *l, int n,
    const kept_set *k, int id, llm_sample_out *out)
{
    double log_z = log(k->z);
    int want = s->params.top_logprobs, m = 0, got;

    out->logprob = (float) ((l[id] - k->max) * k->inv_t - log_z);

    if (k->listed) {
        m = top_listed(s, k, want, out);
        for (int i = 0; i < m; i++) {
            out->top[i].logprob = (float) (out->top[i].logprob - log_z);
        }
    } else {
        /* the kept set is a prefix of the order, so the top of all
           tokens filtered by the threshold is the top of the kept set */
        got = top_n(l, n, want, out->top);
        for (int i = 0; i < got; i++) {
            float x = (out->top[i].logprob - k->max) * k->inv_t;

            if (x >= k->lo) {
                out->top[m].token = out->top[i].token;
                out->top[m].logprob = (float) (x - log_z);
                m++;
            }
        }
    }
    out->n_top = m;
}


/* ------------------------------------------------------------------------
 * the entry points
 * ------------------------------------------------------------------------ */

static int
is_greedy(const llm_sampler *s)
{
    return s->params.temperature < LLM_SAMPLER_GREEDY_EPS;
}


/* llm_sample's body; draft >= 0: llm_sample_draft's */
static int
sample_row(llm_sampler *s, float *logits, int n_vocab, int32_t draft,
    llm_sample_out *out)
{
    const llm_sampling_params *p = &s->params;
    int want = p->logprobs && out != NULL;
    double raw_lse = 0.0;
    kept_set k;
    int id;

    if (n_vocab != s->n_vocab) {
        return sampler_fail(s, "sampler: %d logits for a vocabulary of %d",
                            n_vocab, s->n_vocab);
    }

    if (want && p->logprobs_mode == LLM_LOGPROBS_RAW) {
        raw_logprobs_begin(s, logits, n_vocab, out, &raw_lse);
    }

    if (apply_edits(s, logits) != 0) {
        return -1;
    }

    if (is_greedy(s)) {
        id = argmax(logits, n_vocab);
        if (id < 0) {
            sampler_fail(s, "sampler: no finite logit to sample from");
        } else if (want && p->logprobs_mode == LLM_LOGPROBS_PROCESSED) {
            processed_logprobs_greedy(s, logits, n_vocab, id, out);
        }
    } else if (truncate(s, logits, n_vocab, &k) != 0) {
        id = -1;
    } else {
        id = draft >= 0 ? draw_speculative(s, logits, n_vocab, &k, draft)
                        : draw(s, logits, n_vocab, &k, -1, 0.0);
        if (want && p->logprobs_mode == LLM_LOGPROBS_PROCESSED) {
            processed_logprobs_kept(s, logits, n_vocab, &k, id, out);
        }
    }

    restore_logits(s, logits);
    if (id < 0) {
        return -1;
    }

    if (want && p->logprobs_mode == LLM_LOGPROBS_RAW) {
        out->logprob = (float) (logits[id] - raw_lse);
    }
    if (llm_sampler_accept(s, id) != 0) {
        return -1;
    }
    return id;
}


int
llm_sample(llm_sampler *s, float *logits, int n_vocab, llm_sample_out *out)
{
    return sample_row(s, logits, n_vocab, -1, out);
}


int
llm_sample_draft(llm_sampler *s, float *logits, int n_vocab, int32_t draft,
    llm_sample_out *out)
{
    if (draft < 0 || draft >= s->n_vocab) {
        return sampler_fail(s, "sampler: draft token %d outside the "
                            "vocabulary of %d", draft, s->n_vocab);
    }
    return sample_row(s, logits, n_vocab, draft, out);
}


static void
distribute_blocks(const float *l, int n, const kept_set *k, float *probs)
{
    float x[BLOCK], e[BLOCK], pad[BLOCK], top;

    for (int b = 0; b < n; b += BLOCK) {
        exp_block(row_block(l, n, b, pad), k->max, k->inv_t, k->lo, x, e,
                  &top);
        for (int j = 0; j < BLOCK && b + j < n; j++) {
            probs[b + j] = (float) (e[j] / k->z);
        }
    }
}


int
llm_sampler_distribution(llm_sampler *s, float *logits, int n_vocab,
    float *probs)
{
    kept_set k;
    int id, kept = -1;

    if (n_vocab != s->n_vocab) {
        return sampler_fail(s, "sampler: %d logits for a vocabulary of %d",
                            n_vocab, s->n_vocab);
    }
    if (apply_edits(s, logits) != 0) {
        return -1;
    }

    memset(probs, 0, (size_t) n_vocab * sizeof(*probs));

    if (is_greedy(s)) {
        id = argmax(logits, n_vocab);
        if (id >= 0) {
            probs[id] = 1.0f;
            kept = 1;
        }
    } else if (truncate(s, logits, n_vocab, &k) == 0) {
        kept = (int) k.n_kept;
        if (!k.listed) {
            kept = 0;
            for (int i = 0; i < n_vocab; i++) {
                float x = (logits[i] - k.max) * k.inv_t;

                kept += x >= k.lo && x > -INFINITY;
            }
        }
        if (k.listed) {
            for (size_t i = 0; i < k.n_kept; i++) {
                probs[s->cand[i].token] = (float) (s->cand[i].e / k.z);
            }
        } else {
            distribute_blocks(logits, n_vocab, &k, probs);
        }
    }

    restore_logits(s, logits);
    return kept;
}
