/*
 * The continuous batcher's invariants (issue 5), on the CPU backend:
 *   (a) greedy outputs of N requests submitted together, or staggered over
 *       steps, equal each request run alone, token for token;
 *   (b) a prefix-cache hit gives the same tokens as a miss, and is counted;
 *   (c) a run forced into preemption by a tiny pool gives the same tokens
 *       (greedy and seeded sampling) and counts preemptions;
 *   (d) when idle every block is free again (finished and cancelled
 *       sequences leak nothing; cached blocks are evictable);
 *   (e) a seeded random stress of 500 requests (random lengths, arrivals,
 *       priorities, cancels and paused consumers) on tiny260K ends in
 *       bounded steps, every request finishes exactly once, nothing leaks,
 *       and every request that ran to its length equals its solo run;
 * plus TOO_LONG / QUEUE_FULL refusals, stop tokens, cancel (no token after
 * it), backpressure (a paused sequence is skipped, not preempted), chunked
 * prefill (decodes continue while a long prompt is prefilled), priority,
 * create's out-of-memory path (run it under ASan: see test_create_oom),
 * and a step whose forward runs out of memory (its sequences end with the
 * error, nothing leaks or stays cached, the next step works); priority
 * classes (class order at admission, the value within a class, a waiting
 * interactive request preempts the batch class for blocks, round robin
 * across fair keys, the prefill budget, the batch class giving way) and the
 * stress again with classes and keys.
 * (a)-(c) also run on SmolLM2 Q4_1 ($MODEL), kept short.
 * Sliding windows (hf-mistral: window 12 on every layer, one group;
 * hf-gemma3 and hf-gptoss: a sliding and a full layer, two groups):
 * prompts of several blocks past the window give the tokens of a plain
 * forward over tables of logical blocks that keep every page, alone in a
 * pool too small without the drops (so a page dropped while still inside
 * the window is reused, overwritten, and shows), batched, and on prefix
 * hits; the dropped pages are counted, a pool under the peak refuses.
 *
 * Speculative decoding, sampling on the backend, output constraints and n
 * choices are test_sched_decode.c's; the helpers both use are in
 * sched_fixture.h.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "alloc.h"
#include "backend/backend.h"
#include "model/model.h"
#include "sched/scheduler.h"
#include "common/priority.h"
#include "sched_fixture.h"


/* ---------------------------------------------------------------------------
 * (a) together / staggered == alone; (b) prefix hit == miss;
 * (c) preemption == none. Used for both models.
 */

#define NJ  6


static int
sum_prompts(const job *jobs, int n)
{
    int  i, t = 0;

    for (i = 0; i < n; i++) {
        t += jobs[i].n_prompt;
    }
    return t;
}


static void
test_batching(const char *name, llm_backend *be, int n_vocab, int scale)
{
    static job   jobs[NJ];
    static rec   alone[NJ], got[NJ];
    llm_sched_stats  st;
    llm_sched   *s;
    int          i, bad = -1, pl, mt, same;

    for (i = 0; i < NJ; i++) {
        pl = (3 + i * 7) * scale / 4 + 1;      /* 1..36 tokens at scale 4 */
        mt = 4 + (i * 5) % 13 * scale / 4;
        make_job(&jobs[i], n_vocab, 0, pl, mt, 0);
    }
    run_alone(be, jobs, alone, NJ);

    /* (a) together, small token budget so prompts are chunked */
    s = make_sched(be, 0, 0, 16, 64);
    for (i = 0; i < NJ; i++) {
        submit(s, &jobs[i], &got[i]);
    }
    ok(drain(s, 10000) > 0, "%s: together run drains", name);
    same = same_tokens(alone, got, NJ, &bad);
    ok(same, "%s: %d requests together == alone (first bad %d)", name, NJ,
       bad);
    ok(idle_and_clean(s), "%s: together: idle, no block used", name);
    llm_sched_free(s);

    /* (a) staggered: one new request every 3 steps */
    s = make_sched(be, 0, 0, 16, 64);
    cur_step = 0;
    for (i = 0; i < NJ; ) {
        if (cur_step % 3 == 0) {
            submit(s, &jobs[i], &got[i]);
            i++;
        }
        llm_sched_step(s);
        cur_step++;
    }
    drain(s, 10000);
    same = same_tokens(alone, got, NJ, &bad);
    ok(same,
       "%s: staggered == alone (first bad %d)", name, bad);
    llm_sched_free(s);

    /* (b) shared 2-block system prefix: the second wave hits the cache */
    for (i = 0; i < NJ; i++) {
        make_job(&jobs[i], n_vocab, 32, 32 + 1 + i * 3 * scale / 4, 6, 7);
    }
    make_job(&jobs[NJ - 1], n_vocab, 32, 32, 6, 7);  /* all prefix, 32 */
    run_alone(be, jobs, alone, NJ);
    scrub_kv(be, n_vocab);
    s = make_sched(be, 0, 1, 64, 64);
    submit(s, &jobs[0], &got[0]);
    drain(s, 10000);
    for (i = 1; i < NJ; i++) {
        submit(s, &jobs[i], &got[i]);
    }
    drain(s, 10000);
    llm_sched_stats_get(s, &st);
    same = same_tokens(alone, got, NJ, &bad);
    ok(same,
       "%s: prefix-cache hits == misses (first bad %d)", name, bad);
    is_int(got[0].res.n_cached, 0, "%s: first request: no hit", name);
    is_int(got[1].res.n_cached, 32, "%s: second: 32 cached tokens", name);
    is_int(got[NJ - 1].res.n_cached, 16,
           "%s: fully cached 32-token prompt: last block recomputed", name);
    ok(st.prefix_hit_tokens >= 32 * (NJ - 2) + 16,
       "%s: hits counted (%llu tokens)", name,
       (unsigned long long) st.prefix_hit_tokens);
    ok(idle_and_clean(s) && st.kv_blocks_cached >= 2,
       "%s: idle, nothing used, prefix still cached", name);
    llm_sched_free(s);

    /* (b) all at once: the prefix computed by the first in a step is
       shared by the others admitted in the same step */
    scrub_kv(be, n_vocab);
    s = make_sched(be, 0, 1, 64, 64);
    for (i = 0; i < NJ; i++) {
        submit(s, &jobs[i], &got[i]);
    }
    llm_sched_step(s);
    llm_sched_stats_get(s, &st);
    ok(st.prefix_hit_tokens >= 3 * 32, "%s: same-step prefix sharing: %llu "
       "hit tokens in the first step", name,
       (unsigned long long) st.prefix_hit_tokens);
    ok((int) (st.computed_tokens + st.prefix_hit_tokens)
       <= sum_prompts(jobs, NJ), "%s: ... and not computed (%llu + %llu "
       "<= %d)", name, (unsigned long long) st.computed_tokens,
       (unsigned long long) st.prefix_hit_tokens, sum_prompts(jobs, NJ));
    drain(s, 10000);
    same = same_tokens(alone, got, NJ, &bad);
    ok(same,
       "%s: same-step sharing == alone (first bad %d)", name, bad);
    llm_sched_free(s);

    /* (c) a pool of 6 blocks of 16 for 6 requests of up to ~70 tokens */
    for (i = 0; i < NJ; i++) {
        make_job(&jobs[i], n_vocab, 0, 10 + i * 4, 16 + i * 4 * scale / 4,
                 0);
        if (i % 2 == 1) {
            jobs[i].sp.temperature = 0.9f;
            jobs[i].sp.top_p = 0.9f;
            jobs[i].sp.seed = 1000 + i;
            jobs[i].sp.has_seed = 1;
        }
    }
    run_alone(be, jobs, alone, NJ);
    s = make_sched(be, 6, 1, 32, 64);
    for (i = 0; i < NJ; i++) {
        submit(s, &jobs[i], &got[i]);
    }
    ok(drain(s, 20000) > 0, "%s: tiny pool drains", name);
    llm_sched_stats_get(s, &st);
    ok(st.preemptions > 0, "%s: tiny pool preempted (%llu)", name,
       (unsigned long long) st.preemptions);
    same = same_tokens(alone, got, NJ, &bad);
    ok(same,
       "%s: preempted (greedy and seeded) == alone (first bad %d)", name,
       bad);
    ok(idle_and_clean(s), "%s: tiny pool: idle, no block used", name);
    llm_sched_free(s);
}


