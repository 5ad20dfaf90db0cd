/*
 * Reference kernels for the softmax family, determinants and einsum (see
 * k_linalg.h; matrix products are in linalg.c). einsum hands float32
 * contractions that are matrix products to kn_k_sgemm.
 */
#include "k_linalg.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- softmax family ------------------------------------------------------------ */

static inline double ld(kn_dtype dt, const void *p, int64_t i)
{
    return dt == KN_F32 ? ((const float *)p)[i] : kn_load_f64(dt, p, (size_t)i);
}

static inline void st_(kn_dtype dt, void *p, int64_t i, double v)
{
    if (dt == KN_F32) ((float *)p)[i] = (float)v;
    else kn_store_f64(dt, p, (size_t)i, v);
}

/* Normalizes one row (already gathered into row[0..n)) in place. */
static void softmax_row(double *row, int64_t n, int mode)
{
    if (mode == KN_K_HARDMAX) {
        int64_t best = 0;
        for (int64_t k = 1; k < n; k++)
            if (row[k] > row[best]) best = k;
        for (int64_t k = 0; k < n; k++) row[k] = k == best;
        return;
    }
    double m = row[0], sum = 0;
    for (int64_t k = 1; k < n; k++)
        if (row[k] > m) m = row[k];
    for (int64_t k = 0; k < n; k++) sum += exp(row[k] - m);
    if (mode == KN_K_SOFTMAX) {
        for (int64_t k = 0; k < n; k++) row[k] = exp(row[k] - m) / sum;
    } else {
        double ls = log(sum);
        for (int64_t k = 0; k < n; k++) row[k] = row[k] - m - ls;
    }
}

int kn_k_softmax(const kn_tensor *x, int64_t outer, int64_t n, int64_t inner, int mode,
                 kn_tensor *out)
{
    if (!kn_dtype_info(x->dtype)->is_float || out->dtype != x->dtype)
        return kn_error(KN_ERR_INVALID, "softmax needs a float tensor, got %s", kn_dtype_name(x->dtype));
    int64_t sz[3] = {outer, n, inner};
    int64_t total = kn_shape_numel(3, sz);
    if (total < 0 || total != kn_tensor_numel(x) || total != kn_tensor_numel(out))
        return kn_error(KN_ERR_INTERNAL, "softmax view %lldx%lldx%lld does not match the tensor",
                        (long long)outer, (long long)n, (long long)inner);
    if (total == 0) return KN_OK;
    double *row = malloc(sizeof(double) * (size_t)n);
    if (!row) return kn_error(KN_ERR_NOMEM, "out of memory for a softmax row of %lld", (long long)n);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            for (int64_t k = 0; k < n; k++) row[k] = ld(x->dtype, x->data, base + k * inner);
            softmax_row(row, n, mode);
            for (int64_t k = 0; k < n; k++) st_(out->dtype, out->data, base + k * inner, row[k]);
        }
    free(row);
    return KN_OK;
}

/* ---- determinant ---------------------------------------------------------------- */

/* Determinant of the n x n matrix m (destroyed) by LU with partial pivoting. */
static double det_lu(double *m, int64_t n)
{
    double det = 1.0;
    for (int64_t c = 0; c < n; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < n; r++)
            if (fabs(m[r * n + c]) > fabs(m[p * n + c])) p = r;
        if (m[p * n + c] == 0.0) return 0.0;
        if (p != c) {
            for (int64_t k = 0; k < n; k++) {
                double t = m[c * n + k];
                m[c * n + k] = m[p * n + k];
                m[p * n + k] = t;
            }
            det = -det;
        }
        double piv = m[c * n + c];
        det *= piv;
        for (int64_t r = c + 1; r < n; r++) {
            double f = m[r * n + c] / piv;
            for (int64_t k = c + 1; k < n; k++) m[r * n + k] -= f * m[c * n + k];
        }
    }
    return det;
}

