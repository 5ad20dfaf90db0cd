/*
 * Reference kernels for matrix products (MatMul, Gemm, a packed float32 GEMM
 * core). See k_linalg.h; the softmax family, determinants and einsum are in
 * linalg_einsum.c.
 *
 * Float32 products go through kn_k_sgemm, a small GotoBLAS-style blocked GEMM
 * (pack a KCxNC panel of B and an MCxKC panel of A, then a register tile:
 * 6x16 with AVX2/FMA when the CPU has them, else a portable 4x8),
 * because whole transformer encoders run through this path. Every other dtype
 * goes through a generic loop that widens to double (floats) or wraps in
 * uint64 (integers, so overflow is two's complement and never UB).
 */
#include "k_linalg.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- float32 GEMM core ---------------------------------------------------- */

/* Blocking: an MCxKC panel of A and a KCxNC panel of B are packed so that
 * the micro-kernel streams both contiguously; MC and NC are multiples of
 * every micro-kernel's MR and NR. */
enum { KC = 256, MC = 96, NC = 512 };

typedef float v4f __attribute__((vector_size(16)));

/* C[0:mr, 0:nr] += alpha * Apanel[kc][MR] x Bpanel[kc][NR]. */
typedef void (*micro_fn)(int64_t kc, const float *ap, const float *bp, float *C, int64_t ldc, int64_t mr,
                         int64_t nr, float alpha);

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Packs op(B)[k0:k0+kc, j0:j0+nc] as panels of [kc][NR], zero-padded. */
static void pack_b(const float *B, int64_t ldb, bool tb, int64_t k0, int64_t kc, int64_t j0,
                   int64_t nc, int64_t NR, float *dst)
{
    for (int64_t jp = 0; jp < nc; jp += NR) {
        int64_t nr = min64(NR, nc - jp);
        for (int64_t k = 0; k < kc; k++, dst += NR) {
            if (tb) {
                for (int64_t j = 0; j < nr; j++) dst[j] = B[(j0 + jp + j) * ldb + k0 + k];
            } else {
                memcpy(dst, B + (k0 + k) * ldb + j0 + jp, sizeof(float) * (size_t)nr);
            }
            for (int64_t j = nr; j < NR; j++) dst[j] = 0.0f;
        }
    }
}

/* Packs op(A)[i0:i0+mc, k0:k0+kc] as panels of [kc][MR], zero-padded. */
static void pack_a(const float *A, int64_t lda, bool ta, int64_t i0, int64_t mc, int64_t k0,
                   int64_t kc, int64_t MR, float *dst)
{
    for (int64_t ip = 0; ip < mc; ip += MR) {
        int64_t mr = min64(MR, mc - ip);
        for (int64_t k = 0; k < kc; k++, dst += MR) {
            for (int64_t i = 0; i < mr; i++)
                dst[i] = ta ? A[(k0 + k) * lda + i0 + ip + i] : A[(i0 + ip + i) * lda + k0 + k];
            for (int64_t i = mr; i < MR; i++) dst[i] = 0.0f;
        }
    }
}

/* Portable 4x8 tile in 8 SSE-sized registers (any target GCC/clang support). */
static void micro_4x8(int64_t kc, const float *ap, const float *bp, float *C, int64_t ldc,
                      int64_t mr, int64_t nr, float alpha)
{
    v4f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
    const v4f *b = (const v4f *)bp;
    for (int64_t k = 0; k < kc; k++) {
        v4f b0 = b[2 * k], b1 = b[2 * k + 1];
        const float *a = ap + 4 * k;
        c00 += a[0] * b0;
        c01 += a[0] * b1;
        c10 += a[1] * b0;
        c11 += a[1] * b1;
        c20 += a[2] * b0;
        c21 += a[2] * b1;
        c30 += a[3] * b0;
        c31 += a[3] * b1;
    }
    float t[4][8];
    memcpy(&t[0][0], &c00, 16);
    memcpy(&t[0][4], &c01, 16);
    memcpy(&t[1][0], &c10, 16);
    memcpy(&t[1][4], &c11, 16);
    memcpy(&t[2][0], &c20, 16);
    memcpy(&t[2][4], &c21, 16);
    memcpy(&t[3][0], &c30, 16);
    memcpy(&t[3][4], &c31, 16);
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++) C[i * ldc + j] += alpha * t[i][j];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KN_SGEMM_AVX2 1