/* ---------------------------------------------------------------------------
 * admission, stop, cancel, backpressure, chunked prefill, priority
 */

static void
test_admission(llm_backend *be, int n_vocab)
{
    static job   j, big;
    static rec   r[8];
    llm_request  req;
    llm_seq     *q;
    llm_sched   *s;
    llm_sched_options  o;
    char         err[512];
    int          i, rc;

    /* pool of 4 blocks of 16 = 64 tokens; max_model_len 100; queue of 2 */
    llm_sched_options_default(&o);
    o.max_num_seqs = 2;
    o.n_blocks = 4;
    o.max_model_len = 100;
    o.max_queued = 2;
    o.on_token = on_token;
    o.on_finish = on_finish;
    s = llm_sched_create(be, &o, err, sizeof(err));
    if (!ok(s != NULL, "scheduler with a 4-block pool")) {
        return;
    }
    make_job(&big, n_vocab, 0, 90, 20, 0);
    memset(&req, 0, sizeof(req));
    req.prompt = big.prompt;
    req.n_prompt = 90;
    req.sampling = big.sp;
    req.max_tokens = 20;
    req.user = &r[7];
    rc = llm_sched_add(s, &req, &q, err, sizeof(err));
    is_int(rc, LLM_SCHED_TOO_LONG, "prompt + max_tokens > max_model_len");
    ok(strstr(err, "max_model_len 100") != NULL, "reason: %s", err);
    req.n_prompt = 60;
    req.max_tokens = 10;
    rc = llm_sched_add(s, &req, &q, err, sizeof(err));
    is_int(rc, LLM_SCHED_TOO_LONG, "KV need over the whole pool");
    ok(strstr(err, "whole pool has 4") != NULL, "reason: %s", err);
    req.max_tokens = 5;             /* 64 positions: fits exactly */
    is_int(llm_sched_add(s, &req, &q, err, sizeof(err)), LLM_SCHED_OK,
           "60 + 5 tokens (64 positions) fit a 64-token pool");
    llm_sched_cancel(s, q);
    req.n_prompt = 0;
    is_int(llm_sched_add(s, &req, &q, err, sizeof(err)),
           LLM_SCHED_BAD_REQUEST, "empty prompt refused");
    req.n_prompt = 1;
    big.prompt[0] = n_vocab;
    is_int(llm_sched_add(s, &req, &q, err, sizeof(err)),
           LLM_SCHED_BAD_REQUEST, "token outside the vocabulary refused");

    /* max_num_seqs 2, max_queued 2: two requests get batch places at the
       next step, two more may wait, the fifth is refused */
    make_job(&j, n_vocab, 0, 5, 3, 0);
    for (i = 0; i < 4; i++) {
        is_int(submit(s, &j, &r[i]), LLM_SCHED_OK, "request %d admitted",
               i);
    }
    memset(&req, 0, sizeof(req));
    req.prompt = j.prompt;
    req.n_prompt = j.n_prompt;
    req.sampling = j.sp;
    req.max_tokens = 3;
    rc = llm_sched_add(s, &req, &q, err, sizeof(err));
    is_int(rc, LLM_SCHED_QUEUE_FULL, "fifth: 2 placed + 2 waiting: queue full");
    ok(strstr(err, "max_queued") != NULL, "reason: %s", err);
    llm_sched_step(s);
    rc = llm_sched_add(s, &req, &q, err, sizeof(err));
    is_int(rc, LLM_SCHED_QUEUE_FULL, "after a step: 2 running, 2 waiting: "
           "still full");
    drain(s, 1000);
    is_int(submit(s, &j, &r[4]), LLM_SCHED_OK, "after they finish: room");
    drain(s, 1000);
    for (i = 0; i < 5; i++) {
        ok(r[i].n_finish == 1 && r[i].res.finish == LLM_SEQ_LENGTH
           && r[i].n_out == 3, "request %d: 3 tokens, LENGTH", i);
    }
    ok(idle_and_clean(s), "admission: idle, no block used");
    llm_sched_free(s);
}


