/* The checker's optional compiled inner loop: the frontier search of search.py over models whose
 * steps are guarded updates on interned states (this file), and a reader of this kit's JSON-lines
 * histories (_native_scan.c).
 *
 * Built at install time when a C compiler is present (setup.py marks it optional); the pure
 * Python path is always there and is what every verdict here is tested against
 * (tests/sim/test_native.py). Nothing here knows a model or a protocol:
 *
 *   search(calls, rets, kinds, index, kind_rule, kind_known, table, inert, starts,
 *          nstates, until, deadline, max_configs) -> (status, failed, pos)
 *       One partition, as search.prepare and search.feed do it: the operations `index` names
 *       (int32; empty: all). Per operation: call and return times (int64; INT64_MIN: no return)
 *       and its kind (int32); per kind: its rule and whether its output is known. A rule r is
 *       three int32s of `table` (g, a, b): in state s the next state is a when s == g, else b; KEEP (-2) means s, REFUSE (-1) none; `inert[r]`: effect-free.
 *       States are 0 .. nstates-1. status: 0 ok, 1 illegal (failed: the partition's operation
 *       whose return no configuration survived; pos: the event after it), 2 out of time,
 *       3 out of room, 4 more than 64 operations open at once (the caller falls back to the
 *       pure path, whose bitsets have no width).
 *
 *   search_many(..., indexes: list of index bytes, ...) -> (done, status, failed, pos)
 *       search() over partitions in order until one is not OK: how many were, and its answer.
 *
 *   scan(data, key_field[, min_split]) -> None | (header, clients, calls, rets, sigs, keys, sig_texts,
 *        key_texts)
 *       A strict subset of the JSON-lines format (ASCII, integers, '\n' line ends); None for
 *       anything else, so that the pure reader reads it, or names the line that is wrong. A text
 *       of min_split bytes or more (default 256 KiB) is read in two halves on two threads.
 *       An operation's signature is its input without the key_field member, a NUL byte, and
 *       its output: distinct texts are interned, so the caller decodes each once.
 *
 *   split(keys, part_of_key) -> list of int32 index arrays, one per partition, in the order
 *       of their first operation.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEEP (-2)
#define REFUSE (-1)
#define NO_RETURN INT64_MIN
#define TICK 1023

/* -- a set of configurations (mask, state) that keeps only those no other one does better ------ *
 * Of two configurations in one state whose masks differ only in "loose" bits, one can do all the
 * other can when it has applied every effect-free operation the other has (it need not reach a
 * state where that one is legal again) and no unanswered operation the other has not (it may
 * still apply it, or never). A mask's debt, (mask ^ flip) & loose with `flip` the effect-free
 * operations' bits, is then a subset of the other's. Configurations sharing a state and their
 * other bits (the base) form a group, chained from one slot of the index: one is added only when
 * no member's debt is a subset of its own, and removes the members whose debt contains its own.
 * So the frontier keeps the same verdict, and the same first return no configuration survives,
 * with fewer configurations to extend (with loose 0 it is a plain set). */

#define DEAD (-2) /* the link of a configuration removed from its group */
#define LOW 0xffffffffULL

typedef struct {
    uint64_t mask;
    int32_t state;
    int32_t link; /* the next of its group, -1: none; DEAD: removed */
} Config;

typedef struct {
    Config *items;
    Py_ssize_t count, live, cap; /* count: entries, the removed among them */
    uint64_t *index;             /* slot -> generation << 32 | a group's first entry; other generations: empty */
    uint64_t gen;                /* clearing is a new generation */
    size_t slots, groups;        /* slots: a power of two */
} ConfigSet;

static uint64_t mix(uint64_t base, int32_t state) {
    uint64_t h = base * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)(uint32_t)state * 0xC2B2AE3D27D4EB4FULL);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 32);
}

static int set_init(ConfigSet *set) {
    set->count = set->live = 0;
    set->cap = 16;
    set->slots = 32;
    set->groups = 0;
    set->gen = 1;
    set->items = malloc(sizeof(Config) * set->cap);
    set->index = calloc(set->slots, sizeof(uint64_t));
    return set->items && set->index ? 0 : -1;
}

static void set_free(ConfigSet *set) {
    free(set->items);
    free(set->index);
}

