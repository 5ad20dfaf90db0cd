/*
 * tests/runtime/test_attention.c — the compiled path of ONNX Attention
 * (runtime/src/attention.c, its kernels runtime/src/attention_kern_c.c,
 * runtime/kernels/x86/f32_attention_avx2.c and f32_attention_avx512.c)
 * against the reference kernel (kn_k_attention):
 *  - each kernel table the CPU can run (the others skipped, saying why)
 *    against double sums, on head sizes 1, 7, 64, 80, 128 and others, key
 *    counts that are no multiple of 8 or 16 and value sizes unlike the
 *    head size, nothing written past a row;
 *  - whole nodes: 3-D and 4-D forms, grouped-query heads, head sizes that
 *    are no multiple of 8 and a value size unlike the key size, query
 *    lengths that are no multiple of the tiles, key lengths over several
 *    key blocks (the online softmax's rescaling), float masks broadcast
 *    from [B,1,1,T] and [Sq,T], a bool mask, a mask shorter than T,
 *    causal, softcap, nonpad_kv_seqlen (0 included: every key masked),
 *    within 2e-5 of the reference, each under every kernel table the CPU
 *    can run (the AVX2 one on an AVX-512 CPU by KILN_CPU_MASK); 1 and 3
 *    threads bitwise equal;
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
#include "test_skip.h"

static uint64_t g_seed = 4242;
static float frand(void) /* uniform in [-1, 1) */
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static bool has(uint64_t need) { return (kn_cpu_features() & need) == need; }

enum { AVX2_FMA = KN_CPU_AVX2 | KN_CPU_FMA, MAX_TABLES = 3 };

/* Every kernel table this CPU (and KILN_CPU_MASK) can run, portable first;
 * a table it cannot run is a skipped part, said once. */
static int tables(const kn_attn_kern **out)
{
    static bool said;
    int n = 0;
    out[n++] = &kn_attn_kern_portable;
    if (!kn_attn_kern_avx2.scores || !has(AVX2_FMA)) {
        if (!said) KN_SKIP_PART("no AVX2+FMA (CPU, KILN_CPU_MASK or not x86-64): attention:avx2 not checked");
    } else out[n++] = &kn_attn_kern_avx2;
    if (!kn_attn_kern_avx512.scores || !has(KN_CPU_AVX512F | AVX2_FMA)) {
        if (!said) KN_SKIP_PART("no AVX-512F (CPU, KILN_CPU_MASK or not x86-64): attention:avx512 not checked");
    } else out[n++] = &kn_attn_kern_avx512;
    said = true;
    return n;
}

/* Makes kn_attention_fast pick table k (attention.c, pick_kernels): the
 * portable one by KILN_ATTENTION, the AVX2 one by masking AVX-512 off. */
static void select_table(const kn_attn_kern *k, const char *mask0)
{
    setenv("KILN_ATTENTION", k == &kn_attn_kern_portable ? "portable" : "auto", 1);
    if (k == &kn_attn_kern_avx2) setenv("KILN_CPU_MASK", "0x1f", 1); /* SSE4.2, AVX, AVX2, FMA, F16C */
    else if (mask0) setenv("KILN_CPU_MASK", mask0, 1);
    else unsetenv("KILN_CPU_MASK");
}

static float *floats(size_t n)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* One geometry of the kernel checks: head size D, keys n (any count),
 * value size dv. */
typedef struct kgeom {
    int64_t D, n, dv;
} kgeom;

/* head sizes 1, 7, 64, 80, 128 and others that are no multiple of 8 or 16;
 * key counts below one vector, between the tiles' widths, and a whole
 * block; value sizes unlike the head size */
static const kgeom kgeoms[] = {
    {1, 1, 1},     {1, 13, 7},    {7, 37, 1},     {7, 8, 16},      {20, 40, 27},  {64, 256, 64},
    {64, 250, 80}, {80, 100, 64}, {80, 17, 80},   {128, 200, 128}, {128, 56, 33}, {33, 255, 129},
};

/* The four kernels of k on one geometry against double sums, with row
 * strides wider than the rows, and what lies past each row untouched. */