static void
test_stop_cancel_pause(llm_backend *be, int n_vocab)
{
    static job   j[4];
    static rec   alone[4], r[4];
    llm_request  req;
    llm_sched   *s;
    llm_sched_stats  st;
    char         err[512];
    int          i, n, bad = -1;

    for (i = 0; i < 4; i++) {
        make_job(&j[i], n_vocab, 0, 8 + i, 20, 0);
    }
    run_alone(be, j, alone, 4);

    /* stop token: the 6th token of the solo run ends it (at its first
       occurrence) */
    s = make_sched(be, 0, 1, 64, 8);
    memset(&req, 0, sizeof(req));
    req.prompt = j[0].prompt;
    req.n_prompt = j[0].n_prompt;
    req.sampling = j[0].sp;
    req.max_tokens = 20;
    req.stop_ids = &alone[0].out[5];
    req.n_stop_ids = 1;
    req.user = &r[0];
    memset(&r[0], 0, sizeof(r[0]));
    llm_sched_add(s, &req, &r[0].seq, err, sizeof(err));
    drain(s, 1000);
    for (n = 0; alone[0].out[n] != alone[0].out[5]; n++) {
        /* first occurrence */
    }
    is_int(r[0].n_out, n + 1, "stop id: output ends with its first "
           "occurrence");
    ok(r[0].res.finish == LLM_SEQ_STOP
       && r[0].res.stop_token == alone[0].out[5], "finish STOP, stop_token");

    /* cancel: one waiting, one running; no token after; blocks freed */
    submit(s, &j[1], &r[1]);
    submit(s, &j[2], &r[2]);
    llm_sched_step(s);
    llm_sched_step(s);
    n = r[1].n_out;
    r[1].cancelled = 1;
    llm_sched_cancel(s, r[1].seq);
    ok(r[1].n_finish == 1 && r[1].res.finish == LLM_SEQ_CANCELLED,
       "cancel of a running sequence finishes it at once");
    drain(s, 1000);
    ok(r[1].after_cancel == 0 && r[1].n_out == n, "no token after cancel");
    ok(same_tokens(&alone[2], &r[2], 1, &bad), "the other one unaffected");
    submit(s, &j[3], &r[3]);
    r[3].cancelled = 1;
    llm_sched_cancel(s, r[3].seq);
    ok(r[3].n_finish == 1 && r[3].n_out == 0,
       "cancel of a waiting sequence: finished, no token");
    llm_sched_stats_get(s, &st);
    is_int((int) st.cancelled, 2, "2 cancels counted");
    ok(idle_and_clean(s), "after cancels: idle, no block used");
    llm_sched_free(s);

    /* backpressure: a paused sequence makes no progress, others do; it is
       not preempted and resumes to the same tokens */
    s = make_sched(be, 0, 1, 64, 8);
    submit(s, &j[1], &r[1]);
    submit(s, &j[2], &r[2]);
    llm_sched_step(s);
    llm_sched_step(s);
    r[1].paused = 1;
    n = r[1].n_out;
    for (i = 0; i < 5; i++) {
        llm_sched_step(s);
    }
    ok(r[1].n_out == n && r[2].n_out == n + 5,
       "paused: no token for it (%d -> %d), 5 for the other (%d)", n,
       r[1].n_out, r[2].n_out);
    drain(s, 1000);
    is_int(llm_sched_step(s), 0, "only a paused sequence left: step is 0");
    ok(llm_sched_has_work(s), "... and has_work still says 1");
    r[1].paused = 0;
    drain(s, 1000);
    llm_sched_stats_get(s, &st);
    ok(same_tokens(&alone[1], &r[1], 2, &bad) && st.preemptions == 0,
       "resumed: same tokens as alone, no preemption");
    llm_sched_free(s);
}


static void
test_chunked_prefill_priority(llm_backend *be, int n_vocab)
{
    static job       j[3];
    static rec       r[3];
    llm_sched       *s;
    llm_sched_stats  st;
    int              before, mixed, announced;

    /* a decode keeps producing one token per step while a 150-token prompt
       is prefilled in chunks of the 16-token budget */
    make_job(&j[0], n_vocab, 0, 4, 40, 0);
    make_job(&j[1], n_vocab, 0, 150, 2, 0);
    s = make_sched(be, 0, 0, 16, 8);
    submit(s, &j[0], &r[0]);
    llm_sched_step(s);
    llm_sched_stats_get(s, &st);
    ok(st.last_step_tokens == 4 && st.last_step_prefills == 1
       && st.last_step_decodes == 0, "a prompt alone: a prefill step of 4 "
       "tokens (%d, %d prefills, %d decodes)", st.last_step_tokens,
       st.last_step_prefills, st.last_step_decodes);
    llm_sched_step(s);
    llm_sched_stats_get(s, &st);
    ok(st.last_step_tokens == 1 && st.last_step_prefills == 0
       && st.last_step_decodes == 1, "then a decode step of 1 token (%d, "
       "%d prefills, %d decodes)", st.last_step_tokens,
       st.last_step_prefills, st.last_step_decodes);
    submit(s, &j[1], &r[1]);
    before = r[0].n_out;
    cur_step = 0;
    mixed = 0;
    announced = 0;
    step_calls = 0;
    while (r[1].n_out == 0 && cur_step < 100) {
        llm_sched_step(s);
        llm_sched_stats_get(s, &st);
        mixed += st.last_step_tokens == 16 && st.last_step_prefills == 1
                 && st.last_step_decodes == 1;
        announced += step_announced == st.last_step_tokens;
        cur_step++;
    }
    ok(step_calls == cur_step && announced == cur_step, "on_step announced "
       "each step's tokens, once a step (%d calls, %d right, %d steps)",
       step_calls, announced, cur_step);
    is_int(cur_step, 10, "150-token prompt prefilled over 10 steps "
           "(15 tokens each beside the decode)");
    is_int(r[0].n_out - before, 10, "the decode ran in every one of them");
    is_int(mixed, 10, "each of them a mixed step of 16 tokens (15 of the "
           "prompt, 1 decode)");
    drain(s, 1000);
    llm_sched_free(s);

    /* priority: with one batch place, the lower value runs first */
    s = make_sched(be, 0, 0, 64, 1);
    make_job(&j[0], n_vocab, 0, 5, 3, 0);
    make_job(&j[1], n_vocab, 0, 5, 3, 0);
    make_job(&j[2], n_vocab, 0, 5, 3, 0);
    j[1].priority = -1;
    cur_step = 0;
    submit(s, &j[0], &r[0]);
    submit(s, &j[1], &r[1]);
    submit(s, &j[2], &r[2]);
    drain(s, 1000);
    ok(r[1].step_first < r[0].step_first && r[0].step_first < r[2].step_first,
       "priority -1 first, then FCFS (first tokens at steps %d, %d, %d)",
       r[1].step_first, r[0].step_first, r[2].step_first);
    llm_sched_free(s);
}


