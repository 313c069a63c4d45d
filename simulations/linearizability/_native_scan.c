/* The compiled kernel's reader of this kit's JSON-lines histories (see _native.c for the API):
 * a strict subset of the format read into columns, distinct texts interned, a large text read in
 * two halves on two threads; and the split of operations into partitions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#endif

#define NO_RETURN INT64_MIN

PyObject *native_scan(PyObject *self, PyObject *args);
PyObject *native_split(PyObject *self, PyObject *args);
void init_scan(void);


typedef struct {
    const char *p, *end;
} Cursor;

/* Bytes that end a run of plain string characters: the quote, the backslash, control characters
 * (the line's '\n' among them) and everything outside ASCII. The text scanned is a bytes object,
 * which CPython ends with a NUL, so a run always stops before the buffer does. */
static unsigned char STOP[256];

void init_scan(void) {
    for (int ch = 0; ch < 256; ch++) STOP[ch] = ch < 0x20 || ch >= 0x80 || ch == '"' || ch == '\\';
}

static void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

/* A JSON string without escapes or control characters; 0 on success. */
static int read_plain_string(Cursor *c, const char **start, Py_ssize_t *len) {
    if (c->p >= c->end || *c->p != '"') return -1;
    const char *s = ++c->p;
    while (!STOP[(unsigned char)*c->p]) c->p++;
    if (c->p >= c->end || *c->p != '"') return -1;
    *start = s;
    *len = c->p - s;
    c->p++;
    return 0;
}

static int skip_value(Cursor *c, int depth);

static int skip_string(Cursor *c) {
    if (c->p >= c->end || *c->p != '"') return -1;
    c->p++;
    while (c->p < c->end && *c->p != '"') {
        while (!STOP[(unsigned char)*c->p]) c->p++;
        if (c->p >= c->end) return -1;
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') break;
        if (ch != '\\') return -1;
        {
            c->p++;
            if (c->p >= c->end) return -1;
            char e = *c->p;
            if (e == 'u') {
                for (int k = 1; k <= 4; k++) {
                    if (c->p + k >= c->end) return -1;
                    char h = c->p[k];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return -1;
                }
                c->p += 4;
            } else if (!strchr("\"\\/bfnrt", e) || e == 0) {
                return -1;
            }
        }
        c->p++;
    }
    if (c->p >= c->end) return -1;
    c->p++;
    return 0;
}

/* An integer as JSON writes one (no fraction or exponent), within int64; 0 on success. */
static int read_int(Cursor *c, int64_t *out) {
    int negative = 0;
    if (c->p < c->end && *c->p == '-') { negative = 1; c->p++; }
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
    if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9') return -1;
    uint64_t value = 0;
    int digits = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (++digits > 18) return -1; /* larger ones: the pure reader */
        value = value * 10 + (uint64_t)(*c->p - '0');
        c->p++;
    }
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) return -1; /* not an int */
    *out = negative ? -(int64_t)value : (int64_t)value;
    return 0;
}

static int skip_number(Cursor *c) {
    if (c->p < c->end && *c->p == '-') c->p++;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
    if (*c->p == '0') {
        c->p++;
    } else {
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    return 0;
}

static int skip_literal(Cursor *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n)) return -1;
    c->p += n;
    return 0;
}

static int skip_value(Cursor *c, int depth) {
    if (depth > 64) return -1;
    skip_ws(c);
    if (c->p >= c->end) return -1;
    char ch = *c->p;
    if (ch == '"') return skip_string(c);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == close) { c->p++; return 0; }
        for (;;) {
            if (ch == '{') {
                skip_ws(c);
                if (skip_string(c)) return -1;
                skip_ws(c);
                if (c->p >= c->end || *c->p != ':') return -1;
                c->p++;
            }
            if (skip_value(c, depth + 1)) return -1;
            skip_ws(c);
            if (c->p >= c->end) return -1;
            if (*c->p == ',') { c->p++; continue; }
            if (*c->p == close) { c->p++; return 0; }
            return -1;
        }
    }
    if (ch == 't') return skip_literal(c, "true");
    if (ch == 'f') return skip_literal(c, "false");
    if (ch == 'n') return skip_literal(c, "null");
    return skip_number(c); /* NaN and Infinity, which Python's json reads, fail here: pure path */
}

