/*
 * tests/runtime/test_attention.c — the compiled path of ONNX Attention
 * (runtime/src/attention.c, its kernels runtime/src/attention_kern_c.c
 * and runtime/kernels/x86/f32_attention_avx2.c) against the reference
 * kernel (kn_k_attention):
 *  - each kernel table's four kernels against plain sums, on sizes that
 *    are not multiples of their blocks;
 *  - whole nodes: 3-D and 4-D forms, grouped-query heads, head sizes that
 *    are no multiple of 8 and a value size unlike the key size, query
 *    lengths that are no multiple of the tiles, key lengths over several
 *    key blocks (the online softmax's rescaling), float masks broadcast
 *    from [B,1,1,T] and [Sq,T], a bool mask, a mask shorter than T,
 *    causal, softcap, nonpad_kv_seqlen (0 included: every key masked),
 *    within 2e-5 of the reference; 1 and 3 threads bitwise equal;
 *  - what it declines (past KV, the extra outputs, KILN_ATTENTION=ref) it
 *    declines without writing, and a bad KILN_ATTENTION is an error.
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

#include "../../runtime/src/attention.h"
#include "../../runtime/src/config.h"
#include "../../runtime/src/rt_internal.h"

static uint64_t g_seed = 4242;
static float frand(void) /* uniform in [-1, 1) */
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static bool has_avx2(void) { return (kn_cpu_features() & (KN_CPU_AVX2 | KN_CPU_FMA)) == (KN_CPU_AVX2 | KN_CPU_FMA); }

static int tables(const kn_attn_kern **out)
{
    int n = 0;
    out[n++] = &kn_attn_kern_portable;
    if (has_avx2() && kn_attn_kern_avx2.scores) out[n++] = &kn_attn_kern_avx2;
    return n;
}

static void test_kernels(void **state)
{
    (void)state;
    const kn_attn_kern *ks[2];
    int nk = tables(ks);
    enum { D = 20, LD = 48, N = 40, DV = 27 };
    float q[4 * D], kt[D * LD], s[4 * LD], p[4 * LD], v[N * DV], o[4 * DV], want[4 * DV];
    for (int ki = 0; ki < nk; ki++) {
        const kn_attn_kern *k = ks[ki];
        for (int i = 0; i < 4 * D; i++) q[i] = frand();
        for (int i = 0; i < D * LD; i++) kt[i] = frand();
        k->scores(q, D, kt, LD, N, s);
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < N; j++) {
                double w = 0;
                for (int d = 0; d < D; d++) w += (double)q[r * D + d] * kt[d * LD + j];
                assert_true(fabs(s[r * LD + j] - w) < 1e-5);
            }
        /* pack_kt: a head size and a key count with tails */
        static float kr[37 * 29], kp[D * LD];
        for (int i = 0; i < 37 * 29; i++) kr[i] = frand();
        memset(kp, 0x7f, sizeof kp);
        k->pack_kt(kr, 29, 37, D, kp, LD);
        for (int d = 0; d < D; d++)
            for (int j = 0; j < 40; j++) assert_true(kp[d * LD + j] == (j < 37 ? kr[j * 29 + d] : 0.0f));
        /* softmax_step: a mask added, masked keys, values far below the
         * maximum, a running maximum above the block's */
        float add[37], saved[37];
        for (int j = 0; j < 37; j++) p[j] = 8 * frand(), add[j] = frand();
        p[3] = -INFINITY, p[30] = -200;
        memcpy(saved, p, sizeof saved);
        float m = -INFINITY, sum = k->softmax_step(p, add, 37, &m);
        double mx = -INFINITY, wsum = 0;
        for (int j = 0; j < 37; j++) mx = saved[j] + add[j] > mx ? saved[j] + add[j] : mx;
        assert_true(m == (float)mx);
        for (int j = 0; j < 37; j++) {
            double e = exp((double)(saved[j] + add[j]) - mx);
            assert_true(fabs(p[j] - e) <= 2e-7 * (e > 1 ? e : 1));
            wsum += e;
        }
        assert_true(p[3] == 0 && p[30] == 0);
        assert_true(fabs(sum - wsum) < 1e-5 * wsum);
        m = 100, sum = k->softmax_step(memcpy(p, saved, sizeof saved), NULL, 37, &m);
        assert_true(m == 100 && sum < 1e-30);
        for (int j = 0; j < 11; j++) p[j] = -INFINITY;
        m = -INFINITY;
        assert_true(k->softmax_step(p, NULL, 11, &m) == 0 && m == -INFINITY && p[0] == 0 && p[10] == 0);
        p[5] = NAN, m = 0;
        assert_true(isnan(k->softmax_step(p, NULL, 11, &m)) && isnan(m));
        /* pv accumulates into what o holds */
        for (int i = 0; i < 4 * LD; i++) p[i] = frand();
        for (int i = 0; i < N * DV; i++) v[i] = frand();
        for (int i = 0; i < 4 * DV; i++) o[i] = want[i] = frand();
        k->pv(p, LD, 33, v, DV, DV, o, DV);
        for (int r = 0; r < 4; r++)
            for (int e = 0; e < DV; e++) {
                double w = want[r * DV + e];
                for (int j = 0; j < 33; j++) w += (double)p[r * LD + j] * v[j * DV + e];
                assert_true(fabs(o[r * DV + e] - w) < 1e-5);
            }
    }
}