/* ---------------------------------------------------------------------------
 * (e) random stress
 */

static void
test_stress(llm_backend *be, int n_vocab, int classes)
{
    static job   jobs[MAX_REQ];
    static rec   got[MAX_REQ], alone[MAX_REQ];
    llm_sched   *s;
    llm_sched_stats  st;
    int          n_req = 500, added = 0, steps = 0, i, k, bad = 0, n_cmp = 0;
    int          refused = 0, finished_twice = 0, late = 0, rc;

    rng_state = 12345;
    for (i = 0; i < n_req; i++) {
        /* a third share a 16-token prefix: cache hits under eviction */
        make_job(&jobs[i], n_vocab, rnd(3) == 0 ? 16 : 0, 1 + rnd(48),
                 1 + rnd(24), 3);
        jobs[i].priority = rnd(4) == 0 ? -1 : 0;
        if (classes) {
            /* a third batch class, five keys: give-way, class preemption
               and the round robin under the same churn */
            jobs[i].priority += i % 3 == 0 ? LLM_PRIORITY_BATCH : 0;
            jobs[i].fair_key = i % 5;
        }
        if (rnd(4) == 0) {
            jobs[i].sp.temperature = 0.8f;
            jobs[i].sp.seed = i;
            jobs[i].sp.has_seed = 1;
        }
    }
    /* 20 blocks of 16 tokens: preemption and eviction happen often */
    s = make_sched(be, 20, 1, 48, 12);
    while ((added < n_req || llm_sched_has_work(s)) && steps < 50000) {
        for (k = rnd(3); k > 0 && added < n_req; k--, added++) {
            rc = submit(s, &jobs[added], &got[added]);
            if (rc != LLM_SCHED_OK) {
                refused += rc != LLM_SCHED_QUEUE_FULL;
                got[added].n_finish = 1;   /* never admitted: nothing due */
                got[added].cancelled = 1;
            }
        }
        /* cancel a random admitted, unfinished request now and then */
        if (added > 0 && rnd(10) == 0) {
            i = rnd(added);
            if (got[i].seq != NULL && got[i].n_finish == 0) {
                got[i].cancelled = 1;
                llm_sched_cancel(s, got[i].seq);
            }
        }
        /* a slow consumer now and then */
        if (added > 0) {
            i = rnd(added);
            got[i].paused = rnd(4) == 0;
        }
        if (rnd(8) == 0) {
            for (i = 0; i < added; i++) {
                got[i].paused = 0;
            }
        }
        if (llm_sched_step(s) < 0) {
            break;
        }
        steps++;
        if (added == n_req && steps % 64 == 0) {
            for (i = 0; i < added; i++) {
                got[i].paused = 0;
            }
        }
    }
    llm_sched_stats_get(s, &st);
    if (classes) {
        printf("# stress again: a third batch class, five fair keys\n");
    }
    ok(!llm_sched_has_work(s) && steps < 50000,
       "500 requests drained in %d steps (bound 50000)", steps);
    for (i = 0; i < n_req; i++) {
        finished_twice += got[i].n_finish != 1;
        late += got[i].after_cancel;
    }
    is_int(finished_twice, 0, "every request finished exactly once");
    is_int(late, 0, "no token after a cancel");
    is_int(refused, 0, "no refusal but QUEUE_FULL");
    ok(idle_and_clean(s), "stress: idle, every block free (%d used)",
       st.kv_blocks_used);
    ok(st.preemptions > 0 && st.cancelled > 0 && st.prefix_hit_tokens > 0,
       "stress exercised preemption (%llu), cancel (%llu), prefix hits "
       "(%llu tokens)", (unsigned long long) st.preemptions,
       (unsigned long long) st.cancelled,
       (unsigned long long) st.prefix_hit_tokens);
    llm_sched_free(s);

    /* every request that ran to its end equals its solo run */
    run_alone(be, jobs, alone, n_req);
    for (i = 0; i < n_req; i++) {
        if (!got[i].cancelled) {
            n_cmp++;
            if (!same_tokens(&alone[i], &got[i], 1, &k)) {
                bad++;
            }
        }
    }
    ok(bad == 0 && n_cmp > 300, "%d uncancelled stress requests == solo "
       "(%d differ)", n_cmp, bad);
}


/* ---------------------------------------------------------------------------
 * priority classes, fair keys, prefill budget, giving way
 */

/* the index in r[0..n) of the k-th sequence to get its first token */
static int
nth_first(const rec *r, int n, int k)
{
    int  i, j, before;

    for (i = 0; i < n; i++) {
        for (before = 0, j = 0; j < n; j++) {
            before += r[j].step_first < r[i].step_first
                      || (r[j].step_first == r[i].step_first && j < i);
        }
        if (before == k) {
            return i;
        }
    }
    return -1;
}


