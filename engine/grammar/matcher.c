/*
 * The matcher: a pushdown automaton run on bytes, as a lazily built DFA.
 *
 * A stack is a hash-consed list of nodes (pos, parent, cnt): pos is the
 * next element to match in the grammar's flat array, parent the node to
 * return to when its rule ends (-1: the bottom), cnt the iterations done
 * when pos is a counted repetition (GE_REPEAT; 0 elsewhere): a counter is
 * part of the stack, so of the state, its transitions, masks and history
 * (rollback restores it), and x{0,10000} costs one node per iteration
 * reached, not 10000 rules. A state is the sorted set of the
 * stacks alive, interned, so a state is one integer (sid). Stacks are kept
 * expanded: every top is a terminal (a byte set or a named token), or the
 * accept node 0 when the whole grammar may end here. A call whose return
 * point is the end of an alternative pushes nothing (tail call), so x*
 * written as R ::= x R | "" runs in constant stack.
 *
 * Each state keeps its 256 byte transitions, computed once, and its mask
 * (a few per matcher, evicted round-robin): a mask is one walk of the
 * vocabulary's depth-first trie (vocab.c), each trie edge one array load
 * once its transition is known, a dead byte skipping the whole subtree.
 * A state's mask is the union of its stacks' local masks: the mask of a
 * stack cut below its top LOCAL_DEPTH nodes, cached per cut stack, so
 * that a string in any context costs one trie walk per matcher; the
 * subtrees a cut stack could not decide (its rule ended, the rest of the
 * stack matters) are walked from the full state. A cut stack's key holds
 * each counter's class (counter_class), not its value: counts that behave
 * alike for as many bytes as the longest token share the mask. History
 * is the list of
 * states, so rollback is a pointer move and gives back exactly the masks
 * it had.
 *
 * defines: llm_matcher_new, llm_matcher_free, llm_matcher_mask,
 *          llm_matcher_mask_nocache, llm_matcher_accept,
 *          llm_matcher_accept_bytes, llm_matcher_rollback,
 *          llm_matcher_can_end, llm_matcher_is_done, llm_matcher_stats
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

#define SID_DEAD      (-1)
#define SID_UNKNOWN   (-2)
#define SID_STOPPED   (-3)      /* a stop token was accepted */
#define MASK_SLOTS    128       /* cached masks per matcher */
#define MAX_STATES    (1 << 20)
#define MAX_WORK      200000    /* expansions per step */
#define LOCAL_DEPTH   3         /* stack nodes a local mask depends on */
#if LOCAL_DEPTH != 3
#error "llm_glocal's key holds 3 positions and a cut flag"
#endif
#define LOCAL_SLOTS   64        /* cached local masks per matcher */
#define NODE_BOUNDARY 1         /* bottom of a truncated stack */
#define FP_HORIZON    32        /* bytes of a shared local mask's walk:
                                   deeper trie nodes are left unsure */
#define FP_MAX        2048      /* ints of a fingerprint; past it the cut
                                   stack's mask is not shared */


typedef struct {
    int32_t     pos;
    int32_t     parent;
    int32_t     cnt;            /* at a GE_REPEAT: iterations done */
    int32_t     local;          /* its local mask's slot, or -1 */
} mnode;

/*
 * The mask of one stack truncated to its top LOCAL_DEPTH nodes
 * (llm_glocal): what it allows whatever lies below (accepted), and the
 * trie subtrees that died only after the truncated stack ran out (unsure:
 * the full state decides them). xgrammar's context-independent tokens,
 * per truncated stack. The grammar keeps the first LLM_GRAMMAR_SHARED of
 * them for all its matchers; a matcher owns the ones past that.
 */
typedef struct {
    llm_glocal *l;
    int         owned;
    int32_t     key;            /* the truncated stack's node, or -1 */
} mlocal;

typedef struct {
    int32_t     off;            /* the stacks: pool[off .. off + len) */
    int32_t     len;
    int32_t     slot;           /* cached mask, or -1 */
    uint8_t     can_end;
    uint8_t     at_boundary;    /* a truncated stack ran out here */
    uint8_t     has_token;      /* some top is a named token */
} mstate;

struct llm_matcher {
    const llm_grammar        *g;
    const llm_grammar_vocab  *v;

    mnode      *nodes;
    int32_t     n_nodes, cap_nodes;
    int32_t    *node_hash;      /* open addressing, node ids + 1 */
    uint32_t    node_hmask;

    mstate     *st;
    int32_t     n_st, cap_st, cap_next, cap_bnd;
    uint8_t    *bnd;            /* per state: its at_boundary, for the walk */
    int32_t   **next;           /* per state: [256] or NULL, SID_UNKNOWN
                                   until known; apart from st: the walk
                                   reads only these */
    int32_t    *st_hash;
    uint32_t    st_hmask;
    int32_t    *pool;
    size_t      n_pool, cap_pool;

    int32_t    *tmp;            /* stacks of the step being computed */
    int32_t     n_tmp, cap_tmp;
    int         work;
    int         overflow;       /* a cap was hit: steps past it are dead */

    int32_t    *hist;           /* hist[n_hist - 1]: the current state */
    int32_t     n_hist, cap_hist;

    int32_t    *walk;           /* per trie depth: the state there */
    int         n_words;
    uint32_t   *slots[MASK_SLOTS];  /* masks of n_words, made as used */
    int         cap_slots;          /* slots made */
    int32_t     slot_sid[MASK_SLOTS];
    int32_t     slot_count[MASK_SLOTS];
    int         slot_next;

    mlocal      locals[LOCAL_SLOTS];
    int         local_next;
    uint8_t    *bflag;          /* per trie depth: a boundary was passed */

    int32_t    *fp;             /* a cut stack's structure (fingerprint) */
    int32_t     n_fp;
    int32_t    *fp_seen;        /* per rule: fp_gen when met */
    int32_t    *fp_idx;         /* per rule: its number in this fp */
    int32_t    *fp_q;           /* the rules met, in order */
    int32_t     n_q, fp_gen;
    int32_t    *fp_dseen;       /* per rule: fp_gen when its distance is */
    int32_t    *fp_dist;        /* per rule: fewest bytes before it */
    int32_t    *fp_wq;          /* rules whose distance fell: a ring, each
                                   rule in it once at a time */
    int32_t     n_wq;
    uint8_t    *fp_inq;
    int64_t     fp_work;        /* elements fp_walk read */
};


