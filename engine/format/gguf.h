/*
 * GGUF v3 reader: metadata key/values and the tensor index of a llama.cpp
 * model file, read from an mmap (or any memory buffer, for fuzzing).
 *
 * Nothing here trusts the file: every length, count, offset and shape is
 * checked against the buffer before use, and a fault gives one message of
 * the form "<path>: <what is wrong>" in gguf_file.err. The reader is used
 * both by the engine (weights) and by nginx at config time (tokenizer and
 * chat template), so it allocates with malloc and frees everything in
 * gguf_close().
 *
 * defines: gguf_open, gguf_open_fd, gguf_parse, gguf_close, gguf_find_kv,
 *          gguf_get_*, gguf_arr_str, gguf_find_tensor, gguf_kv_raw (the
 *          tensor types:
 *          kernels/tensor_type.h)
 */
#ifndef NGX_LLM_GGUF_H
#define NGX_LLM_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "tensor_type.h"     /* enum ggml_type, ggml_type_*, ggml_row_size */

/* metadata value types (GGUF spec) */
enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
};

#define GGUF_MAX_DIMS  4

typedef struct {
    char            *key;          /* NUL-terminated copy */
    uint32_t         type;         /* enum gguf_type */
    uint32_t         arr_type;     /* element type when type == ARRAY */
    uint64_t         n;            /* elements (1 for scalars, bytes for
                                      a STRING scalar) */
    const uint8_t   *data;         /* value bytes inside the buffer; for a
                                      string array: the first length prefix */
    uint64_t        *str_off;      /* string arrays: offset of each string's
                                      length prefix from data (n entries) */
} gguf_kv;

typedef struct {
    char            *name;         /* NUL-terminated copy */
    uint32_t         n_dims;
    uint64_t         ne[GGUF_MAX_DIMS];   /* ne[0] = row length (fastest) */
    uint32_t         type;         /* enum ggml_type */
    uint64_t         offset;       /* from the start of the data section */
    const void      *data;         /* inside the buffer, checked in bounds */
    uint64_t         nbytes;
} gguf_tensor;

typedef struct {
    char            *path;
    int              fd;           /* -1 when parsed from memory */
    const uint8_t   *base;         /* the mapping (or caller's buffer) */
    size_t           size;
    int              mapped;       /* base was mmapped by us */
    uint32_t         version;
    uint64_t         n_kv;
    gguf_kv         *kv;
    uint64_t         n_tensors;
    gguf_tensor     *tensors;
    uint64_t         alignment;    /* general.alignment, default 32 */
    const uint8_t   *data_start;   /* tensor data section */
    char             err[512];     /* "<path>: <fault>" after a failure */
} gguf_file;

/* 0 on success; -1 with g->err set. g is always safe to gguf_close().
 * gguf_open_fd maps fd and leaves it open (the caller owns it; the mapping
 * outlives it); gguf_open closes its own descriptor once mapped (g->fd is
 * then -1). gguf_parse reads a caller's buffer, which must outlive g. */
int gguf_open(gguf_file *g, const char *path);
int gguf_open_fd(gguf_file *g, int fd, const char *path_for_messages);
int gguf_parse(gguf_file *g, const uint8_t *buf, size_t len,
    const char *name_for_messages);
void gguf_close(gguf_file *g);

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);

/*
 * Typed getters: 0 on success, -1 when missing or of another type (integer
 * getters accept any integer type whose value fits). Strings are returned
 * as pointer + length into the buffer, not NUL-terminated.
 */
int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out);
int gguf_get_u64(const gguf_file *g, const char *key, uint64_t *out);
int gguf_get_f32(const gguf_file *g, const char *key, float *out);
int gguf_get_bool(const gguf_file *g, const char *key, int *out);
int gguf_get_str(const gguf_file *g, const char *key, const char **s,
    uint64_t *len);
/* arrays: element type and count; data points at the first element */
int gguf_get_arr(const gguf_file *g, const char *key, uint32_t *elem_type,
    uint64_t *n, const void **data);
/* i-th string of a string array */
int gguf_arr_str(const gguf_kv *kv, uint64_t i, const char **s,
    uint64_t *len);

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

/* the stored bytes of kv's value as they follow its type field (a
 * string's length prefix, an array's element type and count included),
 * for copying metadata into another file */
void gguf_kv_raw(const gguf_kv *kv, const uint8_t **start, uint64_t *len);

#endif
