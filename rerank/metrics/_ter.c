/*
 * rerank.metrics._ter: the edit counts of sacrebleu's TER (sacrebleu/metrics/lib_ter.py,
 * translation_edit_rate) on integer token ids, for many (hypothesis, reference) pairs in one call.
 *
 * The numbers are sacrebleu's exactly; rerank/metrics/ter.py holds the same algorithm in Python
 * (the fallback when this module is not built) and says what each step reproduces:
 *   - the beam edit distance: row i of the DP (hypothesis word i) computes the cells j in
 *     [floor(i*ratio) - width, floor(i*ratio) + width), ratio = m/n, width 25 (ceil(ratio/2 + 25)
 *     when ratio/2 > 25), the last row in full; every other cell is "infinite" (1e16) and never
 *     chosen; ties prefer sub/nop, then deletion, then insertion (strict improvement);
 *   - the traceback from (n, m), read with insertions and deletions swapped, gives the alignment
 *     and the error flags of both sides;
 *   - shift candidates in sacrebleu's order and filters (block size <= 10, distance <= 50), ranked
 *     by (gain, length, -start, -target); at most 1000 candidates per pair over all rounds, and
 *     the round that reaches the cap is dropped; a round that gains nothing ends the search.
 * Only the band of each DP row is stored. A candidate shares its first p words with the
 * hypothesis it shifts, so its DP starts from row p of that hypothesis' matrix and keeps costs
 * only (two rolling rows); after a shift, the matrix is recomputed from the first changed word.
 *
 * Entry point: edit_counts(ids, offsets, hyp_index, ref_index, out), buffers of int32, int64,
 * int64, int64 and a writable int64: out[p] = the edits of sequence hyp_index[p] against
 * sequence ref_index[p], sequence s being ids[offsets[s]:offsets[s+1]]. The GIL is released
 * around the loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHIFT_SIZE 10
#define MAX_SHIFT_DIST 50
#define BEAM_WIDTH 25
#define MAX_SHIFT_CANDIDATES 1000
#define INF ((int64_t)10000000000000000LL) /* sacrebleu's _INT_INFINITY, 1e16 */

/* Operations as the DP labels them (before the swap of insertion and deletion). */
enum { OP_UNDEF = 0, OP_NOP, OP_SUB, OP_DEL, OP_INS };

/* Scratch memory of one call, grown as pairs need it. */
typedef struct {
    int32_t *words, *shifted;  /* the current hypothesis and a shifted candidate (n) */
    Py_ssize_t *lo, *hi, *start; /* the band [lo, hi) of each DP row and its offset in cost/op (n + 1) */
    int64_t *cost;             /* the band cells of the current hypothesis' matrix */
    unsigned char *op;         /* and their operations */
    int64_t *row_a, *row_b;    /* rolling rows of a candidate (m + 1) */
    unsigned char *trace;      /* the traceback, last operation first (n + m) */
    Py_ssize_t *align;         /* align[r]: the hypothesis position of reference word r (m) */
    Py_ssize_t *herr, *rerr;   /* prefix sums of the error flags (n + 1, m + 1) */
    Py_ssize_t cap_n, cap_m, cap_band; /* allocated: n + 1, m + 1 and band cells */
} Work;

static void work_free(Work *w)
{
    free(w->words); free(w->shifted); free(w->lo); free(w->hi); free(w->start);
    free(w->cost); free(w->op); free(w->row_a); free(w->row_b); free(w->trace);
    free(w->align); free(w->herr); free(w->rerr);
    memset(w, 0, sizeof(*w));
}

/* realloc that leaves *p alone on failure; returns 0 on failure. */
static int grow(void **p, size_t bytes)
{
    void *q = realloc(*p, bytes ? bytes : 1);
    if (q == NULL) return 0;
    *p = q;
    return 1;
}

