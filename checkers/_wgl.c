/* The Wing-Gong-Lowe linearizability search in C: the native twin of
 * checkers/linearizability.py's _search (which stays the reference).
 *
 * Shape (as Porcupine's checkSingle): the history of one key is a doubly
 * linked list of call and return entries held in int32 arrays; the search
 * linearizes a call when the model allows it and the configuration
 * (linearized set, state) is new, and backtracks at a return. States are
 * int32 ids interned by the caller.
 *
 * The linearized set is a bitset of uint64 words. A cache entry stores only
 * its window: the words from the first one that is not all ones (lo) to the
 * last that is not zero (hi); the words below lo are all ones and those above
 * hi zero by definition, so (lo, window) identifies the set. On a long key the
 * linearized ops form a prefix plus a few, so entries stay small.
 *
 * Models: REGISTER (register, cas-register, etcd) and KV (get/put/append on
 * byte strings, states interned here) are stepped in C and run without the
 * GIL; CALLBACK asks a Python function step(op, state) -> state or -1 once
 * per (op, state) and memoises the answer.
 *
 * Budget: a monotonic deadline, a maximum number of configurations and a
 * cancel flag (a bytearray another thread may set), read every 4096 steps.
 * Result: (code, explored, deepest linearized op ids, op stuck after them)
 * with code 1 linearizable, 0 not, 2 unknown (budget or cancel).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { F_READ = 0, F_WRITE = 1, F_CAS = 2 };
enum { OUT_OK = 0, OUT_UNKNOWN = 1, OUT_FAIL = 2 };
enum { MODEL_REGISTER = 0, MODEL_CALLBACK = 1, MODEL_KV = 2 };
enum { KV_GET = 0, KV_PUT = 1, KV_APPEND = 2 };

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

typedef struct {
    int32_t state;
    int32_t lo;
    int32_t nwords;
    int32_t pad;
    union { uint64_t w[2]; int64_t off; } u;  /* up to 2 words inline, else into the arena */
} CacheEntry;

#define INLINE_WORDS 2
static inline const uint64_t *entry_words(const uint64_t *arena, const CacheEntry *e) {
    return e->nwords <= INLINE_WORDS ? e->u.w : arena + e->u.off;
}

/* Open addressing over 8-byte slots (high hash bits as a tag, entry index + 1; 0 = empty),
 * so a probe touches one cache line; the entries and bitset windows live apart. */
typedef struct { uint32_t tag; int32_t entry; } Slot;

typedef struct {
    Slot *slots;
    int64_t cap, count;
    CacheEntry *entries;
    int64_t entries_cap;
    uint64_t *arena;
    int64_t arena_len, arena_cap;
} Cache;

static int cache_init(Cache *c) {
    c->cap = 1 << 12;
    c->count = 0;
    c->slots = calloc((size_t)c->cap, sizeof(Slot));
    c->entries_cap = 1 << 11;
    c->entries = malloc((size_t)c->entries_cap * sizeof(CacheEntry));
    c->arena_cap = 1 << 12;
    c->arena_len = 0;
    c->arena = malloc((size_t)c->arena_cap * sizeof(uint64_t));
    return c->slots && c->entries && c->arena ? 0 : -1;
}

static void cache_free(Cache *c) { free(c->slots); free(c->entries); free(c->arena); }

static inline uint64_t entry_hash(const Cache *c, const CacheEntry *e) {
    uint64_t h = mix64((uint64_t)(uint32_t)e->state ^ ((uint64_t)(uint32_t)e->lo << 32));
    const uint64_t *w = entry_words(c->arena, e);
    for (int i = 0; i < e->nwords; i++) h = mix64(h ^ w[i]);
    return h;
}

static int cache_rehash(Cache *c) {
    int64_t ncap = c->cap * 2;
    Slot *ns = calloc((size_t)ncap, sizeof(Slot));
    if (!ns) return -1;
    for (int64_t i = 0; i < c->cap; i++) {
        if (!c->slots[i].entry) continue;
        uint64_t h = entry_hash(c, &c->entries[c->slots[i].entry - 1]);
        int64_t j = (int64_t)(h & (uint64_t)(ncap - 1));
        while (ns[j].entry) j = (j + 1) & (ncap - 1);
        ns[j] = c->slots[i];
    }
    free(c->slots);
    c->slots = ns;
    c->cap = ncap;
    return 0;
}

