/* Op names, the execution table and attribute access on descriptors. */
#include "opdesc.h"

#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_names[KN_OP_COUNT] = {
    [KN_OP_UNKNOWN] = "?",
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) [KN_OP_##name] = #name,
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) [KN_OP_##ident] = name,
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
};

static const char *const k_domains[KN_OP_COUNT] = {
    [KN_OP_UNKNOWN] = "",
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) [KN_OP_##name] = domain,
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) [KN_OP_##ident] = domain,
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
};

#define CLASS_FLAGS_UNARY (KN_OPF_ELEMENTWISE | KN_OPF_LAYOUT)
#define CLASS_FLAGS_BINARY KN_OPF_ELEMENTWISE
#define CLASS_FLAGS_VARIADIC KN_OPF_ELEMENTWISE
#define CLASS_FLAGS_OTHER 0
static const unsigned k_flags[KN_OP_COUNT] = {
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) \
    [KN_OP_##name] = CLASS_FLAGS_##cls | (flags),
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) \
    [KN_OP_##ident] = CLASS_FLAGS_##cls | (flags),
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
};

unsigned kn_op_flags(kn_op op) { return (int)op > 0 && op < KN_OP_COUNT ? k_flags[op] : 0; }

static const int k_arity[KN_OP_COUNT][3] = {
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) [KN_OP_##name] = {min_in, max_in, max_out},
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) [KN_OP_##ident] = {min_in, max_in, max_out},
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
};

int kn_op_check_arity(const kn_opdesc *d)
{
    if ((int)d->op <= 0 || d->op >= KN_OP_COUNT) return kn_op_error(d, KN_ERR_INVALID, "unknown op %d", (int)d->op);
    const int *a = k_arity[d->op];
    if (d->n_inputs < a[0] || d->n_inputs > a[1])
        return kn_op_error(d, KN_ERR_INVALID, "has %d inputs, expected %d to %d", d->n_inputs, a[0], a[1]);
    if (d->n_outputs < 0 || d->n_outputs > a[2])
        return kn_op_error(d, KN_ERR_INVALID, "has %d outputs, at most %d allowed", d->n_outputs, a[2]);
    return KN_OK;
}

static kn_exec_fn k_exec[KN_OP_COUNT];
static pthread_once_t k_once = PTHREAD_ONCE_INIT;

static void exec_init(void)
{
    static const kn_exec_impl *const families[] = {
        kn_exec_elementwise, kn_exec_nn, kn_exec_linalg, kn_exec_reduce, kn_exec_generate, kn_exec_select,
        kn_exec_movement, kn_exec_vision, kn_exec_signal, kn_exec_recurrent, kn_exec_misc, kn_exec_control,
        kn_exec_fused,      kn_exec_fused_q, kn_exec_contrib_q,
    };
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const kn_exec_impl *e = families[f]; e->op != KN_OP_UNKNOWN; e++) {
            if (k_exec[e->op]) {
                /* a kiln bug, caught by every test run */
                fprintf(stderr, "kiln: op %s has two execution functions\n", k_names[e->op]);
                abort();
            }
            k_exec[e->op] = e->exec;
        }
}

kn_exec_fn kn_op_exec(kn_op op)
{
    pthread_once(&k_once, exec_init);
    return (int)op > 0 && op < KN_OP_COUNT ? k_exec[op] : NULL;
}

const char *kn_op_type_name(kn_op op) { return (int)op > 0 && op < KN_OP_COUNT ? k_names[op] : "?"; }

static bool default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

kn_op kn_op_from_name(const char *op_type, const char *domain)
{
    for (int i = 1; i < KN_OP_COUNT; i++) {
        if (strcmp(k_names[i], op_type) != 0) continue;
        if (default_domain(k_domains[i]) ? default_domain(domain) : (domain && !strcmp(k_domains[i], domain)))
            return (kn_op)i;
    }
    return KN_OP_UNKNOWN;
}

const kn_attr *kn_op_attr(const kn_opdesc *d, const char *name)
{
    for (int i = 0; i < d->n_attrs; i++)
        if (strcmp(d->attrs[i].name, name) == 0) return &d->attrs[i];
    return NULL;
}