static void check_kernels(const kn_attn_kern *k, kgeom g)
{
    const float sentinel = 12345.0f;
    const int64_t D = g.D, n = g.n, dv = g.dv, n8 = (n + 7) / 8 * 8, ldk = n8 + 24, ldr = D + 3;
    const int64_t ldv = dv + 5, ldo = dv + 3;
    float *kr = floats((size_t)(n * ldr)), *q = floats((size_t)(4 * D)), *kt = floats((size_t)(D * ldk));
    float *s = floats((size_t)(4 * ldk)), *v = floats((size_t)(n * ldv)), *o = floats((size_t)(4 * ldo));
    float *o0 = malloc((size_t)(4 * ldo) * sizeof *o0), *add = floats((size_t)n);
    float *row = malloc((size_t)n * sizeof *row);
    assert_non_null(o0), assert_non_null(row);

    /* pack_kt: keys n8 .. ldk keep what was there */
    for (int64_t i = 0; i < D * ldk; i++) kt[i] = sentinel;
    k->pack_kt(kr, ldr, n, D, kt, ldk);
    for (int64_t d = 0; d < D; d++)
        for (int64_t j = 0; j < ldk; j++) {
            float want = j < n ? kr[j * ldr + d] : j < n8 ? 0.0f : sentinel;
            if (kt[d * ldk + j] != want)
                fail_msg("%s pack_kt D=%lld n=%lld: kt[%lld][%lld] = %g, want %g", k->isa, (long long)D,
                         (long long)n, (long long)d, (long long)j, kt[d * ldk + j], want);
        }

    /* scores over the padded block (n8 keys) */
    for (int64_t i = 0; i < 4 * ldk; i++) s[i] = sentinel;
    k->scores(q, D, kt, ldk, n8, s);
    for (int r = 0; r < 4; r++)
        for (int64_t j = 0; j < ldk; j++) {
            double w = 0, mag = 0;
            for (int64_t d = 0; d < D && j < n8; d++) {
                w += (double)q[r * D + d] * kt[d * ldk + j];
                mag += fabs((double)q[r * D + d] * kt[d * ldk + j]);
            }
            float got = s[r * ldk + j];
            if (j >= n8 ? got != sentinel : fabs(got - w) > 1e-6 * (1 + mag))
                fail_msg("%s scores D=%lld n=%lld: s[%d][%lld] = %.9g, want %.9g", k->isa, (long long)D,
                         (long long)n, r, (long long)j, got, j >= n8 ? sentinel : w);
        }

    /* softmax_step over n keys (not a multiple of the lanes), a mask added,
     * scores of a few units so that the weights span several decades */
    for (int64_t j = 0; j < n; j++) row[j] = s[j] = 6 * frand();
    float m = -INFINITY, sum = k->softmax_step(s, add, n, &m);
    double mx = -INFINITY, wsum = 0;
    for (int64_t j = 0; j < n; j++) mx = row[j] + add[j] > mx ? row[j] + add[j] : mx;
    assert_true(m == (float)mx);
    for (int64_t j = 0; j < n; j++) {
        double e = exp((double)(row[j] + add[j]) - mx);
        if (fabs(s[j] - e) > 2e-7 * (e > 1 ? e : 1))
            fail_msg("%s softmax_step n=%lld: p[%lld] = %.9g, want %.9g", k->isa, (long long)n, (long long)j, s[j], e);
        wsum += e;
    }
    assert_true(fabs(sum - wsum) < 1e-6 * wsum * (1 + n / 64.0));

    /* pv over the n keys, accumulating into o; columns past dv untouched */
    for (int64_t i = 0; i < 4 * ldo; i++) o0[i] = o[i] = (i % ldo) < dv ? frand() : sentinel;
    for (int64_t i = 0; i < 4 * ldk; i++) s[i] = (frand() + 1) / 2;
    k->pv(s, ldk, n, v, ldv, dv, o, ldo);
    for (int r = 0; r < 4; r++)
        for (int64_t e = 0; e < ldo; e++) {
            double w = o0[r * ldo + e], mag = fabs(w);
            for (int64_t j = 0; j < n && e < dv; j++) {
                w += (double)s[r * ldk + j] * v[j * ldv + e];
                mag += fabs((double)s[r * ldk + j] * v[j * ldv + e]);
            }
            float got = o[r * ldo + e];
            if (e >= dv ? got != sentinel : fabs(got - w) > 1e-6 * (1 + mag))
                fail_msg("%s pv n=%lld dv=%lld: o[%d][%lld] = %.9g, want %.9g", k->isa, (long long)n, (long long)dv, r,
                         (long long)e, got, w);
        }
    free(kr), free(q), free(kt), free(s), free(v), free(o), free(o0), free(add), free(row);
}

