/*
 * GGUF reader: the tiny260K files (tools/fixtures.py) and SmolLM2 parse
 * and give the known metadata; corrupted or truncated copies (made in
 * memory) fail with a message naming the fault, and never crash.
 */
#include "tap.h"
#include "format/gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *model_path;


static int
str_eq(const char *s, uint64_t len, const char *want)
{
    return len == strlen(want) && memcmp(s, want, len) == 0;
}


static void
test_tiny260k(const char *type_name, uint32_t embd_type)
{
    char                path[1200], rel[64];
    gguf_file           g;
    const gguf_tensor  *t;
    const gguf_kv      *kv;
    const char         *s;
    uint64_t            len, n;
    uint32_t            u, et;
    float               f;
    const void         *data;

    snprintf(rel, sizeof(rel), "models/tiny260K-%s.gguf", type_name);
    tap_fixture(path, sizeof(path), rel);
    if (!ok(gguf_open(&g, path) == 0, "%s parses", type_name)) {
        printf("#   %s\n", g.err);
        gguf_close(&g);
        return;
    }
    is_int(g.version, 3, "%s: version", type_name);
    is_int(g.n_tensors, 47, "%s: 47 tensors", type_name);
    is_int(g.n_kv, 21, "%s: 21 key/values", type_name);
    ok(gguf_get_str(&g, "general.architecture", &s, &len) == 0
       && str_eq(s, len, "llama"), "%s: architecture llama", type_name);
    ok(gguf_get_u32(&g, "llama.embedding_length", &u) == 0 && u == 64,
       "%s: embedding_length 64", type_name);
    ok(gguf_get_u32(&g, "llama.attention.head_count_kv", &u) == 0 && u == 4,
       "%s: head_count_kv 4", type_name);
    ok(gguf_get_f32(&g, "llama.rope.freq_base", &f) == 0 && f == 10000.0f,
       "%s: rope.freq_base 10000", type_name);
    ok(gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &f) == 0
       && f == 1e-5f, "%s: rms epsilon 1e-5", type_name);
    ok(gguf_get_u32(&g, "general.architecture", &u) == -1,
       "%s: a string is not a u32", type_name);
    ok(gguf_get_arr(&g, "tokenizer.ggml.tokens", &et, &n, &data) == 0
       && et == GGUF_TYPE_STRING && n == 512, "%s: 512 tokens", type_name);
    kv = gguf_find_kv(&g, "tokenizer.ggml.tokens");
    ok(gguf_arr_str(kv, 1, &s, &len) == 0 && str_eq(s, len, "<s>"),
       "%s: token 1 is <s>", type_name);
    ok(gguf_arr_str(kv, 300, &s, &len) == 0
       && str_eq(s, len, "al"), "%s: token 300", type_name);
    ok(gguf_arr_str(kv, 512, &s, &len) == -1, "%s: token 512 is out of range",
       type_name);

    t = gguf_find_tensor(&g, "token_embd.weight");
    ok(t != NULL && t->type == embd_type && t->n_dims == 2 && t->ne[0] == 64
       && t->ne[1] == 512 && t->offset == 0
       && (const uint8_t *) t->data == g.base + 14176
       && t->nbytes == ggml_row_size(embd_type, 64) * 512,
       "%s: token_embd.weight is %s (64, 512) at byte 14176", type_name,
       ggml_type_name(embd_type));
    ok(gguf_find_tensor(&g, "output.weight") == NULL,
       "%s: no output.weight (tied)", type_name);
    t = gguf_find_tensor(&g, "blk.4.ffn_down.weight");
    ok(t != NULL && t->ne[0] == 172 && t->ne[1] == 64,
       "%s: blk.4.ffn_down.weight is (172, 64)", type_name);
    gguf_close(&g);
}


