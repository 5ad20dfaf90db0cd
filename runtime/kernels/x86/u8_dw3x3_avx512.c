/*
 * runtime/kernels/x86/u8_dw3x3_avx512.c — kiln's int8 depthwise 3x3
 * convolution: u8 activations, s8 weights, NHWC, stride 1 or 2, on
 * AVX-512 VNNI; the output requantized to u8 or s8 as it is stored.
 *
 * A depthwise convolution has no sum over channels, so VPDPBUSD's four
 * byte products per lane cannot be four channels as in a matrix product.
 * oneDNN's kernel widens each byte to a lane and uses a quarter of the
 * instruction (16 products); MobileNetV2's int8 depthwise layers then ran
 * barely faster than its float ones. Here the four bytes of a lane are one
 * channel at one column in four consecutive input rows:
 *
 *     lane = (x[r][c], x[r+1][c], x[r+2][c], x[r+3][c])
 *
 * and the filter lane of column kw is (k[0][kw], k[1][kw], k[2][kw], 0)
 * for output row r + 1 (stride 1, top padding 1) and (0, k[0][kw],
 * k[1][kw], k[2][kw]) for output row r + 2: one such column of four rows,
 * built once, serves two output rows and (stride 1) the three output
 * columns that read it; 9 taps take 3 instructions per output row.
 *
 * Building the lanes from four rows of 64 channels is two rounds of
 * in-lane byte and word unpacks (8 shuffles for 256 bytes), which leave
 * the channels of each 128-bit lane in four vectors Q0..Q3: Q_j holds
 * channels 16l + 4j .. 16l + 4j + 3 of lane l. The filters are packed in
 * that order once, and the store's saturating packs (dwords to words to
 * bytes, also in-lane) put the channels back in order for free.
 *
 * The sum is in accumulator units, x (not x - zero point): the zero
 * point's share, zx * sum(k) per channel, joins the bias once; a window
 * that reaches past the image reads zx there (a row of zx bytes above and
 * below, zx vectors left and right), so that the share is the same for
 * every output.
 *
 * Requantization is y = sat(round(scale * acc + offset)), offset =
 * scale * (bias - zx sum(k)) + zy, in float as oneDNN's kernels and
 * onnxruntime compute it: this kernel's output equals oneDNN's on the
 * generated MobileNetV2, where a fixed-point form (16-bit multiplier and
 * shifts) was off by one step in ~1% of each layer's outputs, and the
 * errors grew through the network until 7% of the logits were off by more
 * than a step. The float arithmetic runs on 256-bit halves: 512-bit float
 * instructions between the int8 model's integer and AMX kernels slowed
 * every layer after them (the CPU's clock for heavy 512-bit work), which
 * cost MobileNetV2 int8 on 2 threads more (1.32 -> 1.42 ms) than the
 * depthwise layers gained. ReLU and Clip become a clamp of the bytes.
 *
 * The work is split over (image, pair of output rows, 64-channel chunk);
 * the last chunk of a channel count that is not a multiple of 64 uses
 * masked loads and stores. With 16 or 32 channels (stride 1, one column
 * of padding each side) a chunk is 4 or 2 whole pixels instead, and the
 * window's outer columns are lane shifts of the chunks before and after
 * (dw8_rows_narrow).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "rt_internal.h"

enum {
    DW8_CHUNK = 64,                      /* channels per chunk: 64 bytes of a pixel */
    DW8_FILTER = 2 * 3 * 4 * DW8_CHUNK,  /* packed filter bytes per chunk: 2 rows x 3 kw x Q0..Q3 */
    DW8_BAND_BYTES = 256 << 10,          /* the least output (in whole chunks) per parallel unit */
};

struct kn_dw8 {
    int64_t N, C, H, W, OH, OW;
    int64_t stride, pt, pl; /* the same stride both ways; top and left padding */
    int64_t chunks;         /* ceil(C / 64); 1 when narrow */
    int64_t narrow;         /* C = 16 or 32 at stride 1, same padding: a chunk is 64 / C pixels; else 0 */
    int64_t pairs;          /* groups of output rows per image: pairs (stride 1) or rows */
    bool s8_out;            /* s8 output, else u8 */
    uint8_t zx;             /* the input's zero point */
    int8_t lo, hi;          /* the post-ops' clamp in output bytes (u8 or s8 as the output) */
    int8_t *filter;         /* [chunks][top, bottom][kw][Q0..Q3][64], see above */
    float *scale, *offset;  /* [chunks][Q0..Q3][16], in the order of the Q vectors */
    uint8_t *pad;           /* a row of W x C bytes zx: the rows outside the image */
};