static void glocal_free(llm_glocal *l);


static int
grow(void **p, int32_t *cap, int64_t need, size_t size)
{
    int64_t   n;
    void     *q;

    if (need <= *cap) {
        return 0;
    }
    n = *cap ? (int64_t) *cap * 2 : 64;
    while (n < need) {
        n *= 2;
    }
    if (n > INT32_MAX / 2 || (q = realloc(*p, (size_t) n * size)) == NULL) {
        return -1;
    }
    *p = q;
    *cap = (int32_t) n;
    return 0;
}


static uint32_t
hash2(int32_t a, int32_t b)
{
    uint64_t  h = ((uint64_t) (uint32_t) a << 32) | (uint32_t) b;

    h *= 0x9E3779B97F4A7C15ull;
    return (uint32_t) (h >> 32);
}


static uint32_t
node_hash3(int32_t pos, int32_t parent, int32_t cnt)
{
    return hash2(pos, parent) ^ (uint32_t) cnt * 0x85EBCA6Bu;
}


static int
node_rehash(llm_matcher *m)
{
    uint32_t  n = (m->node_hmask + 1) * 2, i, h;
    int32_t  *t;

    t = calloc(n, sizeof(int32_t));
    if (t == NULL) {
        return -1;
    }
    for (i = 1; i < (uint32_t) m->n_nodes; i++) {
        h = node_hash3(m->nodes[i].pos, m->nodes[i].parent, m->nodes[i].cnt)
            & (n - 1);
        while (t[h]) {
            h = (h + 1) & (n - 1);
        }
        t[h] = (int32_t) i + 1;
    }
    free(m->node_hash);
    m->node_hash = t;
    m->node_hmask = n - 1;
    return 0;
}


static int32_t
node_get(llm_matcher *m, int32_t pos, int32_t parent, int32_t cnt)
{
    uint32_t  h = node_hash3(pos, parent, cnt) & m->node_hmask;
    int32_t   id;

    while ((id = m->node_hash[h]) != 0) {
        if (m->nodes[id - 1].pos == pos && m->nodes[id - 1].parent == parent
            && m->nodes[id - 1].cnt == cnt)
        {
            return id - 1;
        }
        h = (h + 1) & m->node_hmask;
    }
    if (m->n_nodes >= LLM_GRAMMAR_MAX_NODES
        || grow((void **) &m->nodes, &m->cap_nodes, m->n_nodes + 1,
                sizeof(mnode)) != 0)
    {
        m->overflow = 1;
        return -1;
    }
    id = m->n_nodes++;
    m->nodes[id].pos = pos;
    m->nodes[id].parent = parent;
    m->nodes[id].cnt = cnt;
    m->nodes[id].local = -1;
    m->node_hash[h] = id + 1;
    if ((uint32_t) m->n_nodes * 2 > m->node_hmask && node_rehash(m) != 0) {
        m->overflow = 1;
        return -1;
    }
    return id;
}


static int
push_tmp(llm_matcher *m, int32_t id)
{
    if (id < 0 || m->n_tmp >= LLM_GRAMMAR_MAX_STACKS * 4
        || grow((void **) &m->tmp, &m->cap_tmp, m->n_tmp + 1,
                sizeof(int32_t)) != 0)
    {
        m->overflow = 1;
        return -1;
    }
    m->tmp[m->n_tmp++] = id;
    return 0;
}


/* pushes onto tmp the expanded stacks of (pos, parent, cnt) */
static int
expand(llm_matcher *m, int32_t pos, int32_t parent, int32_t cnt)
{
    const llm_grammar  *g = m->g;
    const llm_gelem    *e;
    const llm_grepeat  *rp;
    int32_t             ret, a, t, nc;

    for ( ;; ) {
        if (++m->work > MAX_WORK) {
            m->overflow = 1;
            return -1;
        }
        e = &g->el[pos];
        switch (e->type) {

        case GE_END:
        case GE_ALT:
            if (parent < 0) {
                return push_tmp(m, 0);
            }
            if (parent == NODE_BOUNDARY) {
                return push_tmp(m, NODE_BOUNDARY);
            }
            cnt = m->nodes[parent].cnt;
            pos = m->nodes[parent].pos;
            parent = m->nodes[parent].parent;
            continue;

        case GE_RULE:
            t = g->el[pos + 1].type;
            ret = parent;
            if (t != GE_END && t != GE_ALT
                && (ret = node_get(m, pos + 1, parent, 0)) < 0)
            {
                return -1;
            }
            for (a = g->alt_first[e->val]; a < g->alt_first[e->val + 1]; a++)
            {
                if (expand(m, g->alt_start[a], ret, 0) != 0) {
                    return -1;
                }
            }
            return 0;

        case GE_REPEAT:
            /* another iteration returns here one count up (without a cap,
               counts past min are all alike: it stays at min); past min,
               what follows */
            rp = &g->reps[e->val];
            if (rp->max < 0 || cnt < rp->max) {
                nc = rp->max < 0 && cnt >= rp->min ? rp->min : cnt + 1;
                if ((ret = node_get(m, pos, parent, nc)) < 0) {
                    return -1;
                }
                for (a = g->alt_first[rp->rule];
                     a < g->alt_first[rp->rule + 1]; a++)
                {
                    if (expand(m, g->alt_start[a], ret, 0) != 0) {
                        return -1;
                    }
                }
            }
            if (cnt < rp->min) {
                return 0;
            }
            pos++;
            cnt = 0;
            continue;

        default:
            return push_tmp(m, node_get(m, pos, parent, 0));
        }
    }
}


static int
id_cmp(const void *a, const void *b)
{
    int32_t  x = *(const int32_t *) a, y = *(const int32_t *) b;

    return x < y ? -1 : x > y;
}


static uint32_t
set_hash(const int32_t *s, int32_t n)
{
    uint32_t  h = 2166136261u;
    int32_t   i;

    for (i = 0; i < n; i++) {
        h = (h ^ (uint32_t) s[i]) * 16777619u;
    }
    return h * 0x9E3779B1u;
}


