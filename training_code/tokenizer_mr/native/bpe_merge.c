/* The merge phase of Hugging Face tokenizers' BpeTrainer::do_train (steps 4 and 5 of tokenizer_mr/bpe.py), in C.
 *
 * Plain C with no Python API: loaded with ctypes (tokenizer_mr/native_merge.py), so one shared library serves
 * every CPython version. Its effects equal those of the Python/NumPy implementation in tokenizer_mr/bpe.py,
 * which documents the rules (the tests run both against tokenizers itself):
 *   - pair counts are kept exact (int64) and read as tokenizers' i32 (`count as i32`, then `as u64`) from the
 *     first count that reaches 2**31 on (the "wrap" flag);
 *   - queue order: higher count first, then the smaller pair ((left << 32) | right), then the older entry;
 *     an entry whose count is out of date is pushed back with the current count;
 *   - a popped entry merges its pair, left to right without overlaps, in the words it lists only; every pair
 *     that gained an occurrence gets a new entry listing the words where it did, if its count is positive.
 * The new token of a merge (its id, which may be an existing token's) comes from the caller (`new_token`).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "unknown"
#endif
#define I32_END ((int64_t)1 << 31)
#define EMPTY_KEY UINT64_MAX

enum { STAT_MERGES, STAT_WORD_MERGES, STAT_ENTRIES, STAT_WRAP, STAT_WRAP_COUNT, STAT_INITIAL_PAIRS, STAT_PAIRS,
       STAT_BYTES, STAT_N };
enum { ERR_MEMORY = -1, ERR_CALLBACK = -2, ERR_INPUT = -3 };

typedef int32_t (*new_token_fn)(int32_t left, int32_t right);

/* The SHA-256 of this file as built (setup.py passes it): tells a stale build from a current one. */
const char *bpe_merge_source(void) { return SOURCE_SHA256; }

/* ---- growable arrays ----------------------------------------------------------------------------------------- */
typedef struct { void *data; int64_t len, cap; size_t item; } vec_t;

static int vec_reserve(vec_t *v, int64_t want, int64_t *bytes) {
    if (want <= v->cap) return 0;
    int64_t cap = v->cap ? v->cap : 1024;
    while (cap < want) cap += cap / 2 + 1;
    void *p = realloc(v->data, (size_t)cap * v->item);
    if (!p) return ERR_MEMORY;
    *bytes += (cap - v->cap) * (int64_t)v->item;
    v->data = p;
    v->cap = cap;
    return 0;
}

/* ---- pair -> int64 map (open addressing, linear probing; key and value side by side: one cache line) ----- */
typedef struct { uint64_t key; int64_t val; } slot_t;
typedef struct { slot_t *slots; uint64_t mask; int64_t size; } map_t;

static inline uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

static int map_init(map_t *m, int64_t cap, int64_t *bytes) {
    uint64_t c = 1024;
    while ((int64_t)c < 2 * cap) c <<= 1;
    m->slots = malloc(c * sizeof(slot_t));
    if (!m->slots) return ERR_MEMORY;
    for (uint64_t i = 0; i < c; i++) m->slots[i].key = EMPTY_KEY;
    m->mask = c - 1;
    m->size = 0;
    *bytes += (int64_t)(c * sizeof(slot_t));
    return 0;
}

static void map_free(map_t *m) {
    free(m->slots);
    m->slots = NULL;
}

static int map_grow(map_t *m, int64_t *bytes) {
    map_t n;
    if (map_init(&n, (int64_t)(m->mask + 1), bytes)) return ERR_MEMORY;
    for (uint64_t i = 0; i <= m->mask; i++) {
        uint64_t k = m->slots[i].key;
        if (k == EMPTY_KEY) continue;
        uint64_t j = mix(k) & n.mask;
        while (n.slots[j].key != EMPTY_KEY) j = (j + 1) & n.mask;
        n.slots[j] = m->slots[i];
    }
    n.size = m->size;
    *bytes -= (int64_t)((m->mask + 1) * sizeof(slot_t));
    map_free(m);
    *m = n;
    return 0;
}