bool kn_dw8_supported(const kn_abi_dnnl *rec)
{
    if (!kn_q8_record_ok(rec)) return false;
    int64_t C = rec->src.dims[1];
    if (rec->groups != C || rec->wei.dims[0] != C || rec->wei.dims[1] != 1 || rec->wei.dims[2] != 3 ||
        rec->wei.dims[3] != 3 || rec->wei.nbytes != C * 9)
        return false;
    int64_t s = rec->strides[0];
    if ((s != 1 && s != 2) || rec->strides[1] != s) return false;
    for (int i = 0; i < 2; i++) {
        int64_t in = rec->src.dims[2 + i], pb = rec->pads_begin[i], pe = rec->pads_end[i];
        if (rec->dilations[i] != 1 || pb < 0 || pb > 2 || pe < 0 || pe > 2 || in + pb + pe < 3 ||
            rec->dst.dims[2 + i] != (in + pb + pe - 3) / s + 1)
            return false;
    }
    return true;
}

/* True if rec's chunks are pixels (64 / C of them): 16 or 32 channels at
 * stride 1 with one column of padding each side, so that the columns a
 * window reads are the chunk's own pixels shifted by one (dw8_rows_narrow). */
static bool dw8_narrow(const kn_abi_dnnl *rec)
{
    int64_t C = rec->src.dims[1];
    return (C == 16 || C == 32) && rec->strides[0] == 1 && rec->pads_begin[1] == 1 && rec->pads_end[1] == 1;
}

/* Whether it beats oneDNN's depthwise kernel on rec (a supported one): a
 * 64-channel chunk that is partly empty (the last one of a count that is no
 * multiple of 64) costs as much as a full one, and at stride 2 each output
 * builds two columns of lanes instead of one. On MobileNetV2's layers (one
 * thread, Xeon with AMX) against oneDNN's brdgmm: 0.63-0.71 of its time with
 * full chunks at either stride, 0.90 at stride 1 with 3/4 of the lanes used
 * (144 channels), 1.04-1.08 at stride 2 so (96, 144), 0.66 with 32 narrow
 * (1.28 as a half-empty chunk). */
bool kn_dw8_worth(const kn_abi_dnnl *rec)
{
    int64_t C = rec->src.dims[1], lanes = (C + DW8_CHUNK - 1) / DW8_CHUNK * DW8_CHUNK;
    return C == lanes || dw8_narrow(rec) || (rec->strides[0] == 1 && 4 * C >= 3 * lanes);
}

void kn_dw8_free(kn_dw8 *k)
{
    if (!k) return;
    kn_big_free(k->filter);
    kn_big_free(k->scale);
    kn_big_free(k->offset);
    kn_big_free(k->pad);
    free(k);
}