static int work_reserve(Work *w, Py_ssize_t n, Py_ssize_t m)
{
    if (n + 1 > w->cap_n) {
        size_t k = (size_t)n + 1;
        if (!grow((void **)&w->words, k * sizeof(int32_t)) || !grow((void **)&w->shifted, k * sizeof(int32_t))
            || !grow((void **)&w->lo, k * sizeof(Py_ssize_t)) || !grow((void **)&w->hi, k * sizeof(Py_ssize_t))
            || !grow((void **)&w->start, (k + 1) * sizeof(Py_ssize_t))
            || !grow((void **)&w->herr, k * sizeof(Py_ssize_t)))
            return 0;
        w->cap_n = n + 1;
    }
    if (m + 1 > w->cap_m) {
        size_t k = (size_t)m + 1;
        if (!grow((void **)&w->row_a, k * sizeof(int64_t)) || !grow((void **)&w->row_b, k * sizeof(int64_t))
            || !grow((void **)&w->align, k * sizeof(Py_ssize_t)) || !grow((void **)&w->rerr, k * sizeof(Py_ssize_t)))
            return 0;
        w->cap_m = m + 1;
    }
    if (!grow((void **)&w->trace, (size_t)(n + m + 1)))
        return 0;
    return 1;
}

/* The beam of each row (sacrebleu's BeamEditDistance._edit_distance) and the band offsets. */
static int set_bands(Work *w, Py_ssize_t n, Py_ssize_t m)
{
    double ratio = n ? (double)m / (double)n : 1.0;
    Py_ssize_t width = BEAM_WIDTH, i;
    if ((double)BEAM_WIDTH < ratio / 2.0)
        width = (Py_ssize_t)ceil(ratio / 2.0 + (double)BEAM_WIDTH);
    w->lo[0] = 0; w->hi[0] = m + 1; w->start[0] = 0;
    for (i = 1; i <= n; i++) {
        Py_ssize_t diag = (Py_ssize_t)floor((double)i * ratio);
        Py_ssize_t lo = diag - width > 0 ? diag - width : 0;
        Py_ssize_t hi = diag + width < m + 1 ? diag + width : m + 1;
        if (i == n) hi = m + 1;
        if (hi < lo) hi = lo; /* an empty range, as Python's range() */
        w->lo[i] = lo; w->hi[i] = hi;
    }
    for (i = 0; i <= n; i++)
        w->start[i + 1] = w->start[i] + (w->hi[i] - w->lo[i]);
    if (w->start[n + 1] > w->cap_band) {
        size_t k = (size_t)w->start[n + 1];
        if (!grow((void **)&w->cost, k * sizeof(int64_t)) || !grow((void **)&w->op, k))
            return 0;
        w->cap_band = w->start[n + 1];
    }
    return 1;
}

/* Cell j of a band row stored from lo (row[0] is cell lo); outside the band: infinite. */
static inline int64_t cell(const int64_t *row, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t j)
{
    return (j >= lo && j < hi) ? row[j - lo] : INF;
}

/* One DP row: cur (band [lo, hi)) from prev (band [plo, phi)) for hypothesis word h. ops may be NULL. */
static void dp_row(const int64_t *prev, Py_ssize_t plo, Py_ssize_t phi, int64_t *cur, unsigned char *ops,
                   Py_ssize_t lo, Py_ssize_t hi, int32_t h, const int32_t *ref)
{
    for (Py_ssize_t j = lo; j < hi; j++) {
        int64_t best, c;
        unsigned char op;
        if (j == 0) { /* sacrebleu sets this cell unconditionally */
            best = cell(prev, plo, phi, 0) + 1;
            op = OP_DEL;
        } else {
            int match = h == ref[j - 1];
            best = INF; op = OP_UNDEF;
            c = cell(prev, plo, phi, j - 1) + (match ? 0 : 1);
            if (best > c) { best = c; op = match ? OP_NOP : OP_SUB; }
            c = cell(prev, plo, phi, j) + 1;
            if (best > c) { best = c; op = OP_DEL; }
            c = (j - 1 >= lo ? cur[j - 1 - lo] : INF) + 1;
            if (best > c) { best = c; op = OP_INS; }
        }
        cur[j - lo] = best;
        if (ops) ops[j - lo] = op;
    }
}