static void
test_smollm2(void)
{
    gguf_file           g;
    const gguf_tensor  *t;
    const char         *s;
    uint64_t            len;
    uint32_t            u;
    int                 b;

    if (!ok(gguf_open(&g, model_path) == 0, "SmolLM2 parses")) {
        printf("#   %s\n", g.err);
        gguf_close(&g);
        return;
    }
    is_int(g.n_tensors, 272, "SmolLM2: 272 tensors");
    ok(gguf_get_u32(&g, "llama.block_count", &u) == 0 && u == 30,
       "SmolLM2: 30 blocks");
    ok(gguf_get_u32(&g, "llama.embedding_length", &u) == 0 && u == 576,
       "SmolLM2: dim 576");
    ok(gguf_get_str(&g, "tokenizer.ggml.pre", &s, &len) == 0
       && str_eq(s, len, "smollm"), "SmolLM2: pre-tokenizer smollm");
    ok(gguf_get_str(&g, "tokenizer.chat_template", &s, &len) == 0
       && len > 29 && memcmp(s, "{% for message in messages %}", 29) == 0,
       "SmolLM2: chat template");
    ok(gguf_get_bool(&g, "tokenizer.ggml.add_bos_token", &b) == 0 && b == 0,
       "SmolLM2: add_bos_token false");
    t = gguf_find_tensor(&g, "token_embd.weight");
    ok(t != NULL && t->type == GGML_TYPE_Q8_0 && t->ne[0] == 576
       && t->ne[1] == 49152, "SmolLM2: token_embd Q8_0 (576, 49152)");
    t = gguf_find_tensor(&g, "blk.29.ffn_down.weight");
    ok(t != NULL && t->type == GGML_TYPE_Q4_1 && t->ne[0] == 1536
       && t->ne[1] == 576, "SmolLM2: blk.29.ffn_down Q4_1 (1536, 576)");
    gguf_close(&g);
}


/* ---------------------------------------------------------------------------
 * corruption: each case patches a copy and expects a named fault
 */

/* position of the n_dims field of a tensor's info record */
static size_t
tensor_info_pos(const uint8_t *buf, size_t len, const char *name)
{
    size_t    nl = strlen(name), i;
    uint64_t  l;

    for (i = 0; i + 8 + nl <= len; i++) {
        memcpy(&l, buf + i, 8);
        if (l == nl && memcmp(buf + i + 8, name, nl) == 0) {
            return i + 8 + nl;
        }
    }
    return 0;
}


static void
expect_fail(const uint8_t *buf, size_t len, const char *what,
    const char *want_in_msg)
{
    gguf_file  g;
    int        rc = gguf_parse(&g, buf, len, "corrupt.gguf");

    ok(rc == -1 && strstr(g.err, "corrupt.gguf: ") == g.err
       && strstr(g.err, want_in_msg) != NULL,
       "%s fails: %s", what, g.err);
    gguf_close(&g);
}


static void
put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}


static void
put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}


/*
 * Every type number we do not load, each in place of blk.2.attn_q.weight's
 * (Q4_1, 256 x 64): ggml's other types up to and past GGML_TYPE_COUNT,
 * ik_llama.cpp's repacked (_R4, _R8) and own (IQ*_K, _KS, _KT) types.
 * The message names the tensor, the type (by name where it has one) and
 * the supported list.
 */
