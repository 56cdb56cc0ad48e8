/*
 * Sampler: every rule of engine/sample/sampler.h checked on crafted logits with
 * exact expected values, plus a brute-force reference (full sort) for the
 * windowed truncation on a large random vocabulary, and the per-token cost.
 */
#include "tap.h"
#include "sample/sampler.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_ELEMS(a)  ((int) (sizeof(a) / sizeof((a)[0])))

static int
close_to(double got, double want, double tol)
{
    if (fabs(got - want) <= tol) {
        return 1;
    }
    printf("#   got %.9g, want %.9g (tol %g)\n", got, want, tol);
    return 0;
}


static void
greedy_params(llm_sampling_params *p)
{
    llm_sampling_params_default(p);
    p->temperature = 0.0f;
    p->has_seed = 1;
}


static llm_sampler
make(const llm_sampling_params *p, int n_vocab)
{
    llm_sampler s;
    char err[160];

    if (llm_sampler_init(&s, p, n_vocab, err, sizeof(err)) != 0) {
        printf("# init failed: %s\n", err);
        exit(1);
    }
    return s;
}


/* deterministic test data: a small LCG and Box-Muller */
static uint64_t lcg_state = 12345;

static double
lcg_uniform(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((lcg_state >> 11) + 0.5) * 0x1.0p-53;
}


static float
gaussian(void)
{
    double u = lcg_uniform(), v = lcg_uniform();

    return (float) (sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v));
}


static void
random_logits(float *l, int n, float scale)
{
    for (int i = 0; i < n; i++) {
        l[i] = scale * gaussian();
    }
    /* a few clear favourites, like a real model's row */
    for (int i = 0; i < 5; i++) {
        l[(int) (lcg_uniform() * n)] += 4.0f * scale;
    }
}


/* ------------------------------------------------------------------------ */

static void
test_greedy(void)
{
    llm_sampling_params p;
    llm_sampler s;
    float l[] = { 1.0f, 3.0f, NAN, 3.0f, 2.0f };
    float dead[] = { -INFINITY, NAN, -INFINITY };

    greedy_params(&p);
    s = make(&p, N_ELEMS(l));
    is_int(llm_sample(&s, l, N_ELEMS(l), NULL), 1,
           "greedy: argmax, lowest id wins a tie, NaN never wins");
    is_int(llm_sampler_count(&s, 1), 1, "greedy: the choice is recorded");
    ok(isnan(l[2]) && l[1] == 3.0f, "greedy: logits unchanged");
    is_int(llm_sample(&s, l, 4, NULL), -1, "wrong n_vocab is an error");
    is_str(s.err, "sampler: 4 logits for a vocabulary of 5",
           "wrong n_vocab: message");
    llm_sampler_free(&s);

    s = make(&p, N_ELEMS(dead));
    is_int(llm_sample(&s, dead, N_ELEMS(dead), NULL), -1,
           "greedy: no finite logit is an error");
    llm_sampler_free(&s);

    /* a tiny temperature is greedy too (vLLM: < 1e-5) */
    p.temperature = 1e-6f;
    s = make(&p, N_ELEMS(l));
    is_int(llm_sample(&s, l, N_ELEMS(l), NULL), 1, "temperature 1e-6: greedy");
    llm_sampler_free(&s);
}


static void
test_temperature(void)
{
    llm_sampling_params p;
    llm_sampler s;
    float l[] = { 0.0f, logf(2.0f), logf(4.0f) };
    float probs[3];
    int hist[3] = { 0, 0, 0 }, draws = 20000;
    double chi2 = 0.0;

    llm_sampling_params_default(&p);
    p.has_seed = 1;
    p.seed = 7;
    p.temperature = 0.5f;
    s = make(&p, 3);
    is_int(llm_sampler_distribution(&s, l, 3, probs), 3, "T=0.5: all kept");
    /* p ~ exp(l / 0.5) = 1, 4, 16 */
    ok(close_to(probs[0], 1.0 / 21, 1e-6) && close_to(probs[1], 4.0 / 21, 1e-6)
       && close_to(probs[2], 16.0 / 21, 1e-6), "T=0.5: exact probabilities");
    llm_sampler_free(&s);

    p.temperature = 2.0f;
    s = make(&p, 3);
    llm_sampler_distribution(&s, l, 3, probs);
    /* exp(l / 2) = 1, sqrt 2, 2 */
    ok(close_to(probs[0], 1 / (3 + M_SQRT2), 1e-6)
       && close_to(probs[2], 2 / (3 + M_SQRT2), 1e-6),
       "T=2: exact probabilities");
    llm_sampler_free(&s);

    /* draws follow 1/7, 2/7, 4/7: chi-square with 2 degrees of freedom,
       13.8 is the 0.1% point; the seed is fixed, so this cannot flake */
    p.temperature = 1.0f;
    s = make(&p, 3);
    for (int i = 0; i < draws; i++) {
        hist[llm_sample(&s, l, 3, NULL)]++;
    }
    for (int i = 0; i < 3; i++) {
        double want = draws * (double) (1 << i) / 7.0;

        chi2 += (hist[i] - want) * (hist[i] - want) / want;
    }
    printf("# T=1 draws %d %d %d, chi2 %.2f\n", hist[0], hist[1], hist[2],
           chi2);
    ok(chi2 < 13.8, "T=1: draw frequencies match softmax (chi2 %.2f)", chi2);
    is_int(llm_sampler_count(&s, 2), hist[2], "T=1: every draw recorded");
    llm_sampler_free(&s);
}