int kn_k_det(const kn_tensor *x, kn_tensor *out)
{
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return kn_error(KN_ERR_INVALID, "Det needs [..., M, M] input");
    if (!kn_dtype_info(x->dtype)->is_float || out->dtype != x->dtype)
        return kn_error(KN_ERR_INVALID, "Det needs a float tensor, got %s", kn_dtype_name(x->dtype));
    int64_t n = x->dims[x->rank - 1], mm = n * n;
    int64_t batch = kn_shape_numel(x->rank - 2, x->dims);
    if (kn_tensor_numel(out) != batch) return kn_error(KN_ERR_INTERNAL, "Det output has the wrong size");
    double *m = malloc(sizeof(double) * (size_t)(mm ? mm : 1));
    if (!m) return kn_error(KN_ERR_NOMEM, "out of memory for a %lldx%lld matrix", (long long)n, (long long)n);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < mm; i++) m[i] = ld(x->dtype, x->data, b * mm + i);
        st_(out->dtype, out->data, b, det_lu(m, n));
    }
    free(m);
    return KN_OK;
}

/* ---- einsum ------------------------------------------------------------------- */

enum { EIN_MAX_OPS = 16, EIN_ELL = 52, EIN_LABELS = 52 + KN_MAX_RANK };

/* A parsed equation: per operand, the label of each axis; letters are labels
 * 0..51 in ASCII order (so implicit outputs sort like numpy), and the dims an
 * ellipsis stands for are labels 52.., right-aligned across operands so they
 * broadcast like numpy. */
typedef struct ein_plan {
    int n;
    int rank[EIN_MAX_OPS];
    int label[EIN_MAX_OPS][KN_MAX_RANK];
    int out_rank;
    int out_label[KN_MAX_RANK];
    int64_t size[EIN_LABELS]; /* -2 unseen, -1 unknown */
    int count[EIN_LABELS];    /* occurrences over all operand axes */
    int n_ell;                /* dims covered by the widest ellipsis */
} ein_plan;

static int ein_letter(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
    return -1;
}

/* Counts labels of a term and whether it holds "..."; rejects anything else. */
static int ein_scan_term(const char *t, size_t len, int *n_letters, bool *has_ell)
{
    *n_letters = 0;
    *has_ell = false;
    for (size_t i = 0; i < len; i++) {
        if (ein_letter(t[i]) >= 0) {
            (*n_letters)++;
        } else if (!*has_ell && len - i >= 3 && t[i] == '.' && t[i + 1] == '.' && t[i + 2] == '.') {
            *has_ell = true;
            i += 2;
        } else {
            return kn_error(KN_ERR_INVALID, "Einsum equation term '%.*s' has an invalid character '%c'",
                            (int)len, t, t[i]);
        }
    }
    return KN_OK;
}

/* Merges a dim into a label's size with numpy broadcasting (1 stretches). */
static int ein_size(ein_plan *p, int l, int64_t d)
{
    int64_t s = p->size[l];
    if (s == -2 || s == 1 || (s == -1 && d != -1 && d != 1)) p->size[l] = d;
    else if (d == 1 || d == -1 || d == s) return KN_OK;
    else if (l < EIN_ELL)
        return kn_error(KN_ERR_INVALID, "Einsum label '%c' has sizes %lld and %lld",
                        l < 26 ? 'A' + l : 'a' + l - 26, (long long)s, (long long)d);
    else
        return kn_error(KN_ERR_INVALID, "Einsum ellipsis dims %lld and %lld cannot be broadcast",
                        (long long)s, (long long)d);
    return KN_OK;
}

