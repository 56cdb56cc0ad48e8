/*
 * The grammar engine's insides, shared by its files and the unit tests.
 *
 * A compiled grammar is a flat array of elements, llama.cpp's layout: each
 * rule is its alternatives one after the other, each alternative ended by
 * GE_ALT, the last by GE_END. Terminals are bytes only: a char class on
 * code points is compiled (gbnf.c) into a rule whose alternatives are
 * UTF-8 byte sequences, each byte a set of 256 bits. A matcher state is a
 * set of stacks (matcher.c), each stack a hash-consed list of positions in
 * that array. A bounded repetition x{m,n} past LLM_GRAMMAR_MAX_UNROLL is
 * one element, GE_REPEAT (a counter in the matcher's stack node), not n
 * copies of x.
 *
 * defines: llm_gelem, llm_gbuild (the parser's output), llm_gbnf_parse,
 *          llm_grepeat, llm_regex_to_gbnf, llm_matcher_accept_bytes,
 *          llm_grammar_* caps (LLM_GRAMMAR_MAX_*)
 */
#ifndef NGX_LLM_GRAMMAR_IMPL_H
#define NGX_LLM_GRAMMAR_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

/* caps: past any of them the compile (or, at run time, the step) fails */
#define LLM_GRAMMAR_MAX_ELEMS    (1 << 20)  /* elements of the automaton */
#define LLM_GRAMMAR_MAX_RULES    65536      /* rules, generated ones too */
#define LLM_GRAMMAR_MAX_REPEAT   (1 << 30)  /* m, n of x{m,n} */
#define LLM_GRAMMAR_MAX_UNROLL   1000       /* x{m,n} up to it: copies of
                                               x; past it: a counter */
#define LLM_GRAMMAR_MAX_NEST     256        /* ( ( ( ... nesting */
#define LLM_GRAMMAR_MAX_STACKS   4096       /* stacks in one matcher state */
#define LLM_GRAMMAR_MAX_NODES    (1 << 22)  /* stack nodes of one matcher */
#define LLM_GRAMMAR_SHARED       256        /* local masks a grammar keeps */
#define LLM_GRAMMAR_CACHED       16         /* grammars a vocabulary keeps */
#define LLM_GRAMMAR_VSHARED      1024       /* local masks it keeps for all */

enum {
    GE_END = 0,     /* end of the rule's last alternative */
    GE_ALT,         /* end of an alternative, another follows */
    GE_RULE,        /* val: rule index */
    GE_BYTES,       /* val: index of a 256-bit byte set */
    GE_TOKEN,       /* val: token id (a special token named by the grammar) */
    GE_REPEAT,      /* val: index of an llm_grepeat (x{m,n} by a counter) */
};

typedef struct {
    int32_t     type;
    int32_t     val;
} llm_gelem;

/* x{min,max} counted: body rule x, which may not match the empty string
   (the matcher would loop on empty iterations) */
typedef struct {
    int32_t     rule;
    int32_t     min;
    int32_t     max;                /* -1: no cap */
} llm_grepeat;

/* one rule while parsing: its elements, then flattened by compile */
typedef struct {
    char       *name;
    size_t      name_len;
    llm_gelem  *el;
    int         n_el, cap_el;
    int         defined;
    int         ref_line, ref_col;   /* where first used, for errors */
} llm_grule;

typedef struct {
    llm_grule  *rules;
    int         n_rules, cap_rules;
    uint8_t   (*sets)[32];          /* byte sets, bit b of byte b/8 */
    int         n_sets, cap_sets;
    llm_grepeat *reps;              /* GE_REPEAT's bounds */
    int         n_reps, cap_reps;
    int32_t    *rule_hash;          /* open addressing: rule index + 1 */
    uint32_t    rule_hmask;
    int32_t    *set_hash;           /* open addressing: set index + 1 */
    int32_t     single[256];        /* the set of byte c alone + 1, or 0 */
    int32_t    *range_set;          /* [65536]: set of bytes lo..hi + 1 */
    struct llm_gclass *classes;     /* code point classes made, to share
                                       their rules */
    int         n_classes, cap_classes;
    uint32_t    set_hmask;
    const llm_grammar_vocab *vocab;
    int         max_ws;             /* 0: compact JSON */
    int         strict;             /* for %json: llm_json_schema_opts */
    llm_strbuf  relaxed;            /* what %json and schemas relaxed */
    uint64_t    deadline_ns;        /* 0: none */
    int         n_json;             /* %json blocks seen */
    size_t      max_source;
    char       *err;
    size_t      err_len;
} llm_gbuild;

/* a trie node, 16 bytes: the mask walk reads them in order */
typedef struct {
    uint8_t     byte;               /* the edge from its parent */
    uint8_t     pad;
    uint16_t    depth;
    int32_t     size;               /* nodes in its subtree, itself too */
    int32_t     tok_begin;          /* its own tokens: */
    int32_t     tok_end;            /*   sorted[tok_begin .. tok_end) */
} llm_tnode;

/*
 * The compiled grammars a vocabulary keeps (least recently used out), so
 * that requests with the same constraint share one grammar and its local
 * masks. Key: kind, max_ws (0: compact), strict and the text. A grammar's refs count the cache
 * and every caller of llm_grammar_compile, under the lock.
 */
typedef struct {
    llm_grammar    *g;
    int             kind;
    int             max_ws;
    int             strict;
    uint64_t        hash;
    size_t          len;
    char           *text;
    uint64_t        used;
} llm_gcache_entry;

