/*
 * runtime/src/winograd_xform.h — Winograd's input and output transforms
 * (phases 1 and 3 of winograd.c), written once for any vector width.
 *
 * winograd.c includes this file once per width (no include guard), after
 * defining:
 *   XF(name)     this width's name for function `name`
 *   XF_TARGET    the function attribute that enables its instructions
 *   XF_V         the vector type; XF_LANES its floats, the channels per item
 *   XF_LOAD, XF_STORE (aligned), XF_LOADU, XF_STOREU, XF_ZERO, XF_SET1,
 *   XF_ADD, XF_SUB, XF_MUL, XF_FMADD(a, b, c) = a*b+c, XF_FNMADD = c-a*b,
 *   XF_MAX, XF_MIN, XF_LEAKY(x, alpha)
 * and undefines all of them (and its own BT4, BT2, AT4, AT2) at its end,
 * ready for the next width. The arithmetic is the same at every width, so
 * that results do not depend on it.
 */

/* The alpha x alpha input block of tile t, channels XF_LANES*b.. (zeros
 * outside the image: the padding). */
XF_TARGET static void XF(load_block)(const wino_run *r, int64_t t, int64_t b, XF_V d[MAX_ALPHA][MAX_ALPHA])
{
    const kn_wino *w = r->w;
    int64_t n = t / (w->th * w->tw), ty = t / w->tw % w->th, tx = t % w->tw, pix;
    const float *img = r->src + vec_base(w, w->C, n, b, XF_LANES, &pix);
    int64_t y0 = ty * w->m - 1, x0 = tx * w->m - 1;
    for (int i = 0; i < w->alpha; i++) {
        int64_t y = y0 + i;
        for (int j = 0; j < w->alpha; j++) {
            int64_t x = x0 + j;
            d[i][j] = (y >= 0 && y < w->H && x >= 0 && x < w->W) ? XF_LOAD(img + (y * w->W + x) * pix)
                                                                  : XF_ZERO();
        }
    }
}

/* B^T x for F(4x4) on 6 vectors (applied to rows, then to columns). */
#define BT4(x0, x1, x2, x3, x4, x5, y0, y1, y2, y3, y4, y5)                                                         \
    do {                                                                                                           \
        y0 = XF_ADD(XF_FNMADD(k5, x2, XF_MUL(k4, x0)), x4);                                   \
        XF_V a_ = XF_FNMADD(k4, x2, x4), b_ = XF_FNMADD(k4, x1, x3);                               \
        y1 = XF_ADD(a_, b_);                                                                                \
        y2 = XF_SUB(a_, b_);                                                                                \
        XF_V c_ = XF_SUB(x4, x2), d_ = XF_MUL(k2, XF_SUB(x3, x1));                          \
        y3 = XF_ADD(c_, d_);                                                                                \
        y4 = XF_SUB(c_, d_);                                                                                \
        y5 = XF_ADD(XF_FNMADD(k5, x3, XF_MUL(k4, x1)), x5);                                   \
    } while (0)

/* B^T x for F(2x2) on 4 vectors. */
#define BT2(x0, x1, x2, x3, y0, y1, y2, y3)                                                                         \
    do {                                                                                                           \
        y0 = XF_SUB(x0, x2);                                                                                \
        y1 = XF_ADD(x1, x2);                                                                                \
        y2 = XF_SUB(x2, x1);                                                                                \
        y3 = XF_SUB(x1, x3);                                                                                \
    } while (0)

/* Phase 1 for (tile, XF_LANES channels) pairs [lo, hi): V[p][t - t0][c..]. */
XF_TARGET static int XF(input_chunk)(void *args, int64_t lo, int64_t hi)
{
    const wino_run *r = args;
    const kn_wino *w = r->w;
    int64_t cb = w->C / XF_LANES, pos_stride = r->tn * w->C;
    const XF_V k2 = XF_SET1(2.f), k4 = XF_SET1(4.f), k5 = XF_SET1(5.f);
    for (int64_t it = lo; it < hi; it++) {
        int64_t t = it / cb, b = it % cb;
        XF_V d[MAX_ALPHA][MAX_ALPHA], e[MAX_ALPHA][MAX_ALPHA], f[MAX_ALPHA];
        XF(load_block)(r, t, b, d);
        float *v = r->V + (t - r->t0) * w->C + b * XF_LANES;
        if (w->m == 4) {
            for (int j = 0; j < 6; j++)
                BT4(d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j], e[0][j], e[1][j], e[2][j], e[3][j],
                    e[4][j], e[5][j]);
            for (int i = 0; i < 6; i++) {
                BT4(e[i][0], e[i][1], e[i][2], e[i][3], e[i][4], e[i][5], f[0], f[1], f[2], f[3], f[4], f[5]);
                for (int j = 0; j < 6; j++) XF_STOREU(v + (i * 6 + j) * pos_stride, f[j]);
            }
        } else {
            for (int j = 0; j < 4; j++) BT2(d[0][j], d[1][j], d[2][j], d[3][j], e[0][j], e[1][j], e[2][j], e[3][j]);
            for (int i = 0; i < 4; i++) {
                BT2(e[i][0], e[i][1], e[i][2], e[i][3], f[0], f[1], f[2], f[3]);
                for (int j = 0; j < 4; j++) XF_STOREU(v + (i * 4 + j) * pos_stride, f[j]);
            }
        }
    }
    return KN_OK;
}

