/*
 * Output constraints compiled off the step loop.
 *
 * Design note. Compiling a grammar or a JSON Schema can take milliseconds
 * to the compiler's limit (grammar.h: 100 ms); the step loop must not
 * wait for it, or every running stream would pause. So the scheduler
 * hands a constrained request here: a compile thread (or n_threads)
 * compiles it while the sequence waits in the COMPILING state and the
 * others keep stepping; the thread then calls notify (the engine wakes its
 * loop) and the scheduler takes the result at its next step.
 *
 * Compiled grammars are cached by (kind, JSON whitespace, strictness,
 * text) in a small LRU: many
 * requests share one schema. A grammar is immutable, so one copy serves
 * every sequence (each has its own matcher); a cached entry holds a
 * reference count, and one the LRU evicts lives until its last sequence
 * ends. Refusals are cached too: the same bad schema is not compiled again
 * and again. Two requests for a text being compiled share the one job.
 *
 * Threads: every function here is called from the scheduler's thread; the
 * compile threads only compile a job's text and queue the result.
 *
 * defines: llm_compiler, llm_compiled, llm_compile_fn,
 *          llm_compiler_options, llm_compiler_stats,
 *          llm_compiler_options_default, llm_compiler_create,
 *          llm_compiler_free, llm_compiler_get, llm_compiler_take,
 *          llm_compiler_forget, llm_compiled_grammar, llm_compiled_error,
 *          llm_compiled_ref, llm_compiled_release,
 *          llm_compiler_stats_get
 */
#ifndef NGX_LLM_COMPILE_H
#define NGX_LLM_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

typedef struct llm_compiler  llm_compiler;
typedef struct llm_compiled  llm_compiled;

/* llm_grammar_compile's signature: tests put a slow one in its place */
typedef llm_grammar *(*llm_compile_fn)(const llm_grammar_vocab *v, int kind,
    const char *src, size_t len, const llm_grammar_limits *lim, char *err,
    size_t err_len);

typedef struct {
    const llm_grammar_vocab  *vocab;     /* the model's; outlives us */
    int                       n_threads;     /* default 1 */
    int                       cache_size;    /* entries; default 64 */
    llm_grammar_limits        limits;        /* llm_grammar_limits_default */
    llm_compile_fn            compile;       /* llm_grammar_compile */
    void                    (*notify)(void *arg);  /* from a compile thread:
                                                      a result is ready */
    void                     *notify_arg;
} llm_compiler_options;

typedef struct {
    uint64_t  compiles;         /* texts compiled (refusals included) */
    uint64_t  failures;         /* of them refused */
    uint64_t  hits;             /* requests served from the cache */
    uint64_t  compile_ns;       /* total time the compile threads spent */
    uint64_t  slowest_ns;
    int       cached;           /* entries in the cache now */
} llm_compiler_stats;

void llm_compiler_options_default(llm_compiler_options *o);

/* NULL with a message in err */
llm_compiler *llm_compiler_create(const llm_compiler_options *o, char *err,
    size_t err_len);
/* joins the threads; every llm_compiled must have been released */
void llm_compiler_free(llm_compiler *c);

/*
 * The compiled form of (kind, src) with its JSON whitespace (LLM_JSON_WS_*)
 * and strictness (the options' limits give the rest), for waiter. Returns 1 with *out (a
 * reference: release it) when the cache has it, 0 when it is compiling
 * (llm_compiler_take gives it to waiter later), -1 when out of memory.
 */
int llm_compiler_get(llm_compiler *c, int kind, int json_ws, int strict,
    const char *src, size_t len, void *waiter, llm_compiled **out);

/* one finished waiter: 1 with *waiter and *out (a reference), 0 if none */
int llm_compiler_take(llm_compiler *c, void **waiter, llm_compiled **out);

/* waiter went away (cancelled while compiling): it will not be taken */
void llm_compiler_forget(llm_compiler *c, void *waiter);

/* NULL when the text was refused: then llm_compiled_error says why */
const llm_grammar *llm_compiled_grammar(const llm_compiled *e);
const char *llm_compiled_error(const llm_compiled *e);
/* one more reference on e (a forked choice's), from the engine's thread */
void llm_compiled_ref(llm_compiled *e);
void llm_compiled_release(llm_compiler *c, llm_compiled *e);

void llm_compiler_stats_get(llm_compiler *c, llm_compiler_stats *st);

#endif
