/*
 * `ngx_llm_engine synth` (engine/model/synth.h): the tiny shapes written
 * with the llama3 and qwen2 vocabularies of `make deps`, then read back:
 * they load in the engine with the shape's numbers and the vocabulary's
 * size, a forward gives finite logits of a sane size; the same seed gives
 * the same bytes and another seed other bytes; the matrices' values have
 * the stated deviation (0.02), the norms are 1; BERT's file has
 * llama.cpp's names; gpt-oss's has llama.cpp's names with MXFP4 experts
 * and its window, sinks and YaRN keys; bad arguments give one clear error and no file.
 * (The same tiny files in llama.cpp's tools: bench/peer_suite.sh runs the
 * full shapes through them.)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "format/gguf.h"
#include "fp16.h"
#include "model/model.h"
#include "model/synth.h"
#include "tensor_type.h"
#include "tap.h"

static char vocab_llama[512], vocab_qwen[512];


/* a fresh temporary path (the file is removed; synth writes it) */
static void
tmp_path(char *out, size_t len, const char *tag)
{
    snprintf(out, len, "/tmp/test_synth.%d.%s.gguf", (int) getpid(), tag);
    unlink(out);
}


static int
write_model(const char *arch, const char *shape, const char *vocab,
    uint64_t seed, const char *out, char *err, size_t err_len)
{
    llm_synth_opts o = { arch, shape, vocab, NULL, GGML_TYPE_F16, 1, 0,
                         seed };

    return llm_synth_file(&o, out, NULL, err, err_len);
}


static int
same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int ca, cb, same = fa && fb;

    while (same) {
        ca = getc(fa);
        cb = getc(fb);
        if (ca != cb) {
            same = 0;
        }
        if (ca == EOF || cb == EOF) {
            break;
        }
    }
    if (fa) {
        fclose(fa);
    }
    if (fb) {
        fclose(fb);
    }
    return same;
}


/* the prompt's last logits through the CPU backend; 0 or -1 */
static int
forward(const llm_model *m, float *logits)
{
    static const int32_t ids[] = { 9906, 1917, 11, 1268, 527, 499 };
    char err[512];
    llm_backend_options o;
    llm_backend *be;
    int32_t table[1] = { 0 }, n_blocks = 1, pos[6], seq[6], last = 5;
    const int32_t *tables[1] = { table };
    int rc;

    llm_backend_options_default(&o, m);
    o.kv_n_blocks = 1;
    o.max_batch_tokens = 16;
    if ((be = llm_backend_cpu_create(m, &o, err, sizeof(err))) == NULL) {
        printf("# backend: %s\n", err);
        return -1;
    }
    for (int i = 0; i < 6; i++) {
        pos[i] = i;
        seq[i] = 0;
    }
    llm_batch b = { 6, ids, pos, seq, 1, tables, &n_blocks, 1, &last, logits,
                    0, NULL, NULL, NULL, 0, NULL };
    rc = llm_backend_forward(be, &b);
    llm_backend_free(be);
    return rc;
}


/* loads, has the shape's numbers, and its logits are finite and sane */
static void
check_loads(const char *path, const char *what, int n_expert, int tied)
{
    llm_model m;

    if (!ok(llm_model_load(&m, path, 0, 1) == 0, "%s loads in the engine",
            what))
    {
        printf("#   %s\n", m.err);
        return;
    }
    is_int(m.cfg.dim, 64, "%s: embedding_length", what);
    is_int(m.cfg.n_layers, 2, "%s: block_count", what);
    is_int(m.cfg.n_kv_heads, 2, "%s: head_count_kv", what);
    is_int(m.cfg.n_expert, n_expert, "%s: experts", what);
    is_int(m.cfg.tied_output, tied, "%s: tied output", what);
    float *logits = malloc(sizeof(float) * m.cfg.vocab_size);
    if (ok(forward(&m, logits) == 0, "%s: a 6-token forward runs", what)) {
        double sum = 0, sq = 0, amax = 0;
        int finite = 1;
        for (int i = 0; i < m.cfg.vocab_size; i++) {
            finite &= isfinite(logits[i]);
            sum += logits[i];
            sq += (double) logits[i] * logits[i];
            amax = fmax(amax, fabs(logits[i]));
        }
        double sd = sqrt(sq / m.cfg.vocab_size
                         - (sum / m.cfg.vocab_size) * (sum / m.cfg.vocab_size));
        /* dim 64, N(0, 0.02) output rows over a unit-RMS state: logits of
         * deviation about 0.02 * sqrt(64) = 0.16 */
        ok(finite && sd > 0.05 && sd < 1.0 && amax < 5.0,
           "%s: logits finite and sane (deviation %.3f, max |%.3f|)", what,
           sd, amax);
    }
    free(logits);
    llm_model_free(&m);
}


