/*
 * tools/kiln/compare.c — comparing a computed tensor with an expected one,
 * for the verbs that check kiln against reference outputs (conformance,
 * difftest).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

void kn_cli_as_bf16_if_meant(kn_tensor *t, int meant)
{
    if (meant == KN_BF16 && t->dtype == KN_U16) t->dtype = KN_BF16;
}

int kn_cli_compare(const char *what, const kn_tensor *want, const kn_tensor *got, double rtol, double atol, char *msg,
                   size_t len)
{
    char ws[256], gs[256];
    if (want->dtype != got->dtype || want->rank != got->rank ||
        memcmp(want->dims, got->dims, sizeof(int64_t) * (size_t)want->rank) != 0) {
        snprintf(msg, len, "%s: expected %s[%s], got %s[%s]", what, kn_dtype_name(want->dtype),
                 kn_shape_str(want->rank, want->dims, ws, sizeof ws), kn_dtype_name(got->dtype),
                 kn_shape_str(got->rank, got->dims, gs, sizeof gs));
        return 1;
    }
    int64_t n = kn_tensor_numel(want), bad = 0, first = -1;
    bool is_float = kn_dtype_info(want->dtype)->is_float;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        if (is_float) {
            double a = kn_load_f64(want->dtype, want->data, (size_t)i);
            double b = kn_load_f64(got->dtype, got->data, (size_t)i);
            if (isnan(a) || isnan(b)) ok = isnan(a) && isnan(b);
            else if (isinf(a) || isinf(b)) ok = a == b;
            else {
                double d = fabs(a - b);
                ok = d <= atol + rtol * fabs(a);
                if (d > worst) worst = d;
            }
        } else if (atol >= 1) {
            /* a quantized (8-bit) output may be a whole step off (difftest's "quant" family) */
            double d = fabs((double)kn_load_i64(want->dtype, want->data, (size_t)i) -
                            (double)kn_load_i64(got->dtype, got->data, (size_t)i));
            ok = d <= atol;
        } else {
            ok = kn_load_u64(want->dtype, want->data, (size_t)i) == kn_load_u64(got->dtype, got->data, (size_t)i);
        }
        if (!ok && bad++ == 0) first = i;
    }
    if (!bad) return 0;
    if (is_float)
        snprintf(msg, len, "%s: %lld of %lld elements differ (first at %lld: expected %.9g, got %.9g; max abs diff %.3g)",
                 what, (long long)bad, (long long)n, (long long)first,
                 kn_load_f64(want->dtype, want->data, (size_t)first), kn_load_f64(got->dtype, got->data, (size_t)first),
                 worst);
    else
        snprintf(msg, len, "%s: %lld of %lld elements differ (first at %lld: expected %lld, got %lld)", what,
                 (long long)bad, (long long)n, (long long)first,
                 (long long)kn_load_i64(want->dtype, want->data, (size_t)first),
                 (long long)kn_load_i64(got->dtype, got->data, (size_t)first));
    return 1;
}
