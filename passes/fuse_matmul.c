/*
 * passes/fuse_matmul.c — MatMul / Gemm + bias Add + activations + residual
 * Add → one kiln::FusedMatMul (runtime/ops/fused_int.h), which the cpu
 * backend runs as one oneDNN matmul with a bias and post-ops. In a
 * transformer this turns nn.Linear + Gelu and nn.Linear + residual into one
 * primitive each.
 *
 *   %m = MatMul(%x, %w)             %y = kiln::FusedMatMul(%x, %w, %b, _)
 *   %a = Add(%bias[N], %m)     →         {post_ops=["Gelu"], ...}
 *   %y = Gelu(%a)
 *
 * Conditions (each near miss is a remark): f32, both operands of rank 2 or
 * more (a 1-D MatMul stays as it is); a Gemm's C, when beta is not 0, is a
 * constant row bias ([N] or [1, N]) with beta 1; then as fuse-conv: single
 * users, a bias constant with one value per column (or one value) before
 * any activation, one residual of the output's shape, at most
 * KN_FUSED_MAX_POST post-ops.
 *
 * Preconditions: an inferred graph in topological order; constants folded;
 * Gelu recognized (the exported erf form is five nodes) for Gelu to fuse.
 */
#include <stdlib.h>

#include "fuse_util.h"

/* True if v is a constant row bias of n values ([n] or [1, n]). */
static bool row_bias(const kn_value *v, int64_t n)
{
    const kn_shape *s = &v->shape;
    return v->const_data && v->dtype == KN_F32 && n > 0 &&
           ((s->rank == 1 && s->dims[0] == n) || (s->rank == 2 && s->dims[0] == 1 && s->dims[1] == n));
}

/* The bias a Gemm already has: *out_bias is C when it is a row bias, NULL
 * when there is none (or beta is 0). False if C is something else. */
static bool gemm_bias(const kn_node *n, int64_t N, kn_value **out_bias)
{
    kn_value *c = kn_node_input(n, 2);
    float beta = kn_attr_float(n, "beta", 1.0f);
    *out_bias = NULL;
    if (!c || beta == 0.0f) return true;
    if (beta != 1.0f || !row_bias(c, N)) return false;
    *out_bias = c;
    return true;
}

static int fuse_one(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, bool *out_changed)
{
    kn_value *y = n->outputs[0], *a = kn_node_input(n, 0), *b = kn_node_input(n, 1);
    const char *what = n->op == KN_OP_Gemm ? "Gemm" : "MatMul";
    if (!y || !a || !b || y->dtype != KN_F32 || y->shape.rank < 2) return KN_OK;
    if (a->shape.rank < 2 || b->shape.rank < 2) return KN_OK; /* vector products: MatMul's 1-D rules */
    int64_t N = y->shape.dims[y->shape.rank - 1];
    kn_value *bias = NULL;
    kn_fuse_chain ch;
    kn_fuse_begin(&ch, n, what);
    if (n->op == KN_OP_Gemm && !gemm_bias(n, N, &bias)) {
        kn_node *next = y->n_users == 1 ? y->users[0].node : NULL;
        if (next && (next->op == KN_OP_Relu || next->op == KN_OP_Add || next->op == KN_OP_Gelu))
            kn_pass_remark(ctx, "Gemm '%s' + %s '%s': C is not a constant row bias with beta 1", n->name,
                           next->op_type, next->name);
        return KN_OK;
    }
    int st = kn_fuse_take_bias(ctx, g, &ch, y->shape.rank - 1, N, bias);
    if (st) return st;
    kn_fuse_take_posts(ctx, &ch);
    if (ch.n_nodes == 1) return KN_OK;
    static const char *const drop[] = {"beta", NULL};
    *out_changed = true;
    return kn_fuse_commit(ctx, g, &ch, KN_OP_FusedMatMul, (kn_value *const[]){a, b}, 2, drop);
}

int kn_pass_fuse_matmul(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int count = g->n_nodes;
    kn_node **heads = malloc(sizeof *heads * (size_t)(count ? count : 1));
    if (!heads) return kn_error(KN_ERR_NOMEM, "out of memory");
    int nh = 0;
    for (int i = 0; i < count; i++) {
        kn_op op = g->nodes[i]->op;
        if ((op == KN_OP_MatMul || op == KN_OP_Gemm) && g->nodes[i]->n_outputs == 1) heads[nh++] = g->nodes[i];
    }
    int st = KN_OK;
    for (int i = 0; i < nh && !st; i++) st = fuse_one(ctx, g, heads[i], out_changed);
    free(heads);
    if (!st && *out_changed) st = kn_pass_finish(g);
    return st;
}
