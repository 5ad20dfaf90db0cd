/*
 * tests/runtime/test_rnn.c — the compiled path of LSTM, GRU and RNN
 * (runtime/src/rnn.c, its kernels runtime/src/rnn_kern_c.c and
 * runtime/kernels/x86/f32_rnn_avx2.c) against the reference kernel
 * (kn_k_rnn, in double):
 *  - the activations of each kernel table over a dense range, sigmoid and
 *    tanh within 2e-6 relative (1e-5 is the requirement), the others
 *    within 1e-5;
 *  - the projection and recurrent products against a double product, on
 *    sizes that are not multiples of the blocks;
 *  - whole layers: each kind, direction, layout, sequence lengths (0, short,
 *    full), initial states, peepholes, clip, input_forget,
 *    linear_before_reset, hidden sizes that are not multiples of 16,
 *    batches of 1, 3, 5 and 6 (several rows' recurrent products at once,
 *    each row's bit for bit the one-row product's), and non-default
 *    activations, within 2e-5 of the
 *    reference; 1 and 2 threads bitwise equal; the packed weights kept
 *    across runs only while they are the artifact's constants. Each table
 *    this CPU has runs them and must be the one the session names (on an
 *    AVX-512 CPU the AVX2 table with AVX-512F masked out, as auto picks
 *    an AVX-512 one there, and both AVX-512 tables: with and without the
 *    recurrent products' software prefetch, by the tuning row). One row of
 *    more than 8 blocks (one_row's groups, blocks in reverse on odd steps).
 * The AVX-512 projection is in test_rnn_avx512.c.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../runtime/src/config.h"
#include "../../runtime/src/rnn.h"
#include "../../runtime/src/rt_internal.h"
#include "test_skip.h"

static uint64_t g_seed = 12345;
static float frand(void) /* uniform in [-1, 1) */
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static bool has_avx2(void) { return (kn_cpu_features() & (KN_CPU_AVX2 | KN_CPU_FMA)) == (KN_CPU_AVX2 | KN_CPU_FMA); }
static bool has_avx512(void) { return has_avx2() && (kn_cpu_features() & KN_CPU_AVX512F); }

/* The kernel tables this CPU runs (at most MAX_TABLES). */
enum { MAX_TABLES = 4 };
static int tables(const kn_rnn_kern **out)
{
    int n = 0;
    out[n++] = &kn_rnn_kern_portable;
    if (has_avx2() && kn_rnn_kern_avx2.gemm) out[n++] = &kn_rnn_kern_avx2;
    if (has_avx512() && kn_rnn_kern_avx512.gemm) out[n++] = &kn_rnn_kern_avx512;
    if (has_avx512() && kn_rnn_kern_avx512_nopf.gemm) out[n++] = &kn_rnn_kern_avx512_nopf;
    return n;
}

/* Makes the session's pick (rnn.c: pick_kernels) the table k: KILN_RNN
 * chooses portable or auto, and auto takes an AVX-512 table wherever the
 * CPU has AVX-512F, so the AVX2 table is reached there by masking AVX-512F
 * out (KILN_CPU_MASK, on top of any mask already set); of the two AVX-512
 * tables the tuning row's rnn_prefetch picks one (KILN_TUNE_FAMILY: zen5
 * prefetches, avx512 does not). restore_mask puts the caller's mask and
 * family back. */
static char g_saved_mask[64], g_saved_family[64];
static bool g_had_mask, g_had_family;

static void pick_table(const kn_rnn_kern *k)
{
    const char *m = getenv("KILN_CPU_MASK"), *f = getenv("KILN_TUNE_FAMILY");
    g_had_mask = m != NULL, g_had_family = f != NULL;
    if (m) snprintf(g_saved_mask, sizeof g_saved_mask, "%s", m);
    if (f) snprintf(g_saved_family, sizeof g_saved_family, "%s", f);
    setenv("KILN_RNN", k == &kn_rnn_kern_portable ? "portable" : "auto", 1);
    if (k == &kn_rnn_kern_avx512) setenv("KILN_TUNE_FAMILY", "zen5", 1);
    if (k == &kn_rnn_kern_avx512_nopf) setenv("KILN_TUNE_FAMILY", "avx512", 1);
    if (k == &kn_rnn_kern_avx2 && has_avx512()) {
        char mask[32];
        snprintf(mask, sizeof mask, "%llu", (unsigned long long)(kn_cpu_features() & ~(uint64_t)KN_CPU_AVX512F));
        setenv("KILN_CPU_MASK", mask, 1);
    }
}