/* The value of `key`, inserted as 0 when absent; NULL when memory runs out. Valid until the next insertion. */
static inline int64_t *map_slot(map_t *m, uint64_t key, int64_t *bytes) {
    uint64_t j = mix(key) & m->mask;
    while (m->slots[j].key != EMPTY_KEY) {
        if (m->slots[j].key == key) return &m->slots[j].val;
        j = (j + 1) & m->mask;
    }
    if ((uint64_t)(m->size + 1) * 2 > m->mask + 1) {
        if (map_grow(m, bytes)) return NULL;
        return map_slot(m, key, bytes);
    }
    m->slots[j].key = key;
    m->slots[j].val = 0;
    m->size++;
    return &m->slots[j].val;
}

static inline int64_t map_get(const map_t *m, uint64_t key) {
    uint64_t j = mix(key) & m->mask;
    while (m->slots[j].key != EMPTY_KEY) {
        if (m->slots[j].key == key) return m->slots[j].val;
        j = (j + 1) & m->mask;
    }
    return 0;
}

/* ---- the queue ----------------------------------------------------------------------------------------------- */
typedef struct { uint64_t count; uint64_t pair; int64_t eid; } entry_t;

static inline int before(const entry_t *x, const entry_t *y) {
    if (x->count != y->count) return x->count > y->count;
    if (x->pair != y->pair) return x->pair < y->pair;
    return x->eid < y->eid;
}