int64_t kn_op_attr_int(const kn_opdesc *d, const char *name, int64_t def)
{
    const kn_attr *a = kn_op_attr(d, name);
    if (!a) return def;
    if (a->kind == KN_ATTR_FLOAT) {
        /* old exporters write some integral attributes as floats; a NaN or
         * huge float from a bad model must not be a UB cast */
        if (!(a->f > -9.2e18f && a->f < 9.2e18f)) return def;
        return (int64_t)a->f;
    }
    return a->kind == KN_ATTR_INT ? a->i : def;
}

float kn_op_attr_float(const kn_opdesc *d, const char *name, float def)
{
    const kn_attr *a = kn_op_attr(d, name);
    if (!a) return def;
    if (a->kind == KN_ATTR_INT) return (float)a->i;
    return a->kind == KN_ATTR_FLOAT ? a->f : def;
}

const char *kn_op_attr_string(const kn_opdesc *d, const char *name, const char *def)
{
    const kn_attr *a = kn_op_attr(d, name);
    return a && a->kind == KN_ATTR_STRING ? a->s : def;
}

int kn_op_attr_ints(const kn_opdesc *d, const char *name, const int64_t **out_ints)
{
    const kn_attr *a = kn_op_attr(d, name);
    *out_ints = NULL;
    if (!a || a->kind != KN_ATTR_INTS) return 0;
    *out_ints = a->ints;
    return a->n;
}

int kn_op_attr_floats(const kn_opdesc *d, const char *name, const float **out_floats)
{
    const kn_attr *a = kn_op_attr(d, name);
    *out_floats = NULL;
    if (!a || a->kind != KN_ATTR_FLOATS) return 0;
    *out_floats = a->floats;
    return a->n;
}

int kn_op_fail(const kn_opdesc *d, int st)
{
    if (st) kn_error_prefix("node '%s' (%s): ", d->name, d->op_type);
    return st;
}

int kn_op_error(const kn_opdesc *d, int code, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kn_error(code, "node '%s' (%s): %s", d->name, d->op_type, msg);
}

int kn_op_alloc_output(const kn_opdesc *d, kn_tensor *out, kn_dtype dt, int rank, const int64_t *dims, bool zero)
{
    const kn_op_session *os = d->sess;
    for (int k = 0; os && os->outs && k < os->n_outs; k++) {
        if (out != &os->outs[k] || !os->out_dest[k]) continue;
        int64_t n = rank >= 0 && rank <= KN_MAX_RANK && kn_dtype_valid(dt) ? kn_shape_numel(rank, dims) : -1;
        if (n < 0 || dt == KN_STRING || kn_dtype_nbytes(dt, (size_t)n) != os->out_dest_bytes[k]) break;
        memset(out, 0, sizeof *out);
        out->dtype = dt;
        out->rank = rank;
        for (int i = 0; i < rank; i++) out->dims[i] = dims[i];
        out->data = os->out_dest[k];
        out->nbytes = os->out_dest_bytes[k];
        out->own = KN_BORROWED;
        if (zero) memset(out->data, 0, out->nbytes);
        return KN_OK;
    }
    return kn_tensor_alloc(out, dt, rank, dims);
}

int kn_op_need_inputs(const kn_opdesc *d, const kn_tensor *const *in, int k)
{
    for (int i = 0; i < k; i++)
        if (i >= d->n_inputs || !in[i]) return kn_op_error(d, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

int kn_op_axis(const kn_opdesc *d, int64_t axis, int rank, int *out)
{
    int k = kn_norm_axis(axis, rank);
    if (k < 0) return kn_op_error(d, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = k;
    return KN_OK;
}

int kn_op_scalar_int(const kn_opdesc *d, const kn_tensor *t, const char *what, int64_t *out)
{
    if (!t || kn_tensor_numel(t) != 1)
        return kn_op_error(d, KN_ERR_INVALID, "%s must hold exactly one element", what);
    if (kn_dtype_info(t->dtype)->is_float) {
        double v = kn_load_f64(t->dtype, t->data, 0);
        if (!isfinite(v) || fabs(v) > 9e18) return kn_op_error(d, KN_ERR_INVALID, "%s is not finite", what);
        *out = (int64_t)v;
    } else {
        *out = kn_load_i64(t->dtype, t->data, 0);
    }
    return KN_OK;
}
