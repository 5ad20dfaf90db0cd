/* The op registry: ops.def declarations merged with the family tables. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static kn_op_info k_ops[KN_OP_COUNT] = {
    [KN_OP_UNKNOWN] = {KN_OP_UNKNOWN, "?", "", 0, 0, 0, 0, 0, 0, NULL},
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) \
    [KN_OP_##name] = {KN_OP_##name, #name, domain, min_in, max_in, min_out, max_out, since, until, NULL},
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) \
    [KN_OP_##ident] = {KN_OP_##ident, name, domain, min_in, max_in, min_out, max_out, since, until, NULL},
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
};

static const kn_op_impl *const k_families[] = {
    kn_ops_elementwise, kn_ops_nn,    kn_ops_linalg, kn_ops_reduce,    kn_ops_generate,   kn_ops_select,
    kn_ops_movement,    kn_ops_vision, kn_ops_signal, kn_ops_recurrent, kn_ops_control,    kn_ops_misc,
    kn_ops_fused,       kn_ops_contrib_q, kn_ops_contrib_bert,
};

static pthread_once_t k_once = PTHREAD_ONCE_INIT;

static void registry_init(void)
{
    for (size_t f = 0; f < sizeof k_families / sizeof k_families[0]; f++) {
        for (const kn_op_impl *e = k_families[f]; e->op != KN_OP_UNKNOWN; e++) {
            kn_op_info *oi = &k_ops[e->op];
            if (oi->infer) {
                /* A broken invariant of kiln itself, caught by every test run. */
                fprintf(stderr, "kiln: op %s is defined twice in the registry\n", oi->name);
                abort();
            }
            oi->infer = e->infer;
        }
    }
}

const kn_op_info *kn_op_get(kn_op op)
{
    pthread_once(&k_once, registry_init);
    if ((int)op < 0 || op >= KN_OP_COUNT) return &k_ops[KN_OP_UNKNOWN];
    return &k_ops[op];
}

static bool default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

const kn_op_info *kn_op_lookup(const char *op_type, const char *domain)
{
    pthread_once(&k_once, registry_init);
    for (int i = 1; i < KN_OP_COUNT; i++) {
        const kn_op_info *oi = &k_ops[i];
        if (strcmp(oi->name, op_type) != 0) continue;
        if (default_domain(oi->domain) ? default_domain(domain) : (domain && !strcmp(oi->domain, domain)))
            return oi;
    }
    return NULL;
}

const char *kn_op_name(kn_op op) { return kn_op_get(op)->name; }