/* Distinct texts, kept in one arena so that a scan needs no Python object (it runs without the
 * GIL, possibly on two threads); the list of bytes is made at the end. */
typedef struct {
    char *data;
    size_t len, cap;
    size_t *starts, *lengths; /* per text id: where in data, how long */
    int32_t *index;           /* slot -> text id, -1 empty */
    uint64_t *hashes;
    size_t slots;
    Py_ssize_t count, room;
} Interner;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int interner_init(Interner *t) {
    memset(t, 0, sizeof(*t));
    t->slots = 64;
    t->index = malloc(sizeof(int32_t) * t->slots);
    t->hashes = malloc(sizeof(uint64_t) * t->slots);
    if (!t->index || !t->hashes) return -1;
    memset(t->index, 0xff, sizeof(int32_t) * t->slots);
    return 0;
}

static void interner_free(Interner *t) {
    free(t->index);
    free(t->hashes);
    free(t->data);
    free(t->starts);
    free(t->lengths);
}

static int interner_grow(Interner *t) {
    size_t slots = t->slots * 2;
    int32_t *index = malloc(sizeof(int32_t) * slots);
    uint64_t *hashes = malloc(sizeof(uint64_t) * slots);
    if (!index || !hashes) { free(index); free(hashes); return -1; }
    memset(index, 0xff, sizeof(int32_t) * slots);
    for (size_t k = 0; k < t->slots; k++) {
        if (t->index[k] == -1) continue;
        size_t at = t->hashes[k] & (slots - 1);
        while (index[at] != -1) at = (at + 1) & (slots - 1);
        index[at] = t->index[k];
        hashes[at] = t->hashes[k];
    }
    free(t->index);
    free(t->hashes);
    t->index = index;
    t->hashes = hashes;
    t->slots = slots;
    return 0;
}

/* The id of the text s[0..n): existing or new; -1 out of memory. */
static int32_t intern(Interner *t, const char *s, size_t n) {
    uint64_t h = hash_bytes(s, n);
    size_t slot = h & (t->slots - 1);
    int32_t id;
    while ((id = t->index[slot]) != -1) {
        if (t->hashes[slot] == h && t->lengths[id] == n && !memcmp(t->data + t->starts[id], s, n)) return id;
        slot = (slot + 1) & (t->slots - 1);
    }
    if (t->count == t->room) {
        Py_ssize_t room = t->room ? t->room * 2 : 64;
        size_t *starts = realloc(t->starts, sizeof(size_t) * (size_t)room);
        if (!starts) return -1;
        t->starts = starts;
        size_t *lengths = realloc(t->lengths, sizeof(size_t) * (size_t)room);
        if (!lengths) return -1;
        t->lengths = lengths;
        t->room = room;
    }
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *data = realloc(t->data, cap);
        if (!data) return -1;
        t->data = data;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, n);
    id = (int32_t)t->count++;
    t->starts[id] = t->len;
    t->lengths[id] = n;
    t->len += n;
    t->index[slot] = id;
    t->hashes[slot] = h;
    if ((size_t)t->count * 2 > t->slots && interner_grow(t)) return -1;
    return id;
}

static PyObject *interner_texts(const Interner *t) {
    PyObject *texts = PyList_New(t->count);
    for (Py_ssize_t k = 0; texts && k < t->count; k++) {
        PyObject *text = PyBytes_FromStringAndSize(t->data + t->starts[k], (Py_ssize_t)t->lengths[k]);
        if (!text) { Py_CLEAR(texts); break; }
        PyList_SET_ITEM(texts, k, text);
    }
    return texts;
}