/* 1 if inserted (new), 0 if present, -1 on memory error. */
static int cache_add(Cache *c, uint64_t h, int32_t state, int32_t lo, const uint64_t *win,
                     int32_t nwords) {
    int64_t j = (int64_t)(h & (uint64_t)(c->cap - 1));
    uint32_t tag = (uint32_t)(h >> 32);
    while (c->slots[j].entry) {
        if (c->slots[j].tag == tag) {
            const CacheEntry *e = &c->entries[c->slots[j].entry - 1];
            if (e->state == state && e->lo == lo && e->nwords == nwords &&
                memcmp(entry_words(c->arena, e), win, (size_t)nwords * sizeof(uint64_t)) == 0)
                return 0;
        }
        j = (j + 1) & (c->cap - 1);
    }
    if (nwords > INLINE_WORDS && c->arena_len + nwords > c->arena_cap) {
        int64_t ncap = c->arena_cap * 2;
        while (ncap < c->arena_len + nwords) ncap *= 2;
        uint64_t *na = realloc(c->arena, (size_t)ncap * sizeof(uint64_t));
        if (!na) return -1;
        c->arena = na;
        c->arena_cap = ncap;
    }
    if (c->count == c->entries_cap) {
        CacheEntry *ne = realloc(c->entries, (size_t)c->entries_cap * 2 * sizeof(CacheEntry));
        if (!ne) return -1;
        c->entries = ne;
        c->entries_cap *= 2;
    }
    if (c->count >= INT32_MAX - 1) return -1;
    CacheEntry *e = &c->entries[c->count];
    e->state = state; e->lo = lo; e->nwords = nwords; e->pad = 0;
    if (nwords <= INLINE_WORDS) {
        e->u.w[0] = e->u.w[1] = 0;
        memcpy(e->u.w, win, (size_t)nwords * sizeof(uint64_t));
    } else {
        memcpy(c->arena + c->arena_len, win, (size_t)nwords * sizeof(uint64_t));
        e->u.off = c->arena_len;
        c->arena_len += nwords;
    }
    c->count++;
    c->slots[j].tag = tag;
    c->slots[j].entry = (int32_t)c->count;
    if (c->count * 2 > c->cap && cache_rehash(c) < 0) return -1;
    return 1;
}

/* memo for CALLBACK models: (op, state) -> next state, -1 illegal */
typedef struct { uint64_t key; int32_t val; int32_t used; } MemoEntry;
typedef struct { MemoEntry *slots; int64_t cap, count; } Memo;

static int memo_init(Memo *m) {
    m->cap = 1 << 10; m->count = 0;
    m->slots = calloc((size_t)m->cap, sizeof(MemoEntry));
    return m->slots ? 0 : -1;
}

static MemoEntry *memo_find(Memo *m, uint64_t key) {
    int64_t j = (int64_t)(mix64(key) & (uint64_t)(m->cap - 1));
    while (m->slots[j].used && m->slots[j].key != key) j = (j + 1) & (m->cap - 1);
    return &m->slots[j];
}

static int memo_put(Memo *m, uint64_t key, int32_t val) {
    MemoEntry *e = memo_find(m, key);
    e->key = key; e->val = val; e->used = 1;
    if (++m->count * 2 > m->cap) {
        Memo n; n.cap = m->cap * 2; n.count = 0;
        n.slots = calloc((size_t)n.cap, sizeof(MemoEntry));
        if (!n.slots) return -1;
        for (int64_t i = 0; i < m->cap; i++)
            if (m->slots[i].used) { MemoEntry *d = memo_find(&n, m->slots[i].key); *d = m->slots[i]; n.count++; }
        free(m->slots);
        *m = n;
    }
    return 0;
}

/* Interned byte strings: the states of a kv key. Equal strings share one id. */
typedef struct {
    char *bytes; int64_t len, cap;          /* all strings, back to back */
    int64_t *off; int32_t *slen; uint64_t *hash; int32_t n, ncap;
    int32_t *table; int64_t tcap;          /* open addressing: id + 1, 0 empty */
} StrTab;

static uint64_t hash_bytes(const char *p, int64_t n) {
    uint64_t h = 1469598103934665603ULL;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) { uint64_t w; memcpy(&w, p + i, 8); h = mix64(h ^ w); }
    uint64_t w = 0;
    memcpy(&w, p + i, (size_t)(n - i));
    return mix64(h ^ w ^ ((uint64_t)n << 56));
}