static void set_clear(ConfigSet *set) {
    set->count = set->live = 0;
    set->groups = 0;
    if (++set->gen > LOW) { /* every generation used: the index is emptied for real */
        memset(set->index, 0, sizeof(uint64_t) * set->slots);
        set->gen = 1;
    }
}

static int set_reindex(ConfigSet *set, size_t slots, uint64_t loose) {
    uint64_t *index = calloc(slots, sizeof(uint64_t));
    if (!index) return -1;
    uint64_t tag = set->gen << 32;
    for (size_t k = 0; k < set->slots; k++) {
        uint64_t v = set->index[k];
        if ((v & ~LOW) != tag) continue;
        const Config *c = &set->items[v & LOW];
        size_t slot = mix(c->mask & ~loose, c->state) & (slots - 1);
        while ((index[slot] & ~LOW) == tag) slot = (slot + 1) & (slots - 1);
        index[slot] = v;
    }
    free(set->index);
    set->index = index;
    set->slots = slots;
    return 0;
}

/* 1: added, 0: it or a better one is there already, -1: out of memory */
static int set_add(ConfigSet *set, uint64_t mask, int32_t state, uint64_t loose, uint64_t flip) {
    uint64_t base = mask & ~loose, debt = (mask ^ flip) & loose, tag = set->gen << 32;
    size_t slot = mix(base, state) & (set->slots - 1);
    int32_t head = -1;
    for (uint64_t v; ((v = set->index[slot]) & ~LOW) == tag; slot = (slot + 1) & (set->slots - 1)) {
        const Config *c = &set->items[v & LOW];
        if (c->state == state && (c->mask & ~loose) == base) {
            head = (int32_t)(v & LOW);
            break;
        }
    }
    int32_t link = -1, *tail = &link;
    for (int32_t at = head; at >= 0; at = set->items[at].link) {
        uint64_t other = (set->items[at].mask ^ flip) & loose;
        if ((other & debt) == other) return 0;
    }
    for (int32_t at = head, next; at >= 0; at = next) {
        Config *c = &set->items[at];
        next = c->link;
        if ((debt & ((c->mask ^ flip) & loose)) == debt) {
            c->link = DEAD;
            set->live--;
        } else {
            *tail = at;
            tail = &c->link;
        }
    }
    *tail = -1;
    if (set->count == set->cap) {
        Py_ssize_t cap = set->cap * 2;
        Config *items = realloc(set->items, sizeof(Config) * cap);
        if (!items) return -1;
        set->items = items;
        set->cap = cap;
    }
    set->items[set->count] = (Config){mask, state, link};
    set->index[slot] = tag | (uint64_t)set->count;
    set->count++;
    set->live++;
    if (head < 0 && ++set->groups * 2 > set->slots) return set_reindex(set, set->slots * 2, loose) ? -1 : 1;
    return 1;
}

/* -- the frontier of one partition ------------------------------------------------------------- */

typedef struct {
    uint64_t bit;
    int32_t rule;
    int64_t due, call, op; /* due: its return time (INT64_MAX: none) */
} Open;

typedef struct {
    const int32_t *table;
    ConfigSet configs, next, seen;
    Config *stack;
    Py_ssize_t stack_cap;
    Open effectful[64], inert[64];
    int n_effectful, n_inert;
    uint64_t free_bits, used_bits, forever, inert_bits; /* inert_bits: the open effect-free operations */
    int64_t *bit_of;     /* operation -> its bit while open */
    uint64_t *memo_gen, *memo_bits, gen;
    int32_t nstates;
    uint64_t work;
    double deadline;
    Py_ssize_t max_configs;
    PyThreadState *released; /* the search runs without the GIL; it is taken back to look at signals */
} Frontier;

static int32_t apply(const int32_t *table, int32_t rule, int32_t state) {
    const int32_t *r = table + 3 * (Py_ssize_t)rule;
    int32_t next = state == r[0] ? r[1] : r[2];
    return next == KEEP ? state : next;
}

