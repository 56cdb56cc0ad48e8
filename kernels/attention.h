/*
 * Causal attention over a paged KV cache, in tiles of 16 positions.
 *
 * Design note. A query at position p attends to the cached positions
 * t0..p of its sequence (t0 > 0 only with a sliding window). Positions
 * are taken in tiles of LLM_ATT_TILE aligned to absolute positions (tile
 * c holds 16c..16c+15), with an online softmax across tiles, as flash
 * attention does: per tile 16 scores at once, their exponentials, and
 * the running (max, sum, output) rescaled once. The canonical order of
 * one query's operations (llm_attention_ref is its definition, written
 * plainly) depends only on the query, its positions and the cache:
 *
 *   m = -inf, l = 0, o[hd] = 0
 *   per tile c with a position in t0..p, ascending:
 *     per lane j (position t = 16c + j), if t0 <= t <= p:
 *       a[r] = fmaf chain over d = r, r + 4, ... (r = 0..3) of q[d] k_t[d]
 *       s_j = ((a[0] + a[1]) + (a[2] + a[3])) * scale, else s_j = -inf
 *     mn = max(m, max_j s_j); alpha = llm_att_exp(m - mn)
 *     p_j = llm_att_exp(s_j - mn) (0 where s_j = -inf)
 *     l = fmaf(l, alpha, hsum16(p)), hsum16 a fixed pairwise tree
 *     o[d] = o[d] * alpha, then o[d] = fmaf(p_j, v_t[d], o[d]) for the
 *     lanes j in t0..p, ascending; m = mn
 *   out[d] = o[d] / l
 *
 * ...per span. Positions are cut into spans of LLM_ATT_SPAN (span k holds
 * 256k..256k+255, whole tiles): each span with a position in t0..p
 * gets the loop above from m = -inf, l = 0, o = 0 over its own tiles,
 * and the spans' (m_k, l_k, o_k) are merged in ascending order, the
 * first taken as it is (llm_att_merge):
 *
 *   mn = max(M, m_k); a = llm_att_exp(M - mn); b = llm_att_exp(m_k - mn)
 *   L = fmaf(L, a, l_k * b); O[d] = fmaf(O[d], a, o_k[d] * b); M = mn
 *
 * and out[d] = O[d] / L. An attention sink (gpt-oss: a learned logit
 * per head that takes its share of the softmax's denominator and adds
 * nothing to the output) is merged last, as a span of one position with
 * m = sink, l = 1, o = 0 (llm_att_sink):
 *
 *   mn = max(M, sink); a = llm_att_exp(M - mn)
 *   L = fmaf(L, a, llm_att_exp(sink - mn)); O[d] = O[d] * a; M = mn
 *
 * one scalar function that every kernel's caller runs, so the kernels
 * agree with sinks as they do without. Within one span (up to 256 positions) this is
 * the single loop exactly. Spans let one decode token's attention over a
 * long context run on every thread (llm_attention_span, one span an item)
 * while a prefill, which has items enough, does the same spans in turn.
 *
 * A query's result is therefore the same whichever other queries share
 * its call, so a prefill (many queries of a sequence per call, sharing
 * every K and V load) equals decode (one query) bit for bit, and the
 * AVX-512 kernel equals the reference: the numerics rule of
 * docs/numerics.md.
 *
 * Cache layout the kernels read (one block of block_size positions, one
 * layer): K transposed, (kv_dim, block_size), so a tile's 16 values of
 * one dimension are one vector; V as (block_size, kv_dim). f16 or f32.
 *
 * defines: llm_att_seq, llm_att_query, llm_attention, llm_attention_ref,
 *          llm_attention_span, llm_att_span_used, llm_att_merge,
 *          llm_att_sink,
 *          llm_att_finish, llm_att_exp, LLM_ATT_TILE, LLM_ATT_SPAN,
 *          LLM_ATT_PART, LLM_ATT_MAX_Q
 */
#ifndef NGX_LLM_ATTENTION_H
#define NGX_LLM_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#define LLM_ATT_TILE   16     /* positions per tile */
#define LLM_ATT_MAX_Q  12     /* queries per call */
#define LLM_ATT_MAX_HD 512    /* head_dim the kernels take */
#define LLM_ATT_SPAN   256    /* positions per span, whole tiles */

/* floats of one query's state over a span: o[hd], then m and l */
#define LLM_ATT_PART(hd)  ((hd) + 2)

/* one sequence's cache, one layer, one kv head */
typedef struct {
    const uint8_t  *pool;         /* block 0 */
    size_t          block_bytes;  /* from one block to the next */
    size_t          k_off;        /* from a block to this layer's K */
    size_t          v_off;        /* from a block to this layer's V */
    const int32_t  *table;        /* the sequence's block ids */
    int             block_size;   /* positions per block, a multiple of
                                     LLM_ATT_TILE */
    int             kv_dim;       /* values per position (every kv head) */
    int             f16;          /* values are f16 (else f32) */
    int             head_off;     /* the kv head's first value */
    int             hd;           /* head_dim, 1..LLM_ATT_MAX_HD */
} llm_att_seq;

typedef struct {
    const float    *q;            /* (hd) */
    float          *out;          /* (hd) */
    int             t0, p;        /* positions t0..p, t0 <= p */
    const float    *sink;         /* the head's sink logit (gpt-oss), or
                                     NULL: none */
} llm_att_query;

/* out of every query (nq <= LLM_ATT_MAX_Q) on the best kernel for this
 * CPU (llm_kernels_isa: AVX-512, else the reference) */
void llm_attention(const llm_att_seq *s, const llm_att_query *q, int nq,
    float scale);

/* the definition above, one query at a time, scalar */
void llm_attention_ref(const llm_att_seq *s, const llm_att_query *q, int nq,
    float scale);

/* the state of every query over span k only, into part[i *
 * LLM_ATT_PART(hd)]; a query with no position of t0..p in the span gets
 * m = -inf, l = 0, o = 0 and is not to be merged (llm_att_span_used) */
void llm_attention_span(const llm_att_seq *s, const llm_att_query *q,
    int nq, float scale, int k, float *part);

/* span k has a position of the query */
int llm_att_span_used(const llm_att_query *q, int k);

/* acc merged with the sink: a span of one position whose score is sink
 * and whose value is 0, merged after every real span */
void llm_att_sink(float *acc, float sink, int hd);

/* acc = part (first) or acc merged with part (the spans in ascending
 * order); out = acc's o / l */
void llm_att_merge(float *acc, const float *part, int hd, int first);
void llm_att_finish(const float *acc, float *out, int hd);

/* e^x for x <= 0 (0 below -87, and for -inf): the exponential both
 * kernels compute, operation for operation */
float llm_att_exp(float x);

#endif
