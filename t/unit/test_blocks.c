/*
 * Block manager: allocation and release, refcounted sharing of cached
 * prefixes, the last block never matched, chained hashes, LRU eviction,
 * and a seeded random run checked against the invariants after every
 * operation (counts add up, references equal table entries, every
 * registered block is found by its own content); a fork (n choices)
 * shares the full blocks and gets its own copy of a partial last one.
 * A sliding window: at every position exactly the blocks with a position
 * inside the window of the next query are held (none outside kept, none
 * inside dropped), the peak holds, dropped registered blocks still give
 * prefix hits, forks and releases skip the holes, and the random run
 * again with a window; with a full and a sliding layer group, the full
 * group keeps every page, and a prefix hit needs every group's page (one
 * evicted sliding page ends the hit there).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "sched/block_manager.h"

#define BS  4


/* n_groups layer groups (model/kv.h), the last one sliding `window` when
 * window > 0 (one group: mistral's; two: a full one, then a sliding one) */
static void
set_groups(llm_block_manager *bm, int window, int n_groups)
{
    llm_kv_layout  lo;

    memset(&lo, 0, sizeof(lo));
    lo.n_groups = n_groups;
    lo.per_group = 1;
    lo.window = window;
    lo.sliding[n_groups - 1] = window > 0;
    llm_blocks_set_layout(bm, &lo);
}


static void
fill(int32_t *t, int n, int32_t base)
{
    int  i;

    for (i = 0; i < n; i++) {
        t[i] = base + i;
    }
}


static void
test_alloc_release(void)
{
    llm_block_manager  bm;
    llm_block_table    a, b;
    char               err[256];

    ok(llm_blocks_init(&bm, 0, BS, 1, err, sizeof(err)) == -1
       && strstr(err, "0 blocks") != NULL, "0 blocks refused: %s", err);
    if (!ok(llm_blocks_init(&bm, 8, BS, 0, err, sizeof(err)) == 0,
            "init 8 blocks of 4")) {
        return;
    }
    llm_blocks_table_init(&a, &bm, 20);
    llm_blocks_table_init(&b, &bm, 20);
    is_int(a.cap, 5, "table for 20 tokens holds 5 blocks");
    is_int(llm_blocks_needed(&bm, &a, 9), 3, "9 tokens need 3 blocks");
    ok(llm_blocks_ensure(&bm, &a, 9) == 0, "ensure 9 tokens");
    is_int(a.n, 3, "table has 3 blocks");
    is_int(a.ids[0], 0, "first block id 0");
    is_int(llm_blocks_needed(&bm, &a, 12), 0, "12 tokens fit in 3 blocks");
    is_int(llm_blocks_n_used(&bm), 3, "3 used");
    is_int(llm_blocks_n_available(&bm), 5, "5 available");
    ok(llm_blocks_ensure(&bm, &b, 24) == -1 && b.n == 0,
       "6 blocks refused with 5 left, nothing taken");
    ok(llm_blocks_ensure(&bm, &b, 20) == 0 && b.n == 5, "5 blocks taken");
    is_int(llm_blocks_n_available(&bm), 0, "pool exhausted");
    llm_blocks_release(&bm, &a);
    llm_blocks_release(&bm, &b);
    is_int(a.n + b.n, 0, "tables empty after release");
    is_int(llm_blocks_n_available(&bm), 8, "all 8 available again");
    is_int(llm_blocks_n_cached(&bm), 0, "no prefix caching: nothing cached");
    llm_blocks_table_free(&a);
    llm_blocks_table_free(&b);
    llm_blocks_free(&bm);
}