static void test_kernels(void **state)
{
    (void)state;
    const kn_attn_kern *ks[MAX_TABLES];
    int nk = tables(ks);
    for (int ki = 0; ki < nk; ki++) {
        const kn_attn_kern *k = ks[ki];
        for (size_t g = 0; g < sizeof kgeoms / sizeof kgeoms[0]; g++) check_kernels(k, kgeoms[g]);
        /* softmax_step's edges: masked keys and scores far below the
         * maximum weigh 0, a running maximum above the block's stays, a
         * block with every key masked, a NaN */
        float p[37], add[37], saved[37];
        for (int j = 0; j < 37; j++) p[j] = 8 * frand(), add[j] = frand();
        p[3] = -INFINITY, p[30] = -200;
        memcpy(saved, p, sizeof saved);
        float m = -INFINITY;
        k->softmax_step(p, add, 37, &m);
        assert_true(p[3] == 0 && p[30] == 0);
        m = 100;
        float sum = k->softmax_step(memcpy(p, saved, sizeof saved), NULL, 37, &m);
        assert_true(m == 100 && sum < 1e-30);
        for (int j = 0; j < 11; j++) p[j] = -INFINITY;
        m = -INFINITY;
        assert_true(k->softmax_step(p, NULL, 11, &m) == 0 && m == -INFINITY && p[0] == 0 && p[10] == 0);
        p[5] = NAN, m = 0;
        assert_true(isnan(k->softmax_step(p, NULL, 11, &m)) && isnan(m));
        for (int j = 0; j < 37; j++) p[j] = frand();
        p[36] = NAN, m = 0; /* in a tail lane */
        assert_true(isnan(k->softmax_step(p, NULL, 37, &m)) && isnan(m));
    }
}

/* ---- the bf16 table (autocast's Attention) ---- */

static bool has_bf16_table(void)
{
    static bool said;
    bool ok = kn_attn_kern_avx512_bf16.scores && has(KN_CPU_AVX512F | KN_CPU_AVX512BF16 | AVX2_FMA);
    if (!ok && !said)
        KN_SKIP_PART("no AVX512-BF16 (CPU, KILN_CPU_MASK or not x86-64): attention:avx512-bf16 not checked");
    said = true;
    return ok;
}

/* x rounded to bf16 as vcvtne2ps2bf16 does (nearest, ties to even; the
 * test's values are neither NaN nor denormal): its upper 16 bits. */
static uint32_t bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

static float bf16_round(float x)
{
    uint32_t u = bf16_bits(x) << 16;
    float y;
    memcpy(&y, &u, sizeof y);
    return y;
}

/* The pair word of elements 2p and 2p + 1 of the n values at x (0 past n). */
static uint32_t pair_word(const float *x, int64_t p, int64_t n)
{
    return bf16_bits(x[2 * p]) | (2 * p + 1 < n ? bf16_bits(x[2 * p + 1]) << 16 : 0u);
}

static uint32_t word_at(const float *p)
{
    uint32_t u;
    memcpy(&u, p, sizeof u);
    return u;
}

/* The bf16 table on one geometry: pack_q and pack_kt bit for bit against
 * the rounding above, scores within f32 summation error of double sums of
 * the rounded operands (unrounded, the error would be about 1e-3 of the
 * magnitude: the tolerance tells the two apart). */