static int
st_rehash(llm_matcher *m)
{
    uint32_t  n = (m->st_hmask + 1) * 2, i, h;
    int32_t  *t;

    t = calloc(n, sizeof(int32_t));
    if (t == NULL) {
        return -1;
    }
    for (i = 0; i < (uint32_t) m->n_st; i++) {
        h = set_hash(m->pool + m->st[i].off, m->st[i].len) & (n - 1);
        while (t[h]) {
            h = (h + 1) & (n - 1);
        }
        t[h] = (int32_t) i + 1;
    }
    free(m->st_hash);
    m->st_hash = t;
    m->st_hmask = n - 1;
    return 0;
}


/* the state of the stacks in tmp (sorted, then without duplicates) */
static int32_t
state_get(llm_matcher *m)
{
    const llm_grammar  *g = m->g;
    mstate             *s;
    uint32_t            h;
    int32_t             i, k, n, id, *set;

    if (m->n_tmp == 0) {
        return SID_DEAD;
    }
    qsort(m->tmp, (size_t) m->n_tmp, sizeof(int32_t), id_cmp);
    for (i = 1, k = 1; i < m->n_tmp; i++) {
        if (m->tmp[i] != m->tmp[k - 1]) {
            m->tmp[k++] = m->tmp[i];
        }
    }
    n = k;
    if (n > LLM_GRAMMAR_MAX_STACKS) {
        m->overflow = 1;
        return SID_DEAD;
    }
    h = set_hash(m->tmp, n) & m->st_hmask;
    while ((id = m->st_hash[h]) != 0) {
        s = &m->st[id - 1];
        if (s->len == n
            && memcmp(m->pool + s->off, m->tmp, (size_t) n * 4) == 0)
        {
            return id - 1;
        }
        h = (h + 1) & m->st_hmask;
    }
    if (m->n_st >= MAX_STATES
        || grow((void **) &m->st, &m->cap_st, m->n_st + 1, sizeof(mstate))
        || grow((void **) &m->next, &m->cap_next, m->n_st + 1,
                sizeof(int32_t *))
        || grow((void **) &m->bnd, &m->cap_bnd, m->n_st + 1, 1)
        || m->n_pool + (size_t) n > (size_t) INT32_MAX / 2)
    {
        m->overflow = 1;
        return SID_DEAD;
    }
    if (m->n_pool + (size_t) n > m->cap_pool) {
        size_t   c = m->cap_pool ? m->cap_pool * 2 : 1024;
        int32_t *p;

        while (c < m->n_pool + (size_t) n) {
            c *= 2;
        }
        if ((p = realloc(m->pool, c * sizeof(int32_t))) == NULL) {
            m->overflow = 1;
            return SID_DEAD;
        }
        m->pool = p;
        m->cap_pool = c;
    }
    set = m->pool + m->n_pool;
    memcpy(set, m->tmp, (size_t) n * 4);
    id = m->n_st++;
    s = &m->st[id];
    s->off = (int32_t) m->n_pool;
    s->len = n;
    m->next[id] = NULL;
    s->slot = -1;
    s->can_end = set[0] == 0;
    s->at_boundary = set[0] == NODE_BOUNDARY
                     || (n > 1 && set[1] == NODE_BOUNDARY);
    m->bnd[id] = s->at_boundary;
    s->has_token = 0;
    for (i = 0; i < n; i++) {
        if (set[i] > NODE_BOUNDARY
            && g->el[m->nodes[set[i]].pos].type == GE_TOKEN)
        {
            s->has_token = 1;
        }
    }
    m->n_pool += (size_t) n;
    m->st_hash[h] = id + 1;
    if ((uint32_t) m->n_st * 2 > m->st_hmask && st_rehash(m) != 0) {
        m->overflow = 1;
    }
    return id;
}


/* the state after byte c (type GE_BYTES) or token c (GE_TOKEN) */
static int32_t
step(llm_matcher *m, int32_t sid, int type, int32_t c)
{
    const llm_grammar  *g = m->g;
    const llm_gelem    *e;
    int32_t             i, node;

    m->n_tmp = 0;
    m->work = 0;
    for (i = 0; i < m->st[sid].len; i++) {
        node = m->pool[m->st[sid].off + i];
        if (node <= NODE_BOUNDARY) {
            continue;
        }
        e = &g->el[m->nodes[node].pos];
        if (e->type != type) {
            continue;
        }
        if (type == GE_BYTES
            ? !(g->sets[e->val][c >> 3] & (1u << (c & 7))) : e->val != c)
        {
            continue;
        }
        if (expand(m, m->nodes[node].pos + 1, m->nodes[node].parent, 0)
            != 0)
        {
            return SID_DEAD;
        }
    }
    return state_get(m);
}


static int32_t
step_byte(llm_matcher *m, int32_t sid, uint8_t c)
{
    int32_t  nx, k;

    if (m->next[sid] != NULL && (nx = m->next[sid][c]) != SID_UNKNOWN)
    {
        return nx;
    }
    nx = step(m, sid, GE_BYTES, c);
    if (m->next[sid] == NULL) {
        int32_t  *t = malloc(256 * sizeof(int32_t));

        if (t == NULL) {
            return nx;
        }
        for (k = 0; k < 256; k++) {
            t[k] = SID_UNKNOWN;
        }
        m->next[sid] = t;
    }
    m->next[sid][c] = nx;
    return nx;
}


llm_matcher *
llm_matcher_new(const llm_grammar *g)
{
    llm_matcher  *m;
    int32_t       a, sid;

    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->g = g;
    m->v = g->vocab;
    m->n_words = m->v ? (m->v->n_vocab + 31) / 32 : 0;
    m->node_hmask = 1023;
    m->st_hmask = 255;
    m->node_hash = calloc(m->node_hmask + 1, sizeof(int32_t));
    m->st_hash = calloc(m->st_hmask + 1, sizeof(int32_t));
    m->walk = malloc((size_t) ((m->v ? m->v->max_depth : 0) + 1)
                     * sizeof(int32_t));
    m->bflag = malloc((size_t) (m->v ? m->v->max_depth : 0) + 1);
    if (m->node_hash == NULL || m->st_hash == NULL || m->walk == NULL
        || m->bflag == NULL
        || grow((void **) &m->nodes, &m->cap_nodes, 2, sizeof(mnode)) != 0)
    {
        llm_matcher_free(m);
        return NULL;
    }
    m->nodes[0].pos = -1;               /* the accept node */
    m->nodes[0].parent = -1;
    m->nodes[0].cnt = 0;
    m->nodes[0].local = -1;
    m->nodes[1] = m->nodes[0];          /* NODE_BOUNDARY */
    m->n_nodes = 2;
    for (a = 0; a < MASK_SLOTS; a++) {
        m->slot_sid[a] = -1;
    }
    for (a = 0; a < LOCAL_SLOTS; a++) {
        m->locals[a].key = -1;
    }
    m->work = 0;
    for (a = g->alt_first[g->root]; a < g->alt_first[g->root + 1]; a++) {
        if (expand(m, g->alt_start[a], -1, 0) != 0) {
            llm_matcher_free(m);
            return NULL;
        }
    }
    sid = state_get(m);
    if (sid < 0 || grow((void **) &m->hist, &m->cap_hist, 1, 4) != 0) {
        llm_matcher_free(m);
        return NULL;
    }
    m->hist[m->n_hist++] = sid;
    return m;
}


