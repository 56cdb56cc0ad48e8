/*
 * GGUF v3 writer (gguf_write.h).
 */
#include <string.h>

#include "format/gguf.h"
#include "model/gguf_write.h"


void
gguf_w_bytes(gguf_writer *w, const void *p, size_t n)
{
    if (n > 0 && w->f != NULL && fwrite(p, 1, n, w->f) != n) {
        w->failed = 1;
    }
    w->pos += n;
}


void
gguf_w_u32(gguf_writer *w, uint32_t v)
{
    gguf_w_bytes(w, &v, 4);
}


void
gguf_w_u64(gguf_writer *w, uint64_t v)
{
    gguf_w_bytes(w, &v, 8);
}


void
gguf_w_str(gguf_writer *w, const char *s)
{
    gguf_w_u64(w, strlen(s));
    gguf_w_bytes(w, s, strlen(s));
}


void
gguf_w_pad(gguf_writer *w, uint64_t align)
{
    static const uint8_t zero[64];

    while (w->pos % align) {
        uint64_t n = align - w->pos % align;
        gguf_w_bytes(w, zero, n > sizeof(zero) ? sizeof(zero) : n);
    }
}


void
gguf_w_kv_u32(gguf_writer *w, const char *key, uint32_t v)
{
    gguf_w_str(w, key);
    gguf_w_u32(w, GGUF_TYPE_UINT32);
    gguf_w_u32(w, v);
}


void
gguf_w_kv_f32(gguf_writer *w, const char *key, float v)
{
    gguf_w_str(w, key);
    gguf_w_u32(w, GGUF_TYPE_FLOAT32);
    gguf_w_bytes(w, &v, 4);
}


void
gguf_w_kv_bool(gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;

    gguf_w_str(w, key);
    gguf_w_u32(w, GGUF_TYPE_BOOL);
    gguf_w_bytes(w, &b, 1);
}


void
gguf_w_kv_str(gguf_writer *w, const char *key, const char *s)
{
    gguf_w_str(w, key);
    gguf_w_u32(w, GGUF_TYPE_STRING);
    gguf_w_str(w, s);
}


void
gguf_w_kv_raw(gguf_writer *w, const char *key, uint32_t type,
    const void *raw, uint64_t len)
{
    gguf_w_str(w, key);
    gguf_w_u32(w, type);
    gguf_w_bytes(w, raw, len);
}


void
gguf_w_tensor_info(gguf_writer *w, const char *name, uint32_t n_dims,
    const uint64_t *ne, uint32_t type, uint64_t offset)
{
    gguf_w_str(w, name);
    gguf_w_u32(w, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) {
        gguf_w_u64(w, ne[d]);
    }
    gguf_w_u32(w, type);
    gguf_w_u64(w, offset);
}