static void check_bf16_kernels(kgeom g)
{
    const kn_attn_kern *k = &kn_attn_kern_avx512_bf16;
    const float sentinel = 12345.0f;
    const int64_t D = g.D, n = g.n, Dp = (D + 1) / 2, n8 = (n + 7) / 8 * 8, ldk = n8 + 24, ldr = D + 3;
    float *kr = floats((size_t)(n * ldr)), *q = floats((size_t)(4 * D)), *q0 = malloc((size_t)(4 * D) * sizeof *q0);
    float *kt = floats((size_t)(Dp * ldk)), *s = floats((size_t)(4 * ldk));
    assert_non_null(q0);
    memcpy(q0, q, (size_t)(4 * D) * sizeof *q);
    k->pack_q(q, 4, D);
    for (int r = 0; r < 4; r++)
        for (int64_t p = 0; p < Dp; p++) assert_true(word_at(q + r * D + p) == pair_word(q0 + r * D, p, D));

    for (int64_t i = 0; i < Dp * ldk; i++) kt[i] = sentinel;
    k->pack_kt(kr, ldr, n, D, kt, ldk);
    for (int64_t p = 0; p < Dp; p++)
        for (int64_t j = 0; j < ldk; j++) {
            float *at = kt + p * ldk + j;
            bool ok = j < n ? word_at(at) == pair_word(kr + j * ldr, p, D) : j < n8 ? *at == 0.0f : *at == sentinel;
            if (!ok) fail_msg("avx512-bf16 pack_kt D=%lld n=%lld: word (%lld, %lld) = 0x%08x", (long long)D,
                              (long long)n, (long long)p, (long long)j, word_at(at));
        }

    for (int64_t i = 0; i < 4 * ldk; i++) s[i] = sentinel;
    k->scores(q, D, kt, ldk, n8, s);
    for (int r = 0; r < 4; r++)
        for (int64_t j = 0; j < ldk; j++) {
            double w = 0, mag = 0;
            for (int64_t d = 0; d < D && j < n; d++) {
                double t = (double)bf16_round(q0[r * D + d]) * bf16_round(kr[j * ldr + d]);
                w += t, mag += fabs(t);
            }
            float got = s[r * ldk + j];
            if (j >= n8 ? got != sentinel : fabs(got - w) > 1e-6 * (1 + mag))
                fail_msg("avx512-bf16 scores D=%lld n=%lld: s[%d][%lld] = %.9g, want %.9g", (long long)D, (long long)n,
                         r, (long long)j, got, j >= n8 ? sentinel : w);
        }
    free(kr), free(q), free(q0), free(kt), free(s);
}