void
llm_matcher_free(llm_matcher *m)
{
    int32_t  i;

    if (m == NULL) {
        return;
    }
    for (i = 0; i < m->n_st; i++) {
        free(m->next[i]);
    }
    free(m->st);
    free(m->next);
    free(m->bnd);
    free(m->st_hash);
    free(m->pool);
    free(m->nodes);
    free(m->node_hash);
    free(m->tmp);
    free(m->hist);
    free(m->walk);
    free(m->bflag);
    free(m->fp);
    free(m->fp_seen);
    free(m->fp_idx);
    free(m->fp_q);
    free(m->fp_dseen);
    free(m->fp_dist);
    free(m->fp_wq);
    free(m->fp_inq);
    for (i = 0; i < m->cap_slots; i++) {
        free(m->slots[i]);
    }
    for (i = 0; i < LOCAL_SLOTS; i++) {
        if (m->locals[i].key >= 0 && m->locals[i].owned) {
            glocal_free(m->locals[i].l);
        }
    }
    free(m);
}


static int
set_bit(uint32_t *mask, int32_t id)
{
    uint32_t  b = 1u << (id & 31);

    if (mask[id >> 5] & b) {
        return 0;
    }
    mask[id >> 5] |= b;
    return 1;
}


static int32_t
next_of(llm_matcher *m, int32_t s, uint8_t c)
{
    const int32_t  *next = m->next[s];
    int32_t         nx;

    if (next == NULL || (nx = next[c]) == SID_UNKNOWN) {
        nx = step_byte(m, s, c);
    }
    return nx;
}


/* sets the tokens of trie nodes [i0, i1) reachable from m->walk[depth of
   i0 - 1], a subtree skipped as soon as its first byte is dead */
static void
walk_full(llm_matcher *m, int32_t i0, int32_t i1, uint32_t *mask)
{
    const llm_grammar_vocab  *v = m->v;
    int32_t                   i, nx, t;
    int                       d;

    for (i = i0; i < i1; ) {
        d = v->node[i].depth;
        nx = next_of(m, m->walk[d - 1], v->node[i].byte);
        if (nx < 0) {
            i += v->node[i].size;
            continue;
        }
        m->walk[d] = nx;
        for (t = v->node[i].tok_begin; t < v->node[i].tok_end; t++) {
            set_bit(mask, v->sorted[t]);
        }
        i++;
    }
}


/* the walk of a truncated stack's state: accepted tokens, unsure roots */
static int
walk_local(llm_matcher *m, int32_t lsid, llm_glocal *L, int max_d)
{
    const llm_grammar_vocab  *v = m->v;
    int32_t                   i, nx, t, n = v->n_nodes, cap = 0;
    int                       d;

    memset(L->accepted, 0, (size_t) m->n_words * 4);
    L->n_unsure = 0;
    m->walk[0] = lsid;
    m->bflag[0] = 0;
    for (i = 1; i < n; ) {
        d = v->node[i].depth;
        if (d > max_d) {
            /* past the horizon: the full state decides */
            if (grow((void **) &L->unsure, &cap, L->n_unsure + 1,
                     sizeof(int32_t)) != 0)
            {
                return -1;
            }
            L->unsure[L->n_unsure++] = i;
            i += v->node[i].size;
            continue;
        }
        nx = next_of(m, m->walk[d - 1], v->node[i].byte);
        if (nx < 0) {
            if (m->bflag[d - 1]) {
                if (grow((void **) &L->unsure, &cap, L->n_unsure + 1,
                         sizeof(int32_t)) != 0)
                {
                    return -1;
                }
                L->unsure[L->n_unsure++] = i;
            }
            i += v->node[i].size;
            continue;
        }
        m->walk[d] = nx;
        m->bflag[d] = m->bflag[d - 1] | m->bnd[nx];
        for (t = v->node[i].tok_begin; t < v->node[i].tok_end; t++) {
            set_bit(L->accepted, v->sorted[t]);
        }
        i++;
    }
    return 0;
}


static uint32_t
key_hash(const int32_t *k)
{
    return (hash2(k[0], k[1]) ^ hash2(k[2], k[3]) * 31u
            ^ hash2(k[4], k[5]) * 17u ^ hash2(k[6], k[7]) * 7u)
           & (LLM_GRAMMAR_SHARED * 2 - 1);
}


/* the grammar's local mask of key, or NULL; adds l when it has none and
   room (returns l then, and the grammar owns it) */
static llm_glocal *
shared_find_add(const llm_grammar *g, const int32_t *key, llm_glocal *l)
{
    llm_gshared  *sh = g->shared;
    llm_glocal   *found = NULL;
    uint32_t      h = key_hash(key);

    pthread_mutex_lock(&sh->lock);
    while (sh->slot[h] != NULL) {
        if (memcmp(sh->slot[h]->key, key, 8 * sizeof(int32_t)) == 0) {
            found = sh->slot[h];
            break;
        }
        h = (h + 1) & (LLM_GRAMMAR_SHARED * 2 - 1);
    }
    if (found == NULL && l != NULL && sh->n < LLM_GRAMMAR_SHARED) {
        sh->slot[h] = l;
        sh->n++;
        found = l;
    }
    pthread_mutex_unlock(&sh->lock);
    return found;
}


static void
glocal_free(llm_glocal *l)
{
    if (l != NULL) {
        free(l->accepted);
        free(l->unsure);
        free(l);
    }
}