/* Rows from+1..n of the matrix of w->words (rows 0..from are valid). */
static void fill_matrix(Work *w, Py_ssize_t from, Py_ssize_t n, const int32_t *ref)
{
    for (Py_ssize_t i = from + 1; i <= n; i++)
        dp_row(w->cost + w->start[i - 1], w->lo[i - 1], w->hi[i - 1], w->cost + w->start[i], w->op + w->start[i],
               w->lo[i], w->hi[i], w->words[i - 1], ref);
}

/* The edit distance of w->shifted, whose first p words are those of w->words. */
static int64_t candidate_cost(Work *w, Py_ssize_t p, Py_ssize_t n, Py_ssize_t m, const int32_t *ref)
{
    const int64_t *prev = w->cost + w->start[p];
    int64_t *bufs[2] = {w->row_a, w->row_b};
    for (Py_ssize_t i = p + 1; i <= n; i++) {
        int64_t *cur = bufs[i & 1];
        dp_row(prev, w->lo[i - 1], w->hi[i - 1], cur, NULL, w->lo[i], w->hi[i], w->shifted[i - 1], ref);
        prev = cur;
    }
    return cell(prev, w->lo[n], w->hi[n], m);
}

/* The alignment and error prefix sums from the traceback; 0 if it meets an undefined cell. */
static int align_from_trace(Work *w, Py_ssize_t n, Py_ssize_t m)
{
    Py_ssize_t i = n, j = m, k = 0, t, ph = -1, pr = -1;
    while (i > 0 || j > 0) {
        unsigned char op = (j >= w->lo[i] && j < w->hi[i]) ? w->op[w->start[i] + j - w->lo[i]] : OP_UNDEF;
        w->trace[k++] = op;
        if (op == OP_NOP || op == OP_SUB) { i--; j--; }
        else if (op == OP_INS) j--;
        else if (op == OP_DEL) i--;
        else return 0;
    }
    /* Forward. The DP's deletion consumes a hypothesis word, its insertion a reference word
     * (sacrebleu flips them, then reads the flipped trace the same way). */
    w->herr[0] = 0; w->rerr[0] = 0;
    for (t = k - 1; t >= 0; t--) {
        unsigned char op = w->trace[t];
        if (op == OP_NOP || op == OP_SUB) {
            ph++; pr++;
            w->align[pr] = ph;
            w->herr[ph + 1] = w->herr[ph] + (op == OP_SUB);
            w->rerr[pr + 1] = w->rerr[pr] + (op == OP_SUB);
        } else if (op == OP_DEL) {
            ph++;
            w->herr[ph + 1] = w->herr[ph] + 1;
        } else {
            pr++;
            w->align[pr] = ph;
            w->rerr[pr + 1] = w->rerr[pr] + 1;
        }
    }
    return 1;
}

/* sacrebleu's _perform_shift of w->words into w->shifted; returns the length of the common prefix. */
static Py_ssize_t perform_shift(Work *w, Py_ssize_t n, Py_ssize_t s, Py_ssize_t len, Py_ssize_t t)
{
    const int32_t *a = w->words;
    int32_t *out = w->shifted;
    Py_ssize_t k = 0, p;
#define COPY(from, to) do { if ((to) > (from)) { memcpy(out + k, a + (from), (size_t)((to) - (from)) * sizeof(int32_t)); k += (to) - (from); } } while (0)
    if (t < s) {                /* before the block */
        COPY(0, t); COPY(s, s + len); COPY(t, s); COPY(s + len, n);
        p = t;
    } else if (t > s + len) {   /* after the block */
        COPY(0, s); COPY(s + len, t); COPY(s, s + len); COPY(t, n);
        p = s;
    } else {                    /* inside the block: Python's slices words[s+len:len+t], words[len+t:] */
        Py_ssize_t e = len + t < n ? len + t : n;
        COPY(0, s); COPY(s + len, e); COPY(s, s + len); COPY(e, n);
        p = s;
    }
#undef COPY
    while (p < n && out[p] == a[p]) p++;
    return p;
}