static int strtab_init(StrTab *t) {
    memset(t, 0, sizeof *t);
    t->cap = 1 << 12; t->bytes = malloc((size_t)t->cap);
    t->ncap = 1 << 10;
    t->off = malloc(sizeof(int64_t) * (size_t)t->ncap);
    t->slen = malloc(sizeof(int32_t) * (size_t)t->ncap);
    t->hash = malloc(sizeof(uint64_t) * (size_t)t->ncap);
    t->tcap = 1 << 11; t->table = calloc((size_t)t->tcap, sizeof(int32_t));
    return t->bytes && t->off && t->slen && t->hash && t->table ? 0 : -1;
}

static void strtab_free(StrTab *t) { free(t->bytes); free(t->off); free(t->slen); free(t->hash); free(t->table); }

/* the id of p[0:n] (interned if new), or -1 out of memory. p may not point into t->bytes. */
static int32_t strtab_intern(StrTab *t, const char *p, int64_t n) {
    uint64_t h = hash_bytes(p, n);
    int64_t j = (int64_t)(h & (uint64_t)(t->tcap - 1));
    while (t->table[j]) {
        int32_t id = t->table[j] - 1;
        if (t->hash[id] == h && t->slen[id] == n && memcmp(t->bytes + t->off[id], p, (size_t)n) == 0)
            return id;
        j = (j + 1) & (t->tcap - 1);
    }
    if (n > INT32_MAX || t->n >= INT32_MAX - 1) return -1;
    if (t->len + n > t->cap) {
        int64_t nc = t->cap * 2;
        while (nc < t->len + n) nc *= 2;
        char *nb = realloc(t->bytes, (size_t)nc);
        if (!nb) return -1;
        t->bytes = nb; t->cap = nc;
    }
    if (t->n == t->ncap) {
        int32_t nc = t->ncap * 2;
        int64_t *no = realloc(t->off, sizeof(int64_t) * (size_t)nc);
        if (no) t->off = no;
        int32_t *nl = realloc(t->slen, sizeof(int32_t) * (size_t)nc);
        if (nl) t->slen = nl;
        uint64_t *nh = realloc(t->hash, sizeof(uint64_t) * (size_t)nc);
        if (nh) t->hash = nh;
        if (!no || !nl || !nh) return -1;
        t->ncap = nc;
    }
    int32_t id = t->n++;
    memcpy(t->bytes + t->len, p, (size_t)n);
    t->off[id] = t->len; t->slen[id] = (int32_t)n; t->hash[id] = h;
    t->len += n;
    t->table[j] = id + 1;
    if ((int64_t)t->n * 2 > t->tcap) {
        int64_t nc = t->tcap * 2;
        int32_t *nt = calloc((size_t)nc, sizeof(int32_t));
        if (!nt) return -1;
        for (int32_t i = 0; i < t->n; i++) {
            int64_t k = (int64_t)(t->hash[i] & (uint64_t)(nc - 1));
            while (nt[k]) k = (k + 1) & (nc - 1);
            nt[k] = i + 1;
        }
        free(t->table); t->table = nt; t->tcap = nc;
    }
    return id;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    int kind;
    const int32_t *f, *a, *b, *out;  /* REGISTER: per op */
    PyObject *step;                   /* CALLBACK */
    StrTab strs;                      /* KV: states and values */
    char *scratch; int64_t scratch_cap;
    Memo memo;
    PyThreadState **save;             /* where the released thread state lives */
} Model;