int kn_dw8_create(const kn_abi_dnnl *rec, const int8_t *w, const float *bias, const float *scales, kn_dw8 **out)
{
    *out = NULL;
    if (!kn_dw8_supported(rec))
        return kn_error(KN_ERR_UNSUPPORTED, "int8 depthwise convolution: not one the AVX-512 VNNI kernel runs");
    if (!w || !scales) return kn_error(KN_ERR_INVALID, "int8 depthwise convolution: no weights or scales were given");
    kn_dw8 *k = calloc(1, sizeof *k);
    if (!k) return kn_error(KN_ERR_NOMEM, "out of memory");
    k->N = rec->src.dims[0], k->C = rec->src.dims[1], k->H = rec->src.dims[2], k->W = rec->src.dims[3];
    k->OH = rec->dst.dims[2], k->OW = rec->dst.dims[3];
    k->stride = rec->strides[0], k->pt = rec->pads_begin[0], k->pl = rec->pads_begin[1];
    k->chunks = (k->C + DW8_CHUNK - 1) / DW8_CHUNK;
    k->narrow = dw8_narrow(rec) ? k->C : 0;
    k->pairs = k->stride == 1 ? (k->OH + 1) / 2 : k->OH;
    k->s8_out = rec->dst.dtype == KN_I8;
    k->zx = (uint8_t)rec->src_zp;
    int64_t C = k->C, slots = k->chunks * DW8_CHUNK;
    k->filter = kn_big_alloc((size_t)(k->chunks * DW8_FILTER));
    k->scale = kn_big_alloc((size_t)slots * sizeof(float));
    k->offset = kn_big_alloc((size_t)slots * sizeof(float));
    k->pad = kn_big_alloc((size_t)(k->W * C));
    if (!k->filter || !k->scale || !k->offset || !k->pad) {
        kn_dw8_free(k);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    memset(k->pad, k->zx, (size_t)(k->W * C));
    memset(k->filter, 0, (size_t)(k->chunks * DW8_FILTER));
    kn_q8_byte_clamp(rec, &k->lo, &k->hi);
    for (int64_t s = 0; s < slots; s++) {
        /* slot s of chunk ch: Q vector j, lane l, dword i */
        int64_t ch = s / DW8_CHUNK, e = s % DW8_CHUNK, j = e / 16, ln = e % 16 / 4, i = e % 4;
        int64_t c = ch * DW8_CHUNK + 16 * ln + 4 * j + i;
        if (k->narrow) c %= C; /* the chunk's 64 lanes are 64 / C pixels */
        if (c >= C) {
            k->scale[s] = k->offset[s] = 0.f;
            continue;
        }
        const int8_t *f = w + c * 9;
        int64_t sum = 0;
        for (int t = 0; t < 9; t++) sum += f[t];
        double sc = scales[rec->n_scale == 1 ? 0 : c], b = bias ? bias[c] : 0.0;
        double off = sc * (b - (double)k->zx * (double)sum) + rec->dst_zp;
        /* a sum (at most 9 x 255 x 128 in size) that leaves int32 once
         * scaled would convert to INT_MIN: such a channel is oneDNN's */
        if (!isfinite(sc) || !isfinite(off) || fabs(sc) * 9 * 255 * 128 + fabs(off) >= 2e9) {
            kn_dw8_free(k);
            return kn_error(KN_ERR_UNSUPPORTED, "int8 depthwise convolution: channel %lld: scale %g, bias %g",
                            (long long)c, sc, b);
        }
        k->scale[s] = (float)sc, k->offset[s] = (float)off;
        for (int v = 0; v < 2; v++)
            for (int kw = 0; kw < 3; kw++)
                for (int b4 = 0; b4 < 4; b4++) {
                    int kh = b4 - v; /* the top row's bytes 0..2, the bottom row's 1..3 */
                    if (kh < 0 || kh > 2) continue;
                    k->filter[ch * DW8_FILTER + ((v * 3 + kw) * 4 + j) * DW8_CHUNK + ln * 16 + i * 4 + b4] =
                        f[kh * 3 + kw];
                }
    }
    *out = k;
    return KN_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#define KN_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma")))

/* Four rows of one column as Q0..Q3. */
typedef struct dw8_col {
    __m512i q[4];
} dw8_col;

/* Rows r[0..3] at column x (zx outside the image), channels c0 .. c0 + 63
 * (the first `m` of them unless full). */
KN_TARGET_VNNI static inline __attribute__((always_inline)) dw8_col dw8_load(const uint8_t *const *r, int64_t x,
                                                                            const kn_dw8 *k, int64_t c0, __mmask64 m,
                                                                            const bool full)
{
    dw8_col v;
    if (x < 0 || x >= k->W) {
        v.q[0] = v.q[1] = v.q[2] = v.q[3] = _mm512_set1_epi8((char)k->zx);
        return v;
    }
    int64_t o = x * k->C + c0;
    __m512i a, b, c, d;
    if (full) {
        a = _mm512_loadu_si512(r[0] + o), b = _mm512_loadu_si512(r[1] + o);
        c = _mm512_loadu_si512(r[2] + o), d = _mm512_loadu_si512(r[3] + o);
    } else {
        a = _mm512_maskz_loadu_epi8(m, r[0] + o), b = _mm512_maskz_loadu_epi8(m, r[1] + o);
        c = _mm512_maskz_loadu_epi8(m, r[2] + o), d = _mm512_maskz_loadu_epi8(m, r[3] + o);
    }
    __m512i p = _mm512_unpacklo_epi8(a, b), q = _mm512_unpackhi_epi8(a, b);
    __m512i s = _mm512_unpacklo_epi8(c, d), t = _mm512_unpackhi_epi8(c, d);
    v.q[0] = _mm512_unpacklo_epi16(p, s), v.q[1] = _mm512_unpackhi_epi16(p, s);
    v.q[2] = _mm512_unpacklo_epi16(q, t), v.q[3] = _mm512_unpackhi_epi16(q, t);
    return v;
}

/* One output pixel's 64 channels: the three columns a, b, c by filter f
 * (one output row's 3 x 4 vectors). */
KN_TARGET_VNNI static inline __attribute__((always_inline)) void dw8_taps(__m512i acc[4], const dw8_col *a,
                                                                         const dw8_col *b, const dw8_col *c,
                                                                         const __m512i *f)
{
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a->q[j], _mm512_load_si512(f + j));
        s = _mm512_dpbusd_epi32(s, b->q[j], _mm512_load_si512(f + 4 + j));
        acc[j] = _mm512_dpbusd_epi32(s, c->q[j], _mm512_load_si512(f + 8 + j));
    }
}