/* sacrebleu's translation_edit_rate(hyp, ref)[0]; -1 on a failure (memory, traceback). */
static int64_t ter_edits(Work *w, const int32_t *hyp, Py_ssize_t n, const int32_t *ref, Py_ssize_t m)
{
    int64_t shifts = 0, pre;
    Py_ssize_t checked = 0, valid = 0;
    if (m == 0) return n;
    if (!work_reserve(w, n, m) || !set_bands(w, n, m)) return -1;
    if (n) memcpy(w->words, hyp, (size_t)n * sizeof(int32_t));
    for (Py_ssize_t j = 0; j <= m; j++) { w->cost[j] = j; w->op[j] = OP_INS; } /* row 0: j insertions */
    for (;;) {
        int found = 0;
        int64_t best_gain = 0;
        Py_ssize_t best_len = 0, best_s = 0, best_t = 0;
        fill_matrix(w, valid, n, ref);
        valid = n;
        pre = cell(w->cost + w->start[n], w->lo[n], w->hi[n], m);
        if (!align_from_trace(w, n, m)) return -1;
        for (Py_ssize_t sh = 0; sh < n && checked < MAX_SHIFT_CANDIDATES; sh++) {
            Py_ssize_t r0 = sh - MAX_SHIFT_DIST > 0 ? sh - MAX_SHIFT_DIST : 0;
            Py_ssize_t r1 = sh + MAX_SHIFT_DIST + 1 < m ? sh + MAX_SHIFT_DIST + 1 : m;
            for (Py_ssize_t sr = r0; sr < r1 && checked < MAX_SHIFT_CANDIDATES; sr++) {
                Py_ssize_t len = 0;
                while (w->words[sh + len] == ref[sr + len] && len < MAX_SHIFT_SIZE) {
                    len++;
                    /* the filters: both sides wrong somewhere, and no target inside the block itself */
                    if (w->herr[sh + len] - w->herr[sh] != 0 && w->rerr[sr + len] - w->rerr[sr] != 0
                        && !(sh <= w->align[sr] && w->align[sr] < sh + len)) {
                        Py_ssize_t prev_idx = -1;
                        for (Py_ssize_t off = -1; off < len; off++) {
                            Py_ssize_t r = sr + off, idx, p;
                            int64_t gain;
                            if (r == -1) idx = 0;
                            else if (r < m) idx = w->align[r] + 1;
                            else break;
                            if (idx == prev_idx) continue;
                            prev_idx = idx;
                            p = perform_shift(w, n, sh, len, idx);
                            gain = pre - (p >= n ? pre : candidate_cost(w, p, n, m, ref));
                            checked++;
                            /* (gain, length, -start, -target), the greatest wins; the first of equals stays */
                            if (!found || gain > best_gain
                                || (gain == best_gain && (len > best_len
                                    || (len == best_len && (sh < best_s || (sh == best_s && idx < best_t)))))) {
                                found = 1; best_gain = gain; best_len = len; best_s = sh; best_t = idx;
                            }
                        }
                        if (checked >= MAX_SHIFT_CANDIDATES) break;
                    }
                    if (n == sh + len || m == sr + len) break;
                }
            }
        }
        if (checked >= MAX_SHIFT_CANDIDATES || !found || best_gain <= 0) break;
        valid = perform_shift(w, n, best_s, best_len, best_t);
        memcpy(w->words, w->shifted, (size_t)n * sizeof(int32_t));
        shifts++;
    }
    return shifts + pre;
}

