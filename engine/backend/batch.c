/*
 * Checking a batch before a backend runs it: every index the scheduler
 * wrote must be in range, so a bad batch is one error, never a wild read.
 * Shared by every backend (the shape of llm_batch is theirs in common).
 *
 * defines: llm_batch_check
 */
#include <stdarg.h>
#include <stdio.h>

#include "backend/backend.h"


static int
batch_fail(char *err, size_t err_len, const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}


int
llm_batch_check(const llm_batch *b, const llm_batch_limits *l, char *err,
    size_t err_len)
{
    int  i, s, p, g, k, blk, rows = b->n_groups > 0 ? b->n_groups : 1;
    int  bound = b->n_groups > 0 ? l->n_blocks : l->n_blocks / l->n_groups;

    if (b->n_tokens <= 0 || b->n_tokens > l->max_tokens) {
        return batch_fail(err, err_len, "batch of %d tokens (1..%d allowed)",
                          b->n_tokens, l->max_tokens);
    }
    if (b->n_logits < 0 || b->n_logits > b->n_tokens
        || (b->n_logits > 0 && b->logit_idx == NULL)
        || (b->n_logits > 0 && l->need_logits && b->logits == NULL))
    {
        return batch_fail(err, err_len, "batch asks for %d logit rows of %d "
                          "tokens", b->n_logits, b->n_tokens);
    }

    if (b->n_groups != 0 && (b->n_groups != l->n_groups
                             || (b->n_groups > 1 && b->table_stride == NULL)))
    {
        return batch_fail(err, err_len, "batch of %d KV groups for a model "
                          "of %d", b->n_groups, l->n_groups);
    }
    for (i = 0; i < b->n_tokens; i++) {
        s = b->seq[i];
        p = b->pos[i];
        if (b->token[i] < 0 || b->token[i] >= l->vocab) {
            return batch_fail(err, err_len, "token %d: id %d outside the "
                              "vocabulary of %d", i, b->token[i], l->vocab);
        }
        if (s < 0 || s >= b->n_seqs) {
            return batch_fail(err, err_len, "token %d: sequence %d of %d", i,
                              s, b->n_seqs);
        }
        if (p < 0 || p >= l->max_seq_len) {
            return batch_fail(err, err_len, "token %d: position %d outside "
                              "the context of %d", i, p, l->max_seq_len);
        }
        if (p / l->block_size >= b->n_blocks[s]) {
            return batch_fail(err, err_len, "token %d: position %d needs "
                              "block %d but sequence %d has %d", i, p,
                              p / l->block_size, s, b->n_blocks[s]);
        }
        k = p / l->block_size;
        for (g = 0; g < rows; g++) {
            if (g > 0 && b->table_stride[s] < b->n_blocks[s]) {
                return batch_fail(err, err_len, "sequence %d: table row of "
                                  "%d for %d blocks", s, b->table_stride[s],
                                  b->n_blocks[s]);
            }
            blk = b->block_table[s][(g > 0 ? g * b->table_stride[s] : 0)
                                    + k];
            if (blk < 0 || blk >= bound) {
                return batch_fail(err, err_len, "token %d: KV block id %d "
                                  "outside the pool of %d", i, blk, bound);
            }
        }
    }

    if (b->n_hidden < 0 || b->n_hidden > b->n_tokens
        || (b->n_hidden > 0 && (b->hidden_idx == NULL || b->hidden == NULL)))
    {
        return batch_fail(err, err_len, "batch asks for %d hidden rows of "
                          "%d tokens", b->n_hidden, b->n_tokens);
    }
    for (i = 0; i < b->n_hidden; i++) {
        if (b->hidden_idx[i] < 0 || b->hidden_idx[i] >= b->n_tokens) {
            return batch_fail(err, err_len, "hidden row %d: token index %d "
                              "outside the batch of %d", i,
                              b->hidden_idx[i], b->n_tokens);
        }
    }
    for (i = 0; i < b->n_logits; i++) {
        if (b->logit_idx[i] < 0 || b->logit_idx[i] >= b->n_tokens) {
            return batch_fail(err, err_len, "logit row %d: token index %d of "
                              "%d", i, b->logit_idx[i], b->n_tokens);
        }
    }

    return 0;
}
