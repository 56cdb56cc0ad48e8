/*
 * Matrix multiplication of activations by a (quantized) weight matrix,
 * the CPU backend's one heavy kernel.
 *
 * Design note. out(n_x, rows) = x(n_x, cols) @ W^T, W stored as in GGUF:
 * `rows` output features, each a row of `cols` input features in the
 * weight's own format. Activations are quantized once per call to blocks
 * matching W's (Q4_0/Q4_1/Q8_0: 32-element q8a blocks; Q4_K/Q6_K: 256-
 * element q8k blocks; F32/F16/BF16 weights see float activations), then
 * threads take tiles of weight rows and dot each with all n_x activation
 * rows while the tile is in cache, so a batch costs far less than n_x
 * single calls.
 *
 * Numerics (docs/numerics.md, rule 1). Every out[i][r] is computed by the same sequence
 * of operations whatever n_x, the row's place in the batch, the thread
 * count or the instruction set (scalar, AVX2, AVX-512): block sums are
 * exact integers and the float accumulation order is fixed by design
 * (docs/kernels.md), so batched == unbatched bit for bit and results are
 * the same on every x86-64 machine.
 *
 * The matrix (llm_tensor) and its views are in tensor.h, the instruction
 * set the kernels run in isa.h.
 *
 * defines: llm_tensor_check, llm_matmul, llm_matmul_ld, llm_act,
 *          llm_act_size, llm_act_make, llm_matmul_act, llm_matmul_ref
 */
#ifndef NGX_LLM_MATMUL_H
#define NGX_LLM_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"
#include "threadpool.h"

/* 0 if w can be multiplied (supported type, cols block-aligned, stride
 * large enough); otherwise -1 and one message in err */
int llm_tensor_check(const llm_tensor *w, char *err, size_t err_len);

/*
 * out[i * w->rows + r] = sum_c x[i * w->cols + c] * W[r][c]
 * for i < n_x, r < w->rows. tp may be NULL (single thread). 0, or -1 when
 * the calling thread's activation scratch cannot grow (alloc.h): then out
 * is untouched. An invalid w (llm_tensor_check) aborts with a message: a
 * bug, not a condition; check at load time.
 */
int llm_matmul(llm_threadpool *tp, float *out, const float *x, int n_x,
    const llm_tensor *w);

/* the same with an explicit leading dimension for x and out (elements
 * between consecutive rows), e.g. to write into a slice of a wider buffer */
int llm_matmul_ld(llm_threadpool *tp, float *out, size_t ld_out,
    const float *x, size_t ld_x, int n_x, const llm_tensor *w);

/*
 * Activations prepared once for several products with the same input: the
 * q, k and v projections, or row ranges of one matrix run by different
 * threads. llm_act_make quantizes (and packs) n_x rows of x as w's kernels
 * want them into buf (llm_act_size(w, n_x) bytes, 64-byte aligned, which
 * also hold its packing scratch: it allocates nothing; for float weights
 * x itself is used and must stay valid); llm_matmul_act is
 * llm_matmul_ld on one thread from those activations, for any w (or row
 * view of one) with the same type and cols. Results equal llm_matmul's
 * bit for bit.
 */
typedef struct {
    uint32_t        type;       /* the weights' type they were made for */
    int             pack;       /* and their packing */
    int             cols;
    int             n_x;
    const uint8_t  *data;
    size_t          stride;
} llm_act;

size_t llm_act_size(const llm_tensor *w, int n_x);
void llm_act_make(llm_act *a, void *buf, const float *x, size_t ld_x,
    int n_x, const llm_tensor *w);
void llm_matmul_act(float *out, size_t ld_out, const llm_act *a,
    const llm_tensor *w);

/* test reference: dequantize each weight row and accumulate in double,
 * with float activations (no activation quantization); 0, or -1 when out
 * of memory for one dequantized row */
int llm_matmul_ref(float *out, const float *x, int n_x, const llm_tensor *w);

#endif
