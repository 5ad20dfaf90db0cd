/*
 * runtime/src/fastops.c — f32 fast paths of runtime kernels in compiled
 * artifacts: Sigmoid, Softmax, Add/Sub/Mul/Div, Transpose, Concat, Split
 * and Resize, where a node's shape varies at run time and it is not a
 * generated loop (a YOLOv8n-style detector's head at a run-time image
 * width: the class scores' Sigmoid, the box distributions' Softmax, two
 * dozen Concats; a text detector's upsamplings). Each runs on the
 * session's threads; Sigmoid and Softmax with 8-lane exp (kernels/x86/
 * f32_sigmoid_softmax_avx2.c) where the CPU has AVX2 and FMA. The
 * reference evaluator never comes here: its kernels (kernels/ref), which
 * compute in double, stay the oracle. Every function returns
 * KN_ERR_UNSUPPORTED, with nothing written and no message, where it does
 * not apply, and the caller runs the reference kernel.
 */
#include <stdint.h>
#include <string.h>

#include "fastops.h"
#include "rt_internal.h"

/* Below this many elements one thread runs it (a parallel region costs
 * microseconds). */
#define FAST_PAR_MIN 16384

static bool has_avx2(void)
{
    uint64_t f = kn_cpu_features();
    return (f & KN_CPU_AVX2) && (f & KN_CPU_FMA);
}

static int threads_for(const kn_op_session *os, int64_t n)
{
    return n >= FAST_PAR_MIN && os->threads > 1 ? os->threads : 1;
}

/* ---- Sigmoid --------------------------------------------------------------- */

typedef struct sig_job {
    const float *x;
    float *y;
    int64_t n;
} sig_job;

enum { SIG_PIECE = 4096 }; /* elements per parallel unit */

static int sig_chunk(void *args, int64_t lo, int64_t hi)
{
    const sig_job *j = args;
    int64_t a = lo * SIG_PIECE, b = hi * SIG_PIECE < j->n ? hi * SIG_PIECE : j->n;
    kn_sigmoid256(j->x + a, j->y + a, b - a);
    return KN_OK;
}

int kn_fast_sigmoid(kn_op_session *os, const kn_tensor *x, kn_tensor *y)
{
    if (!os || x->dtype != KN_F32 || y->dtype != KN_F32 || !has_avx2()) return KN_ERR_UNSUPPORTED;
    int64_t n = kn_tensor_numel(x);
    if (n != kn_tensor_numel(y)) return KN_ERR_UNSUPPORTED;
    sig_job j = {x->data, y->data, n};
    os->impl = "kiln sigmoid:avx2";
    return kn_rt_parallel_for_threads(threads_for(os, n), sig_chunk, &j, (n + SIG_PIECE - 1) / SIG_PIECE);
}

/* ---- Add, Sub, Mul, Div ---------------------------------------------------- */

typedef struct bin_job {
    kn_binary_op op;
    const float *a, *b;
    float *y;
    int64_t n;
    bool b_scalar; /* b is one value for every element */
} bin_job;

enum { BIN_PIECE = 8192 }; /* elements per parallel unit */

static int bin_chunk(void *args, int64_t lo, int64_t hi)
{
    const bin_job *j = args;
    int64_t i0 = lo * BIN_PIECE, i1 = hi * BIN_PIECE < j->n ? hi * BIN_PIECE : j->n;
    const float *a = j->a, *b = j->b;
    float *y = j->y;
    /* plain loops the compiler vectorizes; in f32, as a generated loop computes them */
    if (j->b_scalar) {
        float v = b[0];
        switch (j->op) {
        case KN_BIN_ADD: for (int64_t i = i0; i < i1; i++) y[i] = a[i] + v; break;
        case KN_BIN_SUB: for (int64_t i = i0; i < i1; i++) y[i] = a[i] - v; break;
        case KN_BIN_MUL: for (int64_t i = i0; i < i1; i++) y[i] = a[i] * v; break;
        default: for (int64_t i = i0; i < i1; i++) y[i] = a[i] / v; break;
        }
        return KN_OK;
    }
    switch (j->op) {
    case KN_BIN_ADD: for (int64_t i = i0; i < i1; i++) y[i] = a[i] + b[i]; break;
    case KN_BIN_SUB: for (int64_t i = i0; i < i1; i++) y[i] = a[i] - b[i]; break;
    case KN_BIN_MUL: for (int64_t i = i0; i < i1; i++) y[i] = a[i] * b[i]; break;
    default: for (int64_t i = i0; i < i1; i++) y[i] = a[i] / b[i]; break;
    }
    return KN_OK;
}