/* probs 0.4, 0.3, 0.2, 0.1 placed at ids 2, 0, 3, 1 */
static float truncation_logits[] = { -1.2039728f, -2.3025851f, -0.9162907f,
                                     -1.6094379f };

static int
kept_set(int top_k, float top_p, float min_p, float *probs)
{
    llm_sampling_params p;
    llm_sampler s;
    int kept;

    llm_sampling_params_default(&p);
    p.has_seed = 1;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    s = make(&p, 4);
    kept = llm_sampler_distribution(&s, truncation_logits, 4, probs);
    llm_sampler_free(&s);
    return kept;
}


/* which ids have p > 0, as a bit mask */
static int
mask_of(const float *probs, int n)
{
    int m = 0;

    for (int i = 0; i < n; i++) {
        m |= probs[i] > 0.0f ? 1 << i : 0;
    }
    return m;
}


static void
test_truncation(void)
{
    float probs[4];
    float ties[] = { 5.0f, 4.0f, 4.0f, 3.0f, 1.0f };
    float tie_probs[5];
    llm_sampling_params p;
    llm_sampler s;

    is_int(kept_set(2, 1.0f, 0.0f, probs), 2, "top_k=2 keeps 2");
    is_int(mask_of(probs, 4), 0x5, "top_k=2 keeps ids 2 and 0");
    ok(close_to(probs[2], 0.4 / 0.7, 1e-6)
       && close_to(probs[0], 0.3 / 0.7, 1e-6),
       "top_k=2 renormalizes");
    is_int(kept_set(1, 1.0f, 0.0f, probs), 1, "top_k=1 keeps 1");
    is_int(mask_of(probs, 4), 0x4, "top_k=1 keeps the best");
    is_int(kept_set(10, 1.0f, 0.0f, probs), 4, "top_k > vocab keeps all");
    is_int(kept_set(-1, 1.0f, 0.0f, probs), 4, "top_k=-1 is off");

    is_int(kept_set(0, 0.35f, 0.0f, probs), 1, "top_p=0.35 keeps 1");
    is_int(kept_set(0, 0.65f, 0.0f, probs), 2, "top_p=0.65 keeps 2");
    is_int(mask_of(probs, 4), 0x5, "top_p=0.65 keeps ids 2 and 0");
    is_int(kept_set(0, 0.75f, 0.0f, probs), 3, "top_p=0.75 keeps 3");
    is_int(mask_of(probs, 4), 0xd, "top_p=0.75 keeps ids 2, 0, 3");
    ok(close_to(probs[3], 0.2 / 0.9, 1e-6), "top_p renormalizes");
    is_int(kept_set(0, 1.0f, 0.0f, probs), 4, "top_p=1 is off");

    is_int(kept_set(0, 1.0f, 0.3f, probs), 3, "min_p=0.3: p >= 0.12 kept");
    is_int(mask_of(probs, 4), 0xd, "min_p=0.3 drops id 1");
    is_int(kept_set(0, 1.0f, 0.6f, probs), 2, "min_p=0.6: p >= 0.24 kept");
    is_int(kept_set(0, 1.0f, 1.0f, probs), 1, "min_p=1 keeps the best");

    /* order: top_p works on what top_k left (0.4/0.9 + 0.3/0.9 >= 0.75);
       top_p first would keep 3 */
    is_int(kept_set(3, 0.75f, 0.0f, probs), 2, "top_k then top_p");
    ok(close_to(probs[0], 0.3 / 0.7, 1e-6), "top_k + top_p renormalize");
    /* min_p first: 0.6 leaves 0.4, 0.3; top_p 0.6 of that keeps both */
    is_int(kept_set(0, 0.6f, 0.6f, probs), 2, "min_p then top_p");
    is_int(kept_set(0, 0.55f, 0.0f, probs), 2, "top_p=0.55 alone keeps 2");
    is_int(kept_set(0, 0.55f, 0.6f, probs), 1,
           "top_p after min_p: 0.4/0.7 >= 0.55 keeps 1");

    /* tokens tied with the k-th largest stay (vLLM, transformers) */
    llm_sampling_params_default(&p);
    p.has_seed = 1;
    p.top_k = 2;
    s = make(&p, 5);
    is_int(llm_sampler_distribution(&s, ties, 5, tie_probs), 3,
           "top_k=2 with a tie at the 2nd keeps 3");
    is_int(mask_of(tie_probs, 5), 0x7, "top_k tie: ids 0, 1, 2");
    llm_sampler_free(&s);
}