/* 6x16 tile in 12 AVX registers with FMA, chosen at run time when the CPU
 * has AVX2 and FMA (the build itself targets baseline x86-64). */
__attribute__((target("avx2,fma"))) static void micro_6x16_avx2(int64_t kc, const float *ap, const float *bp,
                                                               float *C, int64_t ldc, int64_t mr, int64_t nr,
                                                               float alpha)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < kc; k++, ap += 6, bp += 16) {
        __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8), a;
        a = _mm256_broadcast_ss(ap + 0);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(ap + 1);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(ap + 2);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(ap + 3);
        c30 = _mm256_fmadd_ps(a, b0, c30);
        c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(ap + 4);
        c40 = _mm256_fmadd_ps(a, b0, c40);
        c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(ap + 5);
        c50 = _mm256_fmadd_ps(a, b0, c50);
        c51 = _mm256_fmadd_ps(a, b1, c51);
    }
    float t[6][16];
    _mm256_storeu_ps(&t[0][0], c00);
    _mm256_storeu_ps(&t[0][8], c01);
    _mm256_storeu_ps(&t[1][0], c10);
    _mm256_storeu_ps(&t[1][8], c11);
    _mm256_storeu_ps(&t[2][0], c20);
    _mm256_storeu_ps(&t[2][8], c21);
    _mm256_storeu_ps(&t[3][0], c30);
    _mm256_storeu_ps(&t[3][8], c31);
    _mm256_storeu_ps(&t[4][0], c40);
    _mm256_storeu_ps(&t[4][8], c41);
    _mm256_storeu_ps(&t[5][0], c50);
    _mm256_storeu_ps(&t[5][8], c51);
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++) C[i * ldc + j] += alpha * t[i][j];
}
#endif

/* The micro-kernel for this CPU; KILN_SGEMM_GENERIC=1 forces the portable
 * one (so tests can cover both on one machine). */
static micro_fn pick_micro(int64_t *MR, int64_t *NR)
{
#ifdef KN_SGEMM_AVX2
    const char *env = getenv("KILN_SGEMM_GENERIC");
    __builtin_cpu_init();
    if (!(env && *env == '1') && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *MR = 6, *NR = 16;
        return micro_6x16_avx2;
    }
#endif
    *MR = 4, *NR = 8;
    return micro_4x8;
}

static float *alloc_floats(int64_t n)
{
    size_t bytes = (size_t)round_up(n * (int64_t)sizeof(float), 64);
    return aligned_alloc(64, bytes ? bytes : 64);
}

static int sgemm_1t(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    bool trans_a, const float *B, int64_t ldb, bool trans_b, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0 || K <= 0) return KN_OK;
    int64_t MR, NR;
    micro_fn micro = pick_micro(&MR, &NR);
    int64_t kcap = min64(KC, K), ncap = round_up(min64(NC, N), NR), mcap = round_up(min64(MC, M), MR);
    float *bpack = alloc_floats(kcap * ncap);
    float *apack = alloc_floats(mcap * kcap);
    if (!bpack || !apack) {
        free(bpack);
        free(apack);
        return kn_error(KN_ERR_NOMEM, "out of memory packing a %lldx%lldx%lld matrix product",
                        (long long)M, (long long)N, (long long)K);
    }
    for (int64_t jc = 0; jc < N; jc += NC) {
        int64_t nc = min64(NC, N - jc);
        for (int64_t pc = 0; pc < K; pc += KC) {
            int64_t kc = min64(KC, K - pc);
            pack_b(B, ldb, trans_b, pc, kc, jc, nc, NR, bpack);
            for (int64_t ic = 0; ic < M; ic += MC) {
                int64_t mc = min64(MC, M - ic);
                pack_a(A, lda, trans_a, ic, mc, pc, kc, MR, apack);
                for (int64_t jr = 0; jr < nc; jr += NR)
                    for (int64_t ir = 0; ir < mc; ir += MR)
                        micro(kc, apack + ir * kc, bpack + jr * kc, C + (ic + ir) * ldc + jc + jr, ldc,
                              min64(MR, mc - ir), min64(NR, nc - jr), alpha);
            }
        }
    }
    free(bpack);
    free(apack);
    return KN_OK;
}