static double monotonic(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* the clock of Python's time.monotonic() */
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* The bits of the open effect-free operations other than `except` legal in `state`: they take
 * effect as soon as they are legal, and that depends on the state alone (asked once per state
 * and return). */
static uint64_t legal_inert(Frontier *f, int32_t state, uint64_t except) {
    if (state < f->nstates && f->memo_gen[state] == f->gen) return f->memo_bits[state];
    uint64_t bits = 0;
    for (int k = 0; k < f->n_inert; k++) {
        if (f->inert[k].bit != except && apply(f->table, f->inert[k].rule, state) >= 0) bits |= f->inert[k].bit;
    }
    if (state < f->nstates) {
        f->memo_gen[state] = f->gen;
        f->memo_bits[state] = bits;
    }
    return bits;
}

/* set_add with the frontier's loose bits: its unanswered and its effect-free open operations */
static int add(Frontier *f, ConfigSet *set, uint64_t mask, int32_t state) {
    return set_add(set, mask, state, f->forever | f->inert_bits, f->inert_bits);
}

/* 0 ok, 4 too wide, -1 out of memory */
static int frontier_call(Frontier *f, int64_t op, int32_t rule, int is_inert, int returns, int64_t call, int64_t due) {
    uint64_t bit;
    if (f->free_bits) {
        bit = f->free_bits & (~f->free_bits + 1);
        f->free_bits ^= bit;
    } else {
        if (f->used_bits == UINT64_MAX) return 4;
        bit = (f->used_bits + 1) & ~f->used_bits;
        f->used_bits |= bit;
    }
    f->bit_of[op] = (int64_t)bit;
    if (!returns) f->forever |= bit;
    if (!is_inert) {
        f->effectful[f->n_effectful++] = (Open){bit, rule, returns ? due : INT64_MAX, call, op};
        return 0;
    }
    f->inert[f->n_inert++] = (Open){bit, rule, returns ? due : INT64_MAX, call, op};
    f->inert_bits |= bit;
    /* The bit joins the loose ones as it is set: no configuration's base or group changes. */
    ConfigSet *set = &f->configs;
    for (Py_ssize_t k = 0; k < set->count; k++) {
        if (set->items[k].link != DEAD && apply(f->table, rule, set->items[k].state) >= 0) set->items[k].mask |= bit;
    }
    return 0;
}

static void frontier_commit(Frontier *f, int64_t op) {
    uint64_t bit = (uint64_t)f->bit_of[op];
    ConfigSet swap = f->configs;
    f->configs = f->next;
    f->next = swap;
    f->free_bits |= bit;
    f->inert_bits &= ~bit;
    for (int k = 0; k < f->n_effectful; k++) {
        if (f->effectful[k].bit == bit) {
            f->effectful[k] = f->effectful[--f->n_effectful];
            return;
        }
    }
    for (int k = 0; k < f->n_inert; k++) {
        if (f->inert[k].bit == bit) {
            f->inert[k] = f->inert[--f->n_inert];
            return;
        }
    }
}

static int push(Frontier *f, Py_ssize_t *depth, uint64_t mask, int32_t state) {
    if (*depth == f->stack_cap) {
        Py_ssize_t cap = f->stack_cap * 2;
        Config *stack = realloc(f->stack, sizeof(Config) * cap);
        if (!stack) return -1;
        f->stack = stack;
        f->stack_cap = cap;
    }
    f->stack[(*depth)++] = (Config){mask, state};
    return 0;
}

/* -4 when a signal handler raised (Ctrl-C: KeyboardInterrupt), which needs the GIL to find out. */
static int interrupted(Frontier *f) {
    PyEval_RestoreThread(f->released);
    int raised = PyErr_CheckSignals();
    f->released = PyEval_SaveThread();
    return raised ? -4 : 0;
}

static int lowest_bit(uint64_t bits) { /* the position of the lowest bit set (bits != 0) */
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(bits);
#else
    int at = 0;
    while (!(bits & 1)) bits >>= 1, at++;
    return at;
#endif
}

/* The open operations that change the state, but `except`, by bit position: what one return
 * extends configurations with. Open operations with the same rule are interchangeable: of those
 * not yet applied, the one whose return comes first (in the order returns are fed: by time, then
 * operation) is applied first, since any order that applies another before it does as well with
 * the two swapped; unanswered ones come last, in the order they were called. `first`: the bits
 * of the ones before it. */
typedef struct {
    uint64_t bits;
    uint64_t first[64];
    int32_t rule[64];
} Movers;

static void movers_of(const Frontier *f, uint64_t except, Movers *m) {
    m->bits = 0;
    for (int k = 0; k < f->n_effectful; k++) {
        const Open *o = &f->effectful[k];
        const int32_t *r = f->table + 3 * (Py_ssize_t)o->rule;
        uint64_t first = 0;
        for (int j = 0; j < f->n_effectful; j++) {
            const Open *p = &f->effectful[j];
            const int32_t *q = f->table + 3 * (Py_ssize_t)p->rule;
            if (j == k || (p->rule != o->rule && (q[0] != r[0] || q[1] != r[1] || q[2] != r[2]))) continue;
            if (p->due < o->due || (p->due == o->due && (o->due < INT64_MAX ? p->op < o->op
                                                         : p->call < o->call || (p->call == o->call && p->op < o->op))))
                first |= p->bit;
        }
        if (o->bit == except) continue;
        int at = lowest_bit(o->bit);
        m->bits |= o->bit;
        m->first[at] = first;
        m->rule[at] = o->rule;
    }
}

/* 0 survived, 1 no configuration survived, 2 time, 3 room, -1 out of memory, -4 interrupted */
static int frontier_ret(Frontier *f, int64_t op, int32_t rule) {
    uint64_t bit = (uint64_t)f->bit_of[op];
    ConfigSet *configs = &f->configs, *next = &f->next;
    set_clear(next);
    if (configs->live == 1) {
        /* one way to explain everything so far: no search when the operation already took
         * effect, or when nothing else that changes the state is open */
        Py_ssize_t only = 0;
        while (configs->items[only].link == DEAD) only++;
        Config c = configs->items[only];
        int others = f->n_effectful;
        for (int k = 0; k < f->n_effectful; k++) others -= f->effectful[k].bit == bit;
        if (c.mask & bit) {
            if (add(f, next, c.mask ^ bit, c.state) < 0) return -1;
            frontier_commit(f, op);
            return 0;
        }
        if (!others) {
            int32_t s2 = apply(f->table, rule, c.state);
            if (s2 >= 0) {
                uint64_t m2 = c.mask;
                for (int k = 0; k < f->n_inert; k++) {
                    Open *o = &f->inert[k];
                    if (o->bit != bit && !(m2 & o->bit) && apply(f->table, o->rule, s2) >= 0) m2 |= o->bit;
                }
                if (add(f, next, m2, s2) < 0) return -1;
            }
            frontier_commit(f, op);
            return f->configs.live ? 0 : 1;
        }
    }
    f->gen++;
    Movers movers;
    movers_of(f, bit, &movers);
    ConfigSet *seen = &f->seen;
    set_clear(seen);
    Py_ssize_t depth = 0;
    for (Py_ssize_t k = 0; k < configs->count; k++) {
        Config c = configs->items[k];
        if (c.link == DEAD) continue;
        if (c.mask & bit) {
            if (add(f, next, c.mask ^ bit, c.state) < 0) return -1;
        } else {
            int added = add(f, seen, c.mask, c.state);
            if (added < 0 || (added && push(f, &depth, c.mask, c.state) < 0)) return -1;
        }
    }
    while (depth) {
        f->work++;
        if (!(f->work & TICK)) {
            if (monotonic() > f->deadline) return 2;
            if (seen->live + next->live > f->max_configs) return 3;
            if (!(f->work & (TICK << 6)) && interrupted(f)) return -4;
        }
        Config c = f->stack[--depth];
        int32_t s2 = apply(f->table, rule, c.state);
        if (s2 >= 0 && add(f, next, c.mask | legal_inert(f, s2, bit), s2) < 0) return -1;
        for (uint64_t left = movers.bits & ~c.mask; left; left &= left - 1) {
            int at = lowest_bit(left);
            uint64_t one = left & (~left + 1);
            if ((c.mask & movers.first[at]) != movers.first[at]) continue;
            s2 = apply(f->table, movers.rule[at], c.state);
            if (s2 < 0 || (s2 == c.state && (one & f->forever))) continue; /* an answer that never came
                                                                              changing nothing */
            uint64_t m2 = c.mask | one | legal_inert(f, s2, bit);
            int added = add(f, seen, m2, s2);
            if (added < 0 || (added && push(f, &depth, m2, s2) < 0)) return -1;
        }
    }
    frontier_commit(f, op);
    return f->configs.live ? 0 : 1;
}

typedef struct {
    int64_t time;
    int32_t kind; /* 0 call, 1 return */
    int32_t op;
} Event;

static int compare_events(const void *x, const void *y) {
    const Event *a = x, *b = y;
    if (a->time != b->time) return a->time < b->time ? -1 : 1;
    if (a->kind != b->kind) return a->kind - b->kind;
    return (a->op > b->op) - (a->op < b->op);
}

typedef struct {
    Py_buffer calls, rets, kinds, index, kind_rule, kind_known, table, inert, starts;
} Buffers;

static void release(Buffers *b) {
    Py_buffer *all[] = {&b->calls, &b->rets, &b->kinds, &b->index, &b->kind_rule, &b->kind_known, &b->table,
                        &b->inert, &b->starts};
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++) {
        if (all[k]->obj) PyBuffer_Release(all[k]);
    }
}