int kn_fast_binary(kn_op_session *os, kn_binary_op op, const kn_tensor *a, const kn_tensor *b, kn_tensor *y)
{
    if (!os || (op != KN_BIN_ADD && op != KN_BIN_SUB && op != KN_BIN_MUL && op != KN_BIN_DIV) ||
        a->dtype != KN_F32 || b->dtype != KN_F32 || y->dtype != KN_F32)
        return KN_ERR_UNSUPPORTED;
    int64_t n = kn_tensor_numel(y);
    bool scalar = kn_tensor_numel(b) == 1 && b->rank <= y->rank;
    if (kn_tensor_numel(a) != n || a->rank != y->rank || (!scalar && (b->rank != y->rank || kn_tensor_numel(b) != n)))
        return KN_ERR_UNSUPPORTED;
    for (int k = 0; k < y->rank; k++) /* the same shape (no broadcast but a single b) */
        if (a->dims[k] != y->dims[k] || (!scalar && b->dims[k] != y->dims[k])) return KN_ERR_UNSUPPORTED;
    bin_job j = {op, a->data, b->data, y->data, n, scalar};
    os->impl = "kiln elementwise";
    return kn_rt_parallel_for_threads(threads_for(os, n), bin_chunk, &j, (n + BIN_PIECE - 1) / BIN_PIECE);
}

/* ---- Transpose ----------------------------------------------------------------- */

typedef struct tr_job {
    const char *x;
    char *y;
    int rank;               /* of the permuted outer dims (the innermost kept whole) */
    int64_t ydims[KN_MAX_RANK], xstride[KN_MAX_RANK]; /* per y dim: its size, and x's stride (in runs) */
    size_t run;             /* bytes of the innermost dim, copied whole */
    int64_t runs;
} tr_job;

enum { TR_PIECE = 256 }; /* runs per parallel unit */

static int tr_chunk(void *args, int64_t lo, int64_t hi)
{
    const tr_job *j = args;
    int64_t r1 = hi * TR_PIECE < j->runs ? hi * TR_PIECE : j->runs;
    for (int64_t r = lo * TR_PIECE; r < r1; r++) {
        int64_t rem = r, at = 0;
        for (int k = j->rank - 1; k >= 0; k--) {
            at += rem % j->ydims[k] * j->xstride[k];
            rem /= j->ydims[k];
        }
        memcpy(j->y + (size_t)r * j->run, j->x + (size_t)at * j->run, j->run);
    }
    return KN_OK;
}

int kn_fast_transpose(kn_op_session *os, const kn_tensor *x, const int *perm, kn_tensor *y)
{
    int r = x->rank;
    if (!os || r < 2 || r > KN_MAX_RANK || y->rank != r || y->dtype != x->dtype || perm[r - 1] != r - 1)
        return KN_ERR_UNSUPPORTED; /* only permutations that keep the innermost dim: runs of it move whole */
    size_t es = kn_dtype_size(x->dtype);
    if (es == 0 || x->dtype == KN_STRING) return KN_ERR_UNSUPPORTED;
    int64_t n = kn_tensor_numel(x), inner = x->dims[r - 1];
    if (inner < 16) return KN_ERR_UNSUPPORTED;
    tr_job j = {.x = x->data, .y = y->data, .rank = r - 1, .run = (size_t)inner * es, .runs = n / inner};
    int64_t xs[KN_MAX_RANK], s = 1;
    for (int k = r - 2; k >= 0; k--) xs[k] = s, s *= x->dims[k]; /* x's strides in runs */
    for (int k = 0; k < r - 1; k++) {
        if (perm[k] < 0 || perm[k] >= r - 1 || y->dims[k] != x->dims[perm[k]]) return KN_ERR_UNSUPPORTED;
        j.ydims[k] = y->dims[k], j.xstride[k] = xs[perm[k]];
    }
    os->impl = "kiln transpose runs";
    return kn_rt_parallel_for_threads(threads_for(os, n), tr_chunk, &j, (j.runs + TR_PIECE - 1) / TR_PIECE);
}

/* ---- Softmax ---------------------------------------------------------------- */

