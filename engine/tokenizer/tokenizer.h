/*
 * Tokenizers: byte-level BPE (GPT-2, SmolLM2, Llama 3, Qwen2) and
 * SentencePiece-style BPE with byte fallback (Llama 2, Mistral,
 * stories260K), loaded from GGUF metadata; plus an incremental,
 * UTF-8-safe detokenizer for streaming.
 *
 * A loaded llm_tokenizer owns copies of everything it needs (the gguf_file
 * may be closed right after loading), is read-only afterwards and keeps no
 * global state, so one tokenizer is shared by every thread or nginx worker
 * without locks. Encoding allocates scratch memory proportional to the
 * input and frees it before returning; it never reads files.
 *
 * defines: llm_tokenizer_load_gguf, llm_tokenizer_load_hf,
 *          llm_tokenizer_free, llm_tokenize, llm_tokenize_spans,
 *          llm_token_*, llm_tokenizer_*, llm_detokenize, llm_detok_*
 */
#ifndef NGX_LLM_TOKENIZER_H
#define NGX_LLM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"

typedef struct llm_tokenizer llm_tokenizer;

/* token types, numbered as llama.cpp's GGUF tokenizer.ggml.token_type */
enum llm_token_type {
    LLM_TOKEN_UNDEFINED = 0,
    LLM_TOKEN_NORMAL = 1,
    LLM_TOKEN_UNKNOWN = 2,
    LLM_TOKEN_CONTROL = 3,        /* <s>, <|im_end|>: matched with parse_special */
    LLM_TOKEN_USER_DEFINED = 4,   /* added tokens: always matched whole */
    LLM_TOKEN_UNUSED = 5,
    LLM_TOKEN_BYTE = 6,           /* <0xNN> byte fallback */
};

enum llm_tokenizer_kind {
    LLM_TOKENIZER_BPE = 1,        /* byte-level BPE with merge ranks */
    LLM_TOKENIZER_SPM = 2,        /* SentencePiece BPE with scores */
    LLM_TOKENIZER_WPM = 3,        /* WordPiece (BERT, wordpiece.c) */
};

/*
 * Loads the tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*).
 * NULL on failure with one message in err ("tokenizer: <what is wrong>").
 */
llm_tokenizer *llm_tokenizer_load_gguf(const gguf_file *g, char *err,
    size_t errlen);
/*
 * Loads a Hugging Face tokenizer directory: DIR/tokenizer.json (byte-level
 * BPE for now) and, when present, DIR/tokenizer_config.json.
 */
llm_tokenizer *llm_tokenizer_load_hf(const char *dir, char *err,
    size_t errlen);
void llm_tokenizer_free(llm_tokenizer *t);

/*
 * Encodes len bytes of text. add_special adds BOS (and EOS) when the
 * model's metadata asks for them (tokenizer.ggml.add_bos_token, ...);
 * parse_special makes control tokens written in the text ("<|im_end|>")
 * encode as those tokens instead of as plain text. Invalid UTF-8 is encoded
 * as if each invalid sequence were U+FFFD.
 *
 * Returns the number of ids the text encodes to, writing at most max_ids of
 * them (like snprintf: a result > max_ids means the buffer was too small),
 * or -1 when out of memory.
 */
int llm_tokenize(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int parse_special, int32_t *ids, int max_ids);

/* bytes [start, end) of a text */
typedef struct {
    size_t  start;
    size_t  end;
} llm_span;

/*
 * llm_tokenize() where the n_spans spans of text are request text (a chat
 * message, from jinja_render_spans()): no control token is matched that has
 * a byte inside one, as if that text were encoded with parse_special off,
 * while the template's own control tokens around them still are. User-
 * defined tokens match everywhere, as in llm_tokenize(). Spans may come in
 * any order and overlap; a span past the text's end is cut there. With
 * parse_special off or no spans this is llm_tokenize().
 */
int llm_tokenize_spans(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int parse_special, const llm_span *spans,
    size_t n_spans, int32_t *ids, int max_ids);

/* vocabulary and special ids (-1 when the model has none) */
int llm_tokenizer_kind(const llm_tokenizer *t);
int32_t llm_tokenizer_n_vocab(const llm_tokenizer *t);
int32_t llm_tokenizer_bos(const llm_tokenizer *t);
int32_t llm_tokenizer_eos(const llm_tokenizer *t);
int32_t llm_tokenizer_eot(const llm_tokenizer *t);
int llm_tokenizer_add_bos(const llm_tokenizer *t);
/* the pre-tokenizer name it was loaded with ("smollm", "gpt-2", ...) */
const char *llm_tokenizer_pre(const llm_tokenizer *t);

/*
 * Stop tokens: EOS plus end-of-turn / end-of-message tokens
 * (<|im_end|>, <|eot_id|>, <|endoftext|>, <end_of_turn>, ...). Returns how
 * many there are; *ids points into the tokenizer.
 */
int llm_tokenizer_stop_ids(const llm_tokenizer *t, const int32_t **ids);
int llm_token_is_stop(const llm_tokenizer *t, int32_t id);

/* 1 for CONTROL / UNKNOWN tokens, the ones a reply hides */
int llm_token_is_special(const llm_tokenizer *t, int32_t id);
int llm_token_type(const llm_tokenizer *t, int32_t id);
/* the token's text as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>") */
const char *llm_token_text(const llm_tokenizer *t, int32_t id, size_t *len);
/* the bytes the token decodes to (" the", "\n"); NULL for a bad id */
const char *llm_token_piece(const llm_tokenizer *t, int32_t id, size_t *len);
/* the id of a token's vocabulary text, or -1 */
int32_t llm_token_lookup(const llm_tokenizer *t, const char *text,
    size_t len);

/* --- incremental detokenizer -------------------------------------------- */

#define LLM_DETOK_SKIP_SPECIAL   0x1  /* emit nothing for special tokens */
#define LLM_DETOK_STRIP_SPACE    0x2  /* drop the leading space of the first
                                         piece when the model adds a space
                                         prefix (SentencePiece), as HF's
                                         decode() does */

/* small, no allocation: lives in the caller's request context */
typedef struct {
    uint8_t   pending[4];   /* start of a UTF-8 sequence not yet complete */
    uint8_t   n_pending;
    uint8_t   flags;
    uint8_t   started;      /* a piece has been emitted */
} llm_detok;

/* bytes of output a single llm_detok_push may need */
size_t llm_detok_max_out(const llm_tokenizer *t);

void llm_detok_init(llm_detok *d, unsigned flags);

/*
 * Feeds one token. Writes the bytes that are safe to emit now: complete,
 * valid UTF-8 only. A trailing incomplete sequence is held back until the
 * next token completes it; invalid bytes become U+FFFD (one per maximal
 * invalid subpart, as Python's bytes.decode(errors="replace")). Returns the
 * number of bytes written, or -1 when cap < llm_detok_max_out(t) (nothing
 * consumed). An id out of range emits nothing.
 */
int llm_detok_push(const llm_tokenizer *t, llm_detok *d, int32_t id,
    char *out, size_t cap);

/* end of stream: a held-back incomplete sequence becomes U+FFFD (3 bytes);
 * returns the bytes written (0..3), or -1 when cap < 3 */
int llm_detok_flush(llm_detok *d, char *out, size_t cap);

/*
 * Whole-sequence decode with the same rules (flags as above). Returns the
 * length of the full text, writing at most cap bytes plus a NUL when it
 * fits (snprintf-style), or -1 when out of memory.
 */
int llm_detokenize(const llm_tokenizer *t, const int32_t *ids, int n,
    unsigned flags, char *out, size_t cap);

#endif