static void test_bf16_kernels(void **state)
{
    (void)state;
    if (!has_bf16_table()) skip();
    for (size_t g = 0; g < sizeof kgeoms / sizeof kgeoms[0]; g++) check_bf16_kernels(kgeoms[g]);
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

static double max_abs_error(const kn_tensor *y, const kn_tensor *ref)
{
    double worst = 0;
    for (int64_t i = 0; i < kn_tensor_numel(ref); i++) {
        float a = ((float *)y->data)[i], r = ((float *)ref->data)[i];
        if (isnan(r)) {
            assert_true(isnan(a));
            continue;
        }
        double e = fabs((double)a - r);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* The node with compute bf16 (autocast): against the f32 reference within
 * what bf16 scores allow, and, where the scale is a power of two (so that
 * rounding Q after the scale is rounding it before), against the
 * reference run on Q and K rounded to bf16 within the f32 tolerance: the
 * only difference then is the order of the f32 sums. */
static void check_bf16_node(const acase *c, const kn_attn_dims *dm, const kn_attn_params *pr, const kn_tensor *q,
                            const kn_tensor *k, const kn_tensor *v, const kn_tensor *mp, const kn_tensor *npp,
                            const kn_tensor *ref)
{
    kn_tensor y1, y3, qr, kr, refr;
    kn_op_session s1 = {.threads = 1}, s3 = {.threads = 3};
    assert_int_equal(kn_tensor_alloc(&y1, KN_F32, ref->rank, ref->dims), KN_OK);
    assert_int_equal(kn_tensor_alloc(&y3, KN_F32, ref->rank, ref->dims), KN_OK);
    assert_int_equal(kn_attention_fast(&s1, dm, pr, q, k, v, mp, NULL, npp, &y1, false, KN_BF16), KN_OK);
    assert_int_equal(kn_attention_fast(&s3, dm, pr, q, k, v, mp, NULL, npp, &y3, false, KN_BF16), KN_OK);
    assert_string_equal(s1.impl, "kiln attention:avx512-bf16");
    assert_memory_equal(y1.data, y3.data, (size_t)kn_tensor_numel(ref) * sizeof(float));
    double worst = max_abs_error(&y1, ref);
    if (worst > 1e-2) fail_msg("%s (bf16 scores): max abs error %.3g against f32", c->what, worst);
    double sc = pr->scale, e2 = log2(sc);
    if (e2 == floor(e2)) {
        assert_int_equal(kn_tensor_alloc(&qr, KN_F32, q->rank, q->dims), KN_OK);
        assert_int_equal(kn_tensor_alloc(&kr, KN_F32, k->rank, k->dims), KN_OK);
        assert_int_equal(kn_tensor_alloc(&refr, KN_F32, ref->rank, ref->dims), KN_OK);
        for (int64_t i = 0; i < kn_tensor_numel(q); i++) ((float *)qr.data)[i] = bf16_round(((float *)q->data)[i]);
        for (int64_t i = 0; i < kn_tensor_numel(k); i++) ((float *)kr.data)[i] = bf16_round(((float *)k->data)[i]);
        assert_int_equal(kn_k_attention(dm, pr, &qr, &kr, v, mp, NULL, NULL, npp, &refr, NULL, NULL, NULL), KN_OK);
        double w = max_abs_error(&y1, &refr);
        if (w > 2e-5) fail_msg("%s (bf16 scores): max abs error %.3g against bf16-rounded Q, K", c->what, w);
        kn_tensor_free(&qr), kn_tensor_free(&kr), kn_tensor_free(&refr);
    }
    if (getenv("KILN_TEST_VERBOSE")) printf("%s: bf16 max abs error %.3g against f32\n", c->what, worst);
    s1.free_state(s1.state), s3.free_state(s3.state);
    kn_tensor_free(&y1), kn_tensor_free(&y3);
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

    const kn_attn_kern *ks[MAX_TABLES];
    int nk = tables(ks);
    const char *mask0 = getenv("KILN_CPU_MASK");
    char saved_mask[64];
    if (mask0) mask0 = strncpy(saved_mask, mask0, sizeof saved_mask - 1), saved_mask[sizeof saved_mask - 1] = 0;
    for (int ki = 0; ki < nk; ki++) {
        select_table(ks[ki], mask0);
        kn_op_session s1 = {.threads = 1}, s3 = {.threads = 3};
        assert_int_equal(kn_tensor_alloc(&y1, KN_F32, ref.rank, ref.dims), KN_OK);
        assert_int_equal(kn_tensor_alloc(&y3, KN_F32, ref.rank, ref.dims), KN_OK);
        assert_int_equal(kn_attention_fast(&s1, &dm, &pr, &q, &k, &v, mp, NULL, npp, &y1, false, 0), KN_OK);
        assert_int_equal(kn_attention_fast(&s3, &dm, &pr, &q, &k, &v, mp, NULL, npp, &y3, false, 0), KN_OK);
        /* a second run reuses the scratch */
        assert_int_equal(kn_attention_fast(&s3, &dm, &pr, &q, &k, &v, mp, NULL, npp, &y3, false, 0), KN_OK);
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
        assert_string_equal(s1.impl, ks[ki]->impl);
        s1.free_state(s1.state), s3.free_state(s3.state);
        kn_tensor_free(&y1), kn_tensor_free(&y3);
    }
    unsetenv("KILN_ATTENTION");
    select_table(&kn_attn_kern_avx512, mask0); /* KILN_CPU_MASK as it was */
    if (has_bf16_table()) check_bf16_node(c, &dm, &pr, &q, &k, &v, mp, npp, &ref);
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
        {"D=1, Dv=7", 1, 2, 2, 9, 23, 1, 7, false, false, 0, 2, false},
        {"D=7, Dv=1, 2 key blocks", 1, 1, 1, 13, 300, 7, 1, true, false, 0, 1, false},
        {"D=80, Dv=64, GQA", 1, 4, 2, 21, 261, 80, 64, true, false, 0, 1, false},
        {"D=128, Dv=80, causal", 1, 2, 2, 19, 100, 128, 80, false, true, 0, 0, false},
        {"D=64, Dv=128, short mask", 2, 2, 2, 10, 47, 64, 128, false, false, 0, 4, false},
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
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, &k, NULL, &y, false, 0), KN_ERR_UNSUPPORTED);
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, NULL, NULL, &y, true, 0), KN_ERR_UNSUPPORTED);
    setenv("KILN_ATTENTION", "ref", 1);
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, NULL, NULL, &y, false, 0), KN_ERR_UNSUPPORTED);
    assert_null(s.state);
    assert_int_equal(kn_config_check_attention(), KN_OK);
    setenv("KILN_ATTENTION", "flash", 1);
    assert_int_equal(kn_config_check_attention(), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "KILN_ATTENTION='flash'"));
    unsetenv("KILN_ATTENTION");
    kn_tensor_free(&q), kn_tensor_free(&k), kn_tensor_free(&v), kn_tensor_free(&y);
}