/* ---- threads -------------------------------------------------------------------- */

/* Worker threads for large products: KILN_NUM_THREADS, else the CPUs this
 * process may use (at most 16). Work is split by output columns, and each element is always
 * computed by the same sequence of operations, so results are bitwise the
 * same whatever the thread count. */
static int sgemm_threads(void)
{
    const char *env = getenv("KILN_NUM_THREADS");
    long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
#ifdef CPU_COUNT
    cpu_set_t set; /* the CPUs this process may run on, which containers often limit */
    if (!(env && *env) && sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < n) n = CPU_COUNT(&set);
#endif
    return n < 1 ? 1 : n > 16 ? 16 : (int)n;
}

typedef struct sgemm_job {
    int64_t M, N, K, lda, ldb, ldc, j0, j1;
    float alpha;
    const float *A, *B;
    bool ta, tb;
    float *C;
    int st;
} sgemm_job;

static void *sgemm_worker(void *arg)
{
    sgemm_job *j = arg;
    const float *B = j->B + (j->tb ? j->j0 * j->ldb : j->j0);
    j->st = sgemm_1t(j->M, j->j1 - j->j0, j->K, j->alpha, j->A, j->lda, j->ta, B, j->ldb, j->tb, j->C + j->j0,
                     j->ldc);
    return NULL;
}

int kn_k_sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               bool trans_a, const float *B, int64_t ldb, bool trans_b, float *C, int64_t ldc)
{
    enum { MAX_T = 16, MIN_WORK = 1 << 23 }; /* ~1 ms of work per thread at least */
    int nt = sgemm_threads();
    double work = (double)M * (double)N * (double)K;
    if (work / MIN_WORK < nt) nt = (int)(work / MIN_WORK);
    if (N / 64 < nt) nt = (int)(N / 64);
    if (nt <= 1) return sgemm_1t(M, N, K, alpha, A, lda, trans_a, B, ldb, trans_b, C, ldc);
    sgemm_job jobs[MAX_T];
    pthread_t tid[MAX_T];
    bool started[MAX_T] = {0};
    int64_t chunk = round_up((N + nt - 1) / nt, 16);
    for (int t = 0; t < nt; t++) {
        int64_t j0 = min64(N, t * chunk), j1 = min64(N, j0 + chunk);
        jobs[t] = (sgemm_job){M, N, K, lda, ldb, ldc, j0, j1, alpha, A, B, trans_a, trans_b, C, KN_OK};
        /* Thread 0 runs on the caller; a thread that fails to start runs inline too. */
        if (t > 0 && j1 > j0) started[t] = pthread_create(&tid[t], NULL, sgemm_worker, &jobs[t]) == 0;
    }
    int st = KN_OK;
    for (int t = 0; t < nt; t++) {
        if (!started[t] && jobs[t].j1 > jobs[t].j0) sgemm_worker(&jobs[t]);
    }
    for (int t = 0; t < nt; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        if (jobs[t].st && !st) st = jobs[t].st;
    }
    if (st) return kn_error(st, "out of memory in a %lldx%lldx%lld matrix product", (long long)M, (long long)N,
                            (long long)K);
    return KN_OK;
}

/* ---- generic (any dtype) product -------------------------------------------- */

/* One strided operand: element (r, c) is at base + r*sr + c*sc. */
typedef struct mat_view {
    const void *data;
    int64_t base, sr, sc;
} mat_view;