/* Splits "lhs->rhs" (spaces removed) into terms; fills p's operand labels. */
static int ein_parse_inputs(const char *lhs, int n, const int *ranks, const int64_t *const *dims,
                            ein_plan *p)
{
    const char *term[EIN_MAX_OPS];
    size_t len[EIN_MAX_OPS];
    int nt = 0;
    for (const char *s = lhs;;) {
        const char *e = strchr(s, ',');
        if (nt >= EIN_MAX_OPS) return kn_error(KN_ERR_UNSUPPORTED, "Einsum with more than %d operands", EIN_MAX_OPS);
        term[nt] = s;
        len[nt++] = e ? (size_t)(e - s) : strlen(s);
        if (!e) break;
        s = e + 1;
    }
    if (nt != n) return kn_error(KN_ERR_INVALID, "Einsum equation has %d operand terms but %d inputs", nt, n);
    int ell[EIN_MAX_OPS];
    bool has[EIN_MAX_OPS];
    for (int i = 0; i < n; i++) {
        int nl;
        int st = ein_scan_term(term[i], len[i], &nl, &has[i]);
        if (st) return st;
        ell[i] = ranks[i] - nl;
        if (ell[i] < 0 || (!has[i] && ell[i] != 0))
            return kn_error(KN_ERR_INVALID, "Einsum term '%.*s' does not match input %d of rank %d", (int)len[i],
                            term[i], i, ranks[i]);
        if (ell[i] > p->n_ell) p->n_ell = ell[i];
    }
    for (int i = 0; i < n; i++) {
        int ax = 0;
        p->rank[i] = ranks[i];
        for (size_t c = 0; c < len[i]; c++) {
            if (term[i][c] == '.') {
                for (int t = 0; t < ell[i]; t++) p->label[i][ax++] = EIN_ELL + (p->n_ell - ell[i]) + t;
                c += 2;
            } else {
                p->label[i][ax++] = ein_letter(term[i][c]);
            }
        }
        for (int a = 0; a < ranks[i]; a++) {
            p->count[p->label[i][a]]++;
            int st = ein_size(p, p->label[i][a], dims[i][a]);
            if (st) return st;
        }
    }
    return KN_OK;
}

static int ein_parse_output(const char *rhs, ein_plan *p)
{
    p->out_rank = 0;
    bool seen[EIN_LABELS] = {0};
    if (!rhs) { /* implicit: ellipsis dims, then labels used once, in ASCII order */
        for (int t = 0; t < p->n_ell; t++) p->out_label[p->out_rank++] = EIN_ELL + t;
        for (int l = 0; l < EIN_ELL; l++)
            if (p->count[l] == 1) {
                if (p->out_rank >= KN_MAX_RANK) return kn_error(KN_ERR_UNSUPPORTED, "Einsum output rank too large");
                p->out_label[p->out_rank++] = l;
            }
        return KN_OK;
    }
    bool had_ell = false;
    for (size_t c = 0; rhs[c]; c++) {
        int l = ein_letter(rhs[c]);
        if (rhs[c] == '.' && !had_ell && !strncmp(rhs + c, "...", 3)) {
            had_ell = true;
            c += 2;
            if (p->out_rank + p->n_ell > KN_MAX_RANK)
                return kn_error(KN_ERR_UNSUPPORTED, "Einsum output rank too large");
            for (int t = 0; t < p->n_ell; t++) p->out_label[p->out_rank++] = EIN_ELL + t;
            continue;
        }
        if (l < 0) return kn_error(KN_ERR_INVALID, "Einsum output has an invalid character '%c'", rhs[c]);
        if (!p->count[l]) return kn_error(KN_ERR_INVALID, "Einsum output label '%c' is not in any input", rhs[c]);
        if (seen[l]) return kn_error(KN_ERR_INVALID, "Einsum output label '%c' appears twice", rhs[c]);
        if (p->out_rank >= KN_MAX_RANK) return kn_error(KN_ERR_UNSUPPORTED, "Einsum output rank too large");
        seen[l] = true;
        p->out_label[p->out_rank++] = l;
    }
    return KN_OK;
}

static int ein_parse(const char *eq, int n, const int *ranks, const int64_t *const *dims, ein_plan *p)
{
    memset(p, 0, sizeof *p);
    for (int l = 0; l < EIN_LABELS; l++) p->size[l] = -2;
    if (!eq) return kn_error(KN_ERR_INVALID, "Einsum has no equation");
    if (n < 1 || n > EIN_MAX_OPS) return kn_error(KN_ERR_UNSUPPORTED, "Einsum with %d operands", n);
    for (int i = 0; i < n; i++)
        if (ranks[i] < 0 || ranks[i] > KN_MAX_RANK)
            return kn_error(KN_ERR_INVALID, "Einsum input %d has rank %d", i, ranks[i]);
    p->n = n;
    char buf[512];
    size_t k = 0;
    for (const char *s = eq; *s; s++) {
        if (*s == ' ') continue;
        if (k + 1 >= sizeof buf) return kn_error(KN_ERR_UNSUPPORTED, "Einsum equation is too long");
        buf[k++] = *s;
    }
    buf[k] = '\0';
    char *arrow = strstr(buf, "->");
    if (arrow) *arrow = '\0';
    int st = ein_parse_inputs(buf, n, ranks, dims, p);
    if (st) return st;
    return ein_parse_output(arrow ? arrow + 2 : NULL, p);
}