static void
test_classes(llm_backend *be, int n_vocab)
{
    static job   j[4], big, small;
    static rec   r[4], rb, rs, alone[2];
    llm_sched   *s;
    llm_sched_stats  st;
    int          i, bad = 0;

    /* out-of-range class options are refused at create */
    opt_max_prefill = 65;
    s = make_sched(be, 0, 0, 64, 1);
    opt_max_prefill = 0;
    ok(s == NULL, "max_prefill_tokens 65 > max_batched_tokens 64 refused");
    llm_sched_free(s);
    opt_batch_share = 101;
    s = make_sched(be, 0, 0, 64, 1);
    opt_batch_share = LLM_DEFAULT_BATCH_SHARE;
    ok(s == NULL, "batch_share 101 refused");
    llm_sched_free(s);

    /* one batch place: classes in order, the value inside a class (0
       before 5, though 5 came first), batch 150 after batch 100 */
    s = make_sched(be, 0, 0, 64, 1);
    for (i = 0; i < 4; i++) {
        make_job(&j[i], n_vocab, 0, 5, 2, 0);
    }
    j[0].priority = LLM_PRIORITY_BATCH;
    j[1].priority = LLM_PRIORITY_INTERACTIVE + 5;
    j[2].priority = LLM_PRIORITY_BATCH + 50;
    j[3].priority = LLM_PRIORITY_INTERACTIVE;
    cur_step = 0;
    for (i = 0; i < 4; i++) {
        submit(s, &j[i], &r[i]);
    }
    drain(s, 1000);
    ok(nth_first(r, 4, 0) == 3 && nth_first(r, 4, 1) == 1
       && nth_first(r, 4, 2) == 0 && nth_first(r, 4, 3) == 2,
       "class order at admission: interactive (0 then 5), then batch "
       "(first tokens at steps %d %d %d %d)", r[0].step_first,
       r[1].step_first, r[2].step_first, r[3].step_first);
    llm_sched_free(s);

    /* an 8-block pool held by a batch sequence: an interactive arrival
       preempts it at once instead of waiting for it to finish */
    make_job(&big, n_vocab, 0, 100, 20, 0);
    big.priority = LLM_PRIORITY_BATCH;
    make_job(&small, n_vocab, 0, 30, 5, 0);
    run_alone(be, &big, &alone[0], 1);
    run_alone(be, &small, &alone[1], 1);
    s = make_sched(be, 8, 0, 64, 4);
    submit(s, &big, &rb);
    for (cur_step = 0; cur_step < 4; cur_step++) {
        llm_sched_step(s);
    }
    submit(s, &small, &rs);
    llm_sched_step(s);
    cur_step++;
    ok(rs.n_out == 1 && rb.n_out < 20,
       "KV pressure: the interactive arrival ran in its first step (%d "
       "tokens), the batch one not done (%d)", rs.n_out, rb.n_out);
    drain(s, 1000);
    llm_sched_stats_get(s, &st);
    ok(rb.res.n_preempted >= 1 && rs.res.n_preempted == 0
       && st.preemptions == (uint64_t) rb.res.n_preempted,
       "the batch class was preempted (%d), the interactive one never",
       rb.res.n_preempted);
    ok(same_tokens(&alone[0], &rb, 1, &bad)
       && same_tokens(&alone[1], &rs, 1, &bad) && idle_and_clean(s),
       "preempted by class: both == alone, idle and clean");
    llm_sched_free(s);
}


static void
test_fair_keys(llm_backend *be, int n_vocab)
{
    static job   j[51];
    static rec   r[51];
    llm_sched   *s;
    int          i, k, b_place = -1, unkeyed_ok;

    /* key A queues 50 requests, then key B one: two batch places */
    s = make_sched(be, 0, 0, 64, 2);
    for (i = 0; i < 51; i++) {
        make_job(&j[i], n_vocab, 0, 6, 3, 0);
        j[i].fair_key = i < 50 ? 0xa : 0xb;
        submit(s, &j[i], &r[i]);
    }
    cur_step = 0;
    drain(s, 10000);
    for (k = 0; k < 51; k++) {
        if (nth_first(r, 51, k) == 50) {
            b_place = k;
        }
    }
    ok(b_place >= 0 && b_place <= 2, "fair keys: key B's one request was "
       "served in place %d of 51 behind key A's 50 (first token at step %d)",
       b_place + 1, r[50].step_first);
    ok(idle_and_clean(s), "fair keys: idle and clean");
    llm_sched_free(s);

    /* without keys (all 0) it stays FCFS */
    s = make_sched(be, 0, 0, 64, 2);
    for (i = 0; i < 8; i++) {
        make_job(&j[i], n_vocab, 0, 6, 3, 0);
        submit(s, &j[i], &r[i]);
    }
    cur_step = 0;
    drain(s, 1000);
    for (unkeyed_ok = 1, k = 0; k < 8; k++) {
        unkeyed_ok &= nth_first(r, 8, k) == k;
    }
    ok(unkeyed_ok, "no keys: FCFS");
    llm_sched_free(s);
}