/* C[c0 + i*N + j] = alpha * sum_k A(i,k) B(k,j) + C[...] (C holds beta*bias or 0). */
static void gemm_generic(kn_dtype dt, int64_t M, int64_t N, int64_t K, double alpha, mat_view a,
                         mat_view b, void *C, int64_t c0)
{
    if (dt == KN_F64) { /* i-k-j over typed pointers: the generic loads cost more than the math */
        const double *A = a.data, *B = b.data;
        double *Cd = (double *)C + c0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++) {
                double aik = alpha * A[a.base + i * a.sr + k * a.sc];
                const double *brow = B + b.base + k * b.sr;
                for (int64_t j = 0; j < N; j++) Cd[i * N + j] += aik * brow[j * b.sc];
            }
        return;
    }
    bool is_int = kn_dtype_info(dt)->is_integer;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            size_t ci = (size_t)(c0 + i * N + j);
            if (is_int) {
                uint64_t acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += (uint64_t)kn_load_i64(dt, a.data, (size_t)(a.base + i * a.sr + k * a.sc)) *
                           (uint64_t)kn_load_i64(dt, b.data, (size_t)(b.base + k * b.sr + j * b.sc));
                if (alpha == 1.0)
                    kn_store_i64(dt, C, ci, (int64_t)(acc + (uint64_t)kn_load_i64(dt, C, ci)));
                else
                    kn_store_f64(dt, C, ci, alpha * (double)(int64_t)acc + kn_load_f64(dt, C, ci));
            } else {
                double acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += kn_load_f64(dt, a.data, (size_t)(a.base + i * a.sr + k * a.sc)) *
                           kn_load_f64(dt, b.data, (size_t)(b.base + k * b.sr + j * b.sc));
                kn_store_f64(dt, C, ci, alpha * acc + kn_load_f64(dt, C, ci));
            }
        }
    }
}

/* ---- half-precision products via float32 ----------------------------------------- */

/* A float32 copy of a f16/bf16 tensor (owned by the caller). */
static int widen_f32(const kn_tensor *t, kn_tensor *out)
{
    int st = kn_tensor_alloc(out, KN_F32, t->rank, t->dims);
    if (st) return st;
    int64_t n = kn_tensor_numel(t);
    float *d = out->data;
    const uint16_t *h = t->data;
    for (int64_t i = 0; i < n; i++) d[i] = t->dtype == KN_F16 ? kn_f16_to_f32(h[i]) : kn_bf16_to_f32(h[i]);
    return KN_OK;
}

static void narrow_f32(const kn_tensor *f, kn_tensor *out)
{
    int64_t n = kn_tensor_numel(out);
    const float *d = f->data;
    uint16_t *h = out->data;
    for (int64_t i = 0; i < n; i++) h[i] = out->dtype == KN_F16 ? kn_f32_to_f16(d[i]) : kn_f32_to_bf16(d[i]);
}

static bool is_half(kn_dtype dt) { return dt == KN_F16 || dt == KN_BF16; }

/* Runs a f16/bf16 MatMul (c == NULL, gemm false) or Gemm in float32 and
 * rounds once at the end, as onnxruntime's CPU kernels accumulate. */
static int half_product(const kn_tensor *a, const kn_tensor *b, const kn_tensor *c, bool gemm, bool ta, bool tb,
                        double alpha, double beta, kn_tensor *out)
{
    kn_tensor fa = {0}, fb = {0}, fc = {0}, fo = {0};
    int st = widen_f32(a, &fa);
    if (!st) st = widen_f32(b, &fb);
    if (!st && c) st = is_half(c->dtype) ? widen_f32(c, &fc) : kn_error(KN_ERR_INVALID, "Gemm bias dtype differs");
    if (!st) st = kn_tensor_alloc(&fo, KN_F32, out->rank, out->dims);
    if (!st) st = gemm ? kn_k_gemm(&fa, &fb, c ? &fc : NULL, ta, tb, alpha, beta, &fo) : kn_k_matmul(&fa, &fb, &fo);
    if (!st) narrow_f32(&fo, out);
    kn_tensor_free(&fa);
    kn_tensor_free(&fb);
    kn_tensor_free(&fc);
    kn_tensor_free(&fo);
    return st;
}

/* ---- MatMul ------------------------------------------------------------------ */

/* Broadcasts two dims where -1 means unknown; false if incompatible. */
static bool bcast_dim(int64_t a, int64_t b, int64_t *out)
{
    if (a == 1) *out = b;
    else if (b == 1) *out = a;
    else if (a < 0) *out = b;
    else if (b < 0) *out = a;
    else if (a == b) *out = a;
    else return false;
    return true;
}

static char *shape_str(int r, const int64_t *d, char *buf, size_t len) { return kn_shape_str(r, d, buf, len); }