typedef struct {
    int64_t *clients, *calls, *rets;
    int32_t *sigs, *keys;
    Py_ssize_t n, cap;
} Columns;

static int columns_grow(Columns *cols) {
    Py_ssize_t cap = cols->cap ? cols->cap * 2 : 1024;
    int64_t *a = realloc(cols->clients, sizeof(int64_t) * cap);
    if (!a) return -1;
    cols->clients = a;
    if (!(a = realloc(cols->calls, sizeof(int64_t) * cap))) return -1;
    cols->calls = a;
    if (!(a = realloc(cols->rets, sizeof(int64_t) * cap))) return -1;
    cols->rets = a;
    int32_t *b = realloc(cols->sigs, sizeof(int32_t) * cap);
    if (!b) return -1;
    cols->sigs = b;
    if (!(b = realloc(cols->keys, sizeof(int32_t) * cap))) return -1;
    cols->keys = b;
    cols->cap = cap;
    return 0;
}

/* The input object at c: its span, and the span of its key_field member's value (NULL if
 * absent), plus the cut that removes that member and one comma. 0 on success. */
typedef struct {
    const char *start, *end, *key, *key_end, *cut, *cut_end;
} InputSpan;

static int read_input(Cursor *c, const char *field, size_t field_len, InputSpan *in) {
    memset(in, 0, sizeof(*in));
    if (c->p >= c->end || *c->p != '{') return -1;
    in->start = c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') { in->end = ++c->p; return 0; }
    const char *prev_end = NULL; /* end of the previous member's value */
    for (;;) {
        skip_ws(c);
        const char *member = c->p, *name;
        Py_ssize_t name_len;
        if (read_plain_string(c, &name, &name_len)) return -1;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return -1;
        c->p++;
        skip_ws(c);
        const char *value = c->p;
        if (skip_value(c, 1)) return -1;
        const char *value_end = c->p;
        int is_key = (size_t)name_len == field_len && !memcmp(name, field, field_len);
        if (is_key) {
            if (in->key) return -1; /* a duplicate key member: the pure reader */
            in->key = value;
            in->key_end = value_end;
            in->cut = prev_end ? prev_end : member;
            in->cut_end = value_end;
        }
        skip_ws(c);
        if (c->p >= c->end) return -1;
        if (*c->p == ',') {
            c->p++;
            if (is_key && !prev_end) { /* the first member: cut through its comma */
                skip_ws(c);
                in->cut_end = c->p;
            }
            prev_end = value_end;
            continue;
        }
        if (*c->p == '}') { in->end = ++c->p; return 0; }
        return -1;
    }
}

/* Append one operation: its signature (the input without its key member, NUL, the output) and
 * its key interned. 1 on success, -3 out of memory. */
static int add_operation(Columns *cols, Interner *sigs, Interner *keys, char **buf, size_t *buf_cap,
                         const InputSpan *in, const char *out, const char *out_end, int64_t client, int64_t call,
                         int64_t ret) {
    size_t before = (size_t)((in->key ? in->cut : in->end) - in->start);
    size_t after = in->key ? (size_t)(in->end - in->cut_end) : 0;
    size_t need = before + after + 1 + (size_t)(out_end - out);
    if (need > *buf_cap) {
        char *grown = realloc(*buf, need * 2);
        if (!grown) return -3;
        *buf = grown;
        *buf_cap = need * 2;
    }
    char *w = *buf;
    memcpy(w, in->start, before);
    if (after) memcpy(w + before, in->cut_end, after);
    w[before + after] = 0;
    memcpy(w + before + after + 1, out, (size_t)(out_end - out));
    int32_t sig = intern(sigs, w, need);
    int32_t key = in->key ? intern(keys, in->key, (size_t)(in->key_end - in->key)) : intern(keys, "", 0);
    if (sig < 0 || key < 0) return -3;
    if (cols->n == cols->cap && columns_grow(cols)) return -3;
    cols->clients[cols->n] = client;
    cols->calls[cols->n] = call;
    cols->rets[cols->n] = ret;
    cols->sigs[cols->n] = sig;
    cols->keys[cols->n] = key;
    cols->n++;
    return 1;
}