/* The partition's operations as search.prepare makes them; op k is global operation index[k]. */
typedef struct {
    Py_ssize_t n;
    int64_t *calls, *rets;
    int32_t *rules;
    int8_t *known, *returns;
} Ops;

static void ops_free(Ops *ops) {
    free(ops->calls); free(ops->rets); free(ops->rules); free(ops->known); free(ops->returns);
}

static void sort_run(Event *run, Py_ssize_t n) {
    for (Py_ssize_t k = 1; k < n; k++) {
        if (compare_events(&run[k - 1], &run[k]) > 0) {
            qsort(run, (size_t)n, sizeof(Event), compare_events);
            return;
        }
    }
}

/* The partition's events in (time, call before return, operation) order, as search.prepare
 * sorts them; calls and returns are sorted apart (a history is usually in call order, and its
 * returns nearly so), then merged. Returns how many, or -1 out of memory. */
static Py_ssize_t sort_events(const Ops *ops, const int8_t *inert, int64_t until, Event *events) {
    Py_ssize_t n = ops->n, nc = 0, nr = 0;
    Event *rets = malloc(sizeof(Event) * (size_t)(n + 1));
    if (!rets) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* an effect-free operation with an unknown answer constrains nothing */
        if ((inert[ops->rules[i]] && !ops->known[i]) || (until != NO_RETURN && ops->calls[i] > until)) continue;
        events[nc++] = (Event){ops->calls[i], 0, (int32_t)i};
        if (ops->returns[i]) rets[nr++] = (Event){ops->rets[i], 1, (int32_t)i};
    }
    sort_run(events, nc);
    sort_run(rets, nr);
    memmove(events + nr, events, sizeof(Event) * (size_t)nc); /* merge from the back of the buffer */
    Py_ssize_t a = nr, b = 0, w = 0;
    while (a < nr + nc && b < nr) events[w++] = compare_events(&events[a], &rets[b]) <= 0 ? events[a++] : rets[b++];
    while (b < nr) events[w++] = rets[b++];
    free(rets);
    return nc + nr; /* the calls left over are already in place */
}

