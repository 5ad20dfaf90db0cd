/* quant/compare.c — accuracy metrics (compare.h). */
#include "compare.h"

#include <math.h>
#include <string.h>

#include "observer.h"

void kn_qmetrics_init(kn_qmetrics *m) { memset(m, 0, sizeof *m); }

static size_t argmax(const float *x, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void kn_qmetrics_add(kn_qmetrics *m, const float *ref, const float *test, size_t n, size_t classes)
{
    for (size_t i = 0; i < n; i++) {
        double a = ref[i], b = test[i];
        if (!isfinite(a) || !isfinite(b)) {
            m->nonfinite++;
            continue;
        }
        double d = fabs(a - b);
        if (d > m->max_abs) m->max_abs = d;
        if (fabs(a) > KN_QMETRICS_REL_FLOOR && d / fabs(a) > m->max_rel) m->max_rel = d / fabs(a);
        m->dot += a * b;
        m->ref2 += a * a;
        m->test2 += b * b;
        m->err2 += d * d;
        m->n++;
    }
    if (classes > 1 && n % classes == 0)
        for (size_t r = 0; r < n / classes; r++) {
            m->rows++;
            m->top1_agree += argmax(ref + r * classes, classes) == argmax(test + r * classes, classes);
        }
}

double kn_qmetrics_cosine(const kn_qmetrics *m)
{
    if (m->ref2 == 0 && m->test2 == 0) return 1.0;
    if (m->ref2 == 0 || m->test2 == 0) return 0.0;
    return m->dot / (sqrt(m->ref2) * sqrt(m->test2));
}

double kn_qmetrics_sqnr_db(const kn_qmetrics *m)
{
    if (m->err2 == 0) return INFINITY;
    if (m->ref2 == 0) return -INFINITY;
    return 10.0 * log10(m->ref2 / m->err2);
}

double kn_qmetrics_top1(const kn_qmetrics *m) { return m->rows ? (double)m->top1_agree / (double)m->rows : -1.0; }

void kn_fake_quant_u8(const float *x, size_t n, float scale, int32_t zp, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = ((float)kn_quantize_u8(x[i], scale, zp) - (float)zp) * scale;
}
