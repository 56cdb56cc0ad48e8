/*
 * Tokenizer internals, in three layers that call downwards only:
 *
 *   tokenizer.c, hf.c   the public API: loaders (GGUF, tokenizer.json),
 *                       the builder's last step, encode, decode
 *   bpe.c, spm.c        the algorithms (SPM uses BPE's rank merging
 *                       for tokenizer.json files with merges)
 *   vocab.c             the vocabulary: tables, lookups, the builder's
 *                       add calls, special and stop tokens
 *
 * Loaders (GGUF, tokenizer.json) fill an llm_tokenizer through the builder
 * calls below and never touch the algorithms: add every token, then the
 * merges (BPE), then tok_finish() computes the derived tables.
 *
 * defines: struct llm_tokenizer, tok_text, tok_new, tok_vocab_free,
 *          tok_pool_add, tok_add_token, tok_add_merge, tok_set_pre,
 *          tok_finish, tok_find, tok_merge_find, tok_hash,
 *          tok_specials_init, tok_special_at, tok_stops_init, tok_out,
 *          tok_out_push, tok_bpe_*, tok_spm_*, tok_wpm_*, tok_pair,
 *          tok_heap_*
 */
#ifndef NGX_LLM_TOKENIZER_INTERNAL_H
#define NGX_LLM_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"

#define TOK_MAX_REGEX   4
#define TOK_MAX_STOP    16

/* Unicode normalization of the text between special tokens */
enum { TOK_NORM_NONE = 0, TOK_NORM_NFC = 1, TOK_NORM_NFKC = 2 };

typedef struct {
    uint32_t    text_off;      /* vocabulary text in pool */
    uint32_t    text_len;
    uint32_t    piece_off;     /* decoded bytes in pool */
    uint32_t    piece_len;
    float       score;         /* SPM merge priority */
    uint8_t     type;          /* enum llm_token_type */
} tok_entry;

/* (left id, right id) -> merged id and rank, open addressing */
typedef struct {
    uint64_t    key;           /* left << 32 | right; 0 = empty slot */
    int32_t     rank;
    int32_t     merged;
} tok_merge;

struct llm_tokenizer {
    int          kind;                 /* enum llm_tokenizer_kind */
    int32_t      n_vocab;
    tok_entry   *tokens;               /* (n_vocab) */
    char        *pool;                 /* token texts and pieces */
    size_t       pool_len;
    size_t       pool_cap;

    int32_t     *vocab_slots;          /* text -> id hash, -1 empty */
    uint32_t     vocab_mask;           /* slots - 1 (power of two) */

    tok_merge   *merges;               /* BPE only */
    uint32_t     merge_mask;
    int32_t      n_merges;

    int32_t      byte_token[256];      /* BPE: raw byte -> its 1-byte token;
                                          SPM: <0xNN>; -1 when absent */

    /* BPE pre-tokenizer: regexes applied in turn, each splitting the
       pieces the previous one left (matches and gaps both kept) */
    char         pre_name[32];
    pcre2_code  *re[TOK_MAX_REGEX];
    int          n_re;
    int          ignore_merges;        /* a word that is a token stays whole */
    int          normalize;            /* TOK_NORM_*, tokenizer.json only */

    /* tokens matched whole in the text before pre-tokenization, sorted by
       first byte then longest first; special_first[b] .. [b + 1] */
    int32_t     *specials;
    int32_t      n_specials;
    int32_t      special_first[257];

    int32_t      bos, eos, eot, eom, unk, pad;
    int32_t      post_eos;             /* HF TemplateProcessing's last
                                          special token: what add_eos
                                          appends (Qwen3-Embedding's
                                          <|endoftext|>) even where
                                          tokenizer_config's eos_token,
                                          the stop token, is another;
                                          -1: eos */
    int          add_bos, add_eos;
    int          add_space_prefix;     /* SPM: "▁" before the text */
    int          prefix_first_only;    /* SPM: only before the first text,
                                          not after special tokens (HF
                                          Metaspace prepend_scheme first) */
    int          prefix_if_no_space;   /* SPM: no prefix when the text
                                          starts with a space (Metaspace) */
    int          spm_word_split;       /* SPM: no piece has "▁" after
                                          another character, so words
                                          ("▁..." runs) merge on their own */
    int32_t      stop[TOK_MAX_STOP];
    int          n_stop;
    uint32_t     max_piece;            /* longest decoded piece */

    /* WordPiece (wordpiece.c): HF's BertNormalizer switches */
    int          wpm_clean;            /* controls out, whitespace to ' ' */
    int          wpm_chinese;          /* spaces around CJK ideographs */
    int          wpm_strip;            /* NFD, nonspacing marks out */
    int          wpm_lower;            /* lowercase */
    int          wpm_max_chars;        /* longer words are [UNK] */
};

/* a token's vocabulary text in the pool (re-read after tok_pool_add) */
static inline const char *
tok_text(const llm_tokenizer *t, int32_t id)
{
    return t->pool + t->tokens[id].text_off;
}


/* --- the vocabulary (vocab.c) ------------------------------------------- */