/* A 1-d C-contiguous buffer of native integers of the given item size. */
static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *name)
{
    const char *f;
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return 0;
    f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || (PY_LITTLE_ENDIAN && *f == '<') || (!PY_LITTLE_ENDIAN && (*f == '>' || *f == '!')))
        f++;
    if (view->itemsize != itemsize || view->ndim != 1 || *f == '\0' || f[1] != '\0' || !strchr("bBhHiIlLqQnN", *f)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-d buffer of native %zd-byte integers", name, itemsize);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *edit_counts(PyObject *self, PyObject *args)
{
    PyObject *o_ids, *o_off, *o_hyp, *o_ref, *o_out;
    Py_buffer ids, off, hyp, ref, out;
    Py_ssize_t n_pairs, n_seq, p;
    int ok = 0, failed = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO:edit_counts", &o_ids, &o_off, &o_hyp, &o_ref, &o_out))
        return NULL;
    if (!get_buffer(o_ids, &ids, 4, 0, "ids")) return NULL;
    if (!get_buffer(o_off, &off, 8, 0, "offsets")) goto release_ids;
    if (!get_buffer(o_hyp, &hyp, 8, 0, "hyp_index")) goto release_off;
    if (!get_buffer(o_ref, &ref, 8, 0, "ref_index")) goto release_hyp;
    if (!get_buffer(o_out, &out, 8, 1, "out")) goto release_ref;
    n_pairs = hyp.shape[0];
    n_seq = off.shape[0] - 1;
    if (ref.shape[0] != n_pairs || out.shape[0] != n_pairs || n_seq < 0) {
        PyErr_SetString(PyExc_ValueError, "edit_counts: hyp_index, ref_index and out differ in length, or no offsets");
        goto release_out;
    }
    {
        const int32_t *I = (const int32_t *)ids.buf;
        const int64_t n_ids = (int64_t)ids.shape[0];
        const int64_t *O = (const int64_t *)off.buf, *H = (const int64_t *)hyp.buf, *R = (const int64_t *)ref.buf;
        int64_t *E = (int64_t *)out.buf;
        for (p = 0; p <= n_seq; p++)
            if (O[p] < 0 || O[p] > ids.shape[0] || (p && O[p] < O[p - 1])) {
                PyErr_SetString(PyExc_ValueError, "edit_counts: offsets must rise within ids");
                goto release_out;
            }
        for (p = 0; p < n_pairs; p++)
            if (H[p] < 0 || H[p] >= n_seq || R[p] < 0 || R[p] >= n_seq) {
                PyErr_SetString(PyExc_IndexError, "edit_counts: a sequence index is out of range");
                goto release_out;
            }
        Py_BEGIN_ALLOW_THREADS
        Work w;
        memset(&w, 0, sizeof(w));
        for (p = 0; p < n_pairs && !failed; p++) {
            /* Read once and checked again: out may share memory with the inputs (a write changing a
             * later pair's offsets) and other threads run while the GIL is released. */
            int64_t h = H[p], r = R[p], h0, h1, r0, r1, e;
            if (h < 0 || h >= n_seq || r < 0 || r >= n_seq) { failed = 2; break; }
            h0 = O[h]; h1 = O[h + 1]; r0 = O[r]; r1 = O[r + 1];
            if (h0 < 0 || h1 < h0 || h1 > n_ids || r0 < 0 || r1 < r0 || r1 > n_ids) { failed = 2; break; }
            e = ter_edits(&w, I + h0, (Py_ssize_t)(h1 - h0), I + r0, (Py_ssize_t)(r1 - r0));
            if (e < 0) failed = 1;
            else E[p] = e;
        }
        work_free(&w);
        Py_END_ALLOW_THREADS
    }
    if (failed == 2)
        PyErr_SetString(PyExc_ValueError, "edit_counts: the indices or offsets changed during the call "
                        "(out shares memory with them?)");
    else if (failed)
        PyErr_SetString(PyExc_MemoryError, "edit_counts: out of memory (or an undefined traceback)");
    else
        ok = 1;
release_out:
    PyBuffer_Release(&out);
release_ref:
    PyBuffer_Release(&ref);
release_hyp:
    PyBuffer_Release(&hyp);
release_off:
    PyBuffer_Release(&off);
release_ids:
    PyBuffer_Release(&ids);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"edit_counts", edit_counts, METH_VARARGS,
     "edit_counts(ids, offsets, hyp_index, ref_index, out): sacrebleu's TER edits of every pair into out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ter", "sacrebleu's TER edit counts on token ids (C).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ter(void) { return PyModule_Create(&module); }