int kn_k_matmul_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *out_rank,
                      int64_t *out_dims)
{
    char sa[128], sb[128];
    if (ra < 1 || rb < 1)
        return kn_error(KN_ERR_INVALID, "MatMul operands must have rank >= 1 (got ranks %d and %d)", ra, rb);
    int64_t ka = a[ra - 1], kb = rb >= 2 ? b[rb - 2] : b[0];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return kn_error(KN_ERR_INVALID, "inner dimensions differ: A is %s, B is %s (%lld vs %lld)",
                        shape_str(ra, a, sa, sizeof sa), shape_str(rb, b, sb, sizeof sb),
                        (long long)ka, (long long)kb);
    int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0;
    int r = ba > bb ? ba : bb;
    int extra = (ra >= 2) + (rb >= 2);
    if (r + extra > KN_MAX_RANK)
        return kn_error(KN_ERR_UNSUPPORTED, "MatMul result rank %d exceeds %d", r + extra, KN_MAX_RANK);
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ba ? 1 : a[i - (r - ba)];
        int64_t db = i < r - bb ? 1 : b[i - (r - bb)];
        if (!bcast_dim(da, db, &out_dims[i]))
            return kn_error(KN_ERR_INVALID, "batch dimensions of A %s and B %s cannot be broadcast",
                            shape_str(ra, a, sa, sizeof sa), shape_str(rb, b, sb, sizeof sb));
    }
    int o = r;
    if (ra >= 2) out_dims[o++] = a[ra - 2];
    if (rb >= 2) out_dims[o++] = b[rb - 1];
    *out_rank = o;
    return KN_OK;
}

int kn_k_matmul(const kn_tensor *a, const kn_tensor *b, kn_tensor *out)
{
    int r;
    int64_t od[KN_MAX_RANK];
    int st = kn_k_matmul_shape(a->rank, a->dims, b->rank, b->dims, &r, od);
    if (st) return st;
    if (a->dtype != b->dtype || out->dtype != a->dtype)
        return kn_error(KN_ERR_INVALID, "MatMul operands have dtypes %s and %s", kn_dtype_name(a->dtype),
                        kn_dtype_name(b->dtype));
    if (r != out->rank || kn_shape_numel(r, od) != kn_tensor_numel(out))
        return kn_error(KN_ERR_INTERNAL, "MatMul output was allocated with the wrong shape");
    if (is_half(a->dtype)) return half_product(a, b, NULL, false, false, false, 1.0, 0.0, out);
    int64_t M = a->rank >= 2 ? a->dims[a->rank - 2] : 1, K = a->dims[a->rank - 1];
    int64_t N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if (a->dtype == KN_F32 && b->rank <= 2 && a->rank > 2) {
        /* [..., M, K] @ [K, N]: one product with all of A's rows, so B is packed once */
        int64_t rows = kn_tensor_numel(a) / (K ? K : 1);
        if (K == 0) rows = kn_shape_numel(a->rank - 1, a->dims);
        return kn_k_sgemm(rows, N, K, 1.0f, a->data, K, false, b->data, N, false, out->data, N);
    }
    int ba = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
    int nb = r - (a->rank >= 2) - (b->rank >= 2);
    int64_t sa[KN_MAX_RANK], sb[KN_MAX_RANK];
    kn_broadcast_strides(ba, a->dims, nb, od, sa);
    kn_broadcast_strides(bb, b->dims, nb, od, sb);
    int64_t nbatch = kn_shape_numel(nb, od);
    kn_index it;
    kn_index_init(&it, nb, od);
    for (int64_t t = 0; t < nbatch; t++, kn_index_next(&it)) {
        int64_t ao = kn_index_offset(&it, sa) * M * K, bo = kn_index_offset(&it, sb) * K * N;
        int64_t oo = t * M * N;
        if (a->dtype == KN_F32) {
            st = kn_k_sgemm(M, N, K, 1.0f, (const float *)a->data + ao, K, false,
                            (const float *)b->data + bo, N, false, (float *)out->data + oo, N);
            if (st) return st;
        } else {
            mat_view av = {a->data, ao, K, 1}, bv = {b->data, bo, N, 1};
            gemm_generic(a->dtype, M, N, K, 1.0, av, bv, out->data, oo);
        }
    }
    return KN_OK;
}

