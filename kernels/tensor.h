/*
 * A weight matrix as the kernels read it (llm_tensor): data, element type,
 * shape, row stride and packing; views of its rows or columns; the packed
 * layout of the quant types (pack.c).
 *
 * defines: llm_tensor, LLM_PACK_ROWS, llm_pack_useful, llm_pack_size,
 *          llm_pack, llm_pack_row, llm_tensor_make, llm_tensor_cols,
 *          llm_tensor_rows
 */
#ifndef NGX_LLM_TENSOR_H
#define NGX_LLM_TENSOR_H

#include <stddef.h>
#include <stdint.h>

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
 * Packed weights (Q4_0, Q4_1, Q8_0, Q5_0, IQ4_NL, MXFP4; Q4_K, Q5_K, Q6_K,
 * IQ4_XS per super-block, each part of the block so: pack.c): 16 rows
 * interleaved block by block,
 * so that one 64-byte vector holds the same 4-byte group of 16 rows and
 * the kernels need no transposes: per group of 16 rows and per block,
 * the 16 scales d (f16; MXFP4's 16 E8M0 bytes), Q4_1's 16 minimums m (f16), then the quants as
 * vectors of 16 dwords (lane l: row l's bytes 4k..4k+3; Q8_0's stored as
 * w + 128, unsigned; Q5_0's fifth bits as byte masks, pack.c). The canonical order of every output is unchanged:
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
/* row r of a packed matrix as stored in GGUF, into dst (its row bytes) */
void llm_pack_row(const llm_tensor *p, int r, void *dst);

/* a whole contiguous matrix as stored in GGUF (ne[0] = cols, ne[1] = rows) */
llm_tensor llm_tensor_make(const void *data, uint32_t type, int rows,
    int cols);

/* the input features col0..col0+n-1 (a tensor-parallel shard of a
 * row-split O or down projection); col0 and n must be block-aligned */
llm_tensor llm_tensor_cols(const llm_tensor *w, int col0, int n);

/* the output features row0..row0+n-1 (a column-split QKV / gate / up) */
llm_tensor llm_tensor_rows(const llm_tensor *w, int row0, int n);

#endif