/* the stack of node n cut below its top d nodes (bottom NODE_BOUNDARY) */
static int32_t
truncate_stack(llm_matcher *m, int32_t n, int d)
{
    int32_t  p;

    if (n < 0) {
        return n;
    }
    if (d == 0) {
        return NODE_BOUNDARY;
    }
    p = truncate_stack(m, m->nodes[n].parent, d - 1);
    if (p == m->nodes[n].parent || m->overflow) {
        return n;
    }
    return node_get(m, m->nodes[n].pos, p, m->nodes[n].cnt);
}



/* --- local masks shared by all grammars of a vocabulary ---------------- */

static int
fp_put(llm_matcher *m, int32_t x)
{
    if (m->n_fp >= FP_MAX) {
        return -1;
    }
    m->fp[m->n_fp++] = x;
    return 0;
}


/* rule r's number in this fingerprint, queued when first met */
static int32_t
fp_rule(llm_matcher *m, int32_t r)
{
    if (m->fp_seen[r] != m->fp_gen) {
        m->fp_seen[r] = m->fp_gen;
        m->fp_idx[r] = m->n_q;
        m->fp_q[m->n_q++] = r;
    }
    return m->fp_idx[r];
}


/* per rule: the fewest bytes it consumes, capped at the longest token;
   the grammar keeps them for all its matchers */
static const int32_t *
min_bytes(llm_matcher *m)
{
    const llm_grammar  *g = m->g;
    llm_gshared        *sh = g->shared;
    int32_t            *mb, r, k, cur, best, cap = m->v->max_depth;
    int                 changed;

    pthread_mutex_lock(&sh->lock);
    if (sh->min_bytes == NULL
        && (mb = malloc((size_t) g->n_rules * sizeof(int32_t))) != NULL)
    {
        for (r = 0; r < g->n_rules; r++) {
            mb[r] = cap;
        }
        do {
            changed = 0;
            for (r = g->n_rules - 1; r >= 0; r--) {
                best = cap;
                cur = 0;
                for (k = g->rule_start[r]; ; k++) {
                    int  t = g->el[k].type;

                    if (t == GE_END || t == GE_ALT) {
                        best = cur < best ? cur : best;
                        cur = 0;
                        if (t == GE_END) {
                            break;
                        }
                        continue;
                    }
                    if (t == GE_REPEAT) {
                        const llm_grepeat  *rp = &g->reps[g->el[k].val];

                        cur += rp->min >= cap ? cap
                               : rp->min * mb[rp->rule];
                    } else {
                        cur += t == GE_RULE ? mb[g->el[k].val] : 1;
                    }
                    cur = cur < cap ? cur : cap;
                }
                if (best < mb[r]) {
                    mb[r] = best;
                    changed = 1;
                }
            }
        } while (changed);
        sh->min_bytes = mb;
    }
    mb = sh->min_bytes;
    pthread_mutex_unlock(&sh->lock);
    return mb;
}


/* the distance (bytes before it, at fewest) a rule is entered at */
static void
fp_reach(llm_matcher *m, int32_t r, int32_t d)
{
    if (m->fp_dseen[r] != m->fp_gen || d < m->fp_dist[r]) {
        if (m->fp_dseen[r] != m->fp_gen || !m->fp_inq[r]) {
            m->fp_wq[m->n_wq++ % m->g->n_rules] = r;
            m->fp_inq[r] = 1;
        }
        m->fp_dseen[r] = m->fp_gen;
        m->fp_dist[r] = d;
    }
}


/* the rules a sequence from pos (at d bytes) enters before the horizon;
   returns the distance at its end, or the horizon */
static int32_t
fp_walk(llm_matcher *m, const int32_t *mb, int32_t pos, int32_t d,
    int whole)
{
    const llm_gelem  *e;
    int32_t           start = d, hz = FP_HORIZON;

    for ( ;; pos++) {
        e = &m->g->el[pos];
        m->fp_work++;
        if (e->type == GE_END || (e->type == GE_ALT && !whole)) {
            return d;
        }
        if (e->type == GE_ALT) {
            d = start;
            continue;
        }
        if (d >= hz) {
            /* past the horizon: to the next alternative */
            if (!whole) {
                return hz;
            }
            while (m->g->el[pos + 1].type != GE_ALT
                   && m->g->el[pos + 1].type != GE_END)
            {
                pos++;
            }
            continue;
        }
        if (e->type == GE_RULE) {
            fp_reach(m, e->val, d);
            d += mb[e->val];
        } else if (e->type == GE_REPEAT) {
            return hz;          /* fp_seq gives up there */
        } else {
            d++;
        }
    }
}


/* the elements from pos (at d bytes) to the end of its alternative (whole:
   of its rule), cut at the horizon; rules by number, byte sets by
   content */
static int
fp_seq(llm_matcher *m, const int32_t *mb, int32_t pos, int32_t d, int whole)
{
    const llm_grammar  *g = m->g;
    const llm_gelem    *e;
    const uint8_t      *set;
    int32_t             start = d, hz = FP_HORIZON;
    int                 k;

    for ( ;; pos++) {
        e = &g->el[pos];
        if (d >= hz && e->type != GE_END && e->type != GE_ALT) {
            if (fp_put(m, -2) != 0) {           /* the horizon */
                return -1;
            }
            while (g->el[pos + 1].type != GE_ALT
                   && g->el[pos + 1].type != GE_END)
            {
                pos++;
            }
            continue;
        }
        if (fp_put(m, e->type) != 0) {
            return -1;
        }
        switch (e->type) {
        case GE_END:
            return 0;
        case GE_REPEAT:
            return -1;          /* a counter's value is not in the
                                   fingerprint: not shared */
        case GE_ALT:
            if (!whole) {
                return 0;
            }
            d = start;
            break;
        case GE_RULE:
            if (fp_put(m, fp_rule(m, e->val)) != 0) {
                return -1;
            }
            d += mb[e->val];
            break;
        case GE_BYTES:
            set = g->sets[e->val];
            for (k = 0; k < 32; k += 4) {
                if (fp_put(m, (int32_t) ((uint32_t) set[k]
                                         | (uint32_t) set[k + 1] << 8
                                         | (uint32_t) set[k + 2] << 16
                                         | (uint32_t) set[k + 3] << 24))
                    != 0)
                {
                    return -1;
                }
            }
            d++;
            break;
        default:
            if (fp_put(m, e->val) != 0) {
                return -1;
            }
            d++;
        }
    }
}