static void
test_refused_types(const uint8_t *orig, uint8_t *buf, size_t len,
    size_t pos)
{
    static const struct { uint32_t type; const char *name; } named[] = {
        { 4, "Q4_2 (removed)" }, { 9, "Q8_1" }, { 15, "Q8_K" },
        { 16, "IQ2_XXS" }, { 17, "IQ2_XS" }, { 18, "IQ3_XXS" },
        { 19, "IQ1_S" }, { 21, "IQ3_S" }, { 22, "IQ2_S" }, { 24, "I8" },
        { 28, "F64" }, { 29, "IQ1_M" }, { 31, "Q4_0_4_4 (removed)" },
        { 32, "Q4_0_4_8 (removed)" }, { 33, "Q4_0_8_8 (removed)" },
        { 34, "TQ1_0" }, { 35, "TQ2_0" }, { 36, "IQ4_NL_4_4 (removed)" },
        { 38, "IQ4_NL_8_8 (removed)" }, { 40, "NVFP4" }, { 41, "Q1_0" },
        { 42, "unknown" }, { 43, "unknown" }, { 96, "unknown" },
        { 133, "Q6_0 (ik_llama.cpp)" }, { 137, "IQ2_K (ik_llama.cpp)" },
        { 139, "IQ4_K (ik_llama.cpp)" }, { 144, "IQ4_KS (ik_llama.cpp)" },
        { 155, "IQ4_KT (ik_llama.cpp)" }, { 202, "Q4_0_R8 (ik_llama.cpp)" },
        { 206, "Q5_0_R4 (ik_llama.cpp)" }, { 208, "Q8_0_R8 (ik_llama.cpp)" },
        { 212, "Q4_K_R4 (ik_llama.cpp)" }, { 214, "Q6_K_R4 (ik_llama.cpp)" },
        { 220, "IQ4_NL_R4 (ik_llama.cpp)" },
        { 223, "IQ4_XS_R8 (ik_llama.cpp)" },
        { 337, "IQ2_K_R4 (ik_llama.cpp)" }, { 399, "Q8_K_R8 (ik_llama.cpp)" },
        { 400, "unknown" }, { 0xffffffffu, "unknown" },
    };
    char    want[512];
    size_t  i;
    int     n_bad = 0;

    for (i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        memcpy(buf, orig, len);
        put_u32(buf + pos + 20, named[i].type);
        snprintf(want, sizeof(want), "tensor 'blk.2.attn_q.weight' has "
                 "type %s (%u), which is not supported ("
                 GGML_TYPES_SUPPORTED " are)", named[i].name, named[i].type);
        expect_fail(buf, len, named[i].name, want);
    }
    /* and every number below 64 the table does not load */
    for (i = 0; i < 64; i++) {
        gguf_file  g;

        if (ggml_type_block((uint32_t) i) != 0) {
            continue;
        }
        memcpy(buf, orig, len);
        put_u32(buf + pos + 20, (uint32_t) i);
        if (gguf_parse(&g, buf, len, "mem.gguf") == 0) {
            n_bad++;
            printf("# type %zu accepted\n", i);
        } else if (strstr(g.err, "blk.2.attn_q.weight") == NULL
                   || strstr(g.err, ggml_type_name((uint32_t) i)) == NULL
                   || strstr(g.err, GGML_TYPES_SUPPORTED) == NULL)
        {
            n_bad++;
            printf("# type %zu: %s\n", i, g.err);
        }
        gguf_close(&g);
    }
    is_int(n_bad, 0, "every unsupported type number below 64 is refused "
           "naming the tensor, the type and the supported list");
}