/* ------------------------------------------------------------------------
 * brute-force reference: full sort, the same rules
 * ------------------------------------------------------------------------ */

typedef struct {
    double x;
    int    id;
} ref_item;

static int
ref_cmp(const void *a, const void *b)
{
    const ref_item *x = a, *y = b;

    if (x->x != y->x) {
        return x->x < y->x ? 1 : -1;
    }
    return x->id - y->id;
}


static int
ref_distribution(const float *l, int n, float t, int top_k, float top_p,
    float min_p, double *probs)
{
    ref_item *it = malloc(n * sizeof(*it));
    double max = -INFINITY, z = 0.0, before = 0.0;
    int kept = n;

    for (int i = 0; i < n; i++) {
        max = l[i] > max ? l[i] : max;
    }
    for (int i = 0; i < n; i++) {
        it[i].x = (l[i] - max) / t;
        it[i].id = i;
    }
    qsort(it, n, sizeof(*it), ref_cmp);
    if (min_p > 0) {
        for (kept = 0; kept < n && exp(it[kept].x) >= min_p; kept++) { }
    }
    if (top_k > 0 && top_k < kept) {
        int k = top_k;

        while (k < kept && it[k].x == it[top_k - 1].x) {
            k++;
        }
        kept = k;
    }
    for (int i = 0; i < kept; i++) {
        z += exp(it[i].x);
    }
    if (top_p < 1) {
        int i;

        for (i = 0; i < kept; i++) {
            if (i > 0 && before >= top_p * z) {
                break;
            }
            before += exp(it[i].x);
        }
        kept = i;
    }
    z = 0.0;
    for (int i = 0; i < kept; i++) {
        z += exp(it[i].x);
    }
    for (int i = 0; i < n; i++) {
        probs[i] = 0.0;
    }
    for (int i = 0; i < kept; i++) {
        probs[it[i].id] = exp(it[i].x) / z;
    }
    free(it);
    return kept;
}


static void
test_against_reference(void)
{
    static const struct {
        float t; int top_k; float top_p; float min_p;
    } cases[] = {
        { 1.0f, 0, 0.9f, 0.0f },    /* top_p alone: needs the full mass */
        { 5.0f, 0, 0.95f, 0.0f },   /* flat: the window must widen */
        { 0.7f, 40, 1.0f, 0.0f },
        { 8.0f, 3000, 1.0f, 0.0f }, /* k beyond the first window */
        { 1.5f, 100, 0.8f, 0.0f },
        { 1.0f, 0, 1.0f, 0.05f },   /* threshold only: no sort */
        { 3.0f, 50, 0.9f, 0.02f },
        { 0.3f, 0, 0.5f, 0.0f },
    };
    int n = 49152, kept, ref_kept, mismatch;
    float *l = malloc(n * sizeof(*l)), *probs = malloc(n * sizeof(*probs));
    float *lc = malloc(n * sizeof(*lc));
    double *want = malloc(n * sizeof(*want)), worst;
    llm_sampling_params p;
    llm_sampler s;

    random_logits(l, n, 2.0f);

    for (int c = 0; c < N_ELEMS(cases); c++) {
        /* a temperature above the API's 2 (params/sampling.h) as flatter
           logits at T = 2: softmax(l / t) == softmax((l * 2 / t) / 2) */
        float scale = cases[c].t > 2.0f ? 2.0f / cases[c].t : 1.0f;

        for (int i = 0; i < n; i++) {
            lc[i] = l[i] * scale;
        }
        llm_sampling_params_default(&p);
        p.has_seed = 1;
        p.temperature = cases[c].t * scale;
        p.top_k = cases[c].top_k;
        p.top_p = cases[c].top_p;
        p.min_p = cases[c].min_p;
        s = make(&p, n);
        kept = llm_sampler_distribution(&s, lc, n, probs);
        ref_kept = ref_distribution(lc, n, p.temperature, p.top_k, p.top_p,
                                    p.min_p, want);
        mismatch = 0;
        worst = 0.0;
        for (int i = 0; i < n; i++) {
            mismatch += (probs[i] > 0) != (want[i] > 0);
            worst = fmax(worst, fabs(probs[i] - want[i]));
        }
        printf("# case %d: T=%g top_k=%d top_p=%g min_p=%g kept %d (ref %d)\n",
               c, p.temperature, p.top_k, p.top_p, p.min_p, kept, ref_kept);
        ok(kept == ref_kept && mismatch == 0 && worst < 1e-6,
           "49k vocab case %d: same kept set and probs as a full sort "
           "(max diff %.2g)", c, worst);
        llm_sampler_free(&s);
    }

    free(l);
    free(lc);
    free(probs);
    free(want);
}


