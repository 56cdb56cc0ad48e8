/*
 * Harmony's messages out of a reply (api/harmony.h): an incremental
 * scanner with three states.
 *
 *   H_HEAD   the header: everything up to <|message|>, then read
 *   H_BODY   the body: up to <|end|>, <|call|>, <|return|> or the next
 *            <|start|>; a text channel's goes out as it comes, a call's is
 *            kept whole
 *   H_PLAIN  not Harmony: everything is content
 *
 * Only a tail that may be the start of a marker ("<|", "<|en") waits for
 * the next push.
 *
 * defines: llm_harmony_init, llm_harmony_push, llm_harmony_free
 */
#define _GNU_SOURCE     /* memmem */
#include <stdlib.h>
#include <string.h>

#include "api/harmony.h"


enum { H_HEAD, H_BODY, H_PLAIN };

#define MESSAGE     "<|message|>"
#define CHANNEL     "<|channel|>"
#define START       "<|start|>"

/* the markers a body ends at, <|start|> last: it stays for the next
   header (a message the model did not close) */
static const char *const  body_ends[] = {
    "<|end|>", "<|call|>", "<|return|>", START, NULL
};

static const char *const  markers[] = {
    START, CHANNEL, MESSAGE, "<|end|>", "<|call|>", "<|return|>",
    "<|constrain|>", NULL
};


/* the longest tail of s[0..n) that is a proper start of a marker */
static size_t
held_tail(const char *s, size_t n)
{
    const char *const  *m;
    size_t              k;

    for (k = n < 12 ? n : 12; k > 0; k--) {
        if (s[n - k] != '<') {
            continue;
        }
        for (m = markers; *m; m++) {
            if (strlen(*m) > k && memcmp(*m, s + n - k, k) == 0) {
                return k;
            }
        }
    }
    return 0;
}


static long
find(const char *s, size_t n, const char *what)
{
    const char  *f = n ? memmem(s, n, what, strlen(what)) : NULL;

    return f ? (long) (f - s) : -1;
}


static int
grow(llm_harmony *h, char **p, size_t *cap, size_t need)
{
    size_t  c = *cap ? *cap : 64;
    char   *q;

    if (need <= *cap) {
        return 0;
    }
    while (c < need) {
        c *= 2;
    }
    q = realloc(*p, c);
    if (q == NULL) {
        h->oom = 1;
        return -1;
    }
    *p = q;
    *cap = c;
    return 0;
}


static void
in_cut(llm_harmony *h, size_t n)
{
    memmove(h->in, h->in + n, h->in_len - n);
    h->in_len -= n;
}


/* a word of the header after what ("to=", CHANNEL) into out, "" if none */
static void
head_word(const llm_harmony *h, const char *what, char *out, size_t cap)
{
    long    at = find(h->head, h->head_len, what);
    size_t  i, k = 0;

    out[0] = '\0';
    if (at < 0) {
        return;
    }
    for (i = (size_t) at + strlen(what); i < h->head_len && k + 1 < cap;
         i++)
    {
        if (h->head[i] == ' ' || h->head[i] == '<' || h->head[i] == '\n') {
            break;
        }
        out[k++] = h->head[i];
    }
    out[k] = '\0';
}


static void
head_read(llm_harmony *h)
{
    char  channel[32];

    head_word(h, "to=", h->recipient, sizeof(h->recipient));
    head_word(h, CHANNEL, channel, sizeof(channel));
    h->kind = h->recipient[0] ? LLM_HARMONY_CALL
              : strcmp(channel, "analysis") == 0 ? LLM_HARMONY_REASONING
              : LLM_HARMONY_CONTENT;
    h->body_len = 0;
}


static void
body_out(llm_harmony *h, const char *s, size_t n, llm_harmony_emit emit,
    void *data)
{
    if (n == 0) {
        return;
    }
    if (h->kind != LLM_HARMONY_CALL) {
        emit(data, h->kind, NULL, s, n, 1);
        return;
    }
    if (grow(h, &h->body, &h->body_cap, h->body_len + n) == 0) {
        memcpy(h->body + h->body_len, s, n);
        h->body_len += n;
    }
}


static void
run(llm_harmony *h, int final, llm_harmony_emit emit, void *data)
{
    const char *const  *e;
    long                at, best;
    size_t              keep, skip = 0;

    for ( ;; ) {
        switch (h->state) {

        case H_HEAD:
            at = find(h->in, h->in_len, MESSAGE);
            keep = at >= 0 ? h->in_len - (size_t) at
                   : final ? 0 : held_tail(h->in, h->in_len);
            if (h->head_len + h->in_len - keep > LLM_HARMONY_HEAD_MAX) {
                emit(data, LLM_HARMONY_CONTENT, NULL, h->head, h->head_len,
                     1);
                h->head_len = 0;
                h->state = H_PLAIN;
                continue;
            }
            memcpy(h->head + h->head_len, h->in, h->in_len - keep);
            h->head_len += h->in_len - keep;
            in_cut(h, h->in_len - keep);
            if (at >= 0) {
                in_cut(h, sizeof(MESSAGE) - 1);
                head_read(h);
                h->head_len = 0;
                h->state = H_BODY;
                continue;
            }
            /* the end: a reply that never wrote a header is plain text;
               a header cut short has no body to show */
            if (final && h->head_len
                && find(h->head, h->head_len, CHANNEL) < 0
                && find(h->head, h->head_len, START) < 0
                && find(h->head, h->head_len, "to=") < 0)
            {
                emit(data, LLM_HARMONY_CONTENT, NULL, h->head, h->head_len,
                     1);
            }
            if (final) {
                h->head_len = 0;
            }
            return;

        case H_BODY:
            best = -1;
            for (e = body_ends; *e; e++) {
                at = find(h->in, h->in_len, *e);
                if (at >= 0 && (best < 0 || at < best)) {
                    best = at;
                    skip = e[1] == NULL ? 0 : strlen(*e);  /* START */
                }
            }
            keep = best >= 0 ? h->in_len - (size_t) best
                   : final ? 0 : held_tail(h->in, h->in_len);
            body_out(h, h->in, h->in_len - keep, emit, data);
            in_cut(h, h->in_len - keep);
            if (best < 0 && !final) {
                return;
            }
            if (h->kind == LLM_HARMONY_CALL) {
                emit(data, LLM_HARMONY_CALL, h->recipient, h->body,
                     h->body_len, best >= 0);
            }
            h->state = H_HEAD;
            if (best < 0) {
                return;
            }
            in_cut(h, skip);
            continue;

        default:    /* H_PLAIN */
            if (h->in_len) {
                emit(data, LLM_HARMONY_CONTENT, NULL, h->in, h->in_len, 1);
            }
            h->in_len = 0;
            return;
        }
    }
}


void
llm_harmony_init(llm_harmony *h)
{
    memset(h, 0, sizeof(*h));
    h->state = H_HEAD;
}


int
llm_harmony_push(llm_harmony *h, const char *s, size_t n, int final,
    llm_harmony_emit emit, void *data)
{
    if (h->oom || grow(h, &h->in, &h->in_cap, h->in_len + n + 1) != 0) {
        return -1;
    }
    if (n) {
        memcpy(h->in + h->in_len, s, n);
        h->in_len += n;
    }
    run(h, final, emit, data);
    return h->oom ? -1 : 0;
}


void
llm_harmony_free(llm_harmony *h)
{
    free(h->in);
    free(h->body);
    memset(h, 0, sizeof(*h));
}
