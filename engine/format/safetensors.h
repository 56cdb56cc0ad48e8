/*
 * safetensors reader: the tensor index of one Hugging Face *.safetensors
 * file, read from an mmap (or any memory buffer, for fuzzing).
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype": "BF16", "shape": [rows, cols], "data_offsets":
 * [begin, end]}, ..., "__metadata__": {...}}), then the raw tensor bytes,
 * offsets counted from the end of the header.
 *
 * Nothing here trusts the file (as gguf.c): the header length is bounded,
 * every shape, dtype and offset range is checked against the buffer, and a
 * fault gives one message "<path>: <what is wrong>" (naming the tensor when
 * one is at fault) in st_file.err. Only F32, F16, BF16 and U8 are
 * accepted; the first three are reported as the ggml type numbers the
 * kernels already handle (F32 = 0, F16 = 1, BF16 = 30), so weights are
 * used in place, never converted. U8 (raw bytes: gpt-oss's MXFP4
 * *_blocks and *_scales) is ST_TYPE_U8, no ggml type; the model loader
 * accepts it only there (model/gpt_oss.c).
 *
 * defines: st_open, st_open_at, st_parse, st_close, st_find
 */
#ifndef NGX_LLM_SAFETENSORS_H
#define NGX_LLM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS         4
#define ST_MAX_HEADER       (100u << 20)   /* the format's own limit */
#define ST_MAX_TENSORS      (1u << 20)
#define ST_TYPE_U8          0x100u         /* outside ggml's numbers */

typedef struct {
    char            *name;         /* NUL-terminated copy */
    uint32_t         type;         /* ggml type: F32, F16 or BF16; or
                                      ST_TYPE_U8 */
    uint32_t         n_dims;       /* 0 (scalar) .. ST_MAX_DIMS */
    uint64_t         shape[ST_MAX_DIMS];  /* HF order: shape[n_dims-1] is
                                             the fastest (row length) */
    const void      *data;         /* inside the buffer, checked in bounds */
    uint64_t         nbytes;
} st_tensor;

typedef struct {
    char            *path;
    const uint8_t   *base;         /* the mapping (or caller's buffer) */
    size_t           size;
    int              mapped;       /* base was mmapped by us */
    uint64_t         n_tensors;
    st_tensor       *tensors;
    char             err[512];     /* "<path>: <fault>" after a failure */
} st_file;

/*
 * 0 on success; -1 with f->err set. f is always safe to st_close().
 * st_open_at opens name relative to the directory descriptor dirfd
 * (AT_FDCWD for the current directory) and closes its own descriptor once
 * mapped. st_parse reads a caller's buffer, which must outlive f.
 */
int st_open(st_file *f, const char *path);
int st_open_at(st_file *f, int dirfd, const char *name,
    const char *path_for_messages);
int st_parse(st_file *f, const uint8_t *buf, size_t len,
    const char *name_for_messages);
void st_close(st_file *f);

const st_tensor *st_find(const st_file *f, const char *name);

#endif