/* many rows and cut points, small enough to run the partition code on
   nuclei of a few to a few thousand tokens */
static void
test_selection_sweep(void)
{
    int n = 3000, bad = 0, rows = 60;
    float l[3000], probs[3000];
    double want[3000];
    llm_sampling_params p;
    llm_sampler s;

    for (int r = 0; r < rows; r++) {
        int kept, ref_kept;

        random_logits(l, n, 0.5f + (float) lcg_uniform() * 3.0f);
        llm_sampling_params_default(&p);
        p.has_seed = 1;
        p.temperature = 0.5f + (float) lcg_uniform() * 1.5f;
        p.top_p = 0.05f + (float) lcg_uniform() * 0.94f;
        p.top_k = r % 3 == 0 ? 1 + (int) (lcg_uniform() * 2000) : 0;
        p.min_p = r % 4 == 1 ? (float) lcg_uniform() * 0.01f : 0.0f;
        s = make(&p, n);
        kept = llm_sampler_distribution(&s, l, n, probs);
        ref_kept = ref_distribution(l, n, p.temperature, p.top_k, p.top_p,
                                    p.min_p, want);
        for (int i = 0; i < n; i++) {
            if ((probs[i] > 0) != (want[i] > 0)
                || fabs(probs[i] - want[i]) > 1e-6)
            {
                kept = -2;
            }
        }
        if (kept != ref_kept) {
            printf("# row %d: T=%g top_k=%d top_p=%g min_p=%g: kept %d, "
                   "ref %d\n", r, p.temperature, p.top_k, p.top_p, p.min_p,
                   kept, ref_kept);
            bad++;
        }
        llm_sampler_free(&s);
    }
    is_int(bad, 0, "%d random rows and cuts: kept sets as a full sort", rows);
}


/* ------------------------------------------------------------------------
 * penalties and bias: the edited logits, read back through the processed
 * logprobs of a greedy step (log_softmax of the edited logits)
 * ------------------------------------------------------------------------ */

static const float pen_logits[] = { 2.0f, -1.0f, 0.5f, 1.0f, 0.0f };

/* prompt ids 0, 1; output ids 2, 2, 3; id 4 is never seen: l'[4] = 0 */
static void
edited_logits(float rep, float freq, float pres, float *edited)
{
    llm_sampling_params p;
    llm_sampler s;
    llm_sample_out out;
    int32_t prompt[] = { 0, 1, 0 };
    float l[5];
    float ref = NAN;

    memcpy(l, pen_logits, sizeof(l));
    greedy_params(&p);
    p.repetition_penalty = rep;
    p.frequency_penalty = freq;
    p.presence_penalty = pres;
    p.logprobs = 1;
    p.top_logprobs = 5;
    p.logprobs_mode = LLM_LOGPROBS_PROCESSED;
    s = make(&p, 5);
    llm_sampler_add_prompt(&s, prompt, 3);
    llm_sampler_accept(&s, 2);
    llm_sampler_accept(&s, 3);
    llm_sampler_accept(&s, 2);
    llm_sample(&s, l, 5, &out);
    ok(memcmp(l, pen_logits, sizeof(l)) == 0, "logits restored after edits");
    for (int i = 0; i < out.n_top; i++) {
        if (out.top[i].token == 4) {
            ref = out.top[i].logprob;
        }
    }
    for (int i = 0; i < out.n_top; i++) {
        edited[out.top[i].token] = out.top[i].logprob - ref;
    }
    llm_sampler_free(&s);
}


static int
logits_are(const float *got, float a, float b, float c, float d)
{
    float want[4] = { a, b, c, d };
    int good = 1;

    for (int i = 0; i < 4; i++) {
        good &= close_to(got[i], want[i], 1e-5);
    }
    return good;
}


static void
test_penalties(void)
{
    float e[5];

    edited_logits(1.0f, 0.0f, 0.0f, e);
    ok(logits_are(e, 2.0f, -1.0f, 0.5f, 1.0f), "no penalty: logits as given");

    /* HF/CTRL: positive / r, negative * r, over prompt and output ids */
    edited_logits(2.0f, 0.0f, 0.0f, e);
    ok(logits_are(e, 1.0f, -2.0f, 0.25f, 0.5f), "repetition_penalty=2");

    /* OpenAI: count * f, output ids only (id 2 twice, id 3 once) */
    edited_logits(1.0f, 0.5f, 0.0f, e);
    ok(logits_are(e, 2.0f, -1.0f, -0.5f, 0.5f), "frequency_penalty=0.5");

    edited_logits(1.0f, 0.0f, 0.3f, e);
    ok(logits_are(e, 2.0f, -1.0f, 0.2f, 0.7f), "presence_penalty=0.3");

    edited_logits(1.0f, -0.5f, -0.3f, e);
    ok(logits_are(e, 2.0f, -1.0f, 1.8f, 1.8f), "negative penalties reward");

    /* repetition first, then frequency, then presence:
       id 2: 0.5/2 - 2*0.5 - 0.3 = -1.05; id 3: 1/2 - 0.5 - 0.3 = -0.3 */
    edited_logits(2.0f, 0.5f, 0.3f, e);
    ok(logits_are(e, 1.0f, -2.0f, -1.05f, -0.3f), "all three, in order");
}


