/*
 * Views of a weight matrix: the whole of it as GGUF stores it, a range
 * of its input features or of its output features. No copy, no
 * ownership; a range that is not block-aligned is a bug and aborts.
 */
#include <stdio.h>
#include <stdlib.h>

#include "quant.h"
#include "tensor.h"
#include "tensor_type.h"


llm_tensor
llm_tensor_make(const void *data, uint32_t type, int rows, int cols)
{
    llm_tensor w = { data, type, rows, cols, 0, 0 };
    int blk = llm_quant_block(type);

    if (blk > 0) {
        w.row_stride = (size_t) (cols / blk) * llm_quant_block_bytes(type);
    }
    return w;
}


llm_tensor
llm_tensor_cols(const llm_tensor *w, int col0, int n)
{
    llm_tensor v = *w;
    int blk = llm_quant_block(w->type);

    if (blk == 0 || col0 % blk || n % blk || col0 < 0 || col0 + n > w->cols) {
        fprintf(stderr, "llm_tensor_cols: columns %d..%d of a %s matrix "
                "with %d columns are not a block-aligned range\n", col0,
                col0 + n, ggml_type_name(w->type), w->cols);
        abort();
    }
    v.data = (const uint8_t *) w->data
             + (size_t) (col0 / blk) * llm_quant_block_bytes(w->type)
               * (w->pack ? LLM_PACK_ROWS : 1);
    v.cols = n;
    return v;
}


llm_tensor
llm_tensor_rows(const llm_tensor *w, int row0, int n)
{
    llm_tensor v = *w;

    if (row0 < 0 || n < 0 || row0 + n > w->rows
        || (w->pack && row0 % w->pack != 0))
    {
        fprintf(stderr, "llm_tensor_rows: rows %d..%d of a matrix with %d "
                "rows%s\n", row0, row0 + n, w->rows,
                w->pack ? " packed by 16" : "");
        abort();
    }
    v.data = (const uint8_t *) w->data
             + (size_t) (w->pack ? row0 / w->pack : row0) * w->row_stride;
    v.rows = n;
    return v;
}