/* A bf16 node runs in f32 where the bf16 table may not run: with
 * KILN_ATTENTION=portable, and on a CPU without AVX512-BF16 (the best f32
 * table); an f32 node never takes the bf16 table. The table is picked when
 * a session first runs the node (a new session for each setting here),
 * and again if the node's compute changes. */
static void test_bf16_fallbacks(void **state)
{
    (void)state;
    kn_attn_dims dm = {1, 2, 2, 5, 19, 0, 8, 8, false};
    kn_attn_params pr = {.scale = 0.25};
    kn_tensor q, k, v, y;
    fill(&q, KN_F32, 4, (int64_t[]){1, 2, 5, 8});
    fill(&k, KN_F32, 4, (int64_t[]){1, 2, 19, 8});
    fill(&v, KN_F32, 4, (int64_t[]){1, 2, 19, 8});
    assert_int_equal(kn_tensor_alloc(&y, KN_F32, 4, (int64_t[]){1, 2, 5, 8}), KN_OK);
    const char *mask0 = getenv("KILN_CPU_MASK");
    char saved[64], nobf16[32];
    if (mask0) mask0 = strncpy(saved, mask0, sizeof saved - 1), saved[sizeof saved - 1] = 0;
    kn_op_session s = {.threads = 1};
    setenv("KILN_ATTENTION", "portable", 1);
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, NULL, NULL, &y, false, KN_BF16), KN_OK);
    assert_string_equal(s.impl, "kiln attention:portable");
    s.free_state(s.state), s.state = NULL;
    unsetenv("KILN_ATTENTION");
    const kn_attn_kern *ks[MAX_TABLES];
    const kn_attn_kern *best = ks[tables(ks) - 1]; /* the f32 table auto picks */
    snprintf(nobf16, sizeof nobf16, "0x%llx", (unsigned long long)(kn_cpu_features() & ~(uint64_t)KN_CPU_AVX512BF16));
    setenv("KILN_CPU_MASK", nobf16, 1);
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, NULL, NULL, &y, false, KN_BF16), KN_OK);
    assert_string_equal(s.impl, best->impl);
    if (mask0) setenv("KILN_CPU_MASK", mask0, 1);
    else unsetenv("KILN_CPU_MASK");
    assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, NULL, NULL, &y, false, 0), KN_OK);
    assert_string_equal(s.impl, best->impl);
    if (has_bf16_table()) {
        assert_int_equal(kn_attention_fast(&s, &dm, &pr, &q, &k, &v, NULL, NULL, NULL, &y, false, KN_BF16), KN_OK);
        assert_string_equal(s.impl, "kiln attention:avx512-bf16");
    }
    s.free_state(s.state);
    kn_tensor_free(&q), kn_tensor_free(&k), kn_tensor_free(&v), kn_tensor_free(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels),
        cmocka_unit_test(test_bf16_kernels),
        cmocka_unit_test(test_nodes),
        cmocka_unit_test(test_declines),
        cmocka_unit_test(test_bf16_fallbacks),
    };
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