static void
test_logit_bias(void)
{
    llm_sampling_params p;
    llm_sampler s;
    llm_logit_bias ban[] = { { 0, -100.0f } };
    llm_logit_bias force[] = { { 2, 100.0f }, { 1, -3.0f } };
    llm_logit_bias bad_id[] = { { 3, 1.0f } };
    llm_logit_bias bad_value[] = { { 1, 101.0f } };
    llm_logit_bias twice[] = { { 1, 1.0f }, { 1, 2.0f } };
    float l[] = { 5.0f, 4.0f, 3.0f };
    float probs[3];
    char err[160];
    int hits = 0;

    greedy_params(&p);
    p.logit_bias = ban;
    p.n_logit_bias = 1;
    s = make(&p, 3);
    is_int(llm_sample(&s, l, 3, NULL), 1, "bias -100 bans the argmax");
    ok(l[0] == 5.0f, "bias: logits restored");
    llm_sampler_free(&s);

    p.temperature = 1.0f;
    s = make(&p, 3);
    llm_sampler_distribution(&s, l, 3, probs);
    ok(probs[0] < 1e-40f, "bias -100: probability ~0 (%g)", probs[0]);
    ok(close_to(probs[1], 1.0 / (1.0 + exp(-1.0)), 1e-6),
       "bias -100: the rest renormalized");
    llm_sampler_free(&s);

    p.logit_bias = force;
    p.n_logit_bias = 2;
    s = make(&p, 3);
    for (int i = 0; i < 1000; i++) {
        hits += llm_sample(&s, l, 3, NULL) == 2;
    }
    is_int(hits, 1000, "bias +100 forces the token at T=1");
    llm_sampler_free(&s);

    /* exact: +2 on id 2 makes it tie id 0 at 5; -1 on id 1 gives 3 */
    llm_logit_bias exact[] = { { 2, 2.0f }, { 1, -1.0f } };
    p.logit_bias = exact;
    s = make(&p, 3);
    llm_sampler_distribution(&s, l, 3, probs);
    ok(close_to(probs[2], 1.0 / (2.0 + exp(-2.0)), 1e-6)
       && close_to(probs[0], probs[2], 1e-7), "bias adds exactly");
    llm_sampler_free(&s);

    p.logit_bias = bad_id;
    p.n_logit_bias = 1;
    is_int(llm_sampler_init(&s, &p, 3, err, sizeof(err)), -1,
           "bias on an id outside the vocab is refused");
    is_str(err, "logit_bias token id 3 is outside the vocabulary "
           "(0..2)", "bias outside vocab: message");
    p.logit_bias = bad_value;
    is_int(llm_sampler_init(&s, &p, 3, err, sizeof(err)), -1,
           "bias 101 is refused");
    is_str(err, "logit_bias for token 1 must be in [-100, 100], got 101",
           "bias 101: message");
    p.logit_bias = twice;
    p.n_logit_bias = 2;
    is_int(llm_sampler_init(&s, &p, 3, err, sizeof(err)), -1,
           "bias listing a token twice is refused");
}


/* ------------------------------------------------------------------------ */

static void
run_seq(llm_sampler *s, const float *l, int n, int32_t *ids, int steps)
{
    float *row = malloc(n * sizeof(*row));

    for (int i = 0; i < steps; i++) {
        memcpy(row, l, n * sizeof(*row));
        ids[i] = llm_sample(s, row, n, NULL);
    }
    free(row);
}