static void restore_mask(void)
{
    if (g_had_mask) setenv("KILN_CPU_MASK", g_saved_mask, 1);
    else unsetenv("KILN_CPU_MASK");
    if (g_had_family) setenv("KILN_TUNE_FAMILY", g_saved_family, 1);
    else unsetenv("KILN_TUNE_FAMILY");
}

static void test_activations(void **state)
{
    (void)state;
    const kn_rnn_kern *ks[MAX_TABLES];
    int nk = tables(ks);
    enum { N = 8192 };
    static float x[N], y[N];
    for (int ki = 0; ki < nk; ki++) {
        for (int a = KN_ACT_TANH; a <= KN_ACT_SOFTPLUS; a++) {
            double alpha = a == KN_ACT_THRESHOLDEDRELU ? 0.5 : 0.7, beta = a == KN_ACT_SCALEDTANH ? 1.3 : 0.4;
            for (int i = 0; i < N; i++) {
                /* -30..30, densest around 0, with exact 0 and tiny values */
                double t = (double)(i - N / 2) / (N / 2);
                x[i] = (float)(30.0 * t * t * t);
                if (i % 97 == 0) x[i] = (float)(1e-6 * t);
                y[i] = x[i];
            }
            ks[ki]->act((kn_rnn_act)a, (float)alpha, (float)beta, y, N);
            double rel = a == KN_ACT_SIGMOID || a == KN_ACT_TANH ? 2e-6 : 1e-5;
            for (int i = 0; i < N; i++) {
                double want = kn_k_rnn_act((kn_rnn_act)a, x[i], (float)alpha, (float)beta);
                double err = fabs(y[i] - want), tol = rel * fabs(want) + 1e-30;
                if (a == KN_ACT_ELU || a == KN_ACT_SOFTPLUS) tol += 1e-7; /* exp(x) - 1, log1p near 0 */
                if (!(err <= tol)) {
                    print_error("%s: activation %d at x=%.9g: %.9g, reference %.9g (error %.3g)\n", ks[ki]->isa, a,
                                x[i], y[i], want, err);
                    fail();
                }
            }
        }
    }
}