int kn_k_einsum_shape(const char *eq, int n, const int *ranks, const int64_t *const *dims,
                      int *out_rank, int64_t *out_dims)
{
    ein_plan *p = malloc(sizeof *p);
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = ein_parse(eq, n, ranks, dims, p);
    if (!st) {
        *out_rank = p->out_rank;
        for (int i = 0; i < p->out_rank; i++) out_dims[i] = p->size[p->out_label[i]];
    }
    free(p);
    return st;
}

/* Advances a row-major counter; false after the last index. */
static bool odometer(int r, const int64_t *dims, int64_t *idx)
{
    for (int i = r - 1; i >= 0; i--) {
        if (++idx[i] < dims[i]) return true;
        idx[i] = 0;
    }
    return false;
}

typedef struct ein_walk {
    int n;
    const kn_tensor *const *in;
    int nc;                              /* contracted labels */
    int64_t cdim[EIN_LABELS];
    int64_t cst[EIN_MAX_OPS][EIN_LABELS]; /* operand strides along contracted labels */
    bool is_int;
} ein_walk;

/* Sum over the contracted labels of the product of operands at base offsets. */
static void ein_inner(const ein_walk *w, const int64_t *base, double *out_f, uint64_t *out_i)
{
    int64_t idx[EIN_LABELS] = {0};
    double sf = 0;
    uint64_t si = 0;
    for (;;) {
        double pf = 1;
        uint64_t pi = 1;
        for (int o = 0; o < w->n; o++) {
            int64_t off = base[o];
            for (int c = 0; c < w->nc; c++) off += idx[c] * w->cst[o][c];
            if (w->is_int) pi *= (uint64_t)kn_load_i64(w->in[o]->dtype, w->in[o]->data, (size_t)off);
            else pf *= kn_load_f64(w->in[o]->dtype, w->in[o]->data, (size_t)off);
        }
        sf += pf;
        si += pi;
        if (!odometer(w->nc, w->cdim, idx)) break;
    }
    *out_f = sf;
    *out_i = si;
}

/* Fills w's strides from p; checks operand dims against label sizes. */
static int ein_strides(const ein_plan *p, const kn_tensor *const *in, ein_walk *w,
                       int64_t ost[][KN_MAX_RANK])
{
    int clab[EIN_LABELS];
    bool in_out[EIN_LABELS] = {0};
    for (int i = 0; i < p->out_rank; i++) in_out[p->out_label[i]] = true;
    w->nc = 0;
    for (int l = 0; l < EIN_LABELS; l++)
        if (p->count[l] && !in_out[l]) {
            clab[w->nc] = l;
            w->cdim[w->nc++] = p->size[l];
        }
    for (int o = 0; o < p->n; o++) {
        int64_t es[KN_MAX_RANK], lst[EIN_LABELS] = {0};
        kn_shape_strides(in[o]->rank, in[o]->dims, es);
        for (int a = 0; a < in[o]->rank; a++) {
            int l = p->label[o][a];
            if (in[o]->dims[a] == p->size[l]) lst[l] += es[a]; /* dims of 1 broadcast: stride 0 */
        }
        for (int c = 0; c < w->nc; c++) w->cst[o][c] = lst[clab[c]];
        for (int i = 0; i < p->out_rank; i++) ost[o][i] = lst[p->out_label[i]];
    }
    return KN_OK;
}

/* dst[idx over dst_labels] = src[sum idx * stride_by_label]: a transpose
 * (gather) of a float32 tensor whose axes each carry a distinct label. */