/* One Attention node's geometry and options. */
typedef struct acase {
    const char *what;
    int64_t B, Hq, Hkv, Sq, Skv, D, Dv;
    bool three_d, causal;
    double softcap;
    int mask; /* 0 none, 1 float [B,1,1,T], 2 float [Sq,T], 3 bool [B,Hq,Sq,T], 4 float [B,1,1,T-5] */
    bool nonpad;
} acase;

static void fill(kn_tensor *t, kn_dtype dt, int rank, const int64_t *dims)
{
    assert_int_equal(kn_tensor_alloc(t, dt, rank, dims), KN_OK);
    int64_t n = kn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dt == KN_F32) ((float *)t->data)[i] = frand();
        else ((uint8_t *)t->data)[i] = frand() > -0.6f; /* 80% attend */
    }
}

static void run_case(const acase *c)
{
    kn_attn_dims dm = {c->B, c->Hq, c->Hkv, c->Sq, c->Skv, 0, c->D, c->Dv, c->three_d};
    kn_attn_params pr = {.scale = 1.0 / sqrt((double)c->D), .softcap = c->softcap, .causal = c->causal};
    kn_tensor q, k, v, mask = {0}, np = {0};
    int64_t T = c->Skv;
    if (c->three_d) {
        fill(&q, KN_F32, 3, (int64_t[]){c->B, c->Sq, c->Hq * c->D});
        fill(&k, KN_F32, 3, (int64_t[]){c->B, c->Skv, c->Hkv * c->D});
        fill(&v, KN_F32, 3, (int64_t[]){c->B, c->Skv, c->Hkv * c->Dv});
    } else {
        fill(&q, KN_F32, 4, (int64_t[]){c->B, c->Hq, c->Sq, c->D});
        fill(&k, KN_F32, 4, (int64_t[]){c->B, c->Hkv, c->Skv, c->D});
        fill(&v, KN_F32, 4, (int64_t[]){c->B, c->Hkv, c->Skv, c->Dv});
    }
    /* scores of a few units: the softmax is neither flat nor one-hot */
    for (int64_t i = 0; i < kn_tensor_numel(&q); i++) ((float *)q.data)[i] *= 3;
    if (c->mask == 1) fill(&mask, KN_F32, 4, (int64_t[]){c->B, 1, 1, T});
    if (c->mask == 2) fill(&mask, KN_F32, 2, (int64_t[]){c->Sq, T});
    if (c->mask == 3) fill(&mask, KN_BOOL, 4, (int64_t[]){c->B, c->Hq, c->Sq, T});
    if (c->mask == 4) fill(&mask, KN_F32, 4, (int64_t[]){c->B, 1, 1, T - 5});
    if (c->mask == 1 || c->mask == 4) /* BERT's padding: -10000 past a length */
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t t = T / 2 + b; t < mask.dims[3]; t++) ((float *)mask.data)[b * mask.dims[3] + t] = -10000;
    if (c->nonpad) {
        assert_int_equal(kn_tensor_alloc(&np, KN_I64, 1, (int64_t[]){c->B}), KN_OK);
        for (int64_t b = 0; b < c->B; b++) ((int64_t *)np.data)[b] = b == 0 ? 0 : T - 3 * b;
    }
    const kn_tensor *mp = c->mask ? &mask : NULL, *npp = c->nonpad ? &np : NULL;
    int64_t yd[4] = {c->B, c->Hq, c->Sq, c->Dv};
    if (c->three_d) yd[1] = c->Sq, yd[2] = c->Hq * c->Dv;
    kn_tensor ref, y1, y3;
    assert_int_equal(kn_tensor_alloc(&ref, KN_F32, c->three_d ? 3 : 4, yd), KN_OK);
    assert_int_equal(kn_k_attention(&dm, &pr, &q, &k, &v, mp, NULL, NULL, npp, &ref, NULL, NULL, NULL), KN_OK);

    const kn_attn_kern *ks[2];
    int nk = tables(ks);
    for (int ki = 0; ki < nk; ki++) {
        setenv("KILN_ATTENTION", ks[ki] == &kn_attn_kern_portable ? "portable" : "auto", 1);
        kn_op_session s1 = {.threads = 1}, s3 = {.threads = 3};
        assert_int_equal(kn_tensor_alloc(&y1, KN_F32, ref.rank, ref.dims), KN_OK);
        assert_int_equal(kn_tensor_alloc(&y3, KN_F32, ref.rank, ref.dims), KN_OK);
        assert_int_equal(kn_attention_fast(&s1, &dm, &pr, &q, &k, &v, mp, NULL, npp, &y1, false), KN_OK);
        assert_int_equal(kn_attention_fast(&s3, &dm, &pr, &q, &k, &v, mp, NULL, npp, &y3, false), KN_OK);
        /* a second run reuses the scratch */
        assert_int_equal(kn_attention_fast(&s3, &dm, &pr, &q, &k, &v, mp, NULL, npp, &y3, false), KN_OK);
        double worst = 0;
        for (int64_t i = 0; i < kn_tensor_numel(&ref); i++) {
            float a = ((float *)y1.data)[i], r = ((float *)ref.data)[i];
            if (isnan(r)) {
                assert_true(isnan(a));
                continue;
            }
            double e = fabs((double)a - r);
            worst = e > worst ? e : worst;
        }
        if (worst > 2e-5) fail_msg("%s (%s kernels): max abs error %.3g", c->what, ks[ki]->isa, worst);
        assert_memory_equal(y1.data, y3.data, (size_t)kn_tensor_numel(&ref) * sizeof(float));
        assert_string_equal(s1.impl, ks[ki] == &kn_attn_kern_portable ? "kiln attention:portable"
                                                                      : "kiln attention:avx2");
        s1.free_state(s1.state), s3.free_state(s3.state);
        kn_tensor_free(&y1), kn_tensor_free(&y3);
    }
    unsetenv("KILN_ATTENTION");
    kn_tensor_free(&q), kn_tensor_free(&k), kn_tensor_free(&v), kn_tensor_free(&ref);
    if (c->mask) kn_tensor_free(&mask);
    if (c->nonpad) kn_tensor_free(&np);
}