static void
test_prefix_sharing(void)
{
    llm_block_manager  bm;
    llm_block_table    a, b, c;
    int32_t            t[16], u[16];
    char               err[256];

    llm_blocks_init(&bm, 16, BS, 1, err, sizeof(err));
    llm_blocks_table_init(&a, &bm, 16);
    llm_blocks_table_init(&b, &bm, 16);
    llm_blocks_table_init(&c, &bm, 16);
    fill(t, 16, 100);

    /* a computes 10 tokens: blocks 0 and 1 are full, block 2 half */
    is_int(llm_blocks_match_prefix(&bm, &a, t, 10), 0, "cold cache: 0 hit");
    llm_blocks_ensure(&bm, &a, 10);
    llm_blocks_commit(&bm, &a, t, 10);
    is_int(a.n_hashed, 2, "2 full blocks registered");
    is_int(llm_blocks_n_cached(&bm), 2, "2 cached");

    /* b shares 9 tokens: matches 2 blocks, shares them */
    is_int(llm_blocks_match_prefix(&bm, &b, t, 9), 8, "b: 8 tokens hit");
    ok(b.ids[0] == a.ids[0] && b.ids[1] == a.ids[1], "b shares a's blocks");
    is_int(bm.ref[a.ids[0]], 2, "shared block has 2 references");
    is_int(llm_blocks_n_used(&bm), 3, "sharing takes no new block");
    llm_blocks_release(&bm, &b);

    /* exactly 8 tokens: the block with the last token is not matched */
    is_int(llm_blocks_match_prefix(&bm, &b, t, 8), 4,
           "8-token prompt: only the first block matched");
    llm_blocks_release(&bm, &b);

    /* same second block content after a different first block: a miss */
    memcpy(u, t, sizeof(u));
    u[0] = 7;
    is_int(llm_blocks_match_prefix(&bm, &c, u, 12), 0,
           "different first block: chain hash misses block 2");
    llm_blocks_release(&bm, &c);

    /* released but cached: still a hit, counted available */
    llm_blocks_release(&bm, &a);
    is_int(llm_blocks_n_used(&bm), 0, "all released: 0 used");
    is_int(llm_blocks_n_available(&bm), 16, "cached blocks count available");
    is_int(bm.n_evictable, 2, "2 evictable");
    is_int(llm_blocks_match_prefix(&bm, &b, t, 16), 8,
           "hit after release (12 would need block 3, never computed)");
    is_int(bm.n_evictable, 0, "matched blocks leave the LRU list");
    llm_blocks_release(&bm, &b);

    llm_blocks_table_free(&a);
    llm_blocks_table_free(&b);
    llm_blocks_table_free(&c);
    llm_blocks_free(&bm);
}


static void
test_lru_eviction(void)
{
    llm_block_manager  bm;
    llm_block_table    a, b, big;
    int32_t            ta[8], tb[8];
    char               err[256];

    llm_blocks_init(&bm, 4, BS, 1, err, sizeof(err));
    llm_blocks_table_init(&a, &bm, 8);
    llm_blocks_table_init(&b, &bm, 8);
    llm_blocks_table_init(&big, &bm, 16);
    fill(ta, 8, 10);
    fill(tb, 8, 50);
    llm_blocks_ensure(&bm, &a, 5);
    llm_blocks_commit(&bm, &a, ta, 5);
    llm_blocks_ensure(&bm, &b, 5);
    llm_blocks_commit(&bm, &b, tb, 5);
    llm_blocks_release(&bm, &a);      /* a's cached block released first */
    llm_blocks_release(&bm, &b);
    is_int(bm.n_evictable, 2, "2 cached blocks evictable");
    is_int(bm.n_free, 2, "2 free");
    /* 3 blocks: 2 free + the least recently released cached one (a's) */
    ok(llm_blocks_ensure(&bm, &big, 12) == 0, "3 blocks from 2 free + 1 LRU");
    is_int((int) bm.evictions, 1, "one eviction");
    is_int(llm_blocks_match_prefix(&bm, &a, ta, 8), 0, "a's prefix evicted");
    is_int(llm_blocks_match_prefix(&bm, &b, tb, 8), 4, "b's prefix kept");
    llm_blocks_release(&bm, &b);
    llm_blocks_release(&bm, &big);
    is_int(llm_blocks_n_available(&bm), 4, "all available");
    llm_blocks_table_free(&a);
    llm_blocks_table_free(&b);
    llm_blocks_table_free(&big);
    llm_blocks_free(&bm);
}


/* ---------------------------------------------------------------------------
 * random operations against the invariants
 */

#define R_SEQS    12
#define R_BLOCKS  40
#define R_MAXTOK  40

static uint64_t  rng = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t) (rng % n);
}


