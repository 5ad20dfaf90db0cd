/*
 * passes/freeze.c — inference-mode freezing.
 *
 * A model exported for training still carries what only training needs:
 *   - Dropout (any opset) is the identity at inference: its output 0 is its
 *     input, once nothing reads the mask (output 1);
 *   - Identity nodes forward their input;
 *   - BatchNormalization in inference mode (training_mode=0) computes only
 *     output 0; running_mean/running_var outputs that nothing reads are
 *     dropped, and nodes that fed only them go with the final dce.
 * A Dropout whose training_mode input is a constant true stays: the model
 * asks for training behaviour explicitly.
 */
#include "match.h"

static bool const_true(const kn_value *v)
{
    int64_t x;
    if (!v || !v->const_data) return false;
    if (v->const_data->dtype == KN_BOOL) return v->const_data->data && ((const unsigned char *)v->const_data->data)[0];
    return kn_pm_const_ints(v, &x, 1) == 1 && x != 0;
}

static bool drop_forward(kn_pass_ctx *ctx, kn_node *n, const char *what)
{
    kn_value *x = n->inputs[0], *y = n->outputs[0];
    if (!x || !y) return false;
    if (!kn_pm_replace(y, x)) {
        kn_pass_remark(ctx, "%s '%s': kept, its output is a graph output and '%s' cannot take its name (%s)",
                       n->op_type, n->name, x->name, what);
        return false;
    }
    return true;
}

static bool value_read(const kn_value *v) { return v && (v->n_users > 0 || (v->flags & KN_VALUE_GRAPH_OUTPUT)); }

static bool dropout(kn_pass_ctx *ctx, kn_node *n)
{
    if (n->n_outputs > 1 && value_read(n->outputs[1])) {
        kn_pass_remark(ctx, "Dropout '%s': kept, its mask output '%s' is used", n->name, n->outputs[1]->name);
        return false;
    }
    if (const_true(kn_node_input(n, 2))) {
        kn_pass_remark(ctx, "Dropout '%s': kept, training_mode is true", n->name);
        return false;
    }
    return drop_forward(ctx, n, "Dropout");
}

/* Drops running_mean / running_var (outputs 1..) of an inference-mode BN. */
static bool batchnorm(kn_pass_ctx *ctx, kn_node *n)
{
    if (n->n_outputs < 2) return false;
    if (kn_attr_int(n, "training_mode", 0) != 0) {
        kn_pass_remark(ctx, "BatchNormalization '%s': kept as is, training_mode=1", n->name);
        return false;
    }
    for (int k = 1; k < n->n_outputs; k++)
        if (value_read(n->outputs[k])) {
            kn_pass_remark(ctx, "BatchNormalization '%s': training output '%s' is used", n->name, n->outputs[k]->name);
            return false;
        }
    bool any = false;
    for (int k = 1; k < n->n_outputs; k++) any |= n->outputs[k] != NULL;
    n->n_outputs = 1;
    return any;
}

int kn_pass_freeze(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    for (int i = 0; i < g->n_nodes; i++) {
        kn_node *n = g->nodes[i];
        bool done = false;
        if (n->op == KN_OP_Dropout) done = dropout(ctx, n);
        else if (n->op == KN_OP_Identity) done = drop_forward(ctx, n, "Identity");
        else if (n->op == KN_OP_BatchNormalization) done = batchnorm(ctx, n);
        if (!done) continue;
        ctx->rewrites++;
        *out_changed = true;
    }
    return *out_changed ? kn_pass_finish(g) : KN_OK;
}