static void
test_prefill_budget(llm_backend *be, int n_vocab)
{
    static job   j[3];
    static rec   r[3], alone[3];
    llm_sched   *s;
    int          n, worst = 0, decode_missed = 0, before0, before1, bad = 0;

    /* two decodes beside two long prompts, max_prefill_tokens 8 of a
       64-token budget: every step holds the decodes plus at most 8 */
    make_job(&j[0], n_vocab, 0, 4, 60, 0);
    make_job(&j[1], n_vocab, 0, 120, 3, 0);
    make_job(&j[2], n_vocab, 0, 100, 3, 0);
    run_alone(be, j, alone, 3);
    opt_max_prefill = 8;
    s = make_sched(be, 0, 0, 64, 8);
    opt_max_prefill = 0;
    submit(s, &j[0], &r[0]);
    llm_sched_step(s);
    submit(s, &j[1], &r[1]);
    submit(s, &j[2], &r[2]);
    cur_step = 0;
    while ((r[1].n_out == 0 || r[2].n_out == 0) && cur_step < 100) {
        before0 = r[0].n_out;
        before1 = r[1].n_out;
        n = llm_sched_step(s);
        cur_step++;
        /* decodes this step: j[0], and j[1] once its prompt is done */
        if (n - 1 - (before1 > 0) > worst) {
            worst = n - 1 - (before1 > 0);
        }
        decode_missed += r[0].n_out == before0;
    }
    is_int(worst, 8, "prefill budget: at most 8 prefill tokens per step "
           "beside the decodes");
    is_int(cur_step, 28, "220 prompt tokens over 28 steps (8 a step: the "
           "budget bounds the prompts, not the decode)");
    is_int(decode_missed, 0, "the decode ran in every step");
    drain(s, 1000);
    ok(same_tokens(alone, r, 3, &bad) && idle_and_clean(s),
       "prefill budget: == alone, idle and clean");
    llm_sched_free(s);
}


static void
test_give_way(llm_backend *be, int n_vocab)
{
    static job   j[6];
    static rec   r[6], alone[6];
    llm_sched   *s;
    int          i, n, steps = 0, over = 0, min_b = 1000, max_b = 0;
    int          before[6], batch_tokens, inter_tokens, bad = 0;

    /* four batch decodes, then two interactive ones: with batch_share 50
       the batch class adds at most 50% of the interactive tokens of the
       step (2 decodes: 1 token), round robin over the four */
    for (i = 0; i < 6; i++) {
        make_job(&j[i], n_vocab, 0, 4 + i, i < 4 ? 60 : 20, 0);
        j[i].priority = i < 4 ? LLM_PRIORITY_BATCH : LLM_PRIORITY_INTERACTIVE;
    }
    run_alone(be, j, alone, 6);
    opt_batch_share = 50;
    s = make_sched(be, 0, 0, 64, 8);
    opt_batch_share = LLM_DEFAULT_BATCH_SHARE;
    for (i = 0; i < 4; i++) {
        submit(s, &j[i], &r[i]);
    }
    llm_sched_step(s);
    llm_sched_step(s);
    submit(s, &j[4], &r[4]);
    submit(s, &j[5], &r[5]);
    llm_sched_step(s);                      /* their prefill */
    for (i = 0; i < 4; i++) {
        before[i] = r[i].n_out;
    }
    while (r[4].n_out < 20 && r[5].n_out < 20 && steps < 100) {
        int  b4 = r[4].n_out, b5 = r[5].n_out, bb = 0;

        for (i = 0; i < 4; i++) {
            bb += r[i].n_out;
        }
        n = llm_sched_step(s);
        steps++;
        inter_tokens = (r[4].n_out - b4) + (r[5].n_out - b5);
        for (batch_tokens = -bb, i = 0; i < 4; i++) {
            batch_tokens += r[i].n_out;
        }
        over += batch_tokens > inter_tokens / 2 || inter_tokens != 2
                || n != inter_tokens + batch_tokens;
    }
    for (i = 0; i < 4; i++) {
        n = r[i].n_out - before[i];
        min_b = n < min_b ? n : min_b;
        max_b = n > max_b ? n : max_b;
    }
    is_int(over, 0, "give way: every step ran both interactive decodes and "
           "at most 1 batch token (share 50%%)");
    ok(max_b - min_b <= 1 && min_b >= steps / 4 - 1,
       "give way: the batch share went round the class (%d..%d tokens "
       "each in %d steps)", min_b, max_b, steps);
    drain(s, 1000);
    ok(same_tokens(alone, r, 6, &bad) && idle_and_clean(s),
       "give way: == alone (first bad %d), idle and clean", bad);
    llm_sched_free(s);

    /* share 0: the batch class is paused while an interactive one runs */
    opt_batch_share = 0;
    s = make_sched(be, 0, 0, 64, 8);
    opt_batch_share = LLM_DEFAULT_BATCH_SHARE;
    submit(s, &j[0], &r[0]);
    llm_sched_step(s);
    llm_sched_step(s);
    submit(s, &j[4], &r[4]);
    before[0] = r[0].n_out;
    while (llm_sched_has_work(s) && r[4].n_finish == 0 && steps < 1000) {
        llm_sched_step(s);
        steps++;
    }
    is_int(r[0].n_out - before[0], 0, "share 0: the batch class paused "
           "while the interactive one ran");
    drain(s, 1000);
    ok(same_tokens(alone, r, 1, &bad) && same_tokens(&alone[4], &r[4], 1,
                                                     &bad)
       && idle_and_clean(s), "share 0: resumed after it, == alone");
    llm_sched_free(s);
}


/* ---------------------------------------------------------------------------
 * create out of memory
 */

/* An AddressSanitizer build stops at a malloc it cannot serve unless told
 * to return NULL, as malloc does; test_create_oom needs the NULL. Unused
 * without ASan. */
const char *__asan_default_options(void);

const char *
__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}


/* a logits buffer that cannot exist (65536 sequences of a 2^30-token
 * vocabulary: 2^48 bytes): create fails with its message and frees
 * everything, reading nothing it freed (ASan checks the last part) */
static void
test_create_oom(llm_backend *be)
{
    llm_sched_options  o;
    llm_backend        fake = *be;
    llm_model          huge = *be->model;
    llm_sched         *s;
    char               err[512] = "";

    huge.cfg.vocab_size = 1 << 30;
    fake.model = &huge;
    llm_sched_options_default(&o);
    o.max_num_seqs = 65536;
    o.on_token = on_token;
    o.on_finish = on_finish;
    s = llm_sched_create(&fake, &o, err, sizeof(err));
    ok(s == NULL && strstr(err, "out of memory for 65536 sequences of a "
                           "1073741824-token vocabulary") != NULL,
       "create: out of memory for the logits is refused: %s", err);
    llm_sched_free(s);
}