/* The record's post-ops on one vector (sum: + the residual at the same place). */
XF_TARGET static XF_V XF(apply_posts)(const kn_wino *w, XF_V x, const float *res)
{
    for (int i = 0; i < w->n_post; i++) {
        const kn_abi_post *p = &w->post[i];
        switch (p->kind) {
        case KN_POST_RELU: x = XF_MAX(x, XF_ZERO()); break;
        case KN_POST_LEAKY_RELU: x = XF_LEAKY(x, p->alpha); break;
        case KN_POST_CLIP:
            x = XF_MIN(XF_MAX(x, XF_SET1(p->alpha)), XF_SET1(p->beta));
            break;
        case KN_POST_SUM: x = XF_ADD(x, XF_LOADU(res)); break;
        default: break;
        }
    }
    return x;
}

/* Bias, post-ops and the store of tile t's m x m outputs y, channels
 * XF_LANES*b.. (the pixels that fall inside the image). */
XF_TARGET static void XF(store_tile)(const wino_run *r, int64_t t, int64_t b, XF_V y[4][4])
{
    const kn_wino *w = r->w;
    int64_t n = t / (w->th * w->tw), ty = t / w->tw % w->th, tx = t % w->tw, pix;
    XF_V bias = r->bias ? XF_LOADU(r->bias + b * XF_LANES) : XF_ZERO();
    int64_t off0 = vec_base(w, w->O, n, b, XF_LANES, &pix);
    float *out = r->dst + off0;
    const float *res = r->res ? r->res + off0 : NULL;
    for (int i = 0; i < w->m && ty * w->m + i < w->H; i++) {
        for (int j = 0; j < w->m && tx * w->m + j < w->W; j++) {
            int64_t off = ((ty * w->m + i) * w->W + tx * w->m + j) * pix;
            XF_STORE(out + off, XF(apply_posts)(w, XF_ADD(y[i][j], bias), res ? res + off : NULL));
        }
    }
}

/* A^T x for F(4x4) on 6 vectors (rows, then columns). */
#define AT4(x0, x1, x2, x3, x4, x5, y0, y1, y2, y3)                                                                 \
    do {                                                                                                           \
        XF_V s12 = XF_ADD(x1, x2), d12 = XF_SUB(x1, x2);                                           \
        XF_V s34 = XF_ADD(x3, x4), d34 = XF_SUB(x3, x4);                                           \
        y0 = XF_ADD(XF_ADD(x0, s12), s34);                                                           \
        y1 = XF_FMADD(k2, d34, d12);                                                                        \
        y2 = XF_FMADD(k4, s34, s12);                                                                        \
        y3 = XF_ADD(XF_FMADD(k8, d34, d12), x5);                                                     \
    } while (0)

/* A^T x for F(2x2) on 4 vectors. */
#define AT2(x0, x1, x2, x3, y0, y1)                                                                                 \
    do {                                                                                                           \
        y0 = XF_ADD(XF_ADD(x0, x1), x2);                                                             \
        y1 = XF_SUB(XF_SUB(x1, x2), x3);                                                             \
    } while (0)

/* Phase 3 for (tile, XF_LANES output channels) pairs [lo, hi). */
XF_TARGET static int XF(output_chunk)(void *args, int64_t lo, int64_t hi)
{
    const wino_run *r = args;
    const kn_wino *w = r->w;
    int64_t ob = w->O / XF_LANES, pos_stride = r->tn * w->O;
    const XF_V k2 = XF_SET1(2.f), k4 = XF_SET1(4.f), k8 = XF_SET1(8.f);
    for (int64_t it = lo; it < hi; it++) {
        int64_t t = it / ob, b = it % ob;
        const float *mp = r->M + (t - r->t0) * w->O + b * XF_LANES;
        XF_V x[MAX_ALPHA], e[4][MAX_ALPHA], y[4][4];
        if (w->m == 4) {
            for (int j = 0; j < 6; j++) {
                for (int i = 0; i < 6; i++) x[i] = XF_LOADU(mp + (i * 6 + j) * pos_stride);
                AT4(x[0], x[1], x[2], x[3], x[4], x[5], e[0][j], e[1][j], e[2][j], e[3][j]);
            }
            for (int i = 0; i < 4; i++)
                AT4(e[i][0], e[i][1], e[i][2], e[i][3], e[i][4], e[i][5], y[i][0], y[i][1], y[i][2], y[i][3]);
        } else {
            for (int j = 0; j < 4; j++) {
                for (int i = 0; i < 4; i++) x[i] = XF_LOADU(mp + (i * 4 + j) * pos_stride);
                AT2(x[0], x[1], x[2], x[3], e[0][j], e[1][j]);
            }
            for (int i = 0; i < 2; i++) AT2(e[i][0], e[i][1], e[i][2], e[i][3], y[i][0], y[i][1]);
        }
        XF(store_tile)(r, t, b, y);
    }
    return KN_OK;
}

#undef BT4
#undef BT2
#undef AT4
#undef AT2
#undef XF_TARGET
#undef XF
#undef XF_V
#undef XF_LANES
#undef XF_LOAD
#undef XF_STORE
#undef XF_LOADU
#undef XF_STOREU
#undef XF_ZERO
#undef XF_SET1
#undef XF_ADD
#undef XF_SUB
#undef XF_MUL
#undef XF_FMADD
#undef XF_FNMADD
#undef XF_MAX
#undef XF_MIN
#undef XF_LEAKY