/* 0 if every invariant holds, else a message in why */
static int
check_invariants(const llm_block_manager *bm, const llm_block_table *t,
    const char **why)
{
    static int  refs[R_BLOCKS];
    int         i, k, n_in_map = 0, n_reg = 0;

    memset(refs, 0, sizeof(refs));
    for (i = 0; i < R_SEQS; i++) {
        for (k = 0; k < t[i].n * bm->n_groups; k++) {
            int g = k / t[i].n, id = t[i].ids[g * t[i].cap + k % t[i].n];

            if ((id < 0) != (bm->sliding[g] && k % t[i].n < t[i].n_dropped))
            {
                *why = "a hole outside the dropped leading blocks";
                return -1;
            }
            if (id >= 0) {
                refs[id]++;
            }
        }
    }
    for (i = 0; i < R_BLOCKS; i++) {
        if (refs[i] != bm->ref[i]) {
            *why = "a block's refcount differs from the tables holding it";
            return -1;
        }
        n_reg += bm->registered[i];
    }
    if (llm_blocks_n_used(bm) + llm_blocks_n_available(bm) != R_BLOCKS) {
        *why = "used + available != total";
        return -1;
    }
    for (i = 0; i < (int) bm->map_cap; i++) {
        n_in_map += bm->map[i] >= 0;
    }
    if (n_in_map != n_reg) {
        *why = "hash map entries != registered blocks";
        return -1;
    }
    for (i = 0; i < R_BLOCKS; i++) {
        if (bm->ref[i] == 0 && !bm->registered[i]) {
            k = 0;
            while (k < bm->n_free && bm->free_ids[k] != i) {
                k++;
            }
            if (k == bm->n_free) {
                *why = "an unreferenced unregistered block is not free";
                return -1;
            }
        }
    }
    return 0;
}


static void
test_random(int window, int n_groups)
{
    llm_block_manager  bm;
    llm_block_table    t[R_SEQS];
    int32_t            toks[R_SEQS][R_MAXTOK];
    int                len[R_SEQS] = {0}, i, op, s, n, hits = 0, bad = 0;
    const char        *why = "";
    char               err[256];

    llm_blocks_init(&bm, R_BLOCKS, BS, 1, err, sizeof(err));
    set_groups(&bm, window, n_groups);
    for (i = 0; i < R_SEQS; i++) {
        llm_blocks_table_init(&t[i], &bm, R_MAXTOK);
    }
    for (op = 0; op < 20000 && !bad; op++) {
        s = rnd(R_SEQS);
        if (t[s].n == 0) {
            /* a new sequence over a 3-letter alphabet: many shared prefixes */
            len[s] = 1 + rnd(R_MAXTOK - 8);
            for (i = 0; i < len[s] + 8; i++) {
                toks[s][i] = rnd(3);
            }
            n = llm_blocks_match_prefix(&bm, &t[s], toks[s], len[s]);
            hits += n > 0;
            llm_blocks_slide(&bm, &t[s], n);
            if (llm_blocks_ensure(&bm, &t[s], len[s]) != 0) {
                llm_blocks_release(&bm, &t[s]);
            } else {
                llm_blocks_commit(&bm, &t[s], toks[s], len[s]);
            }
        } else if (rnd(3) == 0 || len[s] >= R_MAXTOK - 8) {
            llm_blocks_release(&bm, &t[s]);
        } else if (llm_blocks_slide(&bm, &t[s], len[s]) >= 0
                   && llm_blocks_ensure(&bm, &t[s], len[s] + 1) == 0)
        {
            len[s]++;
            llm_blocks_commit(&bm, &t[s], toks[s], len[s]);
        }
        bad = check_invariants(&bm, t, &why) != 0;
    }
    ok(!bad, "20000 random operations (window %d, %d groups) keep the "
       "invariants%s%s", window, n_groups, bad ? ": " : "", why);
    ok(window == 0 ? bm.slid == 0 : bm.slid > 100,
       "blocks dropped out of the window: %llu",
       (unsigned long long) bm.slid);
    ok(hits > 100, "random run had prefix hits (%d)", hits);
    ok(bm.evictions > 0, "random run evicted cached blocks (%llu)",
       (unsigned long long) bm.evictions);
    for (i = 0; i < R_SEQS; i++) {
        llm_blocks_release(&bm, &t[i]);
        llm_blocks_table_free(&t[i]);
    }
    is_int(llm_blocks_n_available(&bm), R_BLOCKS, "all blocks back");
    llm_blocks_free(&bm);
}