/* Requantizes acc (the chunk's scale and offset) and stores 64 bytes. */
KN_TARGET_VNNI static inline __attribute__((always_inline)) void dw8_store(const kn_dw8 *k, const __m512i acc[4],
                                                                          const float *sc, const float *of,
                                                                          uint8_t *dst, __mmask64 m, const bool full)
{
    __m512i r[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256 lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm512_castsi512_si256(acc[j])), _mm256_load_ps(sc + 16 * j),
                                    _mm256_load_ps(of + 16 * j));
        __m256 hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm512_extracti64x4_epi64(acc[j], 1)),
                                    _mm256_load_ps(sc + 16 * j + 8), _mm256_load_ps(of + 16 * j + 8));
        /* nearest, ties to even (MXCSR's default), as oneDNN */
        r[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_cvtps_epi32(lo)), _mm256_cvtps_epi32(hi), 1);
    }
    __m512i w0 = _mm512_packs_epi32(r[0], r[1]), w1 = _mm512_packs_epi32(r[2], r[3]);
    __m512i y;
    if (k->s8_out)
        y = _mm512_min_epi8(_mm512_max_epi8(_mm512_packs_epi16(w0, w1), _mm512_set1_epi8(k->lo)),
                            _mm512_set1_epi8(k->hi));
    else
        y = _mm512_min_epu8(_mm512_max_epu8(_mm512_packus_epi16(w0, w1), _mm512_set1_epi8(k->lo)),
                            _mm512_set1_epi8(k->hi));
    if (full)
        _mm512_storeu_si512(dst, y);
    else
        _mm512_mask_storeu_epi8(dst, m, y);
}

/* Output row oy (and oy + 1 when two) of image `in` -> `out`, chunk ch;
 * S the stride. */
KN_TARGET_VNNI static inline __attribute__((always_inline)) void dw8_rows(const kn_dw8 *k, const uint8_t *in,
                                                                         uint8_t *out, int64_t oy, int64_t ch,
                                                                         const int S, const bool two, const bool full)
{
    int64_t C = k->C, rowb = k->W * C, c0 = ch * DW8_CHUNK, iy0 = oy * S - k->pt;
    const uint8_t *r[4];
    for (int b = 0; b < 4; b++) {
        int64_t iy = iy0 + b;
        r[b] = iy >= 0 && iy < k->H ? in + iy * rowb : k->pad;
    }
    __mmask64 m = full ? ~(__mmask64)0 : (~(__mmask64)0) >> (DW8_CHUNK - (C - c0));
    const __m512i *ft = (const __m512i *)(k->filter + ch * DW8_FILTER), *fb = ft + 12;
    const float *sc = k->scale + ch * DW8_CHUNK, *of = k->offset + ch * DW8_CHUNK;
    uint8_t *d0 = out + oy * k->OW * C + c0, *d1 = d0 + k->OW * C;
    int64_t x = -k->pl;
    dw8_col a = dw8_load(r, x, k, c0, m, full), b = dw8_load(r, x + 1, k, c0, m, full);
    for (int64_t ox = 0; ox < k->OW; ox++) {
        dw8_col c = dw8_load(r, x + 2, k, c0, m, full);
        __m512i acc[4];
        dw8_taps(acc, &a, &b, &c, ft);
        dw8_store(k, acc, sc, of, d0 + ox * C, m, full);
        if (two) {
            dw8_taps(acc, &a, &b, &c, fb);
            dw8_store(k, acc, sc, of, d1 + ox * C, m, full);
        }
        if (S == 1) {
            a = b, b = c, x += 1;
        } else {
            a = c, b = dw8_load(r, x + 3, k, c0, m, full), x += 2;
        }
    }
}