/*
 * The cut stack of key k4 written so that it does not depend on the
 * grammar's numbering: its three positions' continuations, then every rule
 * they reach, each cut where it lies past the horizon: a walk of the trie
 * reads at most max_depth bytes (the longest token), so what can only come
 * after that many bytes cannot change its mask. Two cut stacks with the
 * same fingerprint consume those bytes the same way: their local masks are
 * equal. -1 when it is too big.
 */
static int
fingerprint(llm_matcher *m, const int32_t *k4, uint32_t *hash)
{
    const llm_grammar  *g = m->g;
    const int32_t      *mb;
    uint32_t            h = 2166136261u;
    int32_t             q, d, dd[3], r;
    int                 i;

    if (m->fp == NULL) {
        size_t  n = (size_t) g->n_rules;

        m->fp = malloc(FP_MAX * sizeof(int32_t));
        m->fp_seen = calloc(n, sizeof(int32_t));
        m->fp_idx = malloc(n * sizeof(int32_t));
        m->fp_q = malloc(n * sizeof(int32_t));
        m->fp_dseen = calloc(n, sizeof(int32_t));
        m->fp_dist = malloc(n * sizeof(int32_t));
        m->fp_wq = malloc(n * sizeof(int32_t));
        m->fp_inq = calloc(n, 1);
        if (m->fp == NULL || m->fp_seen == NULL || m->fp_idx == NULL
            || m->fp_q == NULL || m->fp_dseen == NULL || m->fp_dist == NULL
            || m->fp_wq == NULL || m->fp_inq == NULL)
        {
            return -1;
        }
    }
    if ((mb = min_bytes(m)) == NULL) {
        return -1;
    }
    m->fp_gen++;

    /* the fewest bytes before each rule, to the horizon */
    m->n_wq = 0;
    for (i = 0, d = 0; i < 3; i++) {
        dd[i] = d;
        if (k4[i] >= 0 && d < FP_HORIZON) {
            d = fp_walk(m, mb, k4[i], d, 0);
        }
    }
    m->fp_work = 0;
    for (q = 0; q < m->n_wq; q++) {
        r = m->fp_wq[q % g->n_rules];
        m->fp_inq[r] = 0;
        fp_walk(m, mb, g->rule_start[r], m->fp_dist[r], 1);
        if (m->fp_work > 8 * FP_MAX) {
            for (; q < m->n_wq; q++) {
                m->fp_inq[m->fp_wq[q % g->n_rules]] = 0;
            }
            return -1;      /* too much within the horizon: not shared */
        }
    }

    /* the structure inside the horizon, rules numbered as met */
    m->n_fp = 0;
    m->n_q = 0;
    if (fp_put(m, k4[3]) != 0) {
        return -1;
    }
    for (i = 0; i < 3; i++) {
        if (k4[i] < 0 ? fp_put(m, -1) != 0
                      : fp_seq(m, mb, k4[i], dd[i], 0) != 0)
        {
            return -1;
        }
    }
    for (q = 0; q < m->n_q; q++) {
        r = m->fp_q[q];
        if (fp_put(m, m->fp_dist[r]) != 0
            || fp_seq(m, mb, g->rule_start[r], m->fp_dist[r], 1) != 0)
        {
            return -1;
        }
    }
    for (i = 0; i < m->n_fp; i++) {
        h = (h ^ (uint32_t) m->fp[i]) * 16777619u;
    }
    *hash = h;
    return m->n_fp;
}


static void
vlocal_free(llm_vlocal *x)
{
    if (x != NULL) {
        free(x->fp);
        free(x->accepted);
        free(x->unsure);
        free(x);
    }
}


/* the two slots (a set) fingerprint hash h may be in */
static uint32_t
vshared_set(uint32_t h)
{
    return (h & (LLM_GRAMMAR_VSHARED - 1)) & ~1u;
}


static int
vshared_is(const llm_vlocal *x, uint32_t h, const llm_matcher *m)
{
    return x != NULL && x->hash == h && x->n_fp == m->n_fp
           && memcmp(x->fp, m->fp, (size_t) m->n_fp * 4) == 0;
}


/* the vocabulary's local mask of the fingerprint in m->fp copied into l;
   0, or -1 when it has none */