typedef struct sm_job {
    const float *x;
    float *y;
    int64_t outer, mid, inner, cols; /* cols: column blocks per slice (inner > 1) */
} sm_job;

enum { SM_COLS = 64 }; /* columns per parallel unit */

static int sm_chunk(void *args, int64_t lo, int64_t hi)
{
    const sm_job *j = args;
    for (int64_t u = lo; u < hi; u++) {
        if (j->inner == 1) {
            kn_softmax256_row(j->x + u * j->mid, j->y + u * j->mid, j->mid);
            continue;
        }
        int64_t o = u / j->cols, c0 = u % j->cols * SM_COLS, c1 = c0 + SM_COLS < j->inner ? c0 + SM_COLS : j->inner;
        int64_t at = o * j->mid * j->inner;
        kn_softmax256_columns(j->x + at, j->y + at, j->mid, j->inner, c0, c1);
    }
    return KN_OK;
}

int kn_fast_softmax(kn_op_session *os, const kn_tensor *x, int64_t outer, int64_t mid, int64_t inner, kn_tensor *y)
{
    if (!os || x->dtype != KN_F32 || y->dtype != KN_F32 || !has_avx2() || outer < 1 || mid < 1 || inner < 1)
        return KN_ERR_UNSUPPORTED;
    int64_t n = kn_tensor_numel(x);
    if (n != outer * mid * inner || n != kn_tensor_numel(y)) return KN_ERR_UNSUPPORTED;
    sm_job j = {x->data, y->data, outer, mid, inner, (inner + SM_COLS - 1) / SM_COLS};
    int64_t units = inner == 1 ? outer : outer * j.cols;
    os->impl = "kiln softmax:avx2";
    return kn_rt_parallel_for_threads(threads_for(os, n), sm_chunk, &j, units);
}

/* ---- Concat and Split ---------------------------------------------------------- */

/* len bytes from src to dst. A channels-last Concat or Split moves a run
 * of a few channels per pixel (YOLOv8n's C2f blocks: 16 floats, 64 bytes),
 * where a memcpy call per run costs about as much as the copy: short runs
 * in pieces of fixed size, which the compiler moves in registers. */
static inline void copy_run(char *dst, const char *src, size_t len)
{
    if (len > 256) {
        memcpy(dst, src, len);
        return;
    }
    for (; len >= 32; len -= 32, dst += 32, src += 32) memcpy(dst, src, 32);
    for (; len >= 4; len -= 4, dst += 4, src += 4) memcpy(dst, src, 4);
    for (; len; len--) *dst++ = *src++;
}

enum { CAT_PIECE = 64 << 10 }; /* output bytes per parallel unit */

/* True if [a, a + na) and [b, b + nb) share a byte. */
static bool overlap(const void *a, size_t na, const void *b, size_t nb)
{
    return na && nb && (const char *)a < (const char *)b + nb && (const char *)b < (const char *)a + na;
}

typedef struct cat_job {
    int n;
    const kn_tensor *const *xs;
    const size_t *chunk; /* bytes of input i per outer index */
    size_t row, bytes;   /* bytes of the output per outer index, and in all */
    int64_t outer, per;  /* outer indices, and per parallel unit (rows mode) */
    char *dst;
} cat_job;

/* Output bytes [lo, hi) pieces, for rows of at least CAT_PIECE bytes (a
 * plain NCHW Concat: one row per image): each piece walks the inputs' runs
 * it covers (input i's run of outer index o starts at o row + the chunks
 * of the inputs before it). */
static int cat_chunk(void *args, int64_t lo, int64_t hi)
{
    const cat_job *j = args;
    size_t a = (size_t)lo * CAT_PIECE, b = (size_t)hi * CAT_PIECE < j->bytes ? (size_t)hi * CAT_PIECE : j->bytes;
    while (a < b) {
        size_t o = a / j->row, r = a % j->row, start = 0;
        int i = 0;
        while (r >= start + j->chunk[i]) start += j->chunk[i++];
        size_t len = start + j->chunk[i] - r < b - a ? start + j->chunk[i] - r : b - a;
        memcpy(j->dst + a, (const char *)j->xs[i]->data + o * j->chunk[i] + (r - start), len);
        a += len;
    }
    return KN_OK;
}

/* Outer indices [lo per, hi per), for short rows (a channels-last Concat:
 * one row per pixel): each row's runs one after the other. */