static void ein_gather_f32(const float *src, const int64_t *stride_by_label, int r, const int *labels,
                           const int64_t *sizes, float *dst)
{
    int64_t dims[EIN_LABELS], st[EIN_LABELS], idx[EIN_LABELS] = {0};
    int64_t total = 1;
    for (int i = 0; i < r; i++) {
        dims[i] = sizes[labels[i]];
        st[i] = stride_by_label[labels[i]];
        total *= dims[i];
    }
    int64_t off = 0;
    for (int64_t e = 0; e < total; e++) {
        dst[e] = src[off];
        for (int i = r - 1; i >= 0; i--) { /* odometer that keeps the source offset in step */
            off += st[i];
            if (++idx[i] < dims[i]) break;
            off -= st[i] * dims[i];
            idx[i] = 0;
        }
    }
}

/* Element stride of each label of operand o (distinct labels, no broadcast). */
static void ein_label_strides(const ein_plan *p, int o, const kn_tensor *t, int64_t *by_label)
{
    int64_t es[KN_MAX_RANK];
    kn_shape_strides(t->rank, t->dims, es);
    for (int a = 0; a < t->rank; a++) by_label[p->label[o][a]] = es[a];
}

/* Two float32 operands whose labels are each batch (A, B, out), M (A, out),
 * N (B, out) or K (A, B): transpose both to [batch, M, K] and [batch, K, N],
 * run the blocked GEMM, and transpose back. *done is false (and nothing is
 * written) for anything else: diagonals, broadcasts, labels summed within
 * one operand; the generic loop handles those. */
static int ein_matmul_f32(const ein_plan *p, const kn_tensor *const *in, kn_tensor *out, bool *done)
{
    *done = false;
    bool ina[EIN_LABELS] = {0}, inb[EIN_LABELS] = {0}, ino[EIN_LABELS] = {0};
    for (int o = 0; o < 2; o++)
        for (int a = 0; a < in[o]->rank; a++) {
            bool *seen = o ? inb : ina;
            int l = p->label[o][a];
            if (seen[l] || in[o]->dims[a] != p->size[l]) return KN_OK;
            seen[l] = true;
        }
    for (int i = 0; i < p->out_rank; i++) ino[p->out_label[i]] = true;
    int lb[EIN_LABELS], lm[EIN_LABELS], ln[EIN_LABELS], lk[EIN_LABELS], nb = 0, nm = 0, nn = 0, nk = 0;
    int64_t B = 1, M = 1, N = 1, K = 1;
    for (int l = 0; l < EIN_LABELS; l++) {
        if (!ina[l] && !inb[l]) continue;
        int64_t sz = p->size[l];
        if (ina[l] && inb[l] && ino[l]) lb[nb++] = l, B *= sz;
        else if (ina[l] && ino[l]) lm[nm++] = l, M *= sz;
        else if (inb[l] && ino[l]) ln[nn++] = l, N *= sz;
        else if (ina[l] && inb[l]) lk[nk++] = l, K *= sz;
        else return KN_OK; /* summed within one operand */
    }
    int la[EIN_LABELS], lbb[EIN_LABELS], lc[EIN_LABELS], ra = 0, rb = 0, rc = 0;
    for (int i = 0; i < nb; i++) la[ra++] = lbb[rb++] = lc[rc++] = lb[i];
    for (int i = 0; i < nm; i++) la[ra++] = lc[rc++] = lm[i];
    for (int i = 0; i < nk; i++) la[ra++] = lbb[rb++] = lk[i];
    for (int i = 0; i < nn; i++) lbb[rb++] = lc[rc++] = ln[i];
    float *ap = malloc(sizeof(float) * (size_t)(B * M * K + 1)), *bp = malloc(sizeof(float) * (size_t)(B * K * N + 1));
    float *cp = calloc((size_t)(B * M * N + 1), sizeof(float));
    int st = KN_OK;
    if (!ap || !bp || !cp) st = kn_error(KN_ERR_NOMEM, "out of memory for an einsum product");
    int64_t sa[EIN_LABELS] = {0}, sb[EIN_LABELS] = {0}, sc[EIN_LABELS] = {0}, so[EIN_LABELS] = {0};
    if (!st) {
        ein_label_strides(p, 0, in[0], sa);
        ein_label_strides(p, 1, in[1], sb);
        ein_gather_f32(in[0]->data, sa, ra, la, p->size, ap);
        ein_gather_f32(in[1]->data, sb, rb, lbb, p->size, bp);
        for (int64_t b = 0; b < B && !st; b++)
            st = kn_k_sgemm(M, N, K, 1.0f, ap + b * M * K, K, false, bp + b * K * N, N, false, cp + b * M * N, N);
    }
    if (!st) {
        /* cp is row-major over lc; read it back in the output's label order */
        int64_t s = 1;
        for (int i = rc - 1; i >= 0; i--) sc[lc[i]] = s, s *= p->size[lc[i]];
        for (int i = 0; i < p->out_rank; i++) so[p->out_label[i]] = sc[p->out_label[i]];
        ein_gather_f32(cp, so, p->out_rank, p->out_label, p->size, out->data);
        *done = true;
    }
    free(ap);
    free(bp);
    free(cp);
    return st;
}