static int gather(Buffers *b, const int32_t *index, Py_ssize_t nindex, int64_t until, Ops *ops) {
    Py_ssize_t total = b->calls.len / 8;
    Py_ssize_t nkinds = b->kind_rule.len / 4, nrules = b->inert.len;
    const int64_t *calls = b->calls.buf, *rets = b->rets.buf;
    const int32_t *kinds = b->kinds.buf, *kind_rule = b->kind_rule.buf;
    const int8_t *kind_known = b->kind_known.buf;
    Py_ssize_t n = nindex ? nindex : total;
    ops->n = n;
    ops->calls = malloc(sizeof(int64_t) * (size_t)(n + 1));
    ops->rets = malloc(sizeof(int64_t) * (size_t)(n + 1));
    ops->rules = malloc(sizeof(int32_t) * (size_t)(n + 1));
    ops->known = malloc((size_t)n + 1);
    ops->returns = malloc((size_t)n + 1);
    if (!ops->calls || !ops->rets || !ops->rules || !ops->known || !ops->returns) return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = nindex ? index[k] : k;
        if (i < 0 || i >= total || kinds[i] < 0 || kinds[i] >= nkinds) return -2;
        int32_t kind = kinds[i], rule = kind_rule[kind];
        if (rule < 0 || rule >= nrules) return -2;
        ops->calls[k] = calls[i];
        ops->rets[k] = rets[i];
        ops->rules[k] = rule;
        ops->known[k] = kind_known[kind];
        ops->returns[k] = rets[i] != NO_RETURN && (until == NO_RETURN || rets[i] <= until);
    }
    return 0;
}