typedef struct {
    llm_sched  *s;
    int         rc;
} step_arg;


static void *
step_thread(void *p)
{
    step_arg  *a = p;

    a->rc = llm_sched_step(a->s);
    return NULL;
}


/* one step from a new thread (the only one using s meanwhile): its matmul
 * scratch starts empty, so the forward has to allocate */
static int
step_fresh_thread(llm_sched *s)
{
    step_arg   a = { s, -2 };
    pthread_t  t;

    if (pthread_create(&t, NULL, step_thread, &a) != 0) {
        return -2;
    }
    pthread_join(t, NULL);
    return a.rc;
}


/* a step whose forward runs out of memory (alloc.h's hook) fails: both
 * sequences of the batch end with the error and no token, every block is
 * free and none stays in the prefix cache (their first 16 positions were
 * committed before the forward that never computed them); the same
 * requests then run to the tokens they give alone */
static void
test_step_oom(const llm_model *m, llm_backend *ref, int n_vocab)
{
    llm_sched_stats   st;
    llm_backend      *be = make_backend(m, 64, 64, 2);
    llm_sched        *s = be != NULL ? make_sched(be, 0, 1, 0, 4) : NULL;
    static job        jobs[2];
    static rec        recs[2], alone[2];
    int               i, rc, bad = -1;

    if (s == NULL) {
        ok(0, "step oom: backend and scheduler");
        llm_backend_free(be);
        return;
    }
    for (i = 0; i < 2; i++) {
        make_job(&jobs[i], n_vocab, 0, 20, 6, 0);
    }
    run_alone(ref, jobs, alone, 2);
    for (i = 0; i < 2; i++) {
        submit(s, &jobs[i], &recs[i]);
    }
    llm_test_fail_alloc_after(0);
    rc = step_fresh_thread(s);
    llm_test_fail_alloc_after(-1);
    llm_sched_stats_get(s, &st);
    ok(rc == -1, "step oom: the step fails");
    for (i = 0; i < 2; i++) {
        ok(recs[i].n_finish == 1 && recs[i].res.finish == LLM_SEQ_ERROR
           && recs[i].n_out == 0
           && strstr(recs[i].msg, "out of memory") != NULL,
           "step oom: sequence %d ends with the error, no token: %s", i,
           recs[i].msg);
    }
    ok(idle_and_clean(s) && st.kv_blocks_cached == 0,
       "step oom: idle, no block used or cached (%d cached)",
       st.kv_blocks_cached);
    for (i = 0; i < 2; i++) {
        submit(s, &jobs[i], &recs[i]);
    }
    ok(drain(s, 100) > 0 && same_tokens(recs, alone, 2, &bad)
       && idle_and_clean(s),
       "step oom: the next steps work, tokens == alone (first bad %d)", bad);
    llm_sched_free(s);
    llm_backend_free(be);
}


/* ---------------------------------------------------------------------------
 * main
 */

/* ---------------------------------------------------------------------------
 * sliding window: the blocks that left it are dropped, outputs unchanged
 */

#define WJ  3

/* greedy tokens of j by forward alone over a table that keeps every block
 * (blocks 0..): what the scheduler gave before blocks were dropped */
static int
window_reference(llm_backend *be, const job *j, int32_t *out)
{
    static int32_t  tok[256], pos[256], table[32];
    const int32_t  *tables[1] = { table };
    int32_t         seq0[256] = {0}, nb = 32, idx;
    int             n = j->n_prompt, i, v, best, vocab;
    float          *logits;
    llm_batch       b;

    vocab = be->model->cfg.vocab_size;
    logits = malloc(vocab * sizeof(float));
    for (i = 0; i < 32; i++) {
        table[i] = i;
    }
    memcpy(tok, j->prompt, n * sizeof(int32_t));
    for (i = 0; i < n; i++) {
        pos[i] = i;
    }
    memset(&b, 0, sizeof(b));
    b.n_tokens = n;
    b.token = tok;
    b.pos = pos;
    b.seq = seq0;
    b.n_seqs = 1;
    b.block_table = tables;
    b.n_blocks = &nb;
    b.n_logits = 1;
    b.logit_idx = &idx;
    b.logits = logits;
    for (i = 0; i < j->max_tokens; i++) {
        idx = b.n_tokens - 1;
        if (logits == NULL || be->iface.forward(be, &b) != 0) {
            free(logits);
            return -1;
        }
        for (best = 0, v = 1; v < vocab; v++) {
            best = logits[v] > logits[best] ? v : best;
        }
        out[i] = best;
        /* the next forward: the sampled token alone at the next position */
        b.token = &out[i];
        b.pos = &pos[n + i];
        pos[n + i] = n + i;
        b.n_tokens = 1;
    }
    free(logits);
    return 0;
}