static void
test_fork(void)
{
    llm_block_manager  bm;
    llm_block_table    p, c, d;
    int32_t            src, dst, toks[12];
    char               err[256];

    if (!ok(llm_blocks_init(&bm, 8, BS, 1, err, sizeof(err)) == 0,
            "fork: init 8 blocks")) {
        return;
    }
    fill(toks, 10, 100);
    llm_blocks_table_init(&p, &bm, 20);
    llm_blocks_table_init(&c, &bm, 20);
    llm_blocks_table_init(&d, &bm, 20);
    llm_blocks_ensure(&bm, &p, 10);
    llm_blocks_commit(&bm, &p, toks, 10);
    ok(llm_blocks_fork(&bm, &c, &p, 10, &src, &dst) == 0 && c.n == 3,
       "fork of 10 tokens: 3 blocks");
    ok(c.ids[0] == p.ids[0] && c.ids[1] == p.ids[1]
       && bm.ref[p.ids[0]] == 2 && bm.ref[p.ids[1]] == 2,
       "the 2 full blocks are shared, referenced twice");
    ok(src == p.ids[2] && dst == c.ids[2] && dst != src && bm.ref[dst] == 1,
       "the partial last block: a fresh one to copy into (%d <- %d)", dst,
       src);
    ok(c.n_hashed == p.n_hashed && c.last_hash == p.last_hash
       && c.n_hashed == 2, "the hash chain continues from the full blocks");
    is_int(llm_blocks_n_used(&bm), 4, "4 blocks used, not 6");
    ok(llm_blocks_fork(&bm, &c, &p, 10, &src, &dst) == -1,
       "a second fork into a non-empty table is refused");
    llm_blocks_release(&bm, &c);
    ok(llm_blocks_ensure(&bm, &d, 5 * BS) == 0
       && llm_blocks_n_available(&bm) == 0, "the pool filled up");
    ok(llm_blocks_fork(&bm, &c, &p, 10, &src, &dst) == -1 && c.n == 0
       && bm.ref[p.ids[0]] == 1,
       "no block for the partial copy: refused, nothing taken");
    llm_blocks_release(&bm, &d);
    ok(llm_blocks_fork(&bm, &c, &p, 8, &src, &dst) == 0 && c.n == 2
       && src == -1 && dst == -1, "fork on a block boundary: nothing to copy");
    llm_blocks_release(&bm, &p);
    llm_blocks_release(&bm, &c);
    is_int(llm_blocks_n_used(&bm), 0, "fork: every reference released");
    is_int(llm_blocks_n_available(&bm), 8, "fork: all blocks available");
    llm_blocks_table_free(&p);
    llm_blocks_table_free(&c);
    llm_blocks_table_free(&d);
    llm_blocks_free(&bm);
}


/* at each position of a sequence fed `chunk` tokens a step, exactly the
 * sliding group's pages holding a position >= pos - W + 1 of the step's
 * first query are held, and every page of a full group; at most
 * llm_blocks_peak() at once */
static void
window_walk(int window, int chunk, int len, int n_groups)
{
    llm_block_manager  bm;
    llm_block_table    t;
    int                pos, k, g, held, peak = 0, kept_out = 0, lost_in = 0;
    char               err[256];

    llm_blocks_init(&bm, 128, BS, 0, err, sizeof(err));
    set_groups(&bm, window, n_groups);
    llm_blocks_table_init(&t, &bm, len);
    for (pos = 0; pos < len; pos += chunk) {
        llm_blocks_slide(&bm, &t, pos);
        llm_blocks_ensure(&bm, &t, pos + chunk < len ? pos + chunk : len);
        held = 0;
        for (g = 0; g < n_groups; g++) {
            for (k = 0; k < t.n; k++) {
                /* block k's last position (k+1)*BS - 1 in the window of
                   the query at pos: read by this step (a full group: all) */
                int in = !bm.sliding[g] || (k + 1) * BS - 1 >= pos - window + 1;
                int id = t.ids[g * t.cap + k];

                kept_out += !in && id >= 0;
                lost_in += in && id < 0;
                held += id >= 0;
            }
        }
        peak = held > peak ? held : peak;
    }
    is_int(kept_out, 0, "window %d, chunk %d, %d groups: no page outside "
           "the window kept", window, chunk, n_groups);
    is_int(lost_in, 0, "window %d, chunk %d, %d groups: no page inside the "
           "window (or of a full group) dropped", window, chunk, n_groups);
    ok(peak <= llm_blocks_peak(&bm, len, chunk), "window %d, chunk %d, %d "
       "groups: held %d at most, peak says %d", window, chunk, n_groups,
       peak, llm_blocks_peak(&bm, len, chunk));
    is_int((int) bm.slid + llm_blocks_n_used(&bm), t.n * n_groups,
           "window %d, chunk %d, %d groups: dropped + held = every group's "
           "table", window, chunk, n_groups);
    llm_blocks_release(&bm, &t);
    is_int(llm_blocks_n_available(&bm), 128, "window %d: all pages back",
           window);
    llm_blocks_table_free(&t);
    llm_blocks_free(&bm);
}


