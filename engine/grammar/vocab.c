/*
 * The vocabulary's bytes once per model: every token matched by its bytes
 * in a trie laid out depth-first (node i's subtree is [i, i + size[i])),
 * so a mask is one linear walk that skips a whole subtree when the
 * grammar cannot take its first byte (the token trie of llguidance and
 * xgrammar). Special tokens and stop tokens stay out of it: the grammar
 * must name the first, the second come where it may end.
 *
 * defines: llm_grammar_vocab_new, llm_grammar_vocab_free
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"


static const llm_tokenizer  *sort_tok;     /* qsort has no context */


static int
piece_cmp(const void *a, const void *b)
{
    const char  *pa, *pb;
    size_t       la, lb;
    int          c;

    pa = llm_token_piece(sort_tok, *(const int32_t *) a, &la);
    pb = llm_token_piece(sort_tok, *(const int32_t *) b, &lb);
    c = memcmp(pa, pb, la < lb ? la : lb);
    if (c != 0) {
        return c;
    }
    if (la != lb) {
        return la < lb ? -1 : 1;
    }
    return *(const int32_t *) a - *(const int32_t *) b;
}


static int
vocab_alloc(llm_grammar_vocab *v, size_t n_nodes)
{
    v->node = malloc(n_nodes * sizeof(llm_tnode));
    return v->node ? 0 : -1;
}


llm_grammar_vocab *
llm_grammar_vocab_new(const llm_tokenizer *tok, char *err, size_t err_len)
{
    static pthread_mutex_t  sort_lock = PTHREAD_MUTEX_INITIALIZER;
    llm_grammar_vocab      *v;
    const int32_t          *stop;
    const char             *p, *q;
    size_t                  len, qlen, total = 1, k;
    int32_t                 n, i, path[1026];
    int                     n_sorted = 0, d, common;

    v = calloc(1, sizeof(*v));
    if (v == NULL) {
        goto oom;
    }
    v->tok = tok;
    v->n_vocab = n = llm_tokenizer_n_vocab(tok);
    v->cache = calloc(1, sizeof(llm_gcache));
    if (v->cache == NULL || pthread_mutex_init(&v->cache->lock, NULL) != 0) {
        free(v->cache);
        v->cache = NULL;
        goto oom;
    }
    v->kind = malloc((size_t) n);
    v->sorted = malloc((size_t) n * sizeof(int32_t));
    v->n_stop = llm_tokenizer_stop_ids(tok, &stop);
    v->stop = malloc((size_t) (v->n_stop + 1) * sizeof(int32_t));
    if (v->kind == NULL || v->sorted == NULL || v->stop == NULL) {
        goto oom;
    }
    memcpy(v->stop, stop, (size_t) v->n_stop * sizeof(int32_t));
    for (i = 0; i < n; i++) {
        p = llm_token_piece(tok, i, &len);
        if (llm_token_is_stop(tok, i)) {
            v->kind[i] = TK_STOP;
        } else if (llm_token_is_special(tok, i)) {
            v->kind[i] = TK_SPECIAL;
        } else if (p == NULL || len == 0 || len > 1024) {
            v->kind[i] = TK_NONE;
        } else {
            v->kind[i] = TK_BYTES;
            v->sorted[n_sorted++] = i;
            total += len;
        }
    }
    pthread_mutex_lock(&sort_lock);
    sort_tok = tok;
    qsort(v->sorted, (size_t) n_sorted, sizeof(int32_t), piece_cmp);
    pthread_mutex_unlock(&sort_lock);

    /* at most one node per byte of every piece, plus the root */
    if (vocab_alloc(v, total) != 0) {
        goto oom;
    }
    memset(&v->node[0], 0, sizeof(llm_tnode));
    v->n_nodes = 1;
    path[0] = 0;
    d = 0;                                  /* depth of the path's end */
    q = NULL;
    qlen = 0;
    for (i = 0; i < n_sorted; i++) {
        p = llm_token_piece(tok, v->sorted[i], &len);
        for (common = 0; q != NULL && (size_t) common < len
             && (size_t) common < qlen && p[common] == q[common]; common++)
        {
            /* shared prefix with the previous piece */
        }
        for ( ; d > common; d--) {           /* close the nodes left */
            v->node[path[d]].size = v->n_nodes - path[d];
        }
        for (k = (size_t) d; k < len; k++) {  /* open the new ones */
            int32_t  x = v->n_nodes++;

            memset(&v->node[x], 0, sizeof(llm_tnode));
            v->node[x].byte = (uint8_t) p[k];
            v->node[x].depth = (uint16_t) (k + 1);
            path[++d] = x;
        }
        if (v->node[path[d]].tok_end == 0) {
            v->node[path[d]].tok_begin = i;
        }
        v->node[path[d]].tok_end = i + 1;
        if (d > v->max_depth) {
            v->max_depth = d;
        }
        q = p;
        qlen = len;
    }
    for ( ; d > 0; d--) {
        v->node[path[d]].size = v->n_nodes - path[d];
    }
    v->node[0].size = v->n_nodes;
    /* the nodes made, fewer than the bytes of all pieces allocated */
    {
        llm_tnode  *shrunk = realloc(v->node, (size_t) v->n_nodes
                                              * sizeof(llm_tnode));

        if (shrunk != NULL) {
            v->node = shrunk;
        }
    }
    v->first_tok = malloc((size_t) (v->n_nodes + 1) * sizeof(int32_t));
    if (v->first_tok == NULL) {
        goto oom;
    }
    /* depth-first order is the tokens' sorted order */
    v->first_tok[v->n_nodes] = n_sorted;
    for (i = v->n_nodes - 1; i >= 0; i--) {
        v->first_tok[i] = v->node[i].tok_end > 0 ? v->node[i].tok_begin
                                                  : v->first_tok[i + 1];
    }
    return v;

oom:
    snprintf(err, err_len, "grammar: out of memory for the vocabulary");
    llm_grammar_vocab_free(v);
    return NULL;
}


void
llm_grammar_vocab_free(llm_grammar_vocab *v)
{
    if (v == NULL) {
        return;
    }
    if (v->cache != NULL) {
        int  i;

        for (i = 0; i < LLM_GRAMMAR_VSHARED; i++) {
            if (v->cache->vl[i] != NULL) {
                free(v->cache->vl[i]->fp);
                free(v->cache->vl[i]->accepted);
                free(v->cache->vl[i]->unsure);
                free(v->cache->vl[i]);
            }
        }
        llm_grammar_cache_clear(v->cache);
        pthread_mutex_destroy(&v->cache->lock);
        free(v->cache);
    }
    free(v->kind);
    free(v->sorted);
    free(v->stop);
    free(v->node);
    free(v->first_tok);
    free(v);
}