/* Rows r[0..3] as lanes, 64 bytes from byte o of each row: the pixels
 * past the row (n bytes left) read zx. */
KN_TARGET_VNNI static inline __attribute__((always_inline)) dw8_col dw8_load_bytes(const uint8_t *const *r,
                                                                                  int64_t o, int64_t n,
                                                                                  const kn_dw8 *k)
{
    dw8_col v;
    if (n <= 0) {
        v.q[0] = v.q[1] = v.q[2] = v.q[3] = _mm512_set1_epi8((char)k->zx);
        return v;
    }
    __mmask64 m = n >= DW8_CHUNK ? ~(__mmask64)0 : (~(__mmask64)0) >> (DW8_CHUNK - n);
    __m512i z = _mm512_set1_epi8((char)k->zx);
    __m512i a = _mm512_mask_loadu_epi8(z, m, r[0] + o), b = _mm512_mask_loadu_epi8(z, m, r[1] + o);
    __m512i c = _mm512_mask_loadu_epi8(z, m, r[2] + o), d = _mm512_mask_loadu_epi8(z, m, r[3] + o);
    __m512i p = _mm512_unpacklo_epi8(a, b), q = _mm512_unpackhi_epi8(a, b);
    __m512i s = _mm512_unpacklo_epi8(c, d), t = _mm512_unpackhi_epi8(c, d);
    v.q[0] = _mm512_unpacklo_epi16(p, s), v.q[1] = _mm512_unpackhi_epi16(p, s);
    v.q[2] = _mm512_unpacklo_epi16(q, t), v.q[3] = _mm512_unpackhi_epi16(q, t);
    return v;
}

/* The lanes of the pixel before each of cur's (L = C / 16 lanes per
 * pixel): prev's last pixel, then cur's but its last. */
KN_TARGET_VNNI static inline __attribute__((always_inline)) dw8_col dw8_before(const dw8_col *cur,
                                                                              const dw8_col *prev, const int L)
{
    dw8_col v;
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        v.q[j] = L == 2 ? _mm512_alignr_epi64(cur->q[j], prev->q[j], 4) : _mm512_alignr_epi64(cur->q[j], prev->q[j], 6);
    return v;
}

/* The lanes of the pixel after each of cur's: cur's but its first, then
 * next's first pixel. */
KN_TARGET_VNNI static inline __attribute__((always_inline)) dw8_col dw8_after(const dw8_col *cur,
                                                                             const dw8_col *next, const int L)
{
    dw8_col v;
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        v.q[j] = L == 2 ? _mm512_alignr_epi64(next->q[j], cur->q[j], 4) : _mm512_alignr_epi64(next->q[j], cur->q[j], 2);
    return v;
}

/* dw8_rows for narrow channels (dw8_narrow): each chunk is 64 / C whole
 * pixels, the three columns of a window the chunk, and it shifted by one
 * pixel either way (lane shifts of the chunks before and after), at L
 * lanes per pixel. */
KN_TARGET_VNNI static inline __attribute__((always_inline)) void dw8_rows_narrow(const kn_dw8 *k, const uint8_t *in,
                                                                                uint8_t *out, int64_t oy,
                                                                                const int L, const bool two)
{
    int64_t rowb = k->W * k->C, iy0 = oy - k->pt;
    const uint8_t *r[4];
    for (int b = 0; b < 4; b++) {
        int64_t iy = iy0 + b;
        r[b] = iy >= 0 && iy < k->H ? in + iy * rowb : k->pad;
    }
    const __m512i *ft = (const __m512i *)k->filter, *fb = ft + 12;
    uint8_t *d0 = out + oy * rowb, *d1 = d0 + rowb; /* OW = W at stride 1, same padding */
    dw8_col prev = dw8_load_bytes(r, 0, 0, k), cur = dw8_load_bytes(r, 0, rowb, k);
    for (int64_t o = 0; o < rowb; o += DW8_CHUNK) {
        dw8_col next = dw8_load_bytes(r, o + DW8_CHUNK, rowb - o - DW8_CHUNK, k);
        dw8_col a = dw8_before(&cur, &prev, L), c = dw8_after(&cur, &next, L);
        int64_t n = rowb - o;
        __mmask64 m = n >= DW8_CHUNK ? ~(__mmask64)0 : (~(__mmask64)0) >> (DW8_CHUNK - n);
        __m512i acc[4];
        dw8_taps(acc, &a, &cur, &c, ft);
        dw8_store(k, acc, k->scale, k->offset, d0 + o, m, n >= DW8_CHUNK);
        if (two) {
            dw8_taps(acc, &a, &cur, &c, fb);
            dw8_store(k, acc, k->scale, k->offset, d1 + o, m, n >= DW8_CHUNK);
        }
        prev = cur, cur = next;
    }
}

