/*
 * GGUF v3 writer: what the quantizer (quantize.c) and the synthetic-model
 * maker (synth.c) write, streamed through one stdio FILE. The writer
 * counts the bytes it wrote (pos), so the tensor data can be aligned; the
 * first failed write sticks in `failed`, checked once at the end. A writer
 * without a FILE only counts.
 *
 * defines: gguf_writer, gguf_w_bytes, gguf_w_u32, gguf_w_u64, gguf_w_str,
 *          gguf_w_pad, gguf_w_kv_u32, gguf_w_kv_f32, gguf_w_kv_bool,
 *          gguf_w_kv_str, gguf_w_kv_raw, gguf_w_tensor_info
 */
#ifndef NGX_LLM_GGUF_WRITE_H
#define NGX_LLM_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE        *f;
    uint64_t     pos;           /* bytes written so far */
    int          failed;        /* a write failed */
} gguf_writer;

void gguf_w_bytes(gguf_writer *w, const void *p, size_t n);
void gguf_w_u32(gguf_writer *w, uint32_t v);
void gguf_w_u64(gguf_writer *w, uint64_t v);
void gguf_w_str(gguf_writer *w, const char *s);        /* u64 length, bytes */
void gguf_w_pad(gguf_writer *w, uint64_t align);       /* zeros to align */

/* one metadata key/value (enum gguf_type of format/gguf.h) */
void gguf_w_kv_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_kv_f32(gguf_writer *w, const char *key, float v);
void gguf_w_kv_bool(gguf_writer *w, const char *key, int v);
void gguf_w_kv_str(gguf_writer *w, const char *key, const char *s);
/* a value copied from another file: its type and its stored bytes
 * (gguf_kv_raw) */
void gguf_w_kv_raw(gguf_writer *w, const char *key, uint32_t type,
    const void *raw, uint64_t len);

/* one tensor index entry: name, dims, ne (ne[0] = row length), ggml type,
 * offset in the data section */
void gguf_w_tensor_info(gguf_writer *w, const char *name, uint32_t n_dims,
    const uint64_t *ne, uint32_t type, uint64_t offset);

#endif
