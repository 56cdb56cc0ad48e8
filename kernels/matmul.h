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
 * defines: llm_tensor, llm_tensor_make, llm_tensor_cols, llm_tensor_rows,
 *          llm_tensor_check, llm_matmul, llm_matmul_ref, llm_kernels_isa*
 */
#ifndef NGX_LLM_MATMUL_H
#define NGX_LLM_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "threadpool.h"

/* a weight matrix or a view of one (no ownership) */
typedef struct {
    const void  *data;         /* row 0, first column of the view */
    uint32_t     type;         /* enum ggml_type */
    int          rows;         /* output features */
    int          cols;         /* input features, a multiple of the block */
    size_t       row_stride;   /* bytes from one row to the next; packed:
                                  from one group of 16 rows to the next */
    int          pack;         /* 0: rows as stored in GGUF; LLM_PACK_ROWS:
                                  rows interleaved by 16 (llm_pack) */
} llm_tensor;

/*
 * Packed weights (Q4_0, Q4_1, Q8_0): 16 rows interleaved block by block,
 * so that one 64-byte vector holds the same 4-byte group of 16 rows and
 * the kernels need no transposes: per group of 16 rows and per block,
 * the 16 scales d (f16), Q4_1's 16 minimums m (f16), then the quants as
 * vectors of 16 dwords (lane l: row l's bytes 4k..4k+3; Q8_0's stored as
 * w + 128, unsigned). The canonical order of every output is unchanged:
 * a packed matrix gives the bits of the same matrix unpacked. Row views
 * of a packed matrix start at a multiple of 16 rows.
 */
#define LLM_PACK_ROWS  16

/* 1 if llm_pack takes w's type (and the CPU has the kernels that make
 * packing pay: AVX-512), else 0 */
int llm_pack_useful(const llm_tensor *w);
/* bytes of w packed (its rows rounded up to 16) */
size_t llm_pack_size(const llm_tensor *w);
/* w (any unpacked view of a packable type) into dst (llm_pack_size
 * bytes, 64-byte aligned); *out is the packed matrix */
void llm_pack(const llm_tensor *w, void *dst, llm_tensor *out);

/* a whole contiguous matrix as stored in GGUF (ne[0] = cols, ne[1] = rows) */
llm_tensor llm_tensor_make(const void *data, uint32_t type, int rows,
    int cols);

/* the input features col0..col0+n-1 (a tensor-parallel shard of a
 * row-split O or down projection); col0 and n must be block-aligned */
llm_tensor llm_tensor_cols(const llm_tensor *w, int col0, int n);

/* the output features row0..row0+n-1 (a column-split QKV / gate / up) */
llm_tensor llm_tensor_rows(const llm_tensor *w, int row0, int n);

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

/* instruction set used by llm_matmul: chosen once from the CPU (the
 * environment variable LLM_ISA=scalar|avx2|avx512 can lower it) */
enum { LLM_ISA_SCALAR = 0, LLM_ISA_AVX2 = 1, LLM_ISA_AVX512 = 2 };
int llm_kernels_isa(void);
const char *llm_kernels_isa_name(int isa);
/* for tests and benches: 0, or -1 if this CPU cannot run isa */
int llm_kernels_set_isa(int isa);

#endif