/*
 * A local mask kept by the vocabulary for every grammar (matcher.c): key
 * is the cut stack's structure written canonically (its elements to the
 * end of their alternatives, the rules they reach, renumbered in the order
 * met, byte sets by content), so that grammars that share a rule shape
 * (a JSON string's characters, a number, ws) share its walk.
 */
typedef struct {
    uint32_t    hash;
    int32_t     n_fp;
    int32_t    *fp;
    uint32_t   *accepted;
    int32_t    *unsure;
    int32_t     n_unsure;
    uint64_t    used;               /* vl_tick when last used */
} llm_vlocal;

typedef struct {
    pthread_mutex_t     lock;
    llm_gcache_entry    e[LLM_GRAMMAR_CACHED];
    uint64_t            tick;
    llm_vlocal         *vl[LLM_GRAMMAR_VSHARED];    /* sets of two slots:
                                                       the older one goes */
    int                 n_vl;
    uint64_t            vl_hits, vl_tick;
} llm_gcache;

struct llm_grammar_vocab {
    const llm_tokenizer *tok;
    int32_t     n_vocab;
    /* trie in depth-first order: node i's subtree is [i, i + size) */
    int32_t     n_nodes;
    llm_tnode  *node;
    int32_t    *sorted;             /* token ids by their bytes */
    int32_t    *first_tok;          /* [n_nodes + 1]: the tokens of node
                                       i's subtree are sorted[first_tok[i]
                                       .. first_tok[i + size[i]]) */
    int         max_depth;
    int32_t    *stop;               /* stop token ids */
    int         n_stop;
    uint8_t    *kind;               /* per token: TK_* below */
    llm_gcache *cache;              /* mutable, behind its lock */
};

#define TK_BYTES    0   /* matched by its bytes (in the trie) */
#define TK_SPECIAL  1   /* only where the grammar names it */
#define TK_STOP     2   /* only where the grammar may end */
#define TK_NONE     3   /* never (empty piece) */

/*
 * A local mask (matcher.c), kept by the grammar for every matcher of it:
 * key is the cut stack's positions, top first (-1 past a short stack),
 * then 1 when it was cut (0: it is the whole stack), then the counter
 * class of each position (0 but at a GE_REPEAT).
 */
typedef struct {
    int32_t     key[8];             /* [4..6]: the positions' counter
                                       classes (matcher.c), [7] 0 */
    uint32_t   *accepted;
    int32_t    *unsure;             /* trie nodes */
    int32_t     n_unsure;
} llm_glocal;

typedef struct {
    pthread_mutex_t   lock;
    llm_glocal       *slot[LLM_GRAMMAR_SHARED * 2];   /* open addressing */
    int32_t          *min_bytes;    /* per rule, up to the longest token:
                                       made by the first matcher needing it */
    int               n;
} llm_gshared;

struct llm_grammar {
    const llm_grammar_vocab *vocab;
    llm_gelem  *el;
    int         n_el;
    int32_t    *rule_start;         /* first element of each rule */
    int32_t    *alt_start;          /* alternatives of rule r: */
    int32_t    *alt_first;          /*   alt_start[alt_first[r] .. [r+1]) */
    int         n_rules;
    int         root;
    uint8_t   (*sets)[32];
    int         n_sets;
    llm_grepeat *reps;
    int         n_reps;
    llm_gshared *shared;            /* mutable, behind its lock */
    llm_gcache  *cache;             /* the cache holding it, or NULL */
    int          refs;              /* under cache->lock */
    char        *relaxed;           /* llm_grammar_relaxed(), or NULL */
};

uint64_t llm_grammar_now_ns(void);

/* the parser: adds the rules of src to b; 0, or -1 with b->err */
int llm_gbnf_parse(llm_gbuild *b, const char *src, size_t len,
    const char *what);
void llm_gbuild_free(llm_gbuild *b);
/* a grammar from what llm_gbnf_parse built: checks, then flattens */
llm_grammar *llm_grammar_from_build(llm_gbuild *b);
/* llm_grammar_compile without the vocabulary's cache (bench, tests) */
llm_grammar *llm_grammar_compile_uncached(const llm_grammar_vocab *v,
    int kind, const char *src, size_t len, const llm_grammar_limits *lim,
    char *err, size_t err_len);
/* drops the cache's references (llm_grammar_vocab_free) */
void llm_grammar_cache_clear(llm_gcache *c);

/* a regex for the whole output -> GBNF text (root ::= ...) */
int llm_regex_to_gbnf(const char *re, size_t len, char **out,
    char *err, size_t err_len);

/* tests: feeds bytes; 0, or -1 (the state is kept) when they cannot come */
int llm_matcher_accept_bytes(llm_matcher *m, const char *s, size_t len);
/* bench: the states and stack nodes a matcher made, and its bytes */
void llm_matcher_stats(const llm_matcher *m, int *states, int *nodes,
    size_t *bytes);
/* tests and bench: local masks the vocabulary keeps, and how often one
   spared a walk */
int llm_grammar_vocab_shared(const llm_grammar_vocab *v, uint64_t *hits);
/* tests and bench: masks computed without the cache (the reference) */
int llm_matcher_mask_nocache(llm_matcher *m, uint32_t *mask);

#endif /* NGX_LLM_GRAMMAR_IMPL_H */