/* deviation of an F16 matrix, and whether a norm is all ones */
static void
check_values(const char *path)
{
    gguf_file g;
    const gguf_tensor *t, *n;

    if (!ok(gguf_open(&g, path) == 0, "the llama file parses")) {
        gguf_close(&g);
        return;
    }
    t = gguf_find_tensor(&g, "blk.1.ffn_gate.weight");
    n = gguf_find_tensor(&g, "blk.1.ffn_norm.weight");
    if (ok(t && t->type == GGML_TYPE_F16 && n && n->type == GGML_TYPE_F32,
           "ffn_gate is F16, ffn_norm F32"))
    {
        const llm_half *h = t->data;
        const float *w = n->data;
        uint64_t cnt = t->nbytes / 2;
        double sum = 0, sq = 0;
        int ones = 1;
        for (uint64_t i = 0; i < cnt; i++) {
            double x = llm_fp16_to_fp32(h[i]);
            sum += x;
            sq += x * x;
        }
        double sd = sqrt(sq / cnt - (sum / cnt) * (sum / cnt));
        ok(fabs(sum / cnt) < 0.002 && sd > 0.019 && sd < 0.021,
           "ffn_gate: mean %.5f, deviation %.5f (0.02 stated)", sum / cnt,
           sd);
        for (uint64_t i = 0; i < n->ne[0]; i++) {
            ones &= w[i] == 1.0f;
        }
        ok(ones, "ffn_norm is all ones");
    }
    ok(gguf_find_tensor(&g, "output.weight") == NULL
       && gguf_find_tensor(&g, "token_embd.weight") != NULL,
       "tiny llama: tied (no output.weight, as Llama-3.2-1B)");
    gguf_close(&g);
}


static void
check_bert(void)
{
    static const char *names[] = {
        "token_embd.weight", "token_types.weight", "position_embd.weight",
        "token_embd_norm.weight", "token_embd_norm.bias",
        "blk.1.attn_q.weight", "blk.1.attn_q.bias", "blk.1.attn_output.bias",
        "blk.1.attn_output_norm.weight", "blk.1.ffn_up.bias",
        "blk.1.ffn_down.weight", "blk.1.layer_output_norm.bias",
    };
    char path[256], err[512];
    gguf_file g;
    uint32_t pool = 0;
    int causal = 1, all = 1;

    tmp_path(path, sizeof(path), "bert");
    if (!ok(write_model("bert", "tiny", vocab_llama, 1, path, err,
                        sizeof(err)) == 0, "tiny bert written"))
    {
        printf("#   %s\n", err);
        return;
    }
    if (ok(gguf_open(&g, path) == 0, "tiny bert parses")) {
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (gguf_find_tensor(&g, names[i]) == NULL) {
                printf("#   no %s\n", names[i]);
                all = 0;
            }
        }
        ok(all, "tiny bert: llama.cpp's BERT tensor names");
        ok(gguf_get_bool(&g, "bert.attention.causal", &causal) == 0
           && causal == 0 && gguf_get_u32(&g, "bert.pooling_type", &pool) == 0
           && pool == 2, "tiny bert: not causal, CLS pooling");
    }
    gguf_close(&g);
    unlink(path);
}