static float *aligned_rand(size_t n)
{
    float *p = NULL;
    assert_int_equal(posix_memalign((void **)&p, 64, n * sizeof *p), 0);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

static void test_products(void **state)
{
    (void)state;
    const kn_rnn_kern *ks[MAX_TABLES];
    int nk = tables(ks);
    const int64_t M = 13, K = 37, np = 3, ldc = np * 16 + 5, lda = K + 3;
    float *A = aligned_rand((size_t)(M * lda)), *P = aligned_rand((size_t)(np * K * 16)),
          *bias = aligned_rand((size_t)np * 16), *C = aligned_rand((size_t)(M * ldc));
    for (int ki = 0; ki < nk; ki++) {
        ks[ki]->gemm(A, lda, M, K, P, np, bias, C, ldc);
        for (int64_t m = 0; m < M; m++)
            for (int64_t c = 0; c < np * 16; c++) {
                double s = bias[c];
                for (int64_t k = 0; k < K; k++) s += (double)A[m * lda + k] * P[(c / 16) * K * 16 + k * 16 + c % 16];
                assert_true(fabs(C[m * ldc + c] - s) <= 1e-5 * (1 + fabs(s)));
            }
        /* the recurrent product: np panels side by side, ldp floats a row */
        for (int n = 1; n <= 4; n++) {
            int64_t ldp = 4 * 16;
            float *R = aligned_rand((size_t)(K * ldp + 16)), acc[64], init[64]; /* + the offset */
            for (int i = 0; i < 64; i++) acc[i] = init[i] = frand();
            ks[ki]->gemv(A, K, R + 16, ldp, n, acc); /* an offset panel, as GRU's h gate reads */
            for (int c = 0; c < n * 16; c++) {
                double s = init[c];
                for (int64_t k = 0; k < K; k++) s += (double)A[k] * R[k * ldp + 16 + c];
                assert_true(fabs(acc[c] - s) <= 1e-5 * (1 + fabs(s)));
            }
            free(R);
        }
        /* several rows at once: each row bit for bit gemv's (3 and 4 panels) */
        for (int n = 3; ks[ki]->gemv_rows && n <= 4; n++)
            for (int rows = 1; rows <= KN_RNN_ROWS; rows++) {
                int64_t ldp = 4 * 16;
                float *R = aligned_rand((size_t)(K * ldp)), acc[KN_RNN_ROWS][64], want[KN_RNN_ROWS][64];
                const float *h[KN_RNN_ROWS];
                float *ap[KN_RNN_ROWS];
                for (int i = 0; i < rows; i++) {
                    for (int c = 0; c < 64; c++) acc[i][c] = want[i][c] = frand();
                    h[i] = A + (i * 3 % M) * lda, ap[i] = acc[i];
                    ks[ki]->gemv(h[i], K, R, ldp, n, want[i]);
                }
                ks[ki]->gemv_rows(rows, h, K, R, ldp, n, ap);
                for (int i = 0; i < rows; i++) assert_memory_equal(acc[i], want[i], sizeof(float) * 16 * (size_t)n);
                free(R);
            }
    }
    free(A), free(P), free(bias), free(C);
}

/* ---- whole layers ---------------------------------------------------------------------- */

typedef struct lcase {
    kn_rnn_kind kind;
    int num_dir;
    bool reverse;
    int layout;
    int64_t T, B, I, H;
    bool bias, init_h, init_c, peep, lbr, input_forget;
    double clip;
    const int64_t *lens; /* B entries, or NULL */
    kn_rnn_act acts[3];  /* 0: defaults */
} lcase;

static void tensor(kn_tensor *t, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3, float scale)
{
    int64_t dims[4] = {d0, d1, d2, d3};
    assert_int_equal(kn_tensor_alloc(t, KN_F32, rank, dims), KN_OK);
    float *p = t->data;
    for (int64_t i = 0; i < kn_tensor_numel(t); i++) p[i] = scale * frand();
}

static double max_diff(const kn_tensor *a, const kn_tensor *b)
{
    double m = 0;
    for (int64_t i = 0; i < kn_tensor_numel(a); i++) {
        double d = fabs((double)((float *)a->data)[i] - ((float *)b->data)[i]);
        m = d > m || isnan(d) ? d : m;
    }
    return m;
}

static void run_case(const lcase *c)
{
    kn_rnn_params p = {.kind = c->kind, .hidden = c->H, .num_dir = c->num_dir, .reverse = c->reverse,
                       .layout = c->layout, .linear_before_reset = c->lbr, .input_forget = c->input_forget,
                       .clip = c->clip};
    static const kn_rnn_act defaults[3] = {KN_ACT_SIGMOID, KN_ACT_TANH, KN_ACT_TANH};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++) {
            p.act[d][k] = c->kind == KN_RNN_SIMPLE ? KN_ACT_TANH : defaults[k];
            if (c->acts[0] || c->acts[1]) p.act[d][k] = c->acts[k];
            p.alpha[d][k] = p.act[d][k] == KN_ACT_LEAKYRELU ? 0.1 : 0.5;
            p.beta[d][k] = 0.3;
        }
    int64_t G = c->kind == KN_RNN_SIMPLE ? 1 : c->kind == KN_RNN_GRU ? 3 : 4, D = c->num_dir, H = c->H;
    kn_tensor X, W, R, B = {0}, h0 = {0}, c0 = {0}, P = {0}, sl = {0};
    tensor(&X, 3, c->layout ? c->B : c->T, c->layout ? c->T : c->B, c->I, 0, 1.0f);
    tensor(&W, 3, D, G * H, c->I, 0, 0.4f);
    tensor(&R, 3, D, G * H, H, 0, 0.4f);
    if (c->bias) tensor(&B, 2, D, 2 * G * H, 0, 0, 0.3f);
    if (c->init_h) tensor(&h0, 3, c->layout ? c->B : D, c->layout ? D : c->B, H, 0, 0.5f);
    if (c->init_c) tensor(&c0, 3, c->layout ? c->B : D, c->layout ? D : c->B, H, 0, 0.5f);
    if (c->peep) tensor(&P, 2, D, 3 * H, 0, 0, 0.3f);
    if (c->lens) {
        int64_t dims[1] = {c->B};
        assert_int_equal(kn_tensor_alloc(&sl, KN_I32, 1, dims), KN_OK);
        for (int64_t b = 0; b < c->B; b++) ((int32_t *)sl.data)[b] = (int32_t)c->lens[b];
    }
    const kn_tensor *pB = c->bias ? &B : NULL, *ph = c->init_h ? &h0 : NULL, *pc = c->init_c ? &c0 : NULL,
                    *pP = c->peep ? &P : NULL, *ps = c->lens ? &sl : NULL;
    bool lstm = c->kind == KN_RNN_LSTM;
    int64_t T = c->T, Bn = c->B;
    int64_t yd[4] = {T, D, Bn, H}, ydb[4] = {Bn, T, D, H}, hd[3] = {D, Bn, H}, hdb[3] = {Bn, D, H};
    kn_tensor ref[3], got[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(i == 0 ? kn_tensor_alloc(&ref[0], KN_F32, 4, c->layout ? ydb : yd)
                                : kn_tensor_alloc(&ref[i], KN_F32, 3, c->layout ? hdb : hd),
                         KN_OK);
    }
    assert_int_equal(kn_k_rnn(&p, &X, &W, &R, pB, ps, ph, pc, pP, &ref[0], &ref[1], lstm ? &ref[2] : NULL), KN_OK);
    const kn_rnn_kern *ks[MAX_TABLES];
    int nk = tables(ks);
    kn_tensor first[3] = {{0}};
    for (int ki = 0; ki < nk; ki++)
        for (int threads = 1; threads <= 2; threads++) {
            kn_op_session os = {.threads = threads};
            for (int run = 0; run < 2; run++) { /* the second run on the state the first one left */
                for (int i = 0; i < 3; i++) assert_int_equal(kn_tensor_copy(&got[i], &ref[i]), KN_OK);
                for (int i = 0; i < 3; i++) memset(got[i].data, 0, got[i].nbytes);
                pick_table(ks[ki]);
                int st = kn_rnn_fast(&os, &p, &X, &W, &R, pB, ps, ph, pc, pP, &got[0], &got[1],
                                     lstm ? &got[2] : NULL);
                restore_mask();
                assert_int_equal(st, KN_OK);
                assert_non_null(os.impl);
                assert_non_null(strstr(os.impl, ks[ki]->isa));
                for (int i = 0; i < (lstm ? 3 : 2); i++) {
                    double d = max_diff(&got[i], &ref[i]);
                    if (!(d <= 2e-5)) {
                        print_error("kind %d dir %d layout %d H %lld B %lld %s, %d threads: output %d is %.3g off "
                                    "the reference\n",
                                    c->kind, (int)D, c->layout, (long long)H, (long long)Bn, ks[ki]->isa, threads, i, d);
                        fail();
                    }
                }
                if (threads == 1 && run == 0)
                    for (int i = 0; i < 3; i++) assert_int_equal(kn_tensor_copy(&first[i], &got[i]), KN_OK);
                else
                    for (int i = 0; i < 3; i++) assert_memory_equal(first[i].data, got[i].data, got[i].nbytes);
                for (int i = 0; i < 3; i++) kn_tensor_free(&got[i]);
            }
            if (os.free_state) os.free_state(os.state);
            if (threads == 2)
                for (int i = 0; i < 3; i++) kn_tensor_free(&first[i]);
        }
    unsetenv("KILN_RNN");
    for (int i = 0; i < 3; i++) kn_tensor_free(&ref[i]);
    kn_tensor_free(&X), kn_tensor_free(&W), kn_tensor_free(&R), kn_tensor_free(&B), kn_tensor_free(&h0);
    kn_tensor_free(&c0), kn_tensor_free(&P), kn_tensor_free(&sl);
}