static int
vshared_get(llm_matcher *m, uint32_t h, llm_glocal *l)
{
    llm_gcache  *c = m->v->cache;
    llm_vlocal  *x = NULL;
    uint32_t     i = vshared_set(h);
    int          rc = -1;

    pthread_mutex_lock(&c->lock);
    if (vshared_is(c->vl[i], h, m)) {
        x = c->vl[i];
    } else if (vshared_is(c->vl[i + 1], h, m)) {
        x = c->vl[i + 1];
    }
    if (x != NULL) {
        l->unsure = x->n_unsure
                    ? malloc((size_t) x->n_unsure * sizeof(int32_t)) : NULL;
        if (x->n_unsure == 0 || l->unsure != NULL) {
            memcpy(l->accepted, x->accepted, (size_t) m->n_words * 4);
            if (x->n_unsure > 0) {
                memcpy(l->unsure, x->unsure,
                       (size_t) x->n_unsure * sizeof(int32_t));
            }
            l->n_unsure = x->n_unsure;
            x->used = ++c->vl_tick;
            c->vl_hits++;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}


/* keeps a copy of l under the fingerprint in m->fp, in place of the less
   recently used of its set */
static void
vshared_add(llm_matcher *m, uint32_t h, const llm_glocal *l)
{
    llm_gcache  *c = m->v->cache;
    llm_vlocal  *x, *old = NULL;
    uint32_t     i = vshared_set(h);

    x = calloc(1, sizeof(*x));
    if (x == NULL) {
        return;
    }
    x->hash = h;
    x->n_fp = m->n_fp;
    x->n_unsure = l->n_unsure;
    x->fp = malloc((size_t) m->n_fp * 4);
    x->accepted = malloc((size_t) m->n_words * 4);
    x->unsure = malloc((size_t) (l->n_unsure + 1) * sizeof(int32_t));
    if (x->fp == NULL || x->accepted == NULL || x->unsure == NULL) {
        vlocal_free(x);
        return;
    }
    memcpy(x->fp, m->fp, (size_t) m->n_fp * 4);
    memcpy(x->accepted, l->accepted, (size_t) m->n_words * 4);
    if (l->n_unsure > 0) {     /* unsure may be NULL when there are none */
        memcpy(x->unsure, l->unsure, (size_t) l->n_unsure * sizeof(int32_t));
    }
    pthread_mutex_lock(&c->lock);
    if (vshared_is(c->vl[i], h, m) || vshared_is(c->vl[i + 1], h, m)) {
        old = x;                /* another matcher was first */
    } else {
        if (c->vl[i] != NULL && (c->vl[i + 1] == NULL
                                 || c->vl[i + 1]->used < c->vl[i]->used))
        {
            i++;
        }
        old = c->vl[i];
        c->n_vl += old == NULL;
        x->used = ++c->vl_tick;
        c->vl[i] = x;
    }
    pthread_mutex_unlock(&c->lock);
    vlocal_free(old);
}


int
llm_grammar_vocab_shared(const llm_grammar_vocab *v, uint64_t *hits)
{
    int  n;

    pthread_mutex_lock(&v->cache->lock);
    n = v->cache->n_vl;
    *hits = v->cache->vl_hits;
    pthread_mutex_unlock(&v->cache->lock);
    return n;
}


/*
 * What of node n's counter a local mask depends on: a walk reads at most
 * max_depth bytes, and an iteration takes one at least (its body may not
 * be empty), so only whether it may stop after 0, 1, ... max_depth more
 * iterations (lo) and go on after them (hi) matter, each clamped at
 * max_depth + 1. Counts far from both bounds share a class (and a mask);
 * near a bound each count has its own. 0: n is no counter.
 */
static int32_t
counter_class(const llm_matcher *m, int32_t n)
{
    const llm_grepeat  *rp;
    int32_t             d = m->v->max_depth + 1, lo, hi, c;

    if (n <= NODE_BOUNDARY || m->g->el[m->nodes[n].pos].type != GE_REPEAT) {
        return 0;
    }
    rp = &m->g->reps[m->g->el[m->nodes[n].pos].val];
    c = m->nodes[n].cnt;
    lo = rp->min - c < 0 ? 0 : rp->min - c > d ? d : rp->min - c;
    hi = rp->max < 0 || rp->max - c > d ? d : rp->max - c;
    return 1 + lo * (d + 1) + hi;
}


static llm_glocal *
local_get(llm_matcher *m, int32_t key)
{
    llm_glocal  *l, *found;
    mlocal      *L;
    uint32_t     h = 0;
    int32_t      lsid, n, k4[8], n_fp;
    int          i, k = m->nodes[key].local;

    if (k >= 0) {
        return m->locals[k].l;
    }
    /* the key: positions top first, whether it was cut, counter classes */
    for (i = 0, n = key; i < 3; i++) {
        k4[i] = n > NODE_BOUNDARY ? m->nodes[n].pos : -1;
        k4[4 + i] = counter_class(m, n);
        n = n > NODE_BOUNDARY ? m->nodes[n].parent : n;
    }
    k4[3] = n == NODE_BOUNDARY;
    k4[7] = 0;
    l = shared_find_add(m->g, k4, NULL);
    if (l == NULL) {
        l = calloc(1, sizeof(*l));
        if (l == NULL
            || (l->accepted = malloc((size_t) m->n_words * 4)) == NULL)
        {
            glocal_free(l);
            return NULL;
        }
        memcpy(l->key, k4, sizeof(k4));
        /* another grammar's walk of the same structure, or a walk */
        n_fp = m->v->cache ? fingerprint(m, k4, &h) : -1;
        if (n_fp < 0 || vshared_get(m, h, l) != 0) {
            m->n_tmp = 0;
            if (push_tmp(m, key) != 0 || (lsid = state_get(m)) < 0
                || walk_local(m, lsid, l, n_fp >= 0 ? FP_HORIZON
                                                    : m->v->max_depth) != 0)
            {
                glocal_free(l);
                return NULL;
            }
            if (n_fp >= 0 && !m->overflow) {
                vshared_add(m, h, l);
            }
        }
        /* another matcher may have added it meanwhile: keep theirs */
        found = shared_find_add(m->g, k4, l);
        if (found != l) {
            if (found != NULL) {
                glocal_free(l);
                l = found;
            }
        }
    }
    k = m->local_next;
    m->local_next = (k + 1) % LOCAL_SLOTS;
    L = &m->locals[k];
    if (L->key >= 0) {
        m->nodes[L->key].local = -1;
        if (L->owned) {
            glocal_free(L->l);
        }
    }
    L->l = l;
    L->owned = shared_find_add(m->g, k4, NULL) != l;
    L->key = key;
    m->nodes[key].local = k;
    return l;
}


/* named tokens where a top names one, stop tokens where it may end */
static void
mask_extras(llm_matcher *m, int32_t sid, uint32_t *mask)
{
    const llm_grammar_vocab  *v = m->v;
    const llm_gelem          *e;
    int32_t                   i, node;

    if (m->st[sid].has_token) {
        for (i = 0; i < m->st[sid].len; i++) {
            node = m->pool[m->st[sid].off + i];
            if (node <= NODE_BOUNDARY) {
                continue;
            }
            e = &m->g->el[m->nodes[node].pos];
            if (e->type == GE_TOKEN && e->val < v->n_vocab) {
                set_bit(mask, e->val);
            }
        }
    }
    if (m->st[sid].can_end) {
        for (i = 0; i < v->n_stop; i++) {
            set_bit(mask, v->stop[i]);
        }
    }
}


static int
popcount_mask(const llm_matcher *m, const uint32_t *mask)
{
    int  i, n = 0;

    for (i = 0; i < m->n_words; i++) {
        n += __builtin_popcount(mask[i]);
    }
    return n;
}


/* the reference: one walk of the whole trie from the full state */
static int
compute_mask(llm_matcher *m, int32_t sid, uint32_t *mask)
{
    memset(mask, 0, (size_t) m->n_words * 4);
    m->walk[0] = sid;
    walk_full(m, 1, m->v->n_nodes, mask);
    mask_extras(m, sid, mask);
    return popcount_mask(m, mask);
}


/*
 * The fast way: the union of the stacks' local masks, plus the unsure
 * subtrees walked from the full state (after the bytes that lead to
 * them). Exact, as the union over stacks is what the full walk computes.
 */
static int
compute_mask_split(llm_matcher *m, int32_t sid, uint32_t *mask)
{
    const llm_grammar_vocab  *v = m->v;
    const char               *p;
    llm_glocal               *L;
    size_t                    len;
    int32_t                   i, j, k, u, s, node, key;
    int                       d;

    memset(mask, 0, (size_t) m->n_words * 4);
    for (i = 0; i < m->st[sid].len; i++) {
        node = m->pool[m->st[sid].off + i];
        if (node <= NODE_BOUNDARY) {
            continue;
        }
        key = truncate_stack(m, node, LOCAL_DEPTH);
        if (m->overflow || (L = local_get(m, key)) == NULL) {
            return compute_mask(m, sid, mask);
        }
        for (k = 0; k < m->n_words; k++) {
            mask[k] |= L->accepted[k];
        }
        for (j = 0; j < L->n_unsure; j++) {
            u = L->unsure[j];
            d = v->node[u].depth;
            p = llm_token_piece(v->tok, v->sorted[v->first_tok[u]], &len);
            for (s = sid, k = 0; k < d - 1 && s >= 0; k++) {
                s = next_of(m, s, (uint8_t) p[k]);
            }
            if (s >= 0) {
                m->walk[d - 1] = s;
                walk_full(m, u, u + v->node[u].size, mask);
            }
        }
    }
    mask_extras(m, sid, mask);
    return popcount_mask(m, mask);
}


int
llm_matcher_mask_nocache(llm_matcher *m, uint32_t *mask)
{
    int32_t  sid = m->hist[m->n_hist - 1];

    if (sid == SID_STOPPED) {
        memset(mask, 0, (size_t) m->n_words * 4);
        return 0;
    }
    return compute_mask(m, sid, mask);
}


int
llm_matcher_mask(llm_matcher *m, uint32_t *mask)
{
    int32_t  sid = m->hist[m->n_hist - 1], k;
    size_t   bytes = (size_t) m->n_words * 4;

    if (sid == SID_STOPPED) {
        memset(mask, 0, bytes);
        return 0;
    }
    if ((k = m->st[sid].slot) >= 0) {
        memcpy(mask, m->slots[k], bytes);
        return m->slot_count[k];
    }
    k = m->slot_next;
    if (k >= m->cap_slots) {                /* made as they are used */
        if ((m->slots[k] = malloc(bytes)) == NULL) {
            return compute_mask_split(m, sid, mask);
        }
        m->cap_slots = k + 1;
    }
    m->slot_next = (k + 1) % MASK_SLOTS;
    if (m->slot_sid[k] >= 0) {
        m->st[m->slot_sid[k]].slot = -1;
    }
    m->slot_count[k] = compute_mask_split(m, sid, mask);
    memcpy(m->slots[k], mask, bytes);
    m->slot_sid[k] = sid;
    m->st[sid].slot = k;
    return m->slot_count[k];
}


static int
push_state(llm_matcher *m, int32_t sid)
{
    if (grow((void **) &m->hist, &m->cap_hist, m->n_hist + 1, 4) != 0) {
        return -1;
    }
    m->hist[m->n_hist++] = sid;
    return 0;
}


static int32_t
walk_bytes(llm_matcher *m, int32_t sid, const char *s, size_t len)
{
    size_t  i;

    for (i = 0; i < len && sid >= 0; i++) {
        sid = step_byte(m, sid, (uint8_t) s[i]);
    }
    return sid;
}


int
llm_matcher_accept(llm_matcher *m, int32_t id)
{
    const llm_grammar_vocab  *v = m->v;
    const char               *p;
    int32_t                   sid = m->hist[m->n_hist - 1], nx = SID_DEAD;
    size_t                    len;

    if (sid == SID_STOPPED || id < 0 || id >= v->n_vocab) {
        return -1;
    }
    if (m->st[sid].has_token) {
        nx = step(m, sid, GE_TOKEN, id);
    }
    if (nx == SID_DEAD) {
        switch (v->kind[id]) {
        case TK_STOP:
            nx = m->st[sid].can_end ? SID_STOPPED : SID_DEAD;
            break;
        case TK_BYTES:
            p = llm_token_piece(v->tok, id, &len);
            nx = walk_bytes(m, sid, p, len);
            break;
        default:
            break;
        }
    }
    if (nx == SID_DEAD) {
        return -1;
    }
    return push_state(m, nx);
}


int
llm_matcher_accept_bytes(llm_matcher *m, const char *s, size_t len)
{
    int32_t  sid = m->hist[m->n_hist - 1];

    if (sid == SID_STOPPED || (sid = walk_bytes(m, sid, s, len)) < 0) {
        return -1;
    }
    return push_state(m, sid);
}


int
llm_matcher_rollback(llm_matcher *m, int k)
{
    if (k < 0 || k > m->n_hist - 1) {
        return -1;
    }
    m->n_hist -= k;
    return 0;
}


int
llm_matcher_can_end(const llm_matcher *m)
{
    int32_t  sid = m->hist[m->n_hist - 1];

    return sid >= 0 && m->st[sid].can_end;
}


int
llm_matcher_is_done(const llm_matcher *m)
{
    int32_t  sid = m->hist[m->n_hist - 1];

    return sid == SID_STOPPED
           || (sid >= 0 && m->st[sid].len == 1 && m->st[sid].can_end);
}


void
llm_matcher_stats(const llm_matcher *m, int *states, int *nodes,
    size_t *bytes)
{
    size_t   b;
    int32_t  i;

    b = sizeof(*m) + (size_t) m->cap_nodes * sizeof(mnode)
        + (size_t) (m->node_hmask + 1) * 4 + (size_t) m->cap_st
        * (sizeof(mstate) + sizeof(int32_t *) + 1)
        + (size_t) (m->st_hmask + 1) * 4 + m->cap_pool * 4
        + (size_t) m->cap_tmp * 4 + (size_t) m->cap_hist * 4
        + (size_t) m->cap_slots * m->n_words * 4;
    for (i = 0; i < m->n_st; i++) {
        b += m->next[i] ? 256 * sizeof(int32_t) : 0;
    }
    for (i = 0; i < LOCAL_SLOTS; i++) {
        if (m->locals[i].key >= 0 && m->locals[i].owned) {
            b += (size_t) m->n_words * 4;
        }
    }
    *states = m->n_st;
    *nodes = m->n_nodes;
    *bytes = b;
}
