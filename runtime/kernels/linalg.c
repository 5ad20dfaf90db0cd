/*
 * Reference kernels for matrix products (MatMul, Gemm, a packed float32 GEMM
 * core), the softmax family, determinants and einsum. See k_linalg.h.
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