static void test_lstm(void **state)
{
    (void)state;
    static const int64_t lens[3] = {5, 0, 2};
    lcase c = {.kind = KN_RNN_LSTM, .num_dir = 1, .T = 5, .B = 1, .I = 7, .H = 20, .bias = true};
    run_case(&c);
    c.num_dir = 2, c.init_h = c.init_c = true, c.peep = true;
    run_case(&c);
    c.B = 3, c.lens = lens, c.layout = 1, c.clip = 0.7;
    run_case(&c);
    c.num_dir = 1, c.reverse = true, c.input_forget = true, c.peep = false, c.layout = 0, c.H = 32;
    run_case(&c);
    /* a step large enough to split across threads, H a multiple of 16 */
    lcase big = {.kind = KN_RNN_LSTM, .num_dir = 1, .T = 6, .B = 1, .I = 24, .H = 96, .bias = true, .init_h = true};
    run_case(&big);
    big.lens = lens, big.B = 3, big.num_dir = 2;
    run_case(&big);
    /* one row of more blocks than one_row's group of 8, the last group
     * partial, both directions (each thread's share of blocks too) */
    lcase wide = {.kind = KN_RNN_LSTM, .num_dir = 2, .T = 5, .B = 1, .I = 12, .H = 150, .bias = true,
                  .init_h = true, .init_c = true};
    run_case(&wide);
    /* batches that step_rows runs in groups of KN_RNN_ROWS, rows ending early */
    static const int64_t lens6[6] = {6, 2, 0, 6, 5, 1};
    lcase rows = {.kind = KN_RNN_LSTM, .num_dir = 2, .T = 6, .B = 6, .I = 10, .H = 40, .bias = true,
                  .init_h = true, .init_c = true, .lens = lens6};
    run_case(&rows);
    rows.layout = 1, rows.lens = NULL, rows.B = 5, rows.clip = 0.8;
    run_case(&rows);
    lcase acts = {.kind = KN_RNN_LSTM, .num_dir = 2, .T = 4, .B = 2, .I = 5, .H = 17, .bias = true,
                  .acts = {KN_ACT_HARDSIGMOID, KN_ACT_SOFTSIGN, KN_ACT_SOFTPLUS}};
    run_case(&acts);
}