static int cat_rows_chunk(void *args, int64_t lo, int64_t hi)
{
    const cat_job *j = args;
    int64_t o1 = hi * j->per < j->outer ? hi * j->per : j->outer;
    for (int64_t o = lo * j->per; o < o1; o++) {
        char *d = j->dst + (size_t)o * j->row;
        for (int i = 0; i < j->n; i++) {
            copy_run(d, (const char *)j->xs[i]->data + (size_t)o * j->chunk[i], j->chunk[i]);
            d += j->chunk[i];
        }
    }
    return KN_OK;
}

int kn_fast_concat(kn_op_session *os, int n, const kn_tensor *const *xs, int axis, kn_tensor *out)
{
    if (!os || n < 1 || n > 64 || axis < 0 || axis >= out->rank) return KN_ERR_UNSUPPORTED;
    size_t es = kn_dtype_size(out->dtype), chunk[64], row = 0;
    if (es == 0 || out->dtype == KN_STRING) return KN_ERR_UNSUPPORTED;
    int64_t outer = 1;
    for (int k = 0; k < axis; k++) outer *= out->dims[k];
    for (int i = 0; i < n; i++) {
        if (xs[i]->dtype != out->dtype || xs[i]->rank != out->rank) return KN_ERR_UNSUPPORTED;
        size_t c = es;
        for (int k = axis; k < out->rank; k++) c *= (size_t)xs[i]->dims[k];
        chunk[i] = c, row += c;
    }
    size_t bytes = row * (size_t)outer;
    int64_t total = (int64_t)(bytes / es);
    if (row == 0 || total != kn_tensor_numel(out)) return KN_ERR_UNSUPPORTED;
    for (int i = 0; i < n; i++) /* the runs must not overlap the output (the plan never does that) */
        if (overlap(xs[i]->data, chunk[i] * (size_t)outer, out->data, bytes)) return KN_ERR_UNSUPPORTED;
    int threads = threads_for(os, total);
    cat_job j = {n, xs, chunk, row, bytes, outer, 1, out->data};
    os->impl = "kiln concat";
    if (row >= CAT_PIECE)
        return kn_rt_parallel_for_threads(threads, cat_chunk, &j, (int64_t)((bytes + CAT_PIECE - 1) / CAT_PIECE));
    j.per = (int64_t)(CAT_PIECE / row);
    return kn_rt_parallel_for_threads(threads, cat_rows_chunk, &j, (outer + j.per - 1) / j.per);
}

typedef struct split_job {
    const char *src;
    char *dst;
    size_t row, run, at; /* bytes of x per outer index, of the piece, and the piece's offset in the row */
    int64_t outer, per;  /* outer indices, and per parallel unit */
} split_job;

static int split_chunk(void *args, int64_t lo, int64_t hi)
{
    const split_job *j = args;
    int64_t o1 = hi * j->per < j->outer ? hi * j->per : j->outer;
    for (int64_t o = lo * j->per; o < o1; o++)
        copy_run(j->dst + (size_t)o * j->run, j->src + (size_t)o * j->row + j->at, j->run);
    return KN_OK;
}

int kn_fast_split(kn_op_session *os, const kn_tensor *x, int axis, int64_t start, kn_tensor *out)
{
    if (!os || axis < 0 || axis >= x->rank || out->rank != x->rank || out->dtype != x->dtype) return KN_ERR_UNSUPPORTED;
    size_t es = kn_dtype_size(x->dtype);
    if (es == 0 || x->dtype == KN_STRING) return KN_ERR_UNSUPPORTED;
    int64_t outer = 1;
    size_t inner = es;
    for (int k = 0; k < x->rank; k++) {
        if (k != axis && out->dims[k] != x->dims[k]) return KN_ERR_UNSUPPORTED;
        if (k < axis) outer *= x->dims[k];
        if (k > axis) inner *= (size_t)x->dims[k];
    }
    if (start < 0 || out->dims[axis] < 0 || start + out->dims[axis] > x->dims[axis]) return KN_ERR_UNSUPPORTED;
    split_job j = {x->data, out->data, inner * (size_t)x->dims[axis], inner * (size_t)out->dims[axis],
                   inner * (size_t)start, outer, 1};
    size_t bytes = j.run * (size_t)outer;
    if (bytes == 0 || overlap(x->data, j.row * (size_t)outer, out->data, bytes)) return KN_ERR_UNSUPPORTED;
    j.per = j.run >= CAT_PIECE ? 1 : (int64_t)(CAT_PIECE / j.run);
    os->impl = "kiln split";
    return kn_rt_parallel_for_threads(threads_for(os, (int64_t)(bytes / es)), split_chunk, &j,
                                      (outer + j.per - 1) / j.per);
}