static void
test_seed(void)
{
    enum { N = 1000, STEPS = 200 };
    static float l[N];
    int32_t a[STEPS], b[STEPS], c[STEPS], d[STEPS];
    llm_sampling_params p;
    llm_sampler sa, sb, sc, sd;
    float row[N];
    int same = 1, differ = 0, alone = 1;

    random_logits(l, N, 1.0f);
    llm_sampling_params_default(&p);
    p.temperature = 1.0f;
    p.top_p = 0.95f;
    p.frequency_penalty = 0.2f;
    p.has_seed = 1;
    p.seed = 42;

    sa = make(&p, N);
    sb = make(&p, N);
    run_seq(&sa, l, N, a, STEPS);
    run_seq(&sb, l, N, b, STEPS);
    p.seed = 43;
    sc = make(&p, N);
    run_seq(&sc, l, N, c, STEPS);
    for (int i = 0; i < STEPS; i++) {
        same &= a[i] == b[i];
        differ += a[i] != c[i];
    }
    ok(same, "same seed, same request: same tokens");
    ok(differ > STEPS / 2, "another seed: other tokens (%d of %d differ)",
       differ, STEPS);

    /* the RNG is the sequence's: interleaving with another sequence (a
       batch) changes nothing */
    p.seed = 42;
    sd = make(&p, N);
    llm_sampler_free(&sc);
    p.seed = 43;
    sc = make(&p, N);
    for (int i = 0; i < STEPS; i++) {
        memcpy(row, l, sizeof(row));
        llm_sample(&sc, row, N, NULL);
        memcpy(row, l, sizeof(row));
        d[i] = llm_sample(&sd, row, N, NULL);
        alone &= d[i] == a[i];
    }
    ok(alone, "seed 42 inside a batch == seed 42 alone");

    llm_sampler_free(&sa);
    llm_sampler_free(&sb);
    llm_sampler_free(&sc);
    llm_sampler_free(&sd);
}


static void
test_logprobs(void)
{
    llm_sampling_params p;
    llm_sampler s;
    llm_sample_out out;
    float l[] = { 1.0f, 2.0f, 3.0f, 0.0f, 3.0f };
    double lse = log(exp(1.0) + exp(2.0) + 2 * exp(3.0) + 1.0);
    llm_logit_bias bias[] = { { 0, 20.0f } };
    int good;

    greedy_params(&p);
    p.logprobs = 1;
    p.top_logprobs = 4;
    s = make(&p, 5);
    is_int(llm_sample(&s, l, 5, &out), 2, "logprobs: greedy picks id 2");
    ok(close_to(out.logprob, 3.0 - lse, 1e-6),
       "logprobs: chosen = log_softmax");
    is_int(out.n_top, 4, "top_logprobs: 4 entries");
    ok(out.top[0].token == 2 && out.top[1].token == 4 && out.top[2].token == 1
       && out.top[3].token == 0, "top_logprobs: logprob desc, tie by id asc");
    ok(close_to(out.top[2].logprob, 2.0 - lse, 1e-6)
       && close_to(out.top[3].logprob, 1.0 - lse, 1e-6),
       "top_logprobs: exact values");
    llm_sampler_free(&s);

    /* raw mode ignores bias and temperature (vLLM default, OpenAI) */
    p.temperature = 0.7f;
    p.top_k = 2;
    p.logit_bias = bias;
    p.n_logit_bias = 1;
    p.top_logprobs = 2;
    s = make(&p, 5);
    good = 1;
    for (int i = 0; i < 50; i++) {
        int id = llm_sample(&s, l, 5, &out);

        good &= id == 0;
        good &= close_to(out.logprob, 1.0 - lse, 1e-6);
        good &= out.top[0].token == 2 && out.top[1].token == 4;
    }
    ok(good, "raw logprobs: from the model's logits, not the biased ones");
    llm_sampler_free(&s);

    /* processed mode: the distribution sampled from (T=0.5, top_k=2 keeps
       ids 2 and 4 at x = 0, then 1, 0... : 2 tokens of 1/2) */
    p.n_logit_bias = 0;
    p.temperature = 0.5f;
    p.top_k = 3;
    p.top_logprobs = 5;
    p.logprobs_mode = LLM_LOGPROBS_PROCESSED;
    s = make(&p, 5);
    llm_sample(&s, l, 5, &out);
    {
        double z = 2.0 + exp(-2.0);     /* x = 0, 0, (2 - 3) / 0.5 */

        is_int(out.n_top, 3, "processed: only kept tokens listed");
        ok(out.top[0].token == 2 && out.top[1].token == 4
           && out.top[2].token == 1, "processed: order");
        ok(close_to(out.top[0].logprob, -log(z), 1e-6)
           && close_to(out.top[2].logprob, -2.0 - log(z), 1e-6),
           "processed: log of the truncated, tempered distribution");
    }
    llm_sampler_free(&s);

    /* processed, min_p only (no sort): threshold path */
    p.top_k = 0;
    p.min_p = 0.5f;
    p.temperature = 1.0f;
    s = make(&p, 5);
    llm_sample(&s, l, 5, &out);
    is_int(out.n_top, 2, "processed min_p: 2 kept listed");
    ok(close_to(out.logprob, -log(2.0), 1e-6), "processed min_p: logprob");
    llm_sampler_free(&s);
}