static void test_gru(void **state)
{
    (void)state;
    static const int64_t lens[2] = {1, 4};
    for (int lbr = 0; lbr < 2; lbr++) {
        lcase c = {.kind = KN_RNN_GRU, .num_dir = 1, .T = 4, .B = 1, .I = 9, .H = 18, .bias = true, .lbr = lbr};
        run_case(&c);
        c.num_dir = 2, c.init_h = true, c.B = 2, c.lens = lens, c.layout = 1;
        run_case(&c);
        c.reverse = true, c.num_dir = 1, c.clip = 0.5, c.layout = 0, c.bias = false;
        run_case(&c);
        lcase big = {.kind = KN_RNN_GRU, .num_dir = 1, .T = 5, .B = 1, .I = 16, .H = 112, .bias = true, .lbr = lbr};
        run_case(&big);
        big.H = 150, big.num_dir = 2, big.init_h = true; /* more than 8 blocks: as the LSTM's */
        run_case(&big);
        static const int64_t lens6[6] = {6, 2, 0, 6, 5, 1};
        lcase rows = {.kind = KN_RNN_GRU, .num_dir = 2, .T = 6, .B = 6, .I = 10, .H = 40, .bias = true,
                      .init_h = true, .lens = lens6, .lbr = lbr};
        run_case(&rows);
        lcase acts = {.kind = KN_RNN_GRU, .num_dir = 1, .T = 3, .B = 1, .I = 3, .H = 8, .bias = true, .lbr = lbr,
                      .acts = {KN_ACT_SCALEDTANH, KN_ACT_LEAKYRELU}};
        run_case(&acts);
    }
}

static void test_rnn(void **state)
{
    (void)state;
    static const int64_t lens[2] = {3, 2};
    lcase c = {.kind = KN_RNN_SIMPLE, .num_dir = 1, .T = 3, .B = 2, .I = 4, .H = 33, .bias = true};
    run_case(&c);
    c.num_dir = 2, c.init_h = true, c.lens = lens, c.layout = 1, c.clip = 0.9;
    run_case(&c);
    c.acts[0] = KN_ACT_RELU, c.acts[1] = KN_ACT_RELU, c.num_dir = 1, c.reverse = true;
    run_case(&c);
    c.acts[0] = KN_ACT_ELU, c.acts[1] = KN_ACT_ELU, c.clip = 0;
    run_case(&c);
    lcase big = {.kind = KN_RNN_SIMPLE, .num_dir = 1, .T = 4, .B = 1, .I = 8, .H = 192, .bias = true};
    run_case(&big);
    c.acts[0] = KN_ACT_AFFINE, c.acts[1] = KN_ACT_AFFINE;
    run_case(&c);
    c.acts[0] = KN_ACT_THRESHOLDEDRELU, c.acts[1] = KN_ACT_THRESHOLDEDRELU;
    run_case(&c);
}

/* Packed weights are kept while they are the artifact's constants, and
 * packed again when they are not (their bytes may change between runs). */
