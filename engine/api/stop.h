/*
 * Stop strings for streamed text: the worker pushes each piece of
 * detokenized text as it arrives and sends on only what can no longer turn
 * out to be part of a stop string, so a stop string never reaches the
 * client, whatever the chunking.
 *
 * Each stop string carries a KMP matcher: its state is the length of the
 * longest prefix of the stop string that is a suffix of the text seen so
 * far. A byte costs O(1) amortized per stop string, so a whole stream costs
 * O(text * n_stops), and the matcher holds back exactly max(state) bytes:
 * the longest tail that could still grow into a stop string.
 *
 * Which match wins: the stop string that completes first (the earliest end
 * in the text), and among those ending on the same byte the longest (the
 * earliest start). That is what a byte-by-byte stream would see, so the
 * output does not depend on how the text was cut into pushes, and no stop
 * string is ever left inside the output. (vLLM tries the strings in list
 * order per token instead, which can depend on the tokens.)
 *
 * UTF-8: output is cut only where a stop string starts or at the end of a
 * push. When the text arrives as whole characters and the stop strings are
 * valid UTF-8 (llm_api_parse checks both the body and each stop string),
 * every cut is on a character boundary.
 *
 * defines: llm_stop_init, llm_stop_push, llm_stop_flush, llm_stop_free
 */
#ifndef NGX_LLM_STOP_H
#define NGX_LLM_STOP_H

#include <stddef.h>
#include <stdint.h>

/* a byte string with its length (no NUL needed) */
typedef struct {
    char            *ptr;
    size_t           len;
} llm_stop_str;

typedef struct {
    char            *s;          /* (len) a copy of the stop string */
    size_t           len;
    size_t          *fail;       /* (len) KMP: fail[i] = longest proper
                                    border of s[0..i] */
    size_t           state;      /* bytes of s matched at the text's end */
} llm_stop_pattern;

typedef struct {
    llm_stop_pattern *pat;       /* (n_pat) */
    int              n_pat;

    char            *buf;        /* (buf_cap) held bytes, then new text */
    size_t           buf_len;
    size_t           buf_cap;
    size_t           emitted;    /* buf[0..emitted) was handed out last call */

    int              stopped;    /* a stop string matched: nothing more */
    int              which;      /* index of the stop string, or -1 */
} llm_stop;

typedef struct {
    const char      *text;       /* bytes to send now; valid until the next
                                    push, flush or free */
    size_t           len;
    int              stopped;    /* 1: a stop string matched; text is what
                                    came before it; push nothing more */
    int              which;      /* index of the matched stop string, -1 */
} llm_stop_out;

/*
 * Copies n stop strings (n may be 0: then push emits everything at once).
 * Returns 0, or -1 with a message in err when a stop string is empty or
 * memory runs out.
 */
int llm_stop_init(llm_stop *m, const llm_stop_str *stops, int n,
    char *err, size_t err_len);

/*
 * Feeds the next piece of text. out gets the bytes that are safe to send:
 * all held and new bytes except the tail that could still begin a stop
 * string, or, on a match, everything before the stop string (the rest is
 * dropped). After a match every push returns an empty out with stopped=1.
 * Returns 0, or -1 when memory runs out (out is then empty).
 */
int llm_stop_push(llm_stop *m, const char *text, size_t len,
    llm_stop_out *out);

/* end of the stream: out gets what was held back (empty after a match) */
void llm_stop_flush(llm_stop *m, llm_stop_out *out);

void llm_stop_free(llm_stop *m);

#endif /* NGX_LLM_STOP_H */