static void
test_window(const char *name, int alone_blocks, int under_blocks)
{
    static job        jobs[WJ];
    static rec        alone[WJ], batch[WJ], hit[WJ];
    static int32_t    ref[WJ][40];
    int               lens[WJ] = { 150, 120, 37 }, i, same = 1, bad = -1;
    llm_model         m;
    llm_backend      *be;
    llm_sched        *s;
    llm_sched_stats   st;
    uint64_t          slid = 0;
    char              path[256];

    snprintf(path, sizeof(path), "t/data/models/%s.gguf", name);
    if (!ok(llm_model_load(&m, path, 0, 1) == 0, "%s loads", name)) {
        printf("# %s\n", m.err);
        return;
    }
    ok(m.cfg.sliding_window == 12, "%s: window 12", name);
    be = make_backend(&m, 64, 256, 1);
    if (be == NULL) {
        llm_model_free(&m);
        return;
    }
    for (i = 0; i < WJ; i++) {
        /* 30 shared tokens: jobs 1 and 2 hit job 0's first blocks */
        make_job(&jobs[i], m.cfg.vocab_size, 30, lens[i], 40, 7);
        same &= window_reference(be, &jobs[i], ref[i]) == 0;
    }
    ok(same, "%s: reference forwards ran", name);

    /* alone, in fewer blocks of 16 than 189 positions take: only with
       the drops (4: one sliding group; 8: a full group holds 12) */
    for (i = 0; i < WJ; i++) {
        s = make_sched(be, alone_blocks, 0, 16, 1);
        submit(s, &jobs[i], &alone[i]);
        drain(s, 10000);
        llm_sched_stats_get(s, &st);
        slid += st.kv_blocks_slid;
        ok(idle_and_clean(s), "%s: job %d alone leaves the pool clean",
           name, i);
        llm_sched_free(s);
        same = alone[i].n_out == 40
               && memcmp(alone[i].out, ref[i], sizeof(ref[i])) == 0;
        ok(same, "%s: job %d (%d tokens) alone in %d blocks == the "
           "forward keeping every block", name, i, lens[i], alone_blocks);
    }
    /* positions 0..188: blocks 0..11; at the last step (n = 188) the
       window reads 177.., so blocks 0..10 were dropped (one sliding
       group in each model) */
    ok(slid >= 11 + 9, "%s: %llu pages dropped", name,
       (unsigned long long) slid);

    /* batched in 2 x alone_blocks, then with the prefix cache in the
       whole pool, twice: misses, then hits (a hit needs every group's
       page of every block from position 0 still cached) */
    s = make_sched(be, 2 * alone_blocks, 0, 64, WJ);
    for (i = 0; i < WJ; i++) {
        submit(s, &jobs[i], &batch[i]);
    }
    drain(s, 10000);
    llm_sched_stats_get(s, &st);
    ok(same_tokens(alone, batch, WJ, &bad), "%s: batched in %d blocks == "
       "alone (first bad %d; %llu preemptions)", name, 2 * alone_blocks,
       bad, (unsigned long long) st.preemptions);
    ok(idle_and_clean(s), "%s: batched leaves the pool clean", name);
    llm_sched_free(s);
    s = make_sched(be, 64, 1, 64, WJ);
    for (i = 0; i < WJ; i++) {
        submit(s, &jobs[i], &batch[i]);
    }
    drain(s, 10000);
    for (i = 0; i < WJ; i++) {
        submit(s, &jobs[i], &hit[i]);
    }
    drain(s, 10000);
    llm_sched_stats_get(s, &st);
    ok(same_tokens(alone, batch, WJ, &bad), "%s: batched with the prefix "
       "cache == alone (first bad %d)", name, bad);
    ok(same_tokens(alone, hit, WJ, &bad), "%s: prefix hits == misses "
       "(first bad %d)", name, bad);
    ok(st.prefix_hit_tokens >= 144 + 112 + 32, "%s: %llu prompt tokens "
       "from the cache", name, (unsigned long long) st.prefix_hit_tokens);
    ok(st.kv_blocks_slid > 0 && idle_and_clean(s), "%s: %llu dropped, the "
       "pool clean", name, (unsigned long long) st.kv_blocks_slid);
    llm_sched_free(s);

    /* the peak is what admission asks */
    s = make_sched(be, under_blocks, 0, 16, 1);
    ok(submit(s, &jobs[0], &alone[0]) == LLM_SCHED_TOO_LONG,
       "%s: a pool of %d blocks, under the peak, refuses the request", name,
       under_blocks);
    llm_sched_free(s);
    llm_backend_free(be);
    llm_model_free(&m);
}


int
main(void)
{
    const char  *model = tap_model();
    char         path[1200];
    llm_model    m;
    llm_backend *be;

    tap_fixture(path, sizeof(path), "models/tiny260K-q4_1.gguf");
    if (!ok(llm_model_load(&m, path, 0, 1) == 0, "tiny260K loads")) {
        printf("# %s\n", m.err);
        return tap_done();
    }
    /* one thread: tiny260K is too small for a second one to pay */
    be = make_backend(&m, 64, 64, 1);
    if (be != NULL) {
        TIMED(test_batching("tiny260K", be, m.cfg.vocab_size, 4));
        TIMED(test_admission(be, m.cfg.vocab_size));
        TIMED(test_stop_cancel_pause(be, m.cfg.vocab_size));
        TIMED(test_chunked_prefill_priority(be, m.cfg.vocab_size));
        TIMED(test_stress(be, m.cfg.vocab_size, 0));
        TIMED(test_classes(be, m.cfg.vocab_size));
        TIMED(test_fair_keys(be, m.cfg.vocab_size));
        TIMED(test_prefill_budget(be, m.cfg.vocab_size));
        TIMED(test_give_way(be, m.cfg.vocab_size));
        TIMED(test_stress(be, m.cfg.vocab_size, 1));
        TIMED(test_create_oom(be));
        TIMED(test_step_oom(&m, be, m.cfg.vocab_size));
    }
    llm_backend_free(be);
    llm_model_free(&m);
    TIMED(test_window("hf-mistral", 4, 2));
    TIMED(test_window("hf-gemma3", 8, 7));
    TIMED(test_window("hf-gptoss", 8, 7));

    /* make unit-asan runs this file again under ASan and UBSan (the use
       after free in llm_sched_create's error path was found that way):
       tiny260K is enough there, SmolLM2 under ASan takes minutes */
    if (getenv("SCHED_TINY_ONLY") != NULL) {
        return tap_done();
    }
    if (access(model, R_OK) != 0) {
        ok(0, "SmolLM2 model at %s (make deps fetches it)", model);
        return tap_done();
    }
    if (!ok(llm_model_load(&m, model, 0, 1) == 0, "SmolLM2 loads")) {
        printf("# %s\n", m.err);
        return tap_done();
    }
    be = make_backend(&m, 64, 64, 2);
    if (be != NULL) {
        TIMED(test_batching("SmolLM2", be, m.cfg.vocab_size, 1));
    }
    llm_backend_free(be);
    llm_model_free(&m);
    return tap_done();
}