/* -1 illegal, -2 Python error, else the next state */
static int32_t model_step(Model *m, int32_t op, int32_t state) {
    if (m->kind == MODEL_REGISTER) {
        int32_t out = m->out[op];
        switch (m->f[op]) {
        case F_READ:
            return (out == OUT_UNKNOWN || state == m->a[op]) ? state : -1;
        case F_WRITE:
            return out == OUT_FAIL ? -1 : m->a[op];
        default: /* cas */
            if (state == m->a[op]) return out == OUT_FAIL ? -1 : m->b[op];
            return (out == OUT_UNKNOWN || out == OUT_FAIL) ? state : -1;
        }
    }
    if (m->kind == MODEL_KV) {
        int32_t out = m->out[op];
        switch (m->f[op]) {
        case KV_GET:
            return (out == OUT_UNKNOWN || state == m->a[op]) ? state : -1;
        case KV_PUT:
            return m->a[op];
        default: break;  /* append: below, memoised */
        }
    }
    uint64_t key = ((uint64_t)(uint32_t)op << 32) | (uint32_t)state;
    MemoEntry *e = memo_find(&m->memo, key);
    if (e->used) return e->val;
    if (m->kind == MODEL_KV) {  /* append: state + value, interned */
        StrTab *t = &m->strs;
        int64_t n1 = t->slen[state], n2 = t->slen[m->a[op]];
        if (n1 + n2 > m->scratch_cap) {
            int64_t nc = (n1 + n2) * 2 + 64;
            char *ns = realloc(m->scratch, (size_t)nc);
            if (!ns) return -3;
            m->scratch = ns; m->scratch_cap = nc;
        }
        memcpy(m->scratch, t->bytes + t->off[state], (size_t)n1);
        memcpy(m->scratch + n1, t->bytes + t->off[m->a[op]], (size_t)n2);
        int32_t id = strtab_intern(t, m->scratch, n1 + n2);
        if (id < 0) return -3;
        if (memo_put(&m->memo, key, id) < 0) return -3;
        return id;
    }
    PyEval_RestoreThread(*m->save);
    PyObject *r = PyObject_CallFunction(m->step, "ii", op, state);
    int32_t v = -2;
    if (r) {
        long x = PyLong_AsLong(r);
        Py_DECREF(r);
        if (!(x == -1 && PyErr_Occurred())) {
            if (x < -1 || x > INT32_MAX) {
                PyErr_Format(PyExc_ValueError, "step returned %ld: want a state id >= 0 or -1", x);
            } else {
                v = (int32_t)x;
            }
        }
    }
    *m->save = PyEval_SaveThread();
    if (v == -2) return -2;
    if (memo_put(&m->memo, key, v) < 0) return -3;
    return v;
}

/* A search over one key, resumable: run() takes up to max_steps steps and pauses, so many
 * keys can take turns (as Porcupine's goroutines do) and the first violation found cancels
 * the rest without waiting on a hard key. */
typedef struct {
    PyObject_HEAD
    int n_ops, n_entries, words, head, entry;
    int32_t *prev, *next, *eop, *match, *stack_e, *stack_s, *best, *call_of;
    uint64_t *bits;
    Cache cache;
    Model m;
    Py_buffer fb, ab, bb, ob;
    PyObject *step;
    int32_t state, depth, best_len, stuck, lo, hi;
    int code;  /* -1 running, 0 not linearizable, 1 linearizable, 2 stopped (budget, cancel) */
    long long steps;
} Search;

