/*
 * rerank.mira._kbmira: one epoch of k-best batch MIRA (mira/kbmira.py, KBMira.epoch) in C.
 *
 * The rules are those of KBMira.epoch and KBMira.visit, which say where they follow Moses kbmira;
 * this loop only removes the per-visit cost of some twenty numpy calls on 100-element arrays (the
 * visits cannot be vectorised: each reads the weights and the background the one before wrote).
 * For each sentence i of `order` with a list of at least two hypotheses (rows a..b of F):
 *   model_j = F_j . w
 *   gain_j  = the background BLEU of K_j + bg (BLEU) or gains_j (any other objective):
 *             exp(sum_n 1/4 log(m_n + bg) - sum_n 1/4 log(c_n + bg) + log R - max(R / H - 1, 0)),
 *             R = ref_len + bg_ref, H = c_1 + bg_c_1
 *   hope = argmax(model + gain), fear = argmax(model - gain)  (the first wins ties, as numpy's)
 *   skip the sentence if hope == fear or not gain_hope > gain_fear; else
 *   loss = (gain_hope - gain_fear) - (model_hope - model_fear); if loss > 0:
 *   d = (F_hope - F_fear) * mask, w += min(C, loss / |d|^2) d (C when |d| = 0), total += w;
 *   and with BLEU bg = decay bg + K_(hope, or the model's best with model_bg).
 * The background BLEU is computed once per distinct statistics row of a list (decoders emit one
 * string with several derivations, and strings with equal counts score alike): K_j is
 * U[stat_of[j]], list i's distinct rows being U[uoff[i]:uoff[i+1]]. The numbers equal the Python
 * loop's to rounding (tests/test_kbmira_kernel.py).
 *
 * Entry point: epoch(F, offsets, order, w, total, bg, U, stat_of, uoff, gains, mask, C, decay,
 *   model_bg) -> (summed loss, number of updates). F (n, d) and U (u, 9) float64, C-contiguous;
 *   offsets, order, stat_of (n) and uoff int64; w, total (d) and bg (9) float64, written in place;
 *   either U, stat_of and uoff or gains (n) given, the others None; mask None or (d) float64.
 *   The GIL is released around the loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A C-contiguous buffer of native float64 ('d') or int64 ('q', 'l', 'n' of 8 bytes), of ndim dimensions. */