static int run_search(Buffers *b, const Ops *ops, int32_t nstates, int64_t until, Frontier *f, Py_ssize_t *failed,
                      Py_ssize_t *pos_out) {
    Py_ssize_t n = ops->n;
    const int8_t *inert = b->inert.buf;
    const int32_t *starts = b->starts.buf;
    Event *events = malloc(sizeof(Event) * (size_t)(2 * n + 1));
    f->bit_of = calloc((size_t)n + 1, sizeof(int64_t));
    f->memo_gen = calloc((size_t)nstates + 1, sizeof(uint64_t));
    f->memo_bits = calloc((size_t)nstates + 1, sizeof(uint64_t));
    f->stack_cap = 64;
    f->stack = malloc(sizeof(Config) * (size_t)f->stack_cap);
    if (!events || !f->bit_of || !f->memo_gen || !f->memo_bits || !f->stack) {
        free(events);
        return -1;
    }
    Py_ssize_t ne = sort_events(ops, inert, until, events);
    if (ne < 0) return -1;
    for (Py_ssize_t k = 0; k < b->starts.len / 4; k++) {
        if (add(f, &f->configs, 0, starts[k]) < 0) { free(events); return -1; }
    }
    int status = 0;
    Py_ssize_t pos = 0;
    *failed = -1;
    for (; pos < ne; pos++) {
        Event e = events[pos];
        int32_t i = e.op, rule = ops->rules[i];
        if (e.kind == 0) {
            status = frontier_call(f, i, rule, inert[rule], ops->returns[i], ops->calls[i], ops->rets[i]);
            if (status) break;
            continue;
        }
        status = frontier_ret(f, i, rule);
        if (status == 1) {
            *failed = i;
            pos++;
            break;
        }
        if (status) break;
    }
    *pos_out = pos;
    free(events);
    return status;
}

/* One partition, the operations `index` names (all when nindex is 0), searched without the GIL
 * (`released` holds the thread state). Statuses as search() returns them; < 0 an error. */
static int search_partition(Buffers *b, const int32_t *index, Py_ssize_t nindex, int nstates, int64_t until,
                            double deadline, Py_ssize_t max_configs, PyThreadState **released, Py_ssize_t *failed,
                            Py_ssize_t *pos) {
    Frontier f;
    memset(&f, 0, sizeof(f));
    f.table = b->table.buf;
    f.nstates = nstates;
    f.deadline = deadline;
    f.max_configs = max_configs;
    f.released = *released;
    int status = -1;
    Ops ops;
    memset(&ops, 0, sizeof(ops));
    *failed = -1;
    *pos = 0;
    if (!set_init(&f.configs) && !set_init(&f.next) && !set_init(&f.seen)) {
        status = gather(b, index, nindex, until, &ops);
        if (!status) status = run_search(b, &ops, nstates, until, &f, failed, pos);
    }
    *released = f.released;
    ops_free(&ops);
    set_free(&f.configs);
    set_free(&f.next);
    set_free(&f.seen);
    free(f.stack);
    free(f.bit_of);
    free(f.memo_gen);
    free(f.memo_bits);
    return status;
}