/* builder */
llm_tokenizer *tok_new(int kind, int32_t n_vocab);
/* the tables and t itself; llm_tokenizer_free also frees the regexes */
void tok_vocab_free(llm_tokenizer *t);
/* appends len bytes (and a NUL) to the pool: their offset, or -1 */
int64_t tok_pool_add(llm_tokenizer *t, const char *s, size_t len);
int tok_add_token(llm_tokenizer *t, int32_t id, const char *text,
    size_t len, float score, int type);
/* a merge "left right" of rank n_merges; unknown halves are skipped */
int tok_add_merge(llm_tokenizer *t, const char *left, size_t llen,
    const char *right, size_t rlen);

int32_t tok_find(const llm_tokenizer *t, const char *text, size_t len);
int32_t tok_merge_find(const llm_tokenizer *t, int32_t left, int32_t right,
    int32_t *rank);
uint32_t tok_hash(const char *s, size_t len);

/* the tokens matched whole (control, unknown, user-defined), from their
   pieces; 0 or -1 when out of memory */
int tok_specials_init(llm_tokenizer *t);
/* the special token written at text[i], longest first, or -1; a control
   token only where none of its bytes is marked (marks: one per byte of
   text, or NULL), user-defined tokens anywhere */
int32_t tok_special_at(const llm_tokenizer *t, const char *text, size_t len,
    size_t i, int parse_special, const uint8_t *marks);
/* the stop list: EOS, EOT, EOM and the end-of-turn tokens we know */
void tok_stops_init(llm_tokenizer *t);

/* a growable id list used while encoding */
typedef struct {
    int32_t     *ids;
    int          n;
    int          cap;
    int          oom;
} tok_out;

void tok_out_push(tok_out *o, int32_t id);

/* --- the builder's last steps (tokenizer.c) ------------------------------ */

int tok_set_pre(llm_tokenizer *t, const char *name, char *err,
    size_t errlen);
int tok_finish(llm_tokenizer *t, char *err, size_t errlen);

/* byte-level BPE (tokenizer/bpe.c) */
int tok_bpe_init(llm_tokenizer *t);
int tok_bpe_pre_regexes(llm_tokenizer *t, const char *name, char *err,
    size_t errlen);
int tok_bpe_add_regex(llm_tokenizer *t, const char *re, char *err,
    size_t errlen);
const char *tok_bpe_gpt2_regex(void);
/* appends one piece of text (no special tokens inside) */
int tok_bpe_encode(const llm_tokenizer *t, const char *text, size_t len,
    tok_out *o);
/* rank BPE over characters with byte fallback (HF's SentencePiece-style
   tokenizer.json), one word */
int tok_bpe_encode_chars(const llm_tokenizer *t, const char *text,
    size_t len, tok_out *o);
/* decoded bytes of a vocabulary text in the byte-level alphabet */
size_t tok_bpe_decode_text(const char *text, size_t len, char *out);
void tok_bpe_free(llm_tokenizer *t);

/* SentencePiece BPE (tokenizer/spm.c) */
int tok_spm_encode(const llm_tokenizer *t, const char *text, size_t len,
    int add_prefix, tok_out *o);
/* the derived tables once every token is in: byte tokens, word split */
void tok_spm_init(llm_tokenizer *t);
size_t tok_spm_decode_text(const char *text, size_t len, int type,
    char *out);

/* WordPiece (tokenizer/wordpiece.c) */
int tok_wpm_encode(const llm_tokenizer *t, const char *text, size_t len,
    tok_out *o);
/* a GGUF vocabulary text ("\u2581word", "piece") as vocab.txt's ("word",
   "##piece") into out (len + 2 bytes); its length */
size_t tok_wpm_vocab_text(const char *text, size_t len, int type,
    char *out);
size_t tok_wpm_decode_text(const char *text, size_t len, int type,
    char *out);

/*
 * Merge queue of both BPE flavours: a candidate merge of two adjacent
 * symbols, lowest key first (BPE: the merge's rank; SentencePiece: minus
 * the merged piece's score), the leftmost on a tie. A binary heap.
 */
typedef struct {
    float       key;
    int32_t     left;          /* symbol index */
    int32_t     right;         /* SPM: symbol index */
    int32_t     left_id;       /* BPE: ids when queued, to spot stale pairs */
    int32_t     right_id;
    int32_t     id;            /* SPM: the merged piece */
    uint32_t    len;           /* SPM: left + right length when queued */
} tok_pair;


static inline int
tok_pair_before(const tok_pair *a, const tok_pair *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}


static inline void
tok_heap_push(tok_pair *heap, int *n, tok_pair p)
{
    int i = (*n)++;

    while (i > 0 && tok_pair_before(&p, &heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = p;
}


static inline tok_pair
tok_heap_pop(tok_pair *heap, int *n)
{
    tok_pair  top = heap[0], last = heap[--(*n)];
    int       i = 0, c;

    for ( ;; ) {
        c = 2 * i + 1;
        if (c >= *n) {
            break;
        }
        if (c + 1 < *n && tok_pair_before(&heap[c + 1], &heap[c])) {
            c++;
        }
        if (!tok_pair_before(&heap[c], &last)) {
            break;
        }
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = last;
    return top;
}

#endif