static int get_array(PyObject *obj, Py_buffer *view, char kind, int ndim, int writable, const char *name)
{
    const char *f;
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return 0;
    f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || (PY_LITTLE_ENDIAN && *f == '<') || (!PY_LITTLE_ENDIAN && (*f == '>' || *f == '!')))
        f++;
    if (view->itemsize != 8 || view->ndim != ndim || *f == '\0' || f[1] != '\0'
        || (kind == 'd' ? *f != 'd' : !strchr("qlnQLN", *f))) {
        PyErr_Format(PyExc_TypeError, "epoch: %s must be a %d-d C-contiguous array of %s", name, ndim,
                     kind == 'd' ? "float64" : "int64");
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *epoch(PyObject *self, PyObject *args)
{
    PyObject *oF, *oOff, *oOrder, *oW, *oTotal, *oBg, *oK, *oStat, *oUoff, *oGains, *oMask;
    double C, decay;
    int model_bg;
    Py_buffer F, off, order, w, total, bg, K, stat, uoff, gains, mask;
    int haveK = 0, haveG = 0, haveM = 0, ok = 0;
    double loss_sum = 0.0;
    long long n_updates = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOddp:epoch", &oF, &oOff, &oOrder, &oW, &oTotal, &oBg, &oK, &oStat,
                          &oUoff, &oGains, &oMask, &C, &decay, &model_bg))
        return NULL;
    if ((oK == Py_None) != (oStat == Py_None) || (oK == Py_None) != (oUoff == Py_None)
        || (oK == Py_None) == (oGains == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "epoch: give either U, stat_of and uoff or gains");
        return NULL;
    }
    if (!get_array(oF, &F, 'd', 2, 0, "F")) return NULL;
    if (!get_array(oOff, &off, 'q', 1, 0, "offsets")) goto release_F;
    if (!get_array(oOrder, &order, 'q', 1, 0, "order")) goto release_off;
    if (!get_array(oW, &w, 'd', 1, 1, "w")) goto release_order;
    if (!get_array(oTotal, &total, 'd', 1, 1, "total")) goto release_w;
    if (!get_array(oBg, &bg, 'd', 1, 1, "bg")) goto release_total;
    if (oK != Py_None) {
        if (!get_array(oK, &K, 'd', 2, 0, "U")) goto release_bg;
        if (!get_array(oStat, &stat, 'q', 1, 0, "stat_of")) { PyBuffer_Release(&K); goto release_bg; }
        if (!get_array(oUoff, &uoff, 'q', 1, 0, "uoff")) {
            PyBuffer_Release(&K); PyBuffer_Release(&stat); goto release_bg;
        }
        haveK = 1;
    } else {
        if (!get_array(oGains, &gains, 'd', 1, 0, "gains")) goto release_bg;
        haveG = 1;
    }
    if (oMask != Py_None) {
        if (!get_array(oMask, &mask, 'd', 1, 0, "mask")) goto release_kg;
        haveM = 1;
    }
    {
        const Py_ssize_t n = F.shape[0], d = F.shape[1], n_lists = off.shape[0] - 1, n_order = order.shape[0];
        const int64_t *O = (const int64_t *)off.buf, *ord = (const int64_t *)order.buf;
        const int64_t *SO = haveK ? (const int64_t *)stat.buf : NULL, *UO = haveK ? (const int64_t *)uoff.buf : NULL;
        Py_ssize_t p, kmax = 0;
        double *model = NULL, *gain = NULL, *step = NULL;
        if (w.shape[0] != d || total.shape[0] != d || bg.shape[0] != 9 || (haveM && mask.shape[0] != d)
            || (haveK && (K.shape[1] != 9 || stat.shape[0] != n || uoff.shape[0] != off.shape[0]))
            || (haveG && gains.shape[0] != n) || n_lists < 0) {
            PyErr_SetString(PyExc_ValueError, "epoch: the arrays' shapes disagree");
            goto release_mask;
        }
        if (n_lists >= 0 && (O[0] != 0 || O[n_lists] != n)) {
            PyErr_SetString(PyExc_ValueError, "epoch: offsets must run from 0 to the rows of F");
            goto release_mask;
        }
        for (p = 0; p < n_lists; p++) {
            if (O[p + 1] < O[p]) {
                PyErr_SetString(PyExc_ValueError, "epoch: offsets must not fall");
                goto release_mask;
            }
            if (O[p + 1] - O[p] > kmax) kmax = (Py_ssize_t)(O[p + 1] - O[p]);
        }
        if (haveK) { /* every row's distinct statistics lie in its list's range of U */
            int bad = UO[0] != 0 || UO[n_lists] != K.shape[0];
            for (p = 0; p < n_lists && !bad; p++) {
                int64_t j;
                bad = UO[p + 1] < UO[p];
                for (j = O[p]; j < O[p + 1] && !bad; j++)
                    bad = SO[j] < UO[p] || SO[j] >= UO[p + 1];
            }
            if (bad) {
                PyErr_SetString(PyExc_ValueError, "epoch: stat_of and uoff do not index U list by list");
                goto release_mask;
            }
        }
        for (p = 0; p < n_order; p++)
            if (ord[p] < 0 || ord[p] >= n_lists) {
                PyErr_SetString(PyExc_IndexError, "epoch: a sentence index in order is out of range");
                goto release_mask;
            }
        model = malloc(sizeof(double) * (size_t)(kmax ? kmax : 1));
        gain = malloc(sizeof(double) * (size_t)(2 * kmax ? 2 * kmax : 1)); /* the rows' gains, then U's */
        step = malloc(sizeof(double) * (size_t)(d ? d : 1));
        if (!model || !gain || !step) {
            free(model); free(gain); free(step);
            PyErr_NoMemory();
            goto release_mask;
        }
        Py_BEGIN_ALLOW_THREADS
        const double *Fv = (const double *)F.buf, *Kv = haveK ? (const double *)K.buf : NULL;
        const double *Gv = haveG ? (const double *)gains.buf : NULL, *Mv = haveM ? (const double *)mask.buf : NULL;
        double *W = (double *)w.buf, *T = (double *)total.buf, *B = (double *)bg.buf;
        for (p = 0; p < n_order; p++) {
            const int64_t i = ord[p], a = O[i], k = O[i + 1] - O[i];
            const double *Fi = Fv + a * d;
            const double *g;
            Py_ssize_t j, f, hope = 0, fear = 0;
            double best_hope, best_fear;
            if (k < 2) continue;
            for (j = 0; j < k; j++) {
                const double *row = Fi + j * d;
                double s = 0.0;
                for (f = 0; f < d; f++) s += row[f] * W[f];
                model[j] = s;
            }
            if (haveK) {
                const int64_t u0 = UO[i], nu = UO[i + 1] - UO[i];
                double *ug = gain + kmax;
                for (j = 0; j < nu; j++) {
                    const double *r = Kv + (u0 + j) * 9;
                    const double R = r[8] + B[8], H = r[4] + B[4];
                    double v = 0.25 * log(r[0] + B[0]) + 0.25 * log(r[1] + B[1]) + 0.25 * log(r[2] + B[2])
                               + 0.25 * log(r[3] + B[3]) - 0.25 * log(H) - 0.25 * log(r[5] + B[5])
                               - 0.25 * log(r[6] + B[6]) - 0.25 * log(r[7] + B[7]) + log(R);
                    double t = (R - H) / H;
                    v -= t > 0.0 ? t : 0.0;
                    ug[j] = exp(v);
                }
                for (j = 0; j < k; j++) gain[j] = ug[SO[a + j] - u0];
                g = gain;
            } else {
                g = Gv + a;
            }
            best_hope = model[0] + g[0];
            best_fear = model[0] - g[0];
            for (j = 1; j < k; j++) {
                const double up = model[j] + g[j], down = model[j] - g[j];
                if (up > best_hope) { best_hope = up; hope = j; }
                if (down > best_fear) { best_fear = down; fear = j; }
            }
            if (hope == fear || !(g[hope] > g[fear])) continue;
            {
                const double loss = (g[hope] - g[fear]) - (model[hope] - model[fear]);
                if (loss > 0) {
                    const double *fh = Fi + hope * d, *ff = Fi + fear * d;
                    double sq = 0.0, eta;
                    for (f = 0; f < d; f++) {
                        step[f] = fh[f] - ff[f];
                        if (Mv) step[f] *= Mv[f];
                        sq += step[f] * step[f];
                    }
                    eta = sq == 0.0 ? C : (loss / sq < C ? loss / sq : C);
                    for (f = 0; f < d; f++) {
                        W[f] += step[f] * eta;
                        T[f] += W[f];
                    }
                    n_updates++;
                    loss_sum += loss;
                }
            }
            if (haveK) {
                Py_ssize_t pick = hope, q;
                if (model_bg) {
                    double m = model[0];
                    pick = 0;
                    for (j = 1; j < k; j++)
                        if (model[j] > m) { m = model[j]; pick = j; }
                }
                for (q = 0; q < 9; q++) B[q] = B[q] * decay + Kv[SO[a + pick] * 9 + q];
            }
        }
        Py_END_ALLOW_THREADS
        free(model); free(gain); free(step);
        ok = 1;
    }
release_mask:
    if (haveM) PyBuffer_Release(&mask);
release_kg:
    if (haveK) { PyBuffer_Release(&K); PyBuffer_Release(&stat); PyBuffer_Release(&uoff); }
    if (haveG) PyBuffer_Release(&gains);
release_bg:
    PyBuffer_Release(&bg);
release_total:
    PyBuffer_Release(&total);
release_w:
    PyBuffer_Release(&w);
release_order:
    PyBuffer_Release(&order);
release_off:
    PyBuffer_Release(&off);
release_F:
    PyBuffer_Release(&F);
    if (!ok) return NULL;
    return Py_BuildValue("(dL)", loss_sum, n_updates);
}

static PyMethodDef methods[] = {
    {"epoch", epoch, METH_VARARGS,
     "epoch(F, offsets, order, w, total, bg, U, stat_of, uoff, gains, mask, C, decay, model_bg) -> (loss, updates): "
     "one k-best MIRA epoch, w, total and bg updated in place."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kbmira", "One k-best batch MIRA epoch (C).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kbmira(void) { return PyModule_Create(&module); }