static void Search_dealloc(Search *self) {
    free(self->prev); free(self->next); free(self->eop); free(self->match); free(self->stack_e);
    free(self->stack_s); free(self->best); free(self->call_of); free(self->bits);
    if (self->cache.slots) cache_free(&self->cache);
    free(self->m.memo.slots);
    if (self->m.strs.bytes) strtab_free(&self->m.strs);
    free(self->m.scratch);
    if (self->fb.obj) PyBuffer_Release(&self->fb);
    if (self->ab.obj) PyBuffer_Release(&self->ab);
    if (self->bb.obj) PyBuffer_Release(&self->bb);
    if (self->ob.obj) PyBuffer_Release(&self->ob);
    Py_XDECREF(self->step);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Search_init(Search *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"events", "n_ops", "kind", "f", "a", "b", "out", "step", "init",
                             "strings", NULL};
    Py_buffer ev = {0};
    int n_ops, kind, init = 0;
    PyObject *step = Py_None, *strings = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*ii|y*y*y*y*OiO", kwlist, &ev, &n_ops, &kind,
                                     &self->fb, &self->ab, &self->bb, &self->ob, &step, &init,
                                     &strings))
        return -1;
    int rc = -1;
    Model *m = &self->m;
    int n_entries = 2 * n_ops;
    if (self->prev) {
        PyErr_SetString(PyExc_RuntimeError, "a Search is initialised once");
        PyBuffer_Release(&ev);
        return -1;
    }
    self->code = -1;
    if (n_ops < 0 || ev.len != (Py_ssize_t)n_entries * 4) {
        PyErr_Format(PyExc_ValueError, "events: want %d int32 entries, got %zd bytes", n_entries,
                     ev.len);
        goto done;
    }
    if (kind == MODEL_REGISTER) {
        if (self->fb.len != n_ops * 4 || self->ab.len != n_ops * 4 || self->bb.len != n_ops * 4 ||
            self->ob.len != n_ops * 4) {
            PyErr_SetString(PyExc_ValueError, "register model: f, a, b, out want n_ops int32 each");
            goto done;
        }
    } else if (kind == MODEL_KV) {
        /* strings: the values (bytes), whose ids are their positions; f, a, out per op */
        if (self->fb.len != n_ops * 4 || self->ab.len != n_ops * 4 || self->ob.len != n_ops * 4 ||
            !PyList_Check(strings)) {
            PyErr_SetString(PyExc_ValueError, "kv model: f, a, out want n_ops int32 each; strings a list");
            goto done;
        }
        if (strtab_init(&m->strs) < 0 || memo_init(&m->memo) < 0) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(strings); i++) {
            char *p; Py_ssize_t n;
            if (PyBytes_AsStringAndSize(PyList_GET_ITEM(strings, i), &p, &n) < 0) goto done;
            if (strtab_intern(&m->strs, p, n) != (int32_t)i) {
                PyErr_SetString(PyExc_ValueError, "kv model: strings must be distinct");
                goto done;
            }
        }
    } else if (kind == MODEL_CALLBACK) {
        if (!PyCallable_Check(step)) { PyErr_SetString(PyExc_TypeError, "step must be callable"); goto done; }
        if (memo_init(&m->memo) < 0) { PyErr_NoMemory(); goto done; }
    } else {
        PyErr_Format(PyExc_ValueError, "unknown model kind %d", kind);
        goto done;
    }
    m->kind = kind;
    m->f = self->fb.buf; m->a = self->ab.buf; m->b = self->bb.buf; m->out = self->ob.buf;
    Py_INCREF(step);
    self->step = step;
    m->step = step;
    self->n_ops = n_ops;
    self->n_entries = n_entries;
    self->words = (n_ops + 63) / 64 + 1;
    self->head = n_entries;  /* sentinel */
    self->prev = malloc(sizeof(int32_t) * (size_t)(n_entries + 1));
    self->next = malloc(sizeof(int32_t) * (size_t)(n_entries + 1));
    self->eop = malloc(sizeof(int32_t) * (size_t)(n_entries + 1));
    self->match = malloc(sizeof(int32_t) * (size_t)(n_entries + 1));
    self->stack_e = malloc(sizeof(int32_t) * (size_t)(n_ops + 1));
    self->stack_s = malloc(sizeof(int32_t) * (size_t)(n_ops + 1));
    self->best = malloc(sizeof(int32_t) * (size_t)(n_ops + 1));
    self->call_of = malloc(sizeof(int32_t) * (size_t)(n_ops + 1));
    self->bits = calloc((size_t)self->words, sizeof(uint64_t));
    if (!self->prev || !self->next || !self->eop || !self->match || !self->stack_e ||
        !self->stack_s || !self->best || !self->call_of || !self->bits || cache_init(&self->cache) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    /* events[i] = op id for a call, -(op id) - 1 for a return, in list order */
    const int32_t *evs = ev.buf;
    int32_t *call_of = self->call_of, *match = self->match, *next = self->next, *prev = self->prev;
    for (int i = 0; i < n_ops; i++) call_of[i] = -1;
    int last = self->head;
    for (int i = 0; i < n_entries; i++) {
        int32_t e = evs[i];
        int op = e >= 0 ? e : -e - 1;
        if (op >= n_ops) { PyErr_SetString(PyExc_ValueError, "event op out of range"); goto done; }
        self->eop[i] = op;
        if (e >= 0) { call_of[op] = i; match[i] = -1; }
        else {
            if (call_of[op] < 0) { PyErr_Format(PyExc_ValueError, "op %d returns before its call", op); goto done; }
            match[call_of[op]] = i; match[i] = -2;  /* -2: a return entry */
        }
        next[last] = i; prev[i] = last; last = i;
    }
    next[last] = -1;
    for (int i = 0; i < n_entries; i++)
        if (match[i] == -1) { PyErr_Format(PyExc_ValueError, "op %d never returns", self->eop[i]); goto done; }
    self->state = init; self->depth = 0; self->best_len = -1; self->stuck = -1;
    self->lo = 0; self->hi = -1;
    self->entry = next[self->head];
    self->code = n_ops == 0 ? 1 : -1;
    rc = 0;
done:
    PyBuffer_Release(&ev);
    return rc;
}