static void
test_params_and_stop(void)
{
    llm_sampling_params p;
    llm_sampler s;
    char err[160];
    int32_t stops[] = { 2, 49152 };

    llm_sampling_params_default(&p);
    p.top_p = 0.0f;
    is_int(llm_sampler_init(&s, &p, 10, err, sizeof(err)), -1,
           "top_p 0 refused");
    is_str(err, "top_p must be in (0, 1], got 0", "top_p 0: message");
    llm_sampling_params_default(&p);
    p.top_logprobs = 21;
    is_int(llm_sampler_init(&s, &p, 10, err, sizeof(err)), -1,
           "top_logprobs 21 refused");
    llm_sampling_params_default(&p);
    p.temperature = -0.1f;
    is_int(llm_sampler_init(&s, &p, 10, err, sizeof(err)), -1,
           "negative temperature refused");
    llm_sampling_params_default(&p);
    p.repetition_penalty = 0.0f;
    is_int(llm_sampler_init(&s, &p, 10, err, sizeof(err)), -1,
           "repetition_penalty 0 refused");

    ok(llm_is_stop_token(49152, stops, 2), "stop id found");
    ok(!llm_is_stop_token(3, stops, 2), "other id is no stop");
    ok(!llm_is_stop_token(2, stops, 0), "empty stop list");

    /* the counts map grows past its first size without losing counts */
    llm_sampling_params_default(&p);
    s = make(&p, 100000);
    for (int i = 0; i < 5000; i++) {
        llm_sampler_accept(&s, i * 17 % 100000);
        llm_sampler_accept(&s, i * 17 % 100000);
    }
    is_int(llm_sampler_count(&s, 4999 * 17 % 100000), 2,
           "counts survive growth");
    is_int(llm_sampler_count(&s, 3), 0, "unseen id counts 0");
    /* ids sharing their low bits */
    for (int i = 0; i < 90; i++) {
        llm_sampler_accept(&s, i * 1024 + 1);
    }
    is_int(llm_sampler_count(&s, 89 * 1024 + 1), 1, "ids 1024 apart counted");
    is_int(llm_sampler_accept(&s, 100000), -1, "out-of-vocab id refused");
    llm_sampler_free(&s);
}


/* ------------------------------------------------------------------------
 * cost per token (diagnostics, not asserted): vocabularies of SmolLM2 and
 * Qwen2, 200 prior output tokens for the penalties
 * ------------------------------------------------------------------------ */

/* CPU time of this thread: other jobs on a shared machine do not count */
static double
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}


static void
bench(void)
{
    static const struct {
        const char *name; float t; int top_k; float top_p; float min_p;
        int logprobs;
    } modes[] = {
        { "greedy", 0.0f, 0, 1.0f, 0.0f, 0 },
        { "T=1", 1.0f, 0, 1.0f, 0.0f, 0 },
        { "T=0.7 top_p=0.9", 0.7f, 0, 0.9f, 0.0f, 0 },
        { "T=0.8 top_k=40", 0.8f, 40, 1.0f, 0.0f, 0 },
        { "T=1 min_p=0.05", 1.0f, 0, 1.0f, 0.05f, 0 },
        { "T=0.7 top_p=0.9 +logprobs 5", 0.7f, 0, 0.9f, 0.0f, 1 },
    };
    int vocabs[] = { 49152, 151936 };
    llm_sampling_params p;
    llm_sample_out out;
    llm_sampler s;

    for (int v = 0; v < 2; v++) {
        int n = vocabs[v], reps = 40;
        float *l = malloc(n * sizeof(*l));

        random_logits(l, n, 2.5f);
        for (int m = 0; m < N_ELEMS(modes); m++) {
            double t0, best;

            llm_sampling_params_default(&p);
            p.has_seed = 1;
            p.temperature = modes[m].t;
            p.top_k = modes[m].top_k;
            p.top_p = modes[m].top_p;
            p.min_p = modes[m].min_p;
            p.frequency_penalty = 0.1f;
            p.logprobs = modes[m].logprobs;
            p.top_logprobs = 5;
            s = make(&p, n);
            for (int i = 0; i < 200; i++) {
                llm_sampler_accept(&s, (i * 7919) % n);
            }
            /* best of 5 rounds: the machine may be busy */
            best = INFINITY;
            for (int round = 0; round < 5; round++) {
                t0 = now_us();
                for (int i = 0; i < reps; i++) {
                    llm_sample(&s, l, n, &out);
                }
                best = fmin(best, (now_us() - t0) / reps);
            }
            printf("# vocab %6d  %-28s %7.1f us/token\n", n, modes[m].name,
                   best);
            llm_sampler_free(&s);
        }
        free(l);
    }
}


/* ------------------------------------------------------------------------
 * speculative drafts: llm_sample_draft draws from the same distribution as
 * llm_sample whatever the draft (a likely one, a middling one, one that
 * truncation drops), on both draw paths (listed candidates, block masses)
 * ------------------------------------------------------------------------ */

#define SPEC_N      40000
#define SPEC_VOCAB  1000

