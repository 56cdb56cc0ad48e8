/*
 * Constrained decoding: a grammar compiled once per request, and a matcher
 * per sequence that says, at each step, which tokens may come next (a
 * bitmask over the vocabulary) and advances on the token sampled.
 *
 * Sources (docs/api.md, "Structured outputs"):
 *   LLM_CONSTRAINT_JSON_OBJECT   any JSON object (the text is ignored)
 *   LLM_CONSTRAINT_JSON_SCHEMA   a JSON Schema (the json_schema.schema text)
 *   LLM_CONSTRAINT_GRAMMAR       GBNF as llama.cpp users know it, plus
 *                                  %json { schema }   a JSON Schema inline
 *                                  <[123]>            the token with id 123
 *                                  <|im_end|>, <tool_call> (unquoted <...>):
 *                                                     the special token
 *                                                     whose text it is
 *   LLM_CONSTRAINT_REGEX         a regular expression for the whole output
 *
 * The matcher works on bytes; a token is allowed when its bytes (or, for a
 * special token, the token itself) can continue the text matched so far.
 * EOS (and the model's other stop tokens) are allowed only where the
 * grammar may end. The compiled grammar is immutable and may be shared by
 * matchers on other threads; a matcher belongs to one sequence.
 *
 * defines: llm_grammar_vocab_new, llm_grammar_vocab_free,
 *          llm_grammar_compile, llm_grammar_free, llm_grammar_relaxed,
 *          llm_matcher_new, llm_matcher_free, llm_matcher_mask,
 *          llm_matcher_accept, llm_matcher_rollback, llm_matcher_can_end,
 *          llm_matcher_is_done
 */
#ifndef NGX_LLM_GRAMMAR_H
#define NGX_LLM_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "common/constraint.h"
#include "tokenizer/tokenizer.h"

typedef struct llm_grammar_vocab llm_grammar_vocab;
typedef struct llm_grammar llm_grammar;
typedef struct llm_matcher llm_matcher;

/* LLM_JSON_WS_COMPACT / FLEXIBLE: common/constraint.h */

typedef struct {
    size_t      max_source;     /* bytes of grammar or schema text */
    uint64_t    max_compile_ns; /* past it the compile fails (a 400) */
    int         max_ws;         /* flexible: longest whitespace run */
    int         json_ws;        /* LLM_JSON_WS_*: the JSON of json_object,
                                   json_schema and %json (tool calls) */
    int         strict;         /* 1: a schema keyword the grammar cannot
                                   enforce is an error; 0: relaxed, and
                                   llm_grammar_relaxed() lists it */
} llm_grammar_limits;

/* LLM_CONSTRAINT_MAX_BYTES of source, 100 ms, flexible JSON of at most
   20 blanks in a row, strict (the request path sets both per request:
   the slot's json_ws and strict) */
void llm_grammar_limits_default(llm_grammar_limits *lim);

/* the tokens' bytes once per model (the token trie lives here) */
llm_grammar_vocab *llm_grammar_vocab_new(const llm_tokenizer *tok,
    char *err, size_t err_len);
void llm_grammar_vocab_free(llm_grammar_vocab *v);

/*
 * Compiles src (len bytes) of the given kind. Returns the grammar, or NULL
 * with a sentence in err that names what is wrong or unsupported (e.g.
 * "json_schema: unsupported keyword 'patternProperties' at
 * /properties/a"): the request then gets a 400 with it.
 *
 * The vocabulary keeps the grammars it compiled last: the same kind and
 * text (and whitespace and strictness) may give back the same grammar,
 * counted, so every compile still takes one llm_grammar_free. Free the
 * vocabulary last.
 */
llm_grammar *llm_grammar_compile(const llm_grammar_vocab *v, int kind,
    const char *src, size_t len, const llm_grammar_limits *lim,
    char *err, size_t err_len);
void llm_grammar_free(llm_grammar *g);

/* without strict: the schema keywords relaxed, ready for a response
   header ("uri-format@/properties/homepage, uniqueItems@/tags"); "" when
   everything is enforced */
const char *llm_grammar_relaxed(const llm_grammar *g);

llm_matcher *llm_matcher_new(const llm_grammar *g);
void llm_matcher_free(llm_matcher *m);

/*
 * mask: (n_vocab + 31) / 32 words; bit (id % 32) of word id / 32 set when
 * token id may come next. Returns the number of allowed tokens (0 only
 * when the matcher is done).
 */
int llm_matcher_mask(llm_matcher *m, uint32_t *mask);

/* advances on token id; -1 when it was not allowed (the state is kept) */
int llm_matcher_accept(llm_matcher *m, int32_t id);

/* undoes the last k accepted tokens (speculative drafts); -1 if k is more
   than were accepted */
int llm_matcher_rollback(llm_matcher *m, int k);

/* 1 when the text so far is a complete match (EOS allowed now) */
int llm_matcher_can_end(const llm_matcher *m);

/* 1 when nothing may follow: the sequence ends here (finish "stop") */
int llm_matcher_is_done(const llm_matcher *m);

#endif /* NGX_LLM_GRAMMAR_H */