static void sift_down(entry_t *h, int64_t n, int64_t i) {
    entry_t e = h[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&h[c + 1], &h[c])) c++;
        if (!before(&h[c], &e)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

static void sift_up(entry_t *h, int64_t i) {
    entry_t e = h[i];
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!before(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

/* `count as i32 as u64` in Rust: what tokenizers compares. */
static inline uint64_t rust_u64(int64_t count) { return (uint64_t)(int64_t)(int32_t)(uint32_t)(uint64_t)count; }

typedef struct {
    map_t counts;   /* pair -> exact count */
    vec_t heap;     /* entry_t */
    vec_t pool;     /* int32 word indices of all entries */
    vec_t ent_off;  /* int64: an entry's first word in pool */
    vec_t ent_len;  /* int32: its number of words */
    int wrap;
    int64_t wrap_count;
    int64_t bytes;
} state_t;

/* The count of `pair` as tokenizers reads it (turns the wrap-around on at the first count >= 2**31). */
static inline uint64_t current_count(state_t *st, uint64_t pair) {
    int64_t c = map_get(&st->counts, pair);
    if (!st->wrap && c >= I32_END) {
        st->wrap = 1;
        st->wrap_count = c;
    }
    return st->wrap ? rust_u64(c) : (uint64_t)c;
}

static int push_entry(state_t *st, uint64_t count, uint64_t pair, int64_t eid) {
    if (vec_reserve(&st->heap, st->heap.len + 1, &st->bytes)) return ERR_MEMORY;
    entry_t *h = st->heap.data;
    h[st->heap.len] = (entry_t){count, pair, eid};
    sift_up(h, st->heap.len++);
    return 0;
}

/* The best entry whose count is current (out-of-date ones go back with the current count); 0 when empty. */
static int pop_entry(state_t *st, entry_t *out) {
    entry_t *h = st->heap.data;
    while (st->heap.len > 0) {
        entry_t top = h[0];
        uint64_t cur = current_count(st, top.pair);
        if (cur == top.count) {
            h[0] = h[--st->heap.len];
            if (st->heap.len) sift_down(h, st->heap.len, 0);
            *out = top;
            return 1;
        }
        h[0].count = cur;
        sift_down(h, st->heap.len, 0);
    }
    return 0;
}

/* ---- step 4: pair counts, the words holding each pair, the initial entries ------------------------------------ */
static const uint64_t *g_sort_pairs;
static const uint64_t *g_sort_counts;

static int cmp_initial(const void *x, const void *y) {
    int64_t i = *(const int64_t *)x, j = *(const int64_t *)y;
    if (g_sort_counts[i] != g_sort_counts[j]) return g_sort_counts[i] > g_sort_counts[j] ? -1 : 1;
    return g_sort_pairs[i] < g_sort_pairs[j] ? -1 : (g_sort_pairs[i] > g_sort_pairs[j]);
}

static int initial_entries(state_t *st, const int32_t *sym, const int64_t *wstart, const int64_t *wcount,
                           int64_t n_words, int64_t *n_static) {
    map_t index; /* pair -> its position in the arrays below */
    vec_t pairs = {0, 0, 0, 8}, totals = {0, 0, 0, 8}, last = {0, 0, 0, 8}, fill = {0, 0, 0, 8};
    int rc = ERR_MEMORY;
    if (map_init(&index, 4096, &st->bytes)) goto out;
    /* pass 1: totals, and per pair the number of distinct words holding it (`last`: the last word counted) */
    for (int64_t w = 0; w < n_words; w++) {
        const int32_t *s = sym + wstart[w];
        int64_t n = wstart[w + 1] - wstart[w];
        for (int64_t k = 0; k + 1 < n; k++) {
            uint64_t key = ((uint64_t)(uint32_t)s[k] << 32) | (uint32_t)s[k + 1];
            int64_t *slot = map_slot(&index, key, &st->bytes);
            if (!slot) goto out;
            if (*slot == 0) {
                if (vec_reserve(&pairs, pairs.len + 1, &st->bytes) || vec_reserve(&totals, pairs.len + 1, &st->bytes) ||
                    vec_reserve(&last, pairs.len + 1, &st->bytes) || vec_reserve(&fill, pairs.len + 1, &st->bytes))
                    goto out;
                ((uint64_t *)pairs.data)[pairs.len] = key;
                ((int64_t *)totals.data)[pairs.len] = 0;
                ((int64_t *)last.data)[pairs.len] = -1;
                ((int64_t *)fill.data)[pairs.len] = 0;
                *slot = ++pairs.len; /* position + 1: 0 means new */
            }
            int64_t p = *slot - 1;
            ((int64_t *)totals.data)[p] += wcount[w];
            if (((int64_t *)last.data)[p] != w) {
                ((int64_t *)last.data)[p] = w;
                ((int64_t *)fill.data)[p]++;
            }
        }
    }
    int64_t np = pairs.len;
    uint64_t *pk = pairs.data;
    int64_t *tot = totals.data, *lst = last.data, *fil = fill.data;
    /* CSR offsets: fill[p] becomes the next free position of pair p in the pool */
    int64_t incidences = 0;
    for (int64_t p = 0; p < np; p++) {
        int64_t c = fil[p];
        fil[p] = incidences;
        incidences += c;
        lst[p] = -1;
    }
    if (vec_reserve(&st->pool, incidences, &st->bytes)) goto out;
    int32_t *pool = st->pool.data;
    int64_t *start = malloc((size_t)(np + 1) * sizeof(int64_t));
    if (!start && np >= 0) goto out;
    memcpy(start, fil, (size_t)np * sizeof(int64_t));
    start[np] = incidences;
    /* pass 2: the words of each pair, ascending */
    for (int64_t w = 0; w < n_words; w++) {
        const int32_t *s = sym + wstart[w];
        int64_t n = wstart[w + 1] - wstart[w];
        for (int64_t k = 0; k + 1 < n; k++) {
            uint64_t key = ((uint64_t)(uint32_t)s[k] << 32) | (uint32_t)s[k + 1];
            int64_t p = map_get(&index, key) - 1;
            if (lst[p] != w) {
                lst[p] = w;
                pool[fil[p]++] = (int32_t)w;
            }
        }
    }
    st->pool.len = incidences;
    map_free(&index);
    /* the exact counts; the wrap-around is on from the start if some pair already occurs 2**31 times */
    if (map_init(&st->counts, np + 1024, &st->bytes)) { free(start); goto out; }
    uint64_t *shown = malloc((size_t)(np + 1) * sizeof(uint64_t));
    int64_t *order = malloc((size_t)(np + 1) * sizeof(int64_t));
    if (!shown || !order) { free(start); free(shown); free(order); goto out; }
    for (int64_t p = 0; p < np; p++) {
        int64_t *slot = map_slot(&st->counts, pk[p], &st->bytes);
        if (!slot) { free(start); free(shown); free(order); goto out; }
        *slot = tot[p];
        if (!st->wrap && tot[p] >= I32_END) {
            st->wrap = 1;
            st->wrap_count = tot[p];
        }
    }
    /* initial entries in pop order (count as tokenizers reads it, descending; then pair): ids 0, 1, ... */
    int64_t ns = 0;
    for (int64_t p = 0; p < np; p++) {
        uint64_t c = st->wrap ? rust_u64(tot[p]) : (uint64_t)tot[p];
        shown[p] = c;
        if ((int32_t)(uint32_t)(uint64_t)tot[p] > 0 || !st->wrap) order[ns++] = p;
    }
    g_sort_pairs = pk;
    g_sort_counts = shown;
    qsort(order, (size_t)ns, sizeof(int64_t), cmp_initial);
    if (vec_reserve(&st->heap, ns, &st->bytes) || vec_reserve(&st->ent_off, ns, &st->bytes) ||
        vec_reserve(&st->ent_len, ns, &st->bytes)) {
        free(start); free(shown); free(order); goto out;
    }
    entry_t *h = st->heap.data;
    for (int64_t r = 0; r < ns; r++) {
        int64_t p = order[r];
        h[r] = (entry_t){shown[p], pk[p], r}; /* sorted: already a heap */
        ((int64_t *)st->ent_off.data)[r] = start[p];
        ((int32_t *)st->ent_len.data)[r] = (int32_t)(start[p + 1] - start[p]);
    }
    st->heap.len = st->ent_off.len = st->ent_len.len = ns;
    *n_static = ns;
    free(start);
    free(shown);
    free(order);
    rc = 0;
out:
    map_free(&index);
    free(pairs.data);
    free(totals.data);
    free(last.data);
    free(fill.data);
    return rc;
}

/* ---- step 5: the merge loop ----------------------------------------------------------------------------------- */
typedef struct { int64_t start; int64_t count; int32_t len; int32_t unused; } word_t;

/* What one merge step changes, gathered before the pair counts are touched: the count moved per left
 * neighbour L ((L, a) -> (L, new)) and per right neighbour R ((b, R) -> (new, R)), and the words where each
 * pair gained an occurrence, by bucket: (L, new) in bucket L, (new, R) in bucket vocab + R, except (new, new),
 * which has the one bucket `new` whichever side made it. */
typedef struct {
    int64_t *left, *right;          /* per symbol: count moved (dense, zero between steps) */
    int32_t *touched_l, *touched_r; /* the symbols with a nonzero entry above */
    int64_t n_l, n_r;
    int32_t *bucket_n;              /* per bucket: words gained in this step (then: write position) */
    int32_t *touched;               /* the buckets touched, in first-touch order */
    int64_t n_touched;
    vec_t gains;                    /* (bucket, word) pairs, int32 x 2 */
    vec_t sorted;                   /* int32 words grouped by bucket */
} step_t;

static inline int gain(state_t *st, step_t *g, int32_t bucket, int32_t word) {
    if (g->gains.len + 2 > g->gains.cap && vec_reserve(&g->gains, g->gains.len + 2, &st->bytes)) return ERR_MEMORY;
    int32_t *d = (int32_t *)g->gains.data + g->gains.len;
    d[0] = bucket;
    d[1] = word;
    g->gains.len += 2;
    if (g->bucket_n[bucket]++ == 0) g->touched[g->n_touched++] = bucket;
    return 0;
}

/* Merge (a, b) into `nw` in one word, left to right without overlaps (as tokenizers' Word::merge): the left
 * neighbour is read after the merges already made in the word, the right one before. */
static int merge_word(state_t *st, step_t *g, int32_t *s, word_t *wd, int32_t a, int32_t b, int32_t nw, int32_t w,
                      int32_t vocab, int64_t *merged) {
    int32_t n = wd->len, i = 0, j = 0;
    int64_t c = wd->count;
    while (i < n) {
        if (s[i] == a && i + 1 < n && s[i + 1] == b) {
            if (j > 0) {
                int32_t l = s[j - 1];
                if (g->left[l] == 0) g->touched_l[g->n_l++] = l;
                g->left[l] += c;
                if (gain(st, g, l, w)) return ERR_MEMORY;
            }
            if (i + 2 < n) {
                int32_t r = s[i + 2];
                if (g->right[r] == 0) g->touched_r[g->n_r++] = r;
                g->right[r] += c;
                if (gain(st, g, r == nw ? nw : vocab + r, w)) return ERR_MEMORY;
            }
            s[j++] = nw;
            i += 2;
            (*merged)++;
        } else {
            s[j++] = s[i++];
        }
    }
    wd->len = j;
    return 0;
}

/* Apply the step's moved counts to the pair counts. */
static int apply_moves(state_t *st, step_t *g, int32_t a, int32_t b, int32_t nw) {
    uint64_t a_lo = (uint32_t)a, nw_lo = (uint32_t)nw, b_hi = (uint64_t)(uint32_t)b << 32,
             nw_hi = (uint64_t)(uint32_t)nw << 32;
    for (int64_t k = 0; k < g->n_l; k++) {
        int32_t l = g->touched_l[k];
        int64_t c = g->left[l], *slot;
        uint64_t l_hi = (uint64_t)(uint32_t)l << 32;
        g->left[l] = 0;
        if (!(slot = map_slot(&st->counts, l_hi | a_lo, &st->bytes))) return ERR_MEMORY;
        *slot -= c;
        if (!(slot = map_slot(&st->counts, l_hi | nw_lo, &st->bytes))) return ERR_MEMORY;
        *slot += c;
    }
    for (int64_t k = 0; k < g->n_r; k++) {
        int32_t r = g->touched_r[k];
        int64_t c = g->right[r], *slot;
        g->right[r] = 0;
        if (!(slot = map_slot(&st->counts, b_hi | (uint32_t)r, &st->bytes))) return ERR_MEMORY;
        *slot -= c;
        if (!(slot = map_slot(&st->counts, nw_hi | (uint32_t)r, &st->bytes))) return ERR_MEMORY;
        *slot += c;
    }
    g->n_l = g->n_r = 0;
    return 0;
}

/* A new entry for every pair that gained occurrences in this step and whose count (as i32) is positive. */
static int push_gains(state_t *st, step_t *g, int32_t nw, int32_t vocab, int64_t *n_entries) {
    int64_t n_gains = g->gains.len / 2;
    if (vec_reserve(&g->sorted, n_gains, &st->bytes)) return ERR_MEMORY;
    int32_t *sorted = g->sorted.data, *gd = g->gains.data;
    int64_t pos = 0;
    for (int64_t t = 0; t < g->n_touched; t++) { /* counting sort by bucket (stable: words stay ascending) */
        int32_t bk = g->touched[t], n = g->bucket_n[bk];
        g->bucket_n[bk] = (int32_t)pos;
        pos += n;
    }
    for (int64_t k = 0; k < n_gains; k++) sorted[g->bucket_n[gd[2 * k]]++] = gd[2 * k + 1];
    int64_t lo = 0;
    for (int64_t t = 0; t < g->n_touched; t++) {
        int32_t bk = g->touched[t];
        int64_t hi = g->bucket_n[bk];
        g->bucket_n[bk] = 0;
        uint64_t pair = bk < vocab ? ((uint64_t)(uint32_t)bk << 32) | (uint32_t)nw
                                   : ((uint64_t)(uint32_t)nw << 32) | (uint32_t)(bk - vocab);
        uint64_t cnt = current_count(st, pair);
        if ((int32_t)(uint32_t)cnt > 0 && cnt < (uint64_t)I32_END) {
            int64_t eid = (*n_entries)++;
            if (vec_reserve(&st->pool, st->pool.len + (hi - lo), &st->bytes) ||
                vec_reserve(&st->ent_off, eid + 1, &st->bytes) || vec_reserve(&st->ent_len, eid + 1, &st->bytes))
                return ERR_MEMORY;
            int32_t *pool = st->pool.data;
            int64_t start = st->pool.len, m = start;
            for (int64_t k = lo; k < hi; k++)
                if (m == start || pool[m - 1] != sorted[k]) pool[m++] = sorted[k];
            st->pool.len = m;
            ((int64_t *)st->ent_off.data)[eid] = start;
            ((int32_t *)st->ent_len.data)[eid] = (int32_t)(m - start);
            st->ent_off.len = st->ent_len.len = eid + 1;
            if (push_entry(st, cnt, pair, eid)) return ERR_MEMORY;
        }
        lo = hi;
    }
    g->gains.len = 0;
    g->n_touched = 0;
    return 0;
}

/* Learn the merges. `sym`: the symbols of the words (ids < n_vocab), word w at sym[wstart[w] .. wstart[w + 1]),
 * modified in place; `wcount`: each word's count (>= 1). For each merge, in order, `new_token(a, b)` records it
 * and returns the id of the merged token (== the current vocabulary size when it is new), or -1 to stop on an
 * error. Writes the statistics to `stats` (STAT_N values). Returns the number of merges, or ERR_* < 0. */
int64_t bpe_merge(int32_t *sym, const int64_t *wstart, const int64_t *wcount, int64_t n_words, int64_t n_vocab,
                  int64_t vocab_size, uint64_t min_frequency, new_token_fn new_token, int64_t *stats) {
    state_t st;
    memset(&st, 0, sizeof st);
    st.heap.item = sizeof(entry_t);
    st.pool.item = sizeof(int32_t);
    st.ent_off.item = sizeof(int64_t);
    st.ent_len.item = sizeof(int32_t);
    step_t g;
    memset(&g, 0, sizeof g);
    g.gains.item = sizeof(int32_t);
    g.sorted.item = sizeof(int32_t);
    int64_t n_merges = 0, merged = 0, n_static = 0, rc = 0;
    word_t *words = NULL;
    memset(stats, 0, STAT_N * sizeof(int64_t));
    if (n_words < 0 || n_words >= INT32_MAX || vocab_size >= INT32_MAX / 2 || n_vocab < 0) return ERR_INPUT;
    for (int64_t w = 0; w < n_words; w++)
        if (wstart[w + 1] - wstart[w] >= INT32_MAX || wstart[w + 1] < wstart[w] || wcount[w] < 1) return ERR_INPUT;
    int32_t vocab = (int32_t)(vocab_size > n_vocab ? vocab_size : n_vocab);
    size_t nb = (size_t)2 * vocab + 1;
    g.left = calloc((size_t)vocab, sizeof(int64_t));
    g.right = calloc((size_t)vocab, sizeof(int64_t));
    g.touched_l = malloc((size_t)vocab * sizeof(int32_t));
    g.touched_r = malloc((size_t)vocab * sizeof(int32_t));
    g.bucket_n = calloc(nb, sizeof(int32_t));
    g.touched = malloc(nb * sizeof(int32_t));
    words = malloc((size_t)(n_words + 1) * sizeof(word_t));
    if (!g.left || !g.right || !g.touched_l || !g.touched_r || !g.bucket_n || !g.touched || !words) {
        rc = ERR_MEMORY;
        goto out;
    }
    st.bytes += (int64_t)(vocab * 24 + nb * 8 + (n_words + 1) * sizeof(word_t));
    for (int64_t w = 0; w < n_words; w++)
        words[w] = (word_t){wstart[w], wcount[w], (int32_t)(wstart[w + 1] - wstart[w]), 0};
    if ((rc = initial_entries(&st, sym, wstart, wcount, n_words, &n_static))) goto out;
    int64_t n_entries = n_static;
    stats[STAT_INITIAL_PAIRS] = n_static;
    while (n_vocab < vocab_size) {
        entry_t top;
        if (!pop_entry(&st, &top)) break;
        if (top.count < 1 || min_frequency > top.count) break;
        int32_t a = (int32_t)(top.pair >> 32), b = (int32_t)(top.pair & 0xffffffffu);
        int32_t nw = new_token(a, b);
        if (nw < 0 || nw > n_vocab || nw >= vocab) {
            rc = ERR_CALLBACK;
            goto out;
        }
        if (nw == n_vocab) n_vocab++;
        n_merges++;
        const int32_t *list = (const int32_t *)st.pool.data + ((int64_t *)st.ent_off.data)[top.eid];
        int32_t len = ((int32_t *)st.ent_len.data)[top.eid];
        for (int32_t k = 0; k < len; k++) {
            /* the words are scattered over memory: fetch the record 16 words ahead, the symbols 8 ahead */
            if (k + 16 < len) __builtin_prefetch(&words[list[k + 16]]);
            if (k + 8 < len) __builtin_prefetch(sym + words[list[k + 8]].start);
            int32_t w = list[k];
            if ((rc = merge_word(&st, &g, sym + words[w].start, &words[w], a, b, nw, w, vocab, &merged))) goto out;
        }
        if ((rc = apply_moves(&st, &g, a, b, nw)) || (rc = push_gains(&st, &g, nw, vocab, &n_entries))) goto out;
    }
    rc = n_merges;
out:
    stats[STAT_MERGES] = n_merges;
    stats[STAT_WORD_MERGES] = merged;
    stats[STAT_ENTRIES] = (st.ent_off.len > n_static ? st.ent_off.len : n_static) - n_static;
    stats[STAT_WRAP] = st.wrap;
    stats[STAT_WRAP_COUNT] = st.wrap_count;
    stats[STAT_PAIRS] = st.counts.size;
    stats[STAT_BYTES] = st.bytes;
    map_free(&st.counts);
    free(st.heap.data);
    free(st.pool.data);
    free(st.ent_off.data);
    free(st.ent_len.data);
    free(g.left);
    free(g.right);
    free(g.touched_l);
    free(g.touched_r);
    free(g.bucket_n);
    free(g.touched);
    free(g.gains.data);
    free(g.sorted.data);
    free(words);
    return rc;
}