/* the token with the k-th largest probability */
static int
kth_token(const float *probs, int n, int k)
{
    int best = -1;

    for (int r = 0; r <= k; r++) {
        int b = -1;

        for (int i = 0; i < n; i++) {
            if ((best < 0 || probs[i] < probs[best]
                 || (probs[i] == probs[best] && i > best))
                && (b < 0 || probs[i] > probs[b]))
            {
                b = i;
            }
        }
        best = b;
    }
    return best;
}


/* every one of the 12 likeliest tokens and the draft: its frequency within
   5 standard deviations (+1e-3) of its probability */
static int
matches(const int *hist, const float *probs, int n, int draft)
{
    int ok_all = 1;

    for (int k = 0; k <= 12; k++) {
        int t = k < 12 ? kth_token(probs, n, k) : draft;
        double p = probs[t], f = (double) hist[t] / SPEC_N;

        if (fabs(f - p) > 5.0 * sqrt(p * (1 - p) / SPEC_N) + 1e-3) {
            printf("#   token %d: frequency %.4f, probability %.4f\n", t, f,
                   p);
            ok_all = 0;
        }
    }
    return ok_all;
}


static void
test_speculative(void)
{
    static float l[SPEC_VOCAB], probs[SPEC_VOCAB];
    static int hist[SPEC_VOCAB];
    static const char *names[] = { "no truncation", "top_k 20",
                                   "top_p 0.9", "min_p 0.05" };
    llm_sampling_params p;
    llm_sampler s, s2;
    int draft, drafts[3], same = 1, got;

    lcg_state = 777;
    random_logits(l, SPEC_VOCAB, 1.5f);
    for (int c = 0; c < 4; c++) {
        llm_sampling_params_default(&p);
        p.temperature = 0.9f;
        p.has_seed = 1;
        p.seed = 42 + c;
        p.top_k = c == 1 ? 20 : 0;
        p.top_p = c == 2 ? 0.9f : 1.0f;
        p.min_p = c == 3 ? 0.05f : 0.0f;
        s = make(&p, SPEC_VOCAB);
        llm_sampler_distribution(&s, l, SPEC_VOCAB, probs);
        drafts[0] = kth_token(probs, SPEC_VOCAB, 0);
        drafts[1] = kth_token(probs, SPEC_VOCAB, 3);
        drafts[2] = kth_token(probs, SPEC_VOCAB, SPEC_VOCAB - 1);
        for (int d = 0; d < 3; d++) {
            draft = drafts[d];
            memset(hist, 0, sizeof(hist));
            for (int i = 0; i < SPEC_N; i++) {
                got = llm_sample_draft(&s, l, SPEC_VOCAB, draft, NULL);
                if (got < 0 || got >= SPEC_VOCAB) {
                    break;
                }
                hist[got]++;
            }
            ok(matches(hist, probs, SPEC_VOCAB, draft),
               "draft %s, %s: %d draws follow the distribution (p(draft) "
               "%.4f, drawn %.4f)", d == 0 ? "likeliest" : d == 1
               ? "4th" : "least likely", names[c], SPEC_N, probs[draft],
               (double) hist[draft] / SPEC_N);
        }
        llm_sampler_free(&s);
    }

    /* seeded: the same draws again */
    llm_sampling_params_default(&p);
    p.temperature = 1.0f;
    p.has_seed = 1;
    p.seed = 9;
    s = make(&p, SPEC_VOCAB);
    s2 = make(&p, SPEC_VOCAB);
    for (int i = 0; i < 2000; i++) {
        same = same && llm_sample_draft(&s, l, SPEC_VOCAB, i % 7, NULL)
                       == llm_sample_draft(&s2, l, SPEC_VOCAB, i % 7, NULL);
    }
    ok(same, "seeded speculative draws are reproducible");
    llm_sampler_free(&s);
    llm_sampler_free(&s2);

    /* greedy: the argmax whatever the draft; bad draft ids refused */
    greedy_params(&p);
    s = make(&p, SPEC_VOCAB);
    got = 0;
    for (int i = 1; i < SPEC_VOCAB; i++) {
        got = l[i] > l[got] ? i : got;
    }
    is_int(llm_sample_draft(&s, l, SPEC_VOCAB, drafts[2], NULL), got,
           "greedy: the argmax, not the draft");
    is_int(llm_sample_draft(&s, l, SPEC_VOCAB, -1, NULL), -1,
           "draft -1 refused");
    is_int(llm_sample_draft(&s, l, SPEC_VOCAB, SPEC_VOCAB, NULL), -1,
           "draft past the vocabulary refused");
    llm_sampler_free(&s);
}


int
main(void)
{
    test_greedy();
    test_temperature();
    test_truncation();
    test_against_reference();
    test_selection_sweep();
    test_penalties();
    test_logit_bias();
    test_seed();
    test_logprobs();
    test_params_and_stop();
    test_speculative();
    bench();
    return tap_done();
}