typedef struct dw8_run {
    const kn_dw8 *k;
    const uint8_t *src;
    uint8_t *dst;
    int64_t parts; /* the parallel loop's units: equal runs of N x pairs x chunks */
} dw8_run;

/* Parts [lo, hi) of the N x pairs x chunks units, the channel chunk
 * fastest: a part is a band of rows. */
KN_TARGET_VNNI static int dw8_chunk(void *args, int64_t lo, int64_t hi)
{
    const dw8_run *r = args;
    const kn_dw8 *k = r->k;
    int64_t all = k->N * k->pairs * k->chunks;
    lo = lo * all / r->parts, hi = hi * all / r->parts;
    for (int64_t u = lo; u < hi; u++) {
        int64_t ch = u % k->chunks, g = u / k->chunks % k->pairs, n = u / (k->chunks * k->pairs);
        const uint8_t *in = r->src + n * k->H * k->W * k->C;
        uint8_t *out = r->dst + n * k->OH * k->OW * k->C;
        bool full = (ch + 1) * DW8_CHUNK <= k->C, two = 2 * g + 1 < k->OH;
        if (k->narrow == 32) {
            if (two)
                dw8_rows_narrow(k, in, out, 2 * g, 2, true);
            else
                dw8_rows_narrow(k, in, out, 2 * g, 2, false);
        } else if (k->narrow == 16) {
            if (two)
                dw8_rows_narrow(k, in, out, 2 * g, 1, true);
            else
                dw8_rows_narrow(k, in, out, 2 * g, 1, false);
        } else if (k->stride == 2) {
            if (full)
                dw8_rows(k, in, out, g, ch, 2, false, true);
            else
                dw8_rows(k, in, out, g, ch, 2, false, false);
        } else if (two) {
            if (full)
                dw8_rows(k, in, out, 2 * g, ch, 1, true, true);
            else
                dw8_rows(k, in, out, 2 * g, ch, 1, true, false);
        } else {
            if (full)
                dw8_rows(k, in, out, 2 * g, ch, 1, false, true);
            else
                dw8_rows(k, in, out, 2 * g, ch, 1, false, false);
        }
    }
    return KN_OK;
}

int kn_dw8_exec(const kn_dw8 *k, const uint8_t *src, uint8_t *dst, int threads)
{
    /* One band of rows per thread: the band a thread reads is, as far as
     * possible, the one it wrote in the layer before (oneDNN's kernels split
     * their output by rows alike), and the band it writes the one it reads
     * next, in its own L2; chunks claimed in any order sent every line
     * across cores and made 2 threads slower than 1 on MobileNetV2's
     * layers. Up to 4 bands per thread for the larger layers, so that a
     * thread slowed by the host is helped out. */
    int64_t all = k->N * k->pairs * k->chunks;
    dw8_run r = {.k = k, .src = src, .dst = dst, .parts = threads > 1 ? threads : 1};
    if (threads > 1 && all * DW8_CHUNK * k->OW >= DW8_BAND_BYTES * 4 * threads) r.parts = 4 * threads;
    if (r.parts > all) r.parts = all;
    return kn_rt_parallel_for_threads(threads, dw8_chunk, &r, r.parts);
}

#else

int kn_dw8_exec(const kn_dw8 *k, const uint8_t *src, uint8_t *dst, int threads)
{
    (void)k, (void)src, (void)dst, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "int8 depthwise convolution: needs an x86-64 CPU with AVX-512 VNNI");
}

#endif