int kn_k_einsum(const char *eq, int n, const kn_tensor *const *in, kn_tensor *out)
{
    int ranks[EIN_MAX_OPS];
    const int64_t *dims[EIN_MAX_OPS];
    if (n < 1 || n > EIN_MAX_OPS) return kn_error(KN_ERR_UNSUPPORTED, "Einsum with %d operands", n);
    for (int i = 0; i < n; i++) {
        if (in[i]->dtype != out->dtype)
            return kn_error(KN_ERR_INVALID, "Einsum input %d has dtype %s, expected %s", i,
                            kn_dtype_name(in[i]->dtype), kn_dtype_name(out->dtype));
        ranks[i] = in[i]->rank;
        dims[i] = in[i]->dims;
    }
    ein_plan *p = malloc(sizeof *p);
    ein_walk *w = malloc(sizeof *w);
    int st = (!p || !w) ? kn_error(KN_ERR_NOMEM, "out of memory") : ein_parse(eq, n, ranks, dims, p);
    if (st) goto done;
    int64_t odims[KN_MAX_RANK], ost[EIN_MAX_OPS][KN_MAX_RANK];
    for (int i = 0; i < p->out_rank; i++) odims[i] = p->size[p->out_label[i]];
    if (out->rank != p->out_rank || kn_shape_numel(out->rank, odims) != kn_tensor_numel(out)) {
        st = kn_error(KN_ERR_INTERNAL, "Einsum output was allocated with the wrong shape");
        goto done;
    }
    if (n == 2 && out->dtype == KN_F32) {
        bool fast;
        st = ein_matmul_f32(p, in, out, &fast);
        if (st || fast) goto done;
    }
    w->n = n;
    w->in = in;
    w->is_int = kn_dtype_info(out->dtype)->is_integer;
    ein_strides(p, in, w, ost);
    int64_t total = kn_tensor_numel(out), csize = kn_shape_numel(w->nc, w->cdim);
    if (csize < 0) {
        st = kn_error(KN_ERR_INVALID, "Einsum contraction is too large");
        goto done;
    }
    if (csize == 0) total = 0; /* an empty contraction sums to zero: out is already zero-filled */
    int64_t idx[KN_MAX_RANK] = {0};
    for (int64_t e = 0; e < total; e++) {
        int64_t base[EIN_MAX_OPS];
        for (int o = 0; o < n; o++) {
            base[o] = 0;
            for (int i = 0; i < p->out_rank; i++) base[o] += idx[i] * ost[o][i];
        }
        double vf;
        uint64_t vi;
        ein_inner(w, base, &vf, &vi);
        if (w->is_int) kn_store_i64(out->dtype, out->data, (size_t)e, (int64_t)vi);
        else kn_store_f64(out->dtype, out->data, (size_t)e, vf);
        odometer(p->out_rank, odims, idx);
    }
done:
    free(p);
    free(w);
    return st;
}