static void
test_corrupt(void)
{
    char       path[1200];
    uint8_t   *orig, *buf;
    size_t     len = 0, pos, i, n_fail;
    gguf_file  g;
    uint32_t   seed;

    tap_fixture(path, sizeof(path), "models/tiny260K-q4_1.gguf");
    orig = (uint8_t *) tap_slurp(path, &len);
    if (!ok(orig != NULL, "read %s", path)) {
        return;
    }
    buf = malloc(len);

#define FRESH() memcpy(buf, orig, len)

    FRESH();
    ok(gguf_parse(&g, buf, len, "mem.gguf") == 0, "in-memory copy parses");
    gguf_close(&g);

    FRESH(); buf[0] = 'X';
    expect_fail(buf, len, "bad magic", "not a GGUF file");
    FRESH(); put_u32(buf + 4, 4);
    expect_fail(buf, len, "version 4", "version 4 is not supported");
    FRESH(); put_u64(buf + 8, 1ull << 40);
    expect_fail(buf, len, "huge tensor count", "tensor count");
    FRESH(); put_u64(buf + 16, 1ull << 60);
    expect_fail(buf, len, "huge metadata count", "metadata count");
    FRESH(); put_u64(buf + 24, UINT64_MAX);
    expect_fail(buf, len, "huge key length", "truncated");
    expect_fail(buf, 10, "10-byte file", "truncated");
    expect_fail(buf, 0, "empty buffer", "truncated");
    expect_fail(orig, 14208 - 1000, "header cut short", "truncated");
    expect_fail(orig, len - 1, "data cut by one byte",
                "'output_norm.weight'");

    pos = tensor_info_pos(orig, len, "blk.2.attn_q.weight");
    ok(pos > 0, "found tensor info of blk.2.attn_q.weight");
    /* layout at pos: n_dims u32, ne[2] u64, type u32, offset u64 */
    FRESH(); put_u32(buf + pos + 20, 16);
    expect_fail(buf, len, "IQ2_XXS tensor",
                "tensor 'blk.2.attn_q.weight' has type IQ2_XXS (16), which "
                "is not supported (" GGML_TYPES_SUPPORTED " are)");
    FRESH(); put_u32(buf + pos + 20, 40);
    expect_fail(buf, len, "NVFP4 tensor", "has type NVFP4 (40)");
    FRESH(); put_u32(buf + pos + 20, 41);
    expect_fail(buf, len, "Q1_0 tensor", "has type Q1_0 (41)");
    FRESH(); put_u32(buf + pos + 20, 31);
    expect_fail(buf, len, "Q4_0_4_4 tensor", "has type Q4_0_4_4 (removed) (31)");
    FRESH(); put_u32(buf + pos + 20, 1000);
    expect_fail(buf, len, "type 1000", "has type unknown (1000)");
    test_refused_types(orig, buf, len, pos);
    FRESH(); put_u32(buf + pos, 5);
    expect_fail(buf, len, "5 dimensions", "5 dimensions");
    FRESH(); put_u32(buf + pos, 0);
    expect_fail(buf, len, "0 dimensions", "0 dimensions");
    FRESH(); put_u64(buf + pos + 4, 63);
    expect_fail(buf, len, "row of 63 in Q4_1", "not a multiple");
    FRESH(); put_u64(buf + pos + 12, 1ull << 40);
    expect_fail(buf, len, "dimension 2^40", "dimension 1 is");
    FRESH(); put_u64(buf + pos + 12, 0);
    expect_fail(buf, len, "dimension 0", "dimension 1 is 0");
    FRESH(); put_u64(buf + pos + 24, 128 * 3 + 1);
    expect_fail(buf, len, "misaligned offset", "not a multiple of the "
                "alignment");
    FRESH(); put_u64(buf + pos + 24, (uint64_t) len);
    expect_fail(buf, len, "offset past the end",
                "'blk.2.attn_q.weight': data");
    FRESH(); put_u64(buf + pos + 24, UINT64_MAX - 31);
    expect_fail(buf, len, "offset near 2^64", "outside");

    /* rename blk.3.attn_q.weight's info to blk.2's: duplicate */
    FRESH();
    i = tensor_info_pos(orig, len, "blk.3.attn_q.weight");
    buf[i - 15] = '2';
    expect_fail(buf, len, "duplicate tensor", "appears twice");

    pos = tensor_info_pos(orig, len, "tokenizer.ggml.tokens");
    ok(pos > 0, "found key tokenizer.ggml.tokens");
    /* layout at pos: type u32 (ARRAY), elem type u32, n u64 */
    FRESH(); put_u32(buf + pos + 4, 99);
    expect_fail(buf, len, "array of type 99", "array element type 99");
    FRESH(); put_u32(buf + pos + 4, GGUF_TYPE_ARRAY);
    expect_fail(buf, len, "nested array", "array element type 9");
    FRESH(); put_u64(buf + pos + 8, 1ull << 62);
    expect_fail(buf, len, "string array too long", "does not fit");
    FRESH(); put_u32(buf + pos, 77);
    expect_fail(buf, len, "value type 77", "value type 77");

    /* every truncation of the header fails cleanly */
    n_fail = 0;
    for (i = 0; i < 14208; i++) {
        if (gguf_parse(&g, orig, i, "cut.gguf") == -1 && g.err[0] != '\0') {
            n_fail++;
        }
        gguf_close(&g);
    }
    is_int(n_fail, 14208, "all 14208 header truncations fail with a message");

    /* random byte damage in the header: no crash, any result allowed */
    seed = 12345;
    for (i = 0; i < 3000; i++) {
        FRESH();
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            buf[(seed >> 8) % 14208] ^= (uint8_t) (1u << ((seed >> 3) & 7));
        }
        if (gguf_parse(&g, buf, len, "flip.gguf") == 0) {
            for (uint64_t t = 0; t < g.n_tensors; t++) {
                const gguf_tensor *tt = &g.tensors[t];
                if ((const uint8_t *) tt->data + tt->nbytes > buf + len) {
                    ok(0, "tensor %s out of bounds after damage", tt->name);
                }
            }
        }
        gguf_close(&g);
    }
    ok(1, "3000 damaged headers parsed without crashing");

    ok(gguf_open(&g, "/nonexistent/x.gguf") == -1
       && strstr(g.err, "/nonexistent/x.gguf: cannot open") == g.err,
       "missing file: %s", g.err);
    gguf_close(&g);

    free(buf);
    free(orig);
}


/* ---------------------------------------------------------------------------
 * a GGUF built in memory: K-quant tensors, alignment, v2
 */

typedef struct {
    uint8_t  buf[4096];
    size_t   n;
} gbuf;