/* ---- Resize ------------------------------------------------------------------ */

typedef struct rs_job {
    const kn_tensor *x;
    const kn_resize_params *p;
    kn_tensor *out;
    int64_t planes, per; /* image planes in all, and per parallel unit */
} rs_job;

/* Planes [lo per, hi per) as a [1, planes, H, W] view of each side: the
 * reference kernel with the leading axes left as they are. */
static int rs_chunk(void *args, int64_t lo, int64_t hi)
{
    const rs_job *j = args;
    int64_t p0 = lo * j->per, p1 = hi * j->per < j->planes ? hi * j->per : j->planes;
    const kn_tensor *x = j->x;
    kn_tensor *out = j->out;
    int64_t in_plane = x->dims[2] * x->dims[3], out_plane = out->dims[2] * out->dims[3];
    kn_tensor xv = *x, ov = *out;
    xv.own = ov.own = KN_BORROWED, xv.map_base = ov.map_base = NULL;
    xv.dims[0] = ov.dims[0] = 1;
    xv.dims[1] = ov.dims[1] = p1 - p0;
    xv.data = (float *)x->data + p0 * in_plane;
    ov.data = (float *)out->data + p0 * out_plane;
    xv.nbytes = (size_t)((p1 - p0) * in_plane) * sizeof(float);
    ov.nbytes = (size_t)((p1 - p0) * out_plane) * sizeof(float);
    return kn_k_resize(&xv, j->p, &ov);
}

/* Output rows [lo per, hi per) of a channels-last image (kn_resize_params.rows). */
static int rs_rows_chunk(void *args, int64_t lo, int64_t hi)
{
    const rs_job *j = args;
    kn_resize_params q = *j->p;
    q.rows[0] = lo * j->per;
    q.rows[1] = hi * j->per < j->out->dims[1] ? hi * j->per : j->out->dims[1];
    return kn_k_resize(j->x, &q, j->out);
}

/* A channels-last image ([N, H, W, C], N and C kept: a Resize the compiler
 * placed NHWC) in groups of output rows. */
static int resize_rows(kn_op_session *os, const kn_tensor *x, const kn_resize_params *p, kn_tensor *out)
{
    int64_t rows = out->dims[1];
    int threads = threads_for(os, kn_tensor_numel(out));
    if (threads == 1 || rows < threads) return KN_ERR_UNSUPPORTED;
    int64_t units = rows < 4 * threads ? rows : 4 * threads;
    rs_job j = {x, p, out, rows, (rows + units - 1) / units};
    os->impl = "kiln resize rows";
    return kn_rt_parallel_for_threads(threads, rs_rows_chunk, &j, (rows + j.per - 1) / j.per);
}

int kn_fast_resize(kn_op_session *os, const kn_tensor *x, const kn_resize_params *p, kn_tensor *out)
{
    if (!os || x->dtype != KN_F32 || out->dtype != KN_F32 || x->rank != 4 || out->rank != 4 ||
        p->coord == KN_COORD_TF_CROP_AND_RESIZE || p->scales[0] != 1.0 || x->dims[0] != out->dims[0])
        return KN_ERR_UNSUPPORTED;
    if (p->scales[3] == 1.0 && x->dims[3] == out->dims[3] && p->scales[1] != 1.0) return resize_rows(os, x, p, out);
    if (p->scales[1] != 1.0 || x->dims[1] != out->dims[1]) return KN_ERR_UNSUPPORTED;
    int64_t planes = x->dims[0] * x->dims[1], n = kn_tensor_numel(out);
    int threads = threads_for(os, n);
    if (threads == 1 || planes < threads) return KN_ERR_UNSUPPORTED;
    int64_t units = planes < 4 * threads ? planes : 4 * threads;
    rs_job j = {x, p, out, planes, (planes + units - 1) / units};
    os->impl = "kiln resize planes";
    return kn_rt_parallel_for_threads(threads, rs_chunk, &j, (planes + j.per - 1) / j.per);
}