static void test_nodes(void **state)
{
    (void)state;
    static const acase cases[] = {
        {"BERT-like, 3-D, padding mask", 2, 4, 4, 37, 37, 16, 16, true, false, 0, 1, false},
        {"4-D, no mask", 1, 3, 3, 5, 9, 8, 8, false, false, 0, 0, false},
        {"several key blocks, 4-D", 1, 2, 2, 70, 600, 24, 24, false, false, 0, 1, false},
        {"causal, 3 key blocks", 1, 2, 2, 530, 530, 16, 16, true, true, 0, 0, false},
        {"grouped-query heads, Dv != D", 2, 6, 2, 33, 41, 20, 12, false, false, 0, 2, false},
        {"bool mask, softcap", 1, 2, 2, 11, 300, 8, 8, false, false, 5.0, 3, false},
        {"short mask, nonpad", 3, 2, 1, 6, 45, 12, 28, true, false, 0, 4, true},
        {"cross attention Sq=1, causal", 2, 4, 4, 1, 77, 64, 64, false, true, 0, 1, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

static void test_declines(void **state)
{
    (void)state;
    kn_attn_dims dm = {1, 1, 1, 2, 2, 0, 4, 4, false};
    kn_attn_params pr = {.scale = 0.5};
    kn_tensor q, k, v, y;
    fill(&q, KN_F32, 4, (int64_t[]){1, 1, 2, 4});
    fill(&k, KN_F32, 4, (int64_t[]){1, 1, 2, 4});
    fill(&v, KN_F32, 4, (int64_t[]){1, 1, 2, 4});
    assert_int_equal(kn_tensor_alloc(&y, KN_F32, 4, (int64_t[]){1, 1, 2, 4}), KN_OK);
    kn_op_session s = {.threads = 1};
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, &k, NULL, &y, false), KN_ERR_UNSUPPORTED);
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, NULL, NULL, &y, true), KN_ERR_UNSUPPORTED);
    setenv("KILN_ATTENTION", "ref", 1);
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, NULL, NULL, &y, false), KN_ERR_UNSUPPORTED);
    assert_null(s.state);
    assert_int_equal(kn_config_check_attention(), KN_OK);
    setenv("KILN_ATTENTION", "flash", 1);
    assert_int_equal(kn_config_check_attention(), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "KILN_ATTENTION='flash'"));
    unsetenv("KILN_ATTENTION");
    kn_tensor_free(&q), kn_tensor_free(&k), kn_tensor_free(&v), kn_tensor_free(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels),
        cmocka_unit_test(test_nodes),
        cmocka_unit_test(test_declines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