/* gpt-oss: MXFP4 experts, F32 router and biases, the window and YaRN */
static void
check_gpt_oss(void)
{
    static const struct { const char *name; uint32_t type; } want[] = {
        { "blk.1.ffn_gate_exps.weight", GGML_TYPE_MXFP4 },
        { "blk.1.ffn_up_exps.weight", GGML_TYPE_MXFP4 },
        { "blk.1.ffn_down_exps.weight", GGML_TYPE_MXFP4 },
        { "blk.1.ffn_down_exps.bias", GGML_TYPE_F32 },
        { "blk.1.ffn_gate_inp.weight", GGML_TYPE_F32 },
        { "blk.1.ffn_gate_inp.bias", GGML_TYPE_F32 },
        { "blk.1.attn_sinks.weight", GGML_TYPE_F32 },
        { "blk.1.attn_q.weight", GGML_TYPE_F16 },
        { "blk.1.attn_output.bias", GGML_TYPE_F32 },
        { "blk.1.post_attention_norm.weight", GGML_TYPE_F32 },
        { "output.weight", GGML_TYPE_F16 },
    };
    char path[256], err[512];
    gguf_file g;
    llm_model m;
    int all = 1;

    tmp_path(path, sizeof(path), "oss");
    if (!ok(write_model("gpt-oss", "tiny", vocab_qwen, 1, path, err,
                        sizeof(err)) == 0, "tiny gpt-oss written"))
    {
        printf("#   %s\n", err);
        return;
    }
    if (ok(gguf_open(&g, path) == 0, "tiny gpt-oss parses")) {
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
            const gguf_tensor *t = gguf_find_tensor(&g, want[i].name);
            if (t == NULL || t->type != want[i].type) {
                printf("#   %s: %s\n", want[i].name,
                       t ? ggml_type_name(t->type) : "missing");
                all = 0;
            }
        }
        ok(all, "tiny gpt-oss: llama.cpp's names, MXFP4 experts, F32 "
           "router, biases and sinks");
    }
    gguf_close(&g);
    check_loads(path, "tiny gpt-oss", 8, 0);
    if (llm_model_load(&m, path, 0, 1) == 0) {
        ok(m.cfg.gpt_oss && m.cfg.sliding_window == 4
           && m.cfg.swa_pattern == 2 && m.cfg.rope_yarn
           && m.cfg.rope_factor == 32.0f && m.cfg.n_expert_used == 4,
           "tiny gpt-oss: window 4 on alternating layers, YaRN x32, top-4");
        llm_model_free(&m);
    }
    unlink(path);
}


int
main(void)
{
    char a[256], b[256], c[256], moe[256], err[512];
    struct stat st;

    tap_fixture(vocab_llama, sizeof(vocab_llama),
                "llama.cpp/ggml-vocab-llama-bpe.gguf");
    tap_fixture(vocab_qwen, sizeof(vocab_qwen),
                "llama.cpp/ggml-vocab-qwen2.gguf");
    tmp_path(a, sizeof(a), "a");
    tmp_path(b, sizeof(b), "b");
    tmp_path(c, sizeof(c), "c");
    tmp_path(moe, sizeof(moe), "moe");

    if (!ok(write_model("llama", "tiny", vocab_llama, 1, a, err, sizeof(err))
            == 0, "tiny llama written with the llama3 vocabulary"))
    {
        printf("#   %s\n", err);
        return tap_done();
    }
    check_loads(a, "tiny llama", 0, 1);
    check_values(a);
    ok(write_model("llama", "tiny", vocab_llama, 1, b, err, sizeof(err)) == 0
       && same_bytes(a, b), "the same seed writes the same bytes");
    ok(write_model("llama", "tiny", vocab_llama, 2, c, err, sizeof(err)) == 0
       && !same_bytes(a, c), "another seed writes other bytes");

    if (ok(write_model("qwen3moe", "tiny", vocab_qwen, 1, moe, err,
                       sizeof(err)) == 0,
           "tiny qwen3moe written with the qwen2 vocabulary"))
    {
        check_loads(moe, "tiny qwen3moe", 8, 0);
    } else {
        printf("#   %s\n", err);
    }
    check_bert();
    check_gpt_oss();

    unlink(b);
    ok(write_model("llama", "70b", vocab_llama, 1, b, err, sizeof(err)) != 0
       && strstr(err, "no shape 'llama 70b'") != NULL && stat(b, &st) != 0,
       "an unknown shape: an error naming it, no file (%s)", err);
    {
        /* a GGUF v3 with no tensors and no keys */
        static const uint8_t empty[24] = { 'G', 'G', 'U', 'F', 3 };
        FILE *f = fopen(c, "wb");
        ok(f && fwrite(empty, 1, sizeof(empty), f) == sizeof(empty)
           && fclose(f) == 0
           && write_model("llama", "tiny", c, 1, b, err, sizeof(err)) != 0
           && strstr(err, "no tokenizer.ggml.tokens") != NULL
           && stat(b, &st) != 0,
           "a vocabulary file without tokens: an error, no file (%s)", err);
    }

    unlink(a);
    unlink(b);
    unlink(c);
    unlink(moe);
    return tap_done();
}