/* One line's object; 1 when it is an operation, 2 a header (first line only), -1 otherwise. */
static int scan_line(Cursor *c, int first, const char *field, size_t field_len, Columns *cols, Interner *sigs,
                     Interner *keys, char **buf, size_t *buf_cap) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != '{') return -1;
    c->p++;
    int64_t client = 0, call = 0, ret = NO_RETURN;
    int has_client = 0, has_call = 0, has_input = 0, has_history = 0;
    InputSpan in;
    const char *out = "null", *out_end = out + 4;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') return -1;
    for (;;) {
        skip_ws(c);
        const char *name;
        Py_ssize_t len;
        if (read_plain_string(c, &name, &len)) return -1;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return -1;
        c->p++;
        skip_ws(c);
        if (c->p >= c->end) return -1;
        if (len == 6 && !memcmp(name, "client", 6)) {
            if (read_int(c, &client)) return -1;
            has_client = 1;
        } else if (len == 4 && !memcmp(name, "call", 4)) {
            if (read_int(c, &call)) return -1;
            has_call = 1;
        } else if (len == 6 && !memcmp(name, "return", 6)) {
            if (*c->p == 'n') {
                if (skip_literal(c, "null")) return -1;
                ret = NO_RETURN;
            } else if (read_int(c, &ret) || ret == NO_RETURN) {
                return -1;
            }
        } else if (len == 5 && !memcmp(name, "input", 5)) {
            if (read_input(c, field, field_len, &in)) return -1;
            has_input = 1;
        } else if (len == 6 && !memcmp(name, "output", 6)) {
            out = c->p;
            if (*c->p == 'n') {
                if (skip_literal(c, "null")) return -1;
            } else if (*c->p != '{' || skip_value(c, 1)) {
                return -1;
            }
            out_end = c->p;
        } else {
            if (len == 7 && !memcmp(name, "history", 7)) has_history = 1;
            if (skip_value(c, 1)) return -1; /* other fields are ignored, as the pure reader does */
        }
        skip_ws(c);
        if (c->p >= c->end) return -1;
        if (*c->p == ',') { c->p++; continue; }
        if (*c->p == '}') { c->p++; break; }
        return -1;
    }
    skip_ws(c);
    if (c->p != c->end) return -1;
    if (first && has_history && !has_client) return 2;
    if (!has_client || !has_call || !has_input) return -1;
    int unknown = out_end - out == 4 && !memcmp(out, "null", 4);
    if ((unknown && ret != NO_RETURN) || (ret != NO_RETURN && ret < call)) return -1; /* the pure reader says why */
    return add_operation(cols, sigs, keys, buf, buf_cap, &in, out, out_end, client, call, ret);
}

/* One stretch of whole lines, scanned into its own columns and texts (no Python object). */
typedef struct {
    const char *p, *end, *field;
    size_t field_len;
    int first;                       /* its first non-blank line may be the file's header */
    int seen;                        /* it had a non-blank line */
    const char *header, *header_end; /* the header line, when there was one */
    Columns cols;
    Interner sigs, keys;
    int status;                      /* >= 0 read; -1 not in the subset; -3 out of memory */
} Chunk;