static void test_repack(void **state)
{
    (void)state;
    kn_rnn_params p = {.kind = KN_RNN_SIMPLE, .hidden = 16, .num_dir = 1, .act = {{KN_ACT_TANH}}};
    kn_tensor X, W, R, Y, ref;
    tensor(&X, 3, 2, 1, 4, 0, 1.0f);
    tensor(&W, 3, 1, 16, 4, 0, 0.5f);
    tensor(&R, 3, 1, 16, 16, 0, 0.5f);
    /* W and R side by side, as in an artifact's weights */
    static float blob[64 + 256];
    memcpy(blob, W.data, sizeof(float) * 64);
    memcpy(blob + 64, R.data, sizeof(float) * 256);
    kn_tensor_free(&W), kn_tensor_free(&R);
    W = (kn_tensor){.dtype = KN_F32, .rank = 3, .dims = {1, 16, 4}, .data = blob, .nbytes = 64 * sizeof(float),
                    .own = KN_BORROWED};
    R = (kn_tensor){.dtype = KN_F32, .rank = 3, .dims = {1, 16, 16}, .data = blob + 64,
                    .nbytes = 256 * sizeof(float), .own = KN_BORROWED};
    int64_t yd[4] = {2, 1, 1, 16};
    for (int constant = 0; constant < 2; constant++) {
        /* the "artifact's weights" span W's and R's bytes, or lie elsewhere */
        kn_op_session os = {.threads = 1, .weights = constant ? (const unsigned char *)blob : NULL,
                            .weights_len = constant ? sizeof blob : 0};
        assert_int_equal(kn_tensor_alloc(&Y, KN_F32, 4, yd), KN_OK);
        assert_int_equal(kn_rnn_fast(&os, &p, &X, &W, &R, NULL, NULL, NULL, NULL, NULL, &Y, NULL, NULL), KN_OK);
        ((float *)W.data)[3] += 0.25f; /* a non-constant W changes between runs */
        assert_int_equal(kn_tensor_alloc(&ref, KN_F32, 4, yd), KN_OK);
        assert_int_equal(kn_k_rnn(&p, &X, &W, &R, NULL, NULL, NULL, NULL, NULL, &ref, NULL, NULL), KN_OK);
        memset(Y.data, 0, Y.nbytes);
        assert_int_equal(kn_rnn_fast(&os, &p, &X, &W, &R, NULL, NULL, NULL, NULL, NULL, &Y, NULL, NULL), KN_OK);
        double d = max_diff(&Y, &ref);
        if (constant) assert_true(d > 1e-4); /* constants: kept packed, so the change is not seen */
        else assert_true(d <= 2e-5);
        kn_tensor_free(&Y), kn_tensor_free(&ref);
        os.free_state(os.state);
    }
    kn_tensor_free(&X), kn_tensor_free(&W), kn_tensor_free(&R);
}

/* KILN_RNN=ref, or a dtype other than float32: the caller's plain C kernel. */
static void test_declines(void **state)
{
    (void)state;
    kn_rnn_params p = {.kind = KN_RNN_SIMPLE, .hidden = 4, .num_dir = 1, .act = {{KN_ACT_TANH}}};
    kn_tensor X, W, R, Y;
    tensor(&X, 3, 2, 1, 3, 0, 1.0f);
    tensor(&W, 3, 1, 4, 3, 0, 0.5f);
    tensor(&R, 3, 1, 4, 4, 0, 0.5f);
    int64_t yd[4] = {2, 1, 1, 4};
    assert_int_equal(kn_tensor_alloc(&Y, KN_F32, 4, yd), KN_OK);
    kn_op_session os = {.threads = 1};
    setenv("KILN_RNN", "ref", 1);
    assert_int_equal(kn_rnn_fast(&os, &p, &X, &W, &R, NULL, NULL, NULL, NULL, NULL, &Y, NULL, NULL),
                     KN_ERR_UNSUPPORTED);
    assert_int_equal(kn_config_check_rnn(), KN_OK);
    setenv("KILN_RNN", "fast", 1);
    assert_int_equal(kn_config_check_rnn(), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "KILN_RNN='fast'"));
    unsetenv("KILN_RNN");
    W.dtype = KN_F64; /* as if: the fast path takes float32 only */
    assert_int_equal(kn_rnn_fast(&os, &p, &X, &W, &R, NULL, NULL, NULL, NULL, NULL, &Y, NULL, NULL),
                     KN_ERR_UNSUPPORTED);
    assert_null(os.state);
    W.dtype = KN_F32;
    kn_tensor_free(&X), kn_tensor_free(&W), kn_tensor_free(&R), kn_tensor_free(&Y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activations), cmocka_unit_test(test_products), cmocka_unit_test(test_lstm),
        cmocka_unit_test(test_gru),         cmocka_unit_test(test_rnn),      cmocka_unit_test(test_repack),
        cmocka_unit_test(test_declines),
    };
    if (!has_avx2()) KN_SKIP_PART("no AVX2+FMA: the AVX2 kernels are not checked");
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