/* run(max_steps=0, deadline=0.0, max_configs=0, cancel=None, pause_at=0.0)
   -> code, -1 while paused */
static PyObject *Search_run(Search *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"max_steps", "deadline", "max_configs", "cancel", "pause_at", NULL};
    long long max_steps = 0, max_configs = 0;
    double deadline = 0, pause_at = 0;
    Py_buffer cancel = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|LdLw*d", kwlist, &max_steps, &deadline,
                                     &max_configs, &cancel, &pause_at))
        return NULL;
    if (self->code != -1) {
        if (cancel.obj) PyBuffer_Release(&cancel);
        return PyLong_FromLong(self->code);
    }
    Model *m = &self->m;
    PyThreadState *save = NULL;
    m->save = &save;
    int32_t *prev = self->prev, *next = self->next, *eop = self->eop, *match = self->match;
    uint64_t *bits = self->bits;
    const int head = self->head, words = self->words;
    int32_t state = self->state, depth = self->depth, lo = self->lo, hi = self->hi;
    int entry = self->entry, code = -1, err = 0;
    long long taken = 0, steps = self->steps;
    const volatile char *flag = cancel.buf && cancel.len ? (const volatile char *)cancel.buf : NULL;
    save = PyEval_SaveThread();
    while (next[head] != -1) {
        if ((++steps & 4095) == 0) {
            if ((flag && *flag) || (deadline > 0 && now_s() > deadline) ||
                (max_configs > 0 && self->cache.count >= max_configs)) { code = 2; break; }
        }
        if (max_steps > 0 && ++taken > max_steps) break;  /* pause */
        if (pause_at > 0 && (steps & 127) == 0 && now_s() > pause_at) break;  /* a time slice */
        if (match[entry] >= 0) {  /* a call */
            int op = eop[entry];
            int32_t ns = model_step(m, op, state);
            if (ns < -1) { err = ns; break; }
            if (ns >= 0) {
                int w = op >> 6;
                uint64_t bit = 1ULL << (op & 63);
                bits[w] |= bit;
                int nlo = lo, nhi = hi > w ? hi : w;
                while (nlo < words && bits[nlo] == ~0ULL) nlo++;
                int32_t nw = nhi >= nlo ? nhi - nlo + 1 : 0;
                uint64_t h = mix64((uint64_t)(uint32_t)ns ^ ((uint64_t)(uint32_t)nlo << 32));
                for (int i = 0; i < nw; i++) h = mix64(h ^ bits[nlo + i]);
                int added = cache_add(&self->cache, h, ns, nlo, bits + nlo, nw);
                if (added < 0) { err = -3; break; }
                if (added) {
                    self->stack_e[depth] = entry; self->stack_s[depth] = state; depth++;
                    state = ns; lo = nlo; hi = nhi;
                    int r = match[entry];  /* lift call and return */
                    next[prev[entry]] = next[entry];
                    if (next[entry] != -1) prev[next[entry]] = prev[entry];
                    next[prev[r]] = next[r];
                    if (next[r] != -1) prev[next[r]] = prev[r];
                    entry = next[head];
                    continue;
                }
                bits[w] &= ~bit;
            }
            entry = next[entry];
        } else {  /* a return: this op ended unlinearized */
            if (depth > self->best_len) {
                self->best_len = depth;
                for (int i = 0; i < depth; i++) self->best[i] = eop[self->stack_e[i]];
                self->stuck = eop[entry];
            }
            if (depth == 0) { code = 0; break; }
            depth--;
            int top = self->stack_e[depth];
            state = self->stack_s[depth];
            int op = eop[top], w = op >> 6;
            bits[w] &= ~(1ULL << (op & 63));
            if (w < lo) lo = w;
            while (hi >= 0 && bits[hi] == 0) hi--;
            int r = match[top];  /* unlift: return first, then call */
            next[prev[r]] = r;
            if (next[r] != -1) prev[next[r]] = r;
            next[prev[top]] = top;
            if (next[top] != -1) prev[next[top]] = top;
            entry = next[top];
        }
    }
    if (code == -1 && !err && next[head] == -1) code = 1;
    PyEval_RestoreThread(save);
    m->save = NULL;
    if (cancel.obj) PyBuffer_Release(&cancel);
    self->state = state; self->depth = depth; self->lo = lo; self->hi = hi; self->entry = entry;
    self->steps = steps;
    if (err == -3) { self->code = 2; return PyErr_NoMemory(); }
    if (err) { self->code = 2; return NULL; }  /* the callback's exception */
    if (code != -1) self->code = code;
    return PyLong_FromLong(code);
}