static void
gb_put(gbuf *b, const void *p, size_t n)
{
    memcpy(b->buf + b->n, p, n);
    b->n += n;
}


static void
gb_u32(gbuf *b, uint32_t v)
{
    gb_put(b, &v, 4);
}


static void
gb_u64(gbuf *b, uint64_t v)
{
    gb_put(b, &v, 8);
}


static void
gb_str(gbuf *b, const char *s)
{
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}


/* two tensors of `type` (256 x 2 and 256 x 1) with general.alignment align */
static size_t
build_gguf(gbuf *b, uint32_t version, uint32_t type, uint32_t align)
{
    uint64_t  row = ggml_row_size(type, 256);
    uint64_t  off2 = (2 * row + align - 1) / align * align;

    memset(b, 0, sizeof(*b));
    gb_put(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, 2);                       /* tensors */
    gb_u64(b, 2);                       /* key/values */
    gb_str(b, "general.alignment");
    gb_u32(b, GGUF_TYPE_UINT32);
    gb_u32(b, align);
    gb_str(b, "general.architecture");
    gb_u32(b, GGUF_TYPE_STRING);
    gb_str(b, "llama");
    gb_str(b, "a.weight");
    gb_u32(b, 2);
    gb_u64(b, 256);
    gb_u64(b, 2);
    gb_u32(b, type);
    gb_u64(b, 0);
    gb_str(b, "b.weight");
    gb_u32(b, 1);
    gb_u64(b, 256);
    gb_u32(b, type);
    gb_u64(b, off2);
    b->n = (b->n + align - 1) / align * align + off2 + row;
    return b->n;
}


static void
test_built(void)
{
    static const uint32_t  types[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q6_K,
                                       GGML_TYPE_Q8_0, GGML_TYPE_BF16 };
    gbuf                   b;
    gguf_file              g;
    const gguf_tensor     *t;
    size_t                 i, len;

    for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        len = build_gguf(&b, 3, types[i], 64);
        if (!ok(gguf_parse(&g, b.buf, len, "built.gguf") == 0,
                "built %s file parses", ggml_type_name(types[i])))
        {
            printf("#   %s\n", g.err);
        }
        t = gguf_find_tensor(&g, "b.weight");
        ok(t != NULL && t->type == types[i] && t->n_dims == 1
           && t->nbytes == ggml_row_size(types[i], 256)
           && ((const uint8_t *) t->data - b.buf) % 64 == 0
           && (const uint8_t *) t->data + t->nbytes == b.buf + len,
           "built %s: b.weight placed at a 64-byte boundary, ends the file",
           ggml_type_name(types[i]));
        gguf_close(&g);
    }
    is_int(ggml_row_size(GGML_TYPE_Q4_K, 256), 144, "Q4_K row of 256: 144 B");
    is_int(ggml_row_size(GGML_TYPE_Q6_K, 512), 420, "Q6_K row of 512: 420 B");
    is_int(ggml_row_size(GGML_TYPE_Q4_K, 128), 0, "Q4_K row of 128: invalid");

    len = build_gguf(&b, 2, GGML_TYPE_Q4_K, 32);
    ok(gguf_parse(&g, b.buf, len, "v2.gguf") == 0 && g.version == 2,
       "version 2 parses");
    gguf_close(&g);

    len = build_gguf(&b, 3, 19, 32);
    expect_fail(b.buf, len, "IQ1_S", "tensor 'a.weight' has type IQ1_S (19)");
    len = build_gguf(&b, 3, GGML_TYPE_Q4_K, 48);
    expect_fail(b.buf, len, "alignment 48", "general.alignment 48 is not a "
                "power of two");
    len = build_gguf(&b, 3, GGML_TYPE_Q4_K, 32);
    expect_fail(b.buf, len - 1, "K-quant data cut by one byte",
                "tensor 'b.weight': data");
}


int
main(void)
{
    model_path = tap_model();

    test_tiny260k("f32", GGML_TYPE_F32);
    test_tiny260k("f16", GGML_TYPE_F16);
    test_tiny260k("bf16", GGML_TYPE_BF16);
    test_tiny260k("q8_0", GGML_TYPE_Q8_0);
    test_tiny260k("q4_0", GGML_TYPE_Q4_0);
    test_tiny260k("q4_1", GGML_TYPE_Q4_1);
    test_smollm2();
    test_corrupt();
    test_built();
    return tap_done();
}