static void *scan_chunk(void *arg) {
    Chunk *k = arg;
    char *buf = NULL;
    size_t buf_cap = 0;
    const char *p = k->p;
    k->status = (interner_init(&k->sigs) | interner_init(&k->keys) | columns_grow(&k->cols)) ? -3 : 0;
    while (k->status >= 0 && p < k->end) {
        const char *line_end = memchr(p, '\n', (size_t)(k->end - p));
        if (!line_end) line_end = k->end;
        Cursor c = {p, line_end};
        skip_ws(&c);
        if (c.p < c.end) {
            Cursor whole = {p, line_end};
            k->status = scan_line(&whole, k->first && !k->seen, k->field, k->field_len, &k->cols, &k->sigs, &k->keys,
                                  &buf, &buf_cap);
            if (k->status == 2) {
                k->header = p;
                k->header_end = line_end;
            }
            k->seen = 1;
        }
        p = line_end + 1;
    }
    free(buf);
    return NULL;
}

static void chunk_free(Chunk *k) {
    free(k->cols.clients); free(k->cols.calls); free(k->cols.rets); free(k->cols.sigs); free(k->cols.keys);
    interner_free(&k->sigs);
    interner_free(&k->keys);
}

/* The second chunk's operations appended to the first's, its text ids mapped onto the first's. */
static int merge_chunks(Chunk *a, Chunk *b) {
    int32_t *sig_ids = malloc(sizeof(int32_t) * (size_t)(b->sigs.count + 1));
    int32_t *key_ids = malloc(sizeof(int32_t) * (size_t)(b->keys.count + 1));
    int status = sig_ids && key_ids ? 0 : -3;
    for (Py_ssize_t k = 0; !status && k < b->sigs.count; k++) {
        sig_ids[k] = intern(&a->sigs, b->sigs.data + b->sigs.starts[k], b->sigs.lengths[k]);
        if (sig_ids[k] < 0) status = -3;
    }
    for (Py_ssize_t k = 0; !status && k < b->keys.count; k++) {
        key_ids[k] = intern(&a->keys, b->keys.data + b->keys.starts[k], b->keys.lengths[k]);
        if (key_ids[k] < 0) status = -3;
    }
    for (Py_ssize_t i = 0; !status && i < b->cols.n; i++) {
        if (a->cols.n == a->cols.cap && columns_grow(&a->cols)) { status = -3; break; }
        Py_ssize_t n = a->cols.n++;
        a->cols.clients[n] = b->cols.clients[i];
        a->cols.calls[n] = b->cols.calls[i];
        a->cols.rets[n] = b->cols.rets[i];
        a->cols.sigs[n] = sig_ids[b->cols.sigs[i]];
        a->cols.keys[n] = key_ids[b->cols.keys[i]];
    }
    free(sig_ids);
    free(key_ids);
    return status;
}

/* Scan [p, end) on two threads when it is at least min_split bytes (at a line boundary near the
 * middle), else on this one; the result is in a. */
static int scan_all(const char *p, const char *end, const char *field, size_t field_len, Py_ssize_t min_split,
                    Chunk *a, Chunk *b) {
    const char *mid = end;
#ifndef _WIN32
    if (end - p >= min_split) {
        const char *nl = memchr(p + (end - p) / 2, '\n', (size_t)(end - (p + (end - p) / 2)));
        if (nl) mid = nl + 1;
    }
#endif
    *a = (Chunk){.p = p, .end = mid, .field = field, .field_len = field_len, .first = 1};
    *b = (Chunk){.p = mid, .end = end, .field = field, .field_len = field_len, .first = 0};
    if (mid == end) {
        scan_chunk(a);
        return a->status;
    }
#ifndef _WIN32
    pthread_t other;
    int threaded = !pthread_create(&other, NULL, scan_chunk, b);
    scan_chunk(a);
    if (threaded) pthread_join(other, NULL); else scan_chunk(b);
#endif
    if (a->status == -3 || b->status == -3) return -3;
    if (a->status < 0 || b->status < 0 || !a->seen) return -1; /* (a blank first half: the pure reader) */
    return merge_chunks(a, b);
}