static void
test_window(void)
{
    llm_block_manager  bm;
    llm_block_table    t;
    char               err[256];
    int                g;

    llm_blocks_init(&bm, 16, BS, 0, err, sizeof(err));
    set_groups(&bm, 6, 1);
    llm_blocks_table_init(&t, &bm, 40);
    llm_blocks_ensure(&bm, &t, 10);
    /* the query at 10 reads 5..10: block 0 (0..3) is out, 1 (4..7) in */
    is_int(llm_blocks_slide(&bm, &t, 10), 1, "at 10, window 6: 1 dropped");
    ok(t.ids[0] == -1 && t.ids[1] >= 0 && t.n_dropped == 1 && t.n == 3,
       "block 0 marked -1, the table keeps its length");
    is_int(llm_blocks_slide(&bm, &t, 12), 0, "at 12 (reads 7..): block 1 "
           "kept for position 7");
    is_int(llm_blocks_slide(&bm, &t, 13), 1, "at 13 (reads 8..): block 1 "
           "dropped");
    is_int(llm_blocks_n_used(&bm), 1, "1 block held");
    is_int(llm_blocks_needed(&bm, &t, 20), 2, "20 tokens: 2 more blocks");
    is_int(llm_blocks_slide(&bm, &t, 13), 0, "sliding again: nothing");
    llm_blocks_release(&bm, &t);
    ok(t.n == 0 && t.n_dropped == 0 && llm_blocks_n_available(&bm) == 16,
       "release skips the holes: every block back");
    set_groups(&bm, 0, 1);
    llm_blocks_ensure(&bm, &t, 40);
    is_int(llm_blocks_slide(&bm, &t, 39), 0, "no window: nothing dropped");
    llm_blocks_release(&bm, &t);
    llm_blocks_table_free(&t);
    is_int(llm_blocks_peak(&bm, 40, 1), 10, "no window: peak = the whole "
           "sequence");
    set_groups(&bm, 6, 1);
    is_int(llm_blocks_peak(&bm, 40, 1), 3, "window 6, decode: peak 3");
    is_int(llm_blocks_peak(&bm, 6, 1), 2, "never more than the sequence");
    llm_blocks_free(&bm);

    for (g = 1; g <= 2; g++) {
        window_walk(6, 1, 60, g);
        window_walk(8, 1, 60, g);   /* a window of whole blocks */
        window_walk(1, 1, 60, g);
        window_walk(6, 5, 61, g);   /* prefill chunks across blocks */
        window_walk(9, 16, 100, g);
        window_walk(200, 7, 100, g);    /* longer than the sequence */
    }
}


/* dropped registered blocks stay in the cache: a later prompt with the
 * same prefix hits all of it, then drops what is outside its window; a
 * fork copies the holes */