/* The arguments both entry points share, after the index (or list of them). */
static int parse_shared(PyObject *args, Buffers *b, PyObject **index, int *nstates, long long *until,
                        double *deadline, Py_ssize_t *max_configs) {
    if (!PyArg_ParseTuple(args, "y*y*y*Oy*y*y*y*y*iLdn", &b->calls, &b->rets, &b->kinds, index, &b->kind_rule,
                          &b->kind_known, &b->table, &b->inert, &b->starts, nstates, until, deadline, max_configs)) {
        return -1;
    }
    Py_ssize_t total = b->calls.len / 8, nkinds = b->kind_rule.len / 4;
    if (b->calls.len % 8 || b->rets.len != total * 8 || b->kinds.len != total * 4 || b->kind_known.len != nkinds
        || b->table.len != b->inert.len * 12 || *nstates < 0) {
        PyErr_SetString(PyExc_ValueError, "search: the arrays do not match in length");
        return -1;
    }
    return 0;
}

static PyObject *search_error(int status) {
    if (status == -4) return NULL; /* the signal handler's exception */
    if (status == -2) {
        PyErr_SetString(PyExc_ValueError, "search: an index, kind or rule out of range");
        return NULL;
    }
    return PyErr_NoMemory();
}

static PyObject *native_search(PyObject *self, PyObject *args) {
    (void)self;
    Buffers b;
    memset(&b, 0, sizeof(b));
    PyObject *index;
    int nstates;
    long long until;
    double deadline;
    Py_ssize_t max_configs, failed, pos;
    if (parse_shared(args, &b, &index, &nstates, &until, &deadline, &max_configs)
        || PyObject_GetBuffer(index, &b.index, PyBUF_SIMPLE)) {
        release(&b);
        return NULL;
    }
    PyThreadState *released = PyEval_SaveThread();
    int status = search_partition(&b, b.index.buf, b.index.len / 4, nstates, until, deadline, max_configs,
                                  &released, &failed, &pos);
    PyEval_RestoreThread(released);
    release(&b);
    if (status < 0) return search_error(status);
    return Py_BuildValue("(inn)", status, failed, pos);
}

/* search() over a list of partitions (int32 index bytes) in order, until one is not OK:
 * (how many were OK before it, its status, failed, pos); all OK: (len, 0, -1, 0). */
static PyObject *native_search_many(PyObject *self, PyObject *args) {
    (void)self;
    Buffers b;
    memset(&b, 0, sizeof(b));
    PyObject *indexes;
    int nstates;
    long long until;
    double deadline;
    Py_ssize_t max_configs, failed = -1, pos = 0;
    if (parse_shared(args, &b, &indexes, &nstates, &until, &deadline, &max_configs)) {
        release(&b);
        return NULL;
    }
    if (!PyList_Check(indexes)) {
        release(&b);
        PyErr_SetString(PyExc_TypeError, "search_many: a list of index bytes");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(indexes), done = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PyList_GET_ITEM(indexes, k);
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) % 4 || !PyBytes_GET_SIZE(item)) {
            release(&b);
            PyErr_SetString(PyExc_TypeError, "search_many: each index is non-empty int32 bytes");
            return NULL;
        }
    }
    Py_INCREF(indexes); /* its items stay alive while the GIL is released */
    PyThreadState *released = PyEval_SaveThread();
    int status = 0;
    for (; done < count; done++) {
        PyObject *item = PyList_GET_ITEM(indexes, done);
        status = search_partition(&b, (const int32_t *)PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item) / 4, nstates,
                                  until, deadline, max_configs, &released, &failed, &pos);
        if (status) break;
    }
    PyEval_RestoreThread(released);
    Py_DECREF(indexes);
    release(&b);
    if (status < 0) return search_error(status);
    return Py_BuildValue("(ninn)", done, status, failed, pos);
}

/* In _native_scan.c: reading the kit's JSON lines, and splitting them into partitions. */
PyObject *native_scan(PyObject *self, PyObject *args);
PyObject *native_split(PyObject *self, PyObject *args);

static PyMethodDef methods[] = {
    {"search", native_search, METH_VARARGS, "One partition's frontier search (see the module comment)."},
    {"search_many", native_search_many, METH_VARARGS, "search() over partitions in order until one is not OK."},
    {"scan", native_scan, METH_VARARGS, "Read a JSON-lines history into columns, or None."},
    {"split", native_split, METH_VARARGS, "Operation indices per partition, in order of appearance."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "simulations.linearizability._native", NULL, -1, methods};

void init_scan(void);

PyMODINIT_FUNC PyInit__native(void) {
    init_scan();
    return PyModule_Create(&module);
}