PyObject *native_scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *text;
    const char *field;
    Py_ssize_t field_len, min_split = 256 * 1024;
    if (!PyArg_ParseTuple(args, "Ss#|n", &text, &field, &field_len, &min_split)) return NULL; /* bytes: NUL-ended */
    /* Bytes outside ASCII and line ends other than '\n' (which str.splitlines also splits on)
     * fail to parse below, inside strings or out: the pure reader then reads the file. */
    const char *p = PyBytes_AS_STRING(text), *end = p + PyBytes_GET_SIZE(text);
    Chunk a, b;
    int status;
    Py_INCREF(text);
    Py_BEGIN_ALLOW_THREADS
    status = scan_all(p, end, field, (size_t)field_len, min_split, &a, &b);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL, *header = NULL, *sig_texts = NULL, *key_texts = NULL;
    if (status == -3) {
        PyErr_NoMemory();
    } else if (status < 0) {
        result = Py_None;
        Py_INCREF(result);
    } else if ((header = a.header ? PyBytes_FromStringAndSize(a.header, a.header_end - a.header) : Py_NewRef(Py_None))
               && (sig_texts = interner_texts(&a.sigs)) && (key_texts = interner_texts(&a.keys))) {
        Columns *cols = &a.cols;
        result = Py_BuildValue("(Oy#y#y#y#y#OO)", header, (char *)cols->clients, cols->n * 8, (char *)cols->calls,
                               cols->n * 8, (char *)cols->rets, cols->n * 8, (char *)cols->sigs, cols->n * 4,
                               (char *)cols->keys, cols->n * 4, sig_texts, key_texts);
    }
    Py_XDECREF(header);
    Py_XDECREF(sig_texts);
    Py_XDECREF(key_texts);
    Py_DECREF(text);
    chunk_free(&a);
    chunk_free(&b);
    return result;
}

PyObject *native_split(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer keys, parts;
    if (!PyArg_ParseTuple(args, "y*y*", &keys, &parts)) return NULL;
    Py_ssize_t n = keys.len / 4, nkeys = parts.len / 4;
    const int32_t *key = keys.buf, *part_of = parts.buf;
    Py_ssize_t nparts = 0;
    for (Py_ssize_t k = 0; k < nkeys; k++) if (part_of[k] + 1 > nparts) nparts = part_of[k] + 1;
    Py_ssize_t *sizes = calloc((size_t)nparts + 1, sizeof(Py_ssize_t));
    Py_ssize_t *order = malloc(sizeof(Py_ssize_t) * ((size_t)nparts + 1)); /* first appearance -> part */
    Py_ssize_t *rank = malloc(sizeof(Py_ssize_t) * ((size_t)nparts + 1));
    PyObject *out = NULL;
    if (!sizes || !order || !rank) goto done;
    Py_ssize_t seen = 0;
    for (Py_ssize_t k = 0; k <= nparts; k++) rank[k] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (key[i] < 0 || key[i] >= nkeys) { PyErr_SetString(PyExc_ValueError, "split: key out of range"); goto done; }
        int32_t part = part_of[key[i]];
        if (rank[part] < 0) { rank[part] = seen; order[seen++] = part; }
        sizes[part]++;
    }
    out = PyList_New(seen);
    if (!out) goto done;
    int32_t **fill = malloc(sizeof(int32_t *) * ((size_t)nparts + 1));
    if (!fill) { Py_CLEAR(out); goto done; }
    for (Py_ssize_t r = 0; r < seen; r++) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, sizes[order[r]] * 4);
        if (!b) { free(fill); Py_CLEAR(out); goto done; }
        fill[order[r]] = (int32_t *)PyBytes_AS_STRING(b);
        PyList_SET_ITEM(out, r, b);
    }
    for (Py_ssize_t i = 0; i < n; i++) *fill[part_of[key[i]]]++ = (int32_t)i;
    free(fill);
done:
    free(sizes);
    free(order);
    free(rank);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&parts);
    return out;
}