static void
test_window_prefix(void)
{
    llm_block_manager  bm;
    llm_block_table    a, b, c;
    int32_t            toks[24], src, dst;
    char               err[256];

    llm_blocks_init(&bm, 16, BS, 1, err, sizeof(err));
    set_groups(&bm, 5, 1);
    fill(toks, 24, 500);
    llm_blocks_table_init(&a, &bm, 24);
    llm_blocks_table_init(&b, &bm, 24);
    llm_blocks_table_init(&c, &bm, 24);
    llm_blocks_ensure(&bm, &a, 18);
    llm_blocks_commit(&bm, &a, toks, 18);
    is_int(llm_blocks_slide(&bm, &a, 18), 3, "at 18 (reads 14..): blocks "
           "0-2 dropped");
    is_int(llm_blocks_n_cached(&bm), 4, "the 4 full blocks stay cached");
    ok(llm_blocks_fork(&bm, &c, &a, 18, &src, &dst) == 0 && c.n == 5
       && c.n_dropped == 3 && c.ids[2] == -1 && c.ids[3] == a.ids[3]
       && bm.ref[a.ids[3]] == 2 && dst >= 0 && src == a.ids[4],
       "a fork copies the holes, shares block 3, copies the partial 4");
    llm_blocks_release(&bm, &c);
    llm_blocks_release(&bm, &a);
    is_int(llm_blocks_match_prefix(&bm, &b, toks, 20), 16, "a new prompt "
           "hits every dropped block: 16 tokens");
    is_int(llm_blocks_slide(&bm, &b, 16), 3, "and drops 3 of them at once "
           "(its first query at 16 reads 12..)");
    llm_blocks_release(&bm, &b);
    is_int(llm_blocks_n_available(&bm), 16, "window prefix: all back");
    llm_blocks_table_free(&a);
    llm_blocks_table_free(&b);
    llm_blocks_table_free(&c);
    llm_blocks_free(&bm);
}


/* a full and a sliding group: a logical block takes 2 pages, the sliding
 * row drops, a hit takes both groups' pages and stops where one is gone */
static void
test_groups_prefix(void)
{
    llm_block_manager  bm;
    llm_block_table    a, b, f;
    int32_t            toks[24], src[2], dst[2];
    char               err[256];

    llm_blocks_init(&bm, 16, BS, 1, err, sizeof(err));
    set_groups(&bm, 5, 2);
    fill(toks, 24, 700);
    llm_blocks_table_init(&a, &bm, 24);
    llm_blocks_table_init(&b, &bm, 24);
    llm_blocks_table_init(&f, &bm, 24);
    is_int(llm_blocks_needed(&bm, &a, 18), 10, "groups: 18 tokens need 5 "
           "blocks of 2 pages");
    llm_blocks_ensure(&bm, &a, 18);
    llm_blocks_commit(&bm, &a, toks, 18);
    is_int(llm_blocks_n_cached(&bm), 8, "groups: 4 full blocks, 8 pages "
           "registered");
    is_int(llm_blocks_slide(&bm, &a, 18), 3, "groups: at 18 the sliding "
           "row drops blocks 0-2");
    ok(a.ids[0] >= 0 && a.ids[2] >= 0 && a.ids[a.cap] == -1
       && a.ids[a.cap + 2] == -1 && a.ids[a.cap + 3] >= 0,
       "groups: the full row keeps them, the sliding row has holes");
    is_int(llm_blocks_peak(&bm, 18, 1), 5 + 3, "groups: peak = the full "
           "row's 5 + the window's 3");
    ok(llm_blocks_fork(&bm, &b, &a, 18, src, dst) == 0 && dst[0] >= 0
       && dst[1] >= 0 && src[0] == a.ids[4] && src[1] == a.ids[a.cap + 4]
       && b.ids[b.cap + 1] == -1 && b.ids[1] == a.ids[1],
       "groups: a fork shares each row, copies each group's partial page");
    llm_blocks_release(&bm, &b);
    llm_blocks_release(&bm, &a);
    is_int(llm_blocks_n_available(&bm), 16, "groups: every page back");
    /* 16 pages, 8 cached: 10 fresh ones evict the LRU's 2 oldest, the
       sliding pages of blocks 2 and 1 (dropped first, last-first) while
       the full group's pages of blocks 0-3 stay cached */
    ok(llm_blocks_ensure(&bm, &f, 5 * BS) == 0 && bm.evictions == 2,
       "groups: 10 pages taken, 2 cached ones evicted");
    llm_blocks_release(&bm, &f);
    is_int(llm_blocks_match_prefix(&bm, &b, toks, 20), BS, "groups: the hit "
           "stops at block 1, whose sliding page is gone (its full page is "
           "cached)");
    llm_blocks_release(&bm, &b);
    llm_blocks_table_free(&a);
    llm_blocks_table_free(&b);
    llm_blocks_table_free(&f);
    llm_blocks_free(&bm);
}


int
main(void)
{
    test_alloc_release();
    test_prefix_sharing();
    test_lru_eviction();
    test_random(0, 1);
    test_random(7, 1);
    test_random(7, 2);
    test_fork();
    test_window();
    test_window_prefix();
    test_groups_prefix();
    return tap_done();
}