/* ---- Gemm -------------------------------------------------------------------- */

/* Fills out[M,N] with beta * c, c unidirectionally broadcast (rank <= 2). */
static int gemm_fill_bias(const kn_tensor *c, double beta, int64_t M, int64_t N, kn_tensor *out)
{
    int64_t od[2] = {M, N}, cs[2];
    char buf[128];
    if (c->rank > 2) return kn_error(KN_ERR_INVALID, "Gemm bias C has rank %d, expected <= 2", c->rank);
    for (int i = 0; i < c->rank; i++) {
        int64_t d = c->dims[i], want = od[2 - c->rank + i];
        if (d != 1 && d != want)
            return kn_error(KN_ERR_INVALID, "Gemm bias C of shape %s cannot be broadcast to %lldx%lld",
                            kn_shape_str(c->rank, c->dims, buf, sizeof buf), (long long)M, (long long)N);
    }
    if (c->dtype != out->dtype)
        return kn_error(KN_ERR_INVALID, "Gemm bias C has dtype %s, expected %s", kn_dtype_name(c->dtype),
                        kn_dtype_name(out->dtype));
    kn_broadcast_strides(c->rank, c->dims, 2, od, cs);
    bool exact_int = kn_dtype_info(out->dtype)->is_integer && beta == 1.0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            size_t src = (size_t)(i * cs[0] + j * cs[1]), dst = (size_t)(i * N + j);
            if (out->dtype == KN_F32)
                ((float *)out->data)[dst] = (float)(beta * ((const float *)c->data)[src]);
            else if (exact_int)
                kn_store_i64(out->dtype, out->data, dst, kn_load_i64(c->dtype, c->data, src));
            else
                kn_store_f64(out->dtype, out->data, dst, beta * kn_load_f64(c->dtype, c->data, src));
        }
    return KN_OK;
}

int kn_k_gemm(const kn_tensor *a, const kn_tensor *b, const kn_tensor *c, bool trans_a,
              bool trans_b, double alpha, double beta, kn_tensor *out)
{
    if (a->rank != 2 || b->rank != 2)
        return kn_error(KN_ERR_INVALID, "Gemm operands must be 2-D (got ranks %d and %d)", a->rank, b->rank);
    if (a->dtype != b->dtype || out->dtype != a->dtype)
        return kn_error(KN_ERR_INVALID, "Gemm operands have dtypes %s and %s", kn_dtype_name(a->dtype),
                        kn_dtype_name(b->dtype));
    int64_t M = trans_a ? a->dims[1] : a->dims[0], K = trans_a ? a->dims[0] : a->dims[1];
    int64_t kb = trans_b ? b->dims[1] : b->dims[0], N = trans_b ? b->dims[0] : b->dims[1];
    if (K != kb)
        return kn_error(KN_ERR_INVALID, "Gemm inner dimensions differ: op(A) is %lldx%lld, op(B) is %lldx%lld",
                        (long long)M, (long long)K, (long long)kb, (long long)N);
    if (out->rank != 2 || out->dims[0] != M || out->dims[1] != N)
        return kn_error(KN_ERR_INTERNAL, "Gemm output was allocated with the wrong shape");
    if (is_half(a->dtype)) return half_product(a, b, c && beta != 0.0 ? c : NULL, true, trans_a, trans_b, alpha, beta, out);
    if (c && beta != 0.0) {
        int st = gemm_fill_bias(c, beta, M, N, out);
        if (st) return st;
    }
    if (a->dtype == KN_F32)
        return kn_k_sgemm(M, N, K, (float)alpha, a->data, a->dims[1], trans_a, b->data, b->dims[1], trans_b,
                          out->data, N);
    mat_view av = {a->data, 0, trans_a ? 1 : a->dims[1], trans_a ? a->dims[1] : 1};
    mat_view bv = {b->data, 0, trans_b ? 1 : b->dims[1], trans_b ? b->dims[1] : 1};
    gemm_generic(a->dtype, M, N, K, alpha, av, bv, out->data, 0);
    return KN_OK;
}