/* result() -> (code, explored, deepest op ids, stuck op id) */
static PyObject *Search_result(Search *self, PyObject *unused) {
    int n = self->best_len > 0 ? self->best_len : 0;
    PyObject *bl = PyList_New(n);
    if (!bl) return NULL;
    for (int i = 0; i < n; i++) PyList_SET_ITEM(bl, i, PyLong_FromLong(self->best[i]));
    return Py_BuildValue("(iLNi)", self->code, (long long)self->cache.count, bl, self->stuck);
}

static PyMethodDef Search_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Search_run, METH_VARARGS | METH_KEYWORDS,
     "run(max_steps=0, deadline=0.0, max_configs=0, cancel=None, pause_at=0.0) -> "
     "1 linearizable, 0 not, 2 stopped (deadline, max_configs or cancel), -1 paused after "
     "max_steps or at pause_at (time.monotonic() seconds)"},
    {"result", (PyCFunction)Search_result, METH_NOARGS,
     "result() -> (code, configurations explored, deepest op ids, op stuck after them or -1)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SearchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "checkers._wgl.Search",
    .tp_basicsize = sizeof(Search),
    .tp_dealloc = (destructor)Search_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Search(events, n_ops, kind, f=b'', a=b'', b=b'', out=b'', step=None, init=0, "
              "strings=None): one key's Wing-Gong-Lowe search, run in slices",
    .tp_methods = Search_methods,
    .tp_init = (initproc)Search_init,
    .tp_new = PyType_GenericNew,
};

/* events(calls, rets) -> bytes: the entry list as wgl.events builds it (the reference):
   calls and returns ordered by time, a call before a return at the same instant, then by
   op id; an op id for a call, -(id) - 1 for a return. calls, rets: float64 per op. */
typedef struct { double t; int32_t kind, op; } Ev;

static int ev_cmp(const void *x, const void *y) {
    const Ev *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->kind != b->kind) return a->kind - b->kind;
    return (a->op > b->op) - (a->op < b->op);
}

static PyObject *wgl_events(PyObject *mod, PyObject *args) {
    Py_buffer cb, rb;
    if (!PyArg_ParseTuple(args, "y*y*", &cb, &rb)) return NULL;
    PyObject *res = NULL;
    Ev *evs = NULL;
    Py_ssize_t n = cb.len / (Py_ssize_t)sizeof(double);
    if (cb.len != rb.len || cb.len % (Py_ssize_t)sizeof(double) || n > INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "events: calls and rets want one float64 per op each");
        goto done;
    }
    const double *calls = cb.buf, *rets = rb.buf;
    evs = malloc(sizeof(Ev) * (size_t)(2 * n + 1));
    if (!evs) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (calls[i] != calls[i] || rets[i] != rets[i]) {
            PyErr_Format(PyExc_ValueError, "events: op %zd has a NaN time", i);
            goto done;
        }
        evs[2 * i] = (Ev){calls[i], 0, (int32_t)i};
        evs[2 * i + 1] = (Ev){rets[i], 1, (int32_t)i};
    }
    qsort(evs, (size_t)(2 * n), sizeof(Ev), ev_cmp);
    res = PyBytes_FromStringAndSize(NULL, 2 * n * (Py_ssize_t)sizeof(int32_t));
    if (!res) goto done;
    int32_t *out = (int32_t *)PyBytes_AS_STRING(res);
    for (Py_ssize_t i = 0; i < 2 * n; i++) out[i] = evs[i].kind ? -evs[i].op - 1 : evs[i].op;
done:
    free(evs);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&rb);
    return res;
}

static PyMethodDef module_methods[] = {
    {"events", wgl_events, METH_VARARGS,
     "events(calls, rets) -> bytes of int32: the entry list (see checkers/wgl.py events)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wgl",
                                    "The native Wing-Gong-Lowe search (see checkers/wgl.py).", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__wgl(void) {
    if (PyType_Ready(&SearchType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (!mod) return NULL;
    Py_INCREF(&SearchType);
    if (PyModule_AddObject(mod, "Search", (PyObject *)&SearchType) < 0) {
        Py_DECREF(&SearchType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
