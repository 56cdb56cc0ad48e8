/*
 * gpt-oss's Harmony format, the reply side: the model's text split into
 * its messages, each one's header read for the channel and the recipient.
 * The prompt ends in "<|start|>assistant" (the published template's
 * generation prompt), so the reply is a run of
 *
 *   [<|start|>assistant] HEADER <|message|> BODY END
 *
 *   HEADER  <|channel|>CHANNEL, and maybe " to=RECIPIENT" (before or after
 *           the channel) and a content type (" json" or
 *           " <|constrain|>json"): "<|channel|>commentary
 *           to=functions.get_weather <|constrain|>json"
 *   END     <|end|> (more messages follow), <|call|> (a tool call: the
 *           model stops), <|return|> (the answer is done), or the end of
 *           the text (a stop token the detokenizer did not write, or a cut)
 *
 * What each message is (llm_harmony_emit's kind):
 *
 *   a recipient (to=...)        LLM_HARMONY_CALL, the body whole at its end
 *   analysis                    LLM_HARMONY_REASONING, as it comes
 *   final, commentary, other    LLM_HARMONY_CONTENT, as it comes
 *                               (commentary without a recipient is a
 *                               preamble the user is meant to see)
 *
 * Text that is no Harmony at all (a header that never reaches <|message|>
 * within LLM_HARMONY_HEAD_MAX bytes, or a reply that ends without ever
 * writing <|channel|>, <|start|> or to=) is content: nothing the model
 * wrote is lost. A header cut by the end of the text (max_tokens) has no
 * body: nothing to emit. Pushing a text whole
 * or split at any byte emits the same (t/unit/test_harmony.c).
 *
 * defines: llm_harmony_init, llm_harmony_push, llm_harmony_free
 */
#ifndef NGX_LLM_API_HARMONY_H
#define NGX_LLM_API_HARMONY_H

#include <stddef.h>

#define LLM_HARMONY_REASONING   1
#define LLM_HARMONY_CONTENT     2
#define LLM_HARMONY_CALL        3

#define LLM_HARMONY_HEAD_MAX    256     /* bytes of one header */

/*
 * kind LLM_HARMONY_CALL: recipient ("functions.get_weather"), s[0..n) the
 * body, complete 0 when the text ended inside it; other kinds: recipient
 * NULL, a piece of the message's text.
 */
typedef void (*llm_harmony_emit)(void *data, int kind, const char *recipient,
    const char *s, size_t n, int complete);

typedef struct {
    int      state;             /* H_HEAD, H_BODY, H_PLAIN */
    int      kind;              /* the message's LLM_HARMONY_* */
    char     head[LLM_HARMONY_HEAD_MAX];
    size_t   head_len;
    char     recipient[128];
    char    *in;                /* text not yet read (a marker's start) */
    size_t   in_len, in_cap;
    char    *body;              /* a call's body so far */
    size_t   body_len, body_cap;
    int      oom;
} llm_harmony;

void llm_harmony_init(llm_harmony *h);

/* final: the end of the text. 0, or -1 when memory ran out */
int llm_harmony_push(llm_harmony *h, const char *s, size_t n, int final,
    llm_harmony_emit emit, void *data);

void llm_harmony_free(llm_harmony *h);

#endif /* NGX_LLM_API_HARMONY_H */
