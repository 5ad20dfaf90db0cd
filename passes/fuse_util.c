/*
 * passes/fuse_util.c — the chain building shared by the fusion passes (see
 * fuse_util.h).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_util.h"

void kn_fuse_begin(kn_fuse_chain *ch, kn_node *head, const char *what)
{
    memset(ch, 0, sizeof *ch);
    ch->head = head;
    ch->what = what;
    ch->nodes[ch->n_nodes++] = head;
    ch->out = head->outputs[0];
}

static void shape_text(const kn_shape *s, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < s->rank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, i ? ",%lld" : "%lld", (long long)s->dims[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

bool kn_fuse_can_extend(kn_pass_ctx *ctx, const kn_fuse_chain *ch, const kn_node *next)
{
    const kn_value *cur = ch->out;
    const char *by = cur->producer ? cur->producer->op_type : ch->what;
    if (cur->flags & KN_VALUE_GRAPH_OUTPUT) {
        kn_pass_remark(ctx, "%s '%s' + %s '%s': %s output is a graph output", ch->what, ch->head->name,
                       next->op_type, next->name, by);
        return false;
    }
    if (cur->n_users != 1) {
        /* a fork after an activation ends a chain as intended (a ResNet block's
         * output feeds the next block twice): only an unfused head is news */
        if (ch->n_post > 0) return false;
        kn_pass_remark(ctx, "%s '%s' + %s '%s': %s output has %d users", ch->what, ch->head->name, next->op_type,
                       next->name, by, cur->n_users);
        return false;
    }
    return true;
}

/* The input of the binary node u that is not v; NULL if both are v. */
static kn_value *other_input(const kn_node *u, const kn_value *v)
{
    kn_value *a = kn_node_input(u, 0), *b = kn_node_input(u, 1);
    if (a == v && b == v) return NULL;
    return a == v ? b : a;
}

/* The first user of v in v's own graph whose op `want` accepts. (A node of
 * an If or Loop body reading v counts as a user too, and keeps v unfused.) */
static kn_node *user_of(const kn_value *v, bool (*want)(kn_op))
{
    for (int i = 0; i < v->n_users; i++) {
        kn_node *u = v->users[i].node;
        if (u->graph == v->graph && want(u->op)) return u;
    }
    return NULL;
}

static bool is_add(kn_op op) { return op == KN_OP_Add; }

static bool is_post(kn_op op)
{
    switch (op) {
    case KN_OP_Add: case KN_OP_Relu: case KN_OP_LeakyRelu: case KN_OP_Clip: case KN_OP_Sigmoid: case KN_OP_Tanh:
    case KN_OP_HardSwish: case KN_OP_Gelu: return true;
    default: return false;
    }
}

/* ---- bias ------------------------------------------------------------------------ */

/* If the constant c, added to a value of shape y, varies only along `axis`
 * of y with `count` values (or is a scalar), writes them (as f32) to vals. */
static bool channel_values(const kn_value *c, const kn_shape *y, int axis, int64_t count, float *vals)
{
    const kn_tensor *t = c->const_data;
    if (!t || t->dtype != KN_F32 || t->rank > y->rank) return false;
    int64_t n = kn_tensor_numel(t);
    for (int j = 0; j < t->rank; j++) {
        int ax = j + (y->rank - t->rank);
        if (t->dims[j] != 1 && (ax != axis || t->dims[j] != count)) return false;
    }
    const float *p = t->data;
    for (int64_t k = 0; k < count; k++) vals[k] = n == 1 ? p[0] : p[k];
    return true;
}

/* A new f32 [count] constant named after the chain's head. */
static kn_value *new_bias(kn_graph *g, const kn_fuse_chain *ch, const float *vals, int64_t count)
{
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (kn_tensor_alloc(t, KN_F32, 1, &count)) {
        free(t);
        return NULL;
    }
    memcpy(t->data, vals, sizeof(float) * (size_t)count);
    char name[256];
    snprintf(name, sizeof name, "%s.bias", ch->head->name);
    return kn_graph_add_constant(g, kn_graph_lookup(g, name) ? NULL : name, t);
}

int kn_fuse_take_bias(kn_pass_ctx *ctx, kn_graph *g, kn_fuse_chain *ch, int axis, int64_t count,
                      kn_value *old_bias)
{
    ch->bias = old_bias;
    if (count <= 0 || ch->out->shape.rank < 0) return KN_OK;
    float *vals = malloc(sizeof(float) * 2 * (size_t)count);
    if (!vals) return kn_error(KN_ERR_NOMEM, "out of memory");
    float *add = vals + count;
    int taken = 0;
    kn_node *u;
    while (ch->n_post == 0 && taken < KN_FUSE_MAX_BIAS_ADDS && (u = user_of(ch->out, is_add)) && u->outputs[0]) {
        kn_value *c = other_input(u, ch->out);
        /* a value read twice stops here; kn_fuse_take_posts says so */
        if (!c || !c->const_data || ch->out->n_users != 1 || (ch->out->flags & KN_VALUE_GRAPH_OUTPUT)) break;
        /* anything else may be a residual: kn_fuse_take_posts decides (and remarks) */
        if (!channel_values(c, &ch->out->shape, axis, count, add)) break;
        if (!kn_shape_same(&u->outputs[0]->shape, &ch->out->shape)) break; /* the Add broadcasts the output up */
        if (!taken) {
            const kn_tensor *ob = old_bias ? old_bias->const_data : NULL;
            if (old_bias && (!ob || ob->dtype != KN_F32 || kn_tensor_numel(ob) != count)) {
                kn_pass_remark(ctx, "%s '%s' + Add '%s': the %s's own bias is not a constant of %lld values",
                               ch->what, ch->head->name, u->name, ch->what, (long long)count);
                break;
            }
            for (int64_t k = 0; k < count; k++) vals[k] = ob ? ((const float *)ob->data)[k] : 0.0f;
        }
        for (int64_t k = 0; k < count; k++) vals[k] += add[k];
        taken++;
        ch->nodes[ch->n_nodes++] = u;
        ch->out = u->outputs[0];
    }
    int st = KN_OK;
    if (taken && !(ch->bias = new_bias(g, ch, vals, count))) st = kn_error(KN_ERR_NOMEM, "out of memory");
    free(vals);
    return st;
}

/* ---- post-ops ----------------------------------------------------------------------- */

/* One scalar bound of Clip (opset 11+: an input), or def when absent. */
static bool clip_bound(const kn_node *u, int i, float def, float *out)
{
    const kn_value *v = kn_node_input(u, i);
    *out = def;
    if (!v) return true;
    const kn_tensor *t = v->const_data;
    if (!t || t->dtype != KN_F32 || kn_tensor_numel(t) != 1) return false;
    *out = ((const float *)t->data)[0];
    return true;
}

/* The post-op an activation node becomes; why is set (and false returned)
 * for a near miss. */
bool kn_fuse_post_of(const kn_node *u, kn_abi_post *p, const char **why)
{
    *why = NULL;
    memset(p, 0, sizeof *p);
    switch (u->op) {
    case KN_OP_Relu: p->kind = KN_POST_RELU; return true;
    case KN_OP_Sigmoid: p->kind = KN_POST_SIGMOID; return true;
    case KN_OP_Tanh: p->kind = KN_POST_TANH; return true;
    case KN_OP_HardSwish: p->kind = KN_POST_HARDSWISH; return true;
    case KN_OP_LeakyRelu:
        p->kind = KN_POST_LEAKY_RELU;
        p->alpha = kn_attr_float(u, "alpha", 0.01f);
        return true;
    case KN_OP_Gelu: {
        const char *a = kn_attr_string(u, "approximate", "none");
        p->kind = !strcmp(a, "tanh") ? KN_POST_GELU_TANH : KN_POST_GELU_ERF;
        if (strcmp(a, "tanh") && strcmp(a, "none")) *why = "Gelu's approximate is neither 'none' nor 'tanh'";
        return *why == NULL;
    }
    case KN_OP_Clip:
        p->kind = KN_POST_CLIP;
        if (kn_node_opset(u) < 11) {
            /* the old attribute form's defaults are the float range */
            p->alpha = kn_attr_float(u, "min", -FLT_MAX);
            p->beta = kn_attr_float(u, "max", FLT_MAX);
            return true;
        }
        if (!clip_bound(u, 1, -INFINITY, &p->alpha) || !clip_bound(u, 2, INFINITY, &p->beta))
            *why = "Clip's bounds are not f32 scalar constants";
        else if (isnan(p->alpha) || isnan(p->beta))
            *why = "a bound of Clip is NaN";
        else if (p->alpha > p->beta)
            p->alpha = p->beta; /* min > max: every value becomes max (NaN stays NaN), as clip(x, max, max) */
        return *why == NULL;
    default: *why = "not an activation kiln fuses"; return false;
    }
}

/* Takes the residual Add u (cur + other) if it qualifies. */
static bool take_residual(kn_pass_ctx *ctx, kn_fuse_chain *ch, kn_node *u)
{
    kn_value *cur = ch->out, *r = other_input(u, cur);
    const char *why = NULL;
    char why_buf[200];
    if (!r) why = "adds the output to itself";
    else if (ch->residual) why = "a residual Add is fused already (oneDNN takes one sum)";
    else if (!strcmp(ch->what, "Conv") && ch->n_post > 0)
        /* oneDNN 2.x's optimized convolutions take [sum, eltwise], not
         * [eltwise, sum]: the primitive would run its reference kernel,
         * a hundred times slower than an Add of its own */
        why = "a residual after an activation makes oneDNN run its reference convolution";
    else if (r->dtype != cur->dtype || !kn_shape_same(&r->shape, &cur->shape) || !u->outputs[0] ||
             !kn_shape_same(&u->outputs[0]->shape, &cur->shape)) {
        char rs[80], ys[80];
        shape_text(&r->shape, rs, sizeof rs);
        shape_text(&cur->shape, ys, sizeof ys);
        snprintf(why_buf, sizeof why_buf, "the addend %s %s is neither %s nor a residual of the output's %s %s",
                 kn_dtype_name(r->dtype), rs,
                 ch->n_post ? "(after an activation) a bias" : "a constant with one value per channel",
                 kn_dtype_name(cur->dtype), ys);
        why = why_buf;
    }
    if (why) {
        kn_pass_remark(ctx, "%s '%s' + Add '%s': %s", ch->what, ch->head->name, u->name, why);
        return false;
    }
    ch->residual = r;
    ch->post[ch->n_post++] = (kn_abi_post){.kind = KN_POST_SUM};
    return true;
}

static float clamp_to(float v, float lo, float hi) { return fminf(fmaxf(v, lo), hi); }

/* Relu and Clip as the bounds [*lo, *hi] they clamp to. */
static bool as_clamp(const kn_abi_post *p, float *lo, float *hi)
{
    if (p->kind == KN_POST_RELU) *lo = 0.0f, *hi = INFINITY;
    else if (p->kind == KN_POST_CLIP) *lo = p->alpha, *hi = p->beta;
    else return false;
    return true;
}

/* Folds a clamp p (Relu or Clip) into the chain's last post-op when that is
 * a clamp too: clip(clip(x, a1, b1), a2, b2) == clip(x, c(a1), c(b1)) with
 * c(v) = min(max(v, a2), b2), as both are monotone (NaN stays NaN). One
 * step instead of two, and no two post-ops of one oneDNN algorithm with
 * different bounds, which oneDNN 2.x runs with the first one's bounds. */
static bool merge_clamp(kn_fuse_chain *ch, const kn_abi_post *p)
{
    float a1, b1, a2, b2;
    if (!ch->n_post || !as_clamp(&ch->post[ch->n_post - 1], &a1, &b1) || !as_clamp(p, &a2, &b2)) return false;
    float lo = clamp_to(a1, a2, b2), hi = clamp_to(b1, a2, b2); /* lo <= hi, as a1 <= b1 and a2 <= b2 */
    if (lo == 0.0f && hi == INFINITY) ch->post[ch->n_post - 1] = (kn_abi_post){.kind = KN_POST_RELU};
    else ch->post[ch->n_post - 1] = (kn_abi_post){.kind = KN_POST_CLIP, .alpha = lo, .beta = hi};
    return true;
}

/* The SiLU exporters write as Mul(x, Sigmoid(x)): v read by exactly a
 * Sigmoid s and a Mul m of v and s's output, which m alone reads, with m's
 * output of v's shape. Returns m (and s in *sig), or NULL. */
static kn_node *swish_of(const kn_value *v, kn_node **sig)
{
    if (v->n_users != 2 || (v->flags & KN_VALUE_GRAPH_OUTPUT)) return NULL;
    kn_node *s = NULL, *m = NULL;
    for (int i = 0; i < 2; i++) {
        kn_node *u = v->users[i].node;
        if (u->graph != v->graph) return NULL;
        if (u->op == KN_OP_Sigmoid) s = u;
        else if (u->op == KN_OP_Mul) m = u;
    }
    if (!s || !m || s->n_inputs != 1 || m->n_inputs != 2 || !s->outputs[0] || !m->outputs[0]) return NULL;
    const kn_value *so = s->outputs[0];
    if (so->n_users != 1 || (so->flags & KN_VALUE_GRAPH_OUTPUT)) return NULL;
    if (!((m->inputs[0] == v && m->inputs[1] == so) || (m->inputs[0] == so && m->inputs[1] == v))) return NULL;
    if (!kn_shape_same(&m->outputs[0]->shape, &v->shape) || m->outputs[0]->dtype != v->dtype) return NULL;
    *sig = s;
    return m;
}

/* Takes x * sigmoid(x) after the chain as one Swish post-op, if it is there. */
static bool take_swish(kn_pass_ctx *ctx, kn_fuse_chain *ch)
{
    kn_node *s, *m = swish_of(ch->out, &s);
    if (!m) return false;
    if (ch->n_post == KN_FUSED_MAX_POST || ch->n_nodes + 2 > KN_FUSE_MAX_NODES) {
        kn_pass_remark(ctx, "%s '%s' + Sigmoid '%s' * Mul '%s': %d post-ops fused already (the most one primitive "
                       "takes)", ch->what, ch->head->name, s->name, m->name, ch->n_post);
        return false;
    }
    ch->post[ch->n_post++] = (kn_abi_post){.kind = KN_POST_SWISH};
    ch->nodes[ch->n_nodes++] = s;
    ch->nodes[ch->n_nodes++] = m;
    ch->out = m->outputs[0];
    return true;
}

void kn_fuse_take_posts(kn_pass_ctx *ctx, kn_fuse_chain *ch)
{
    kn_node *u;
    for (;;) {
        if (take_swish(ctx, ch)) continue;
        if (!(u = user_of(ch->out, is_post)) || !u->outputs[0] || !kn_fuse_can_extend(ctx, ch, u)) return;
        kn_abi_post p;
        const char *why;
        if (u->op != KN_OP_Add && ch->n_nodes < KN_FUSE_MAX_NODES && kn_fuse_post_of(u, &p, &why) && merge_clamp(ch, &p)) {
            ch->nodes[ch->n_nodes++] = u;
            ch->out = u->outputs[0];
            continue;
        }
        if (ch->n_post == KN_FUSED_MAX_POST) {
            kn_pass_remark(ctx, "%s '%s' + %s '%s': %d post-ops fused already (the most one primitive takes)",
                           ch->what, ch->head->name, u->op_type, u->name, KN_FUSED_MAX_POST);
            return;
        }
        if (u->op == KN_OP_Add) {
            if (!take_residual(ctx, ch, u)) return;
        } else {
            if (!kn_fuse_post_of(u, &p, &why)) {
                kn_pass_remark(ctx, "%s '%s' + %s '%s': %s", ch->what, ch->head->name, u->op_type, u->name, why);
                return;
            }
            ch->post[ch->n_post++] = p;
        }
        ch->nodes[ch->n_nodes++] = u;
        ch->out = u->outputs[0];
    }
}

/* ---- the fused node ------------------------------------------------------------------- */

static bool dropped(const char *name, const char *const *drop)
{
    for (int i = 0; drop && drop[i]; i++)
        if (!strcmp(drop[i], name)) return true;
    return false;
}

/* Adds a list attribute of np entries (filled by the caller through the
 * returned pointer, valid until the next attribute is added: the node's
 * attribute array may move). */
kn_attr *kn_fuse_add_list(kn_node *n, const char *name, kn_attr_kind kind, int np, size_t elem, void **out_items)
{
    kn_attr *a = kn_node_add_attr(n, name, kind);
    void *items = a ? kn_arena_alloc(&n->graph->model->arena, elem * (size_t)np) : NULL;
    if (!items) return NULL;
    a->n = np;
    *out_items = items;
    return a;
}

int kn_fuse_set_posts(kn_node *n, const kn_abi_post *post, int np)
{
    if (np == 0) return KN_OK;
    void *items;
    kn_attr *a = kn_fuse_add_list(n, "post_ops", KN_ATTR_STRINGS, np, sizeof(char *), &items);
    if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
    a->strings = items;
    for (int i = 0; i < np; i++) a->strings[i] = kn_fused_post_name(post[i].kind);
    if (!(a = kn_fuse_add_list(n, "post_alpha", KN_ATTR_FLOATS, np, sizeof(float), &items)))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    a->floats = items;
    for (int i = 0; i < np; i++) a->floats[i] = post[i].alpha;
    if (!(a = kn_fuse_add_list(n, "post_beta", KN_ATTR_FLOATS, np, sizeof(float), &items)))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    a->floats = items;
    for (int i = 0; i < np; i++) a->floats[i] = post[i].beta;
    return KN_OK;
}

kn_node *kn_fuse_replace(kn_pass_ctx *ctx, kn_graph *g, kn_node *head, kn_node *const *nodes, int n_nodes,
                         kn_value *out, kn_op op, kn_value *const *ins, int n_ins, const char *const *drop)
{
    /* the new node takes the head's name (names are unique, so the head
     * goes first); the replaced nodes go last to first, each output then
     * unread */
    int at = 0;
    while (at < g->n_nodes && g->nodes[at] != head) at++;
    for (int i = n_nodes - 1; i >= 0; i--) kn_node_remove(nodes[i]);
    const kn_op_info *oi = kn_op_get(op);
    kn_node *n = kn_node_create_named(g, oi->name, oi->domain, head->name, n_ins, ins, 1, NULL);
    if (!n) {
        kn_error(KN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    /* where the head was, so that printed graphs keep their order (the
     * stable sort in kn_pass_finish moves it only if a residual comes later) */
    if (at < g->n_nodes - 1) {
        memmove(&g->nodes[at + 1], &g->nodes[at], sizeof(kn_node *) * (size_t)(g->n_nodes - 1 - at));
        g->nodes[at] = n;
    }
    /* the result keeps its name and users: it may be a graph output */
    n->outputs[0] = out;
    out->producer = n;
    out->producer_index = 0;
    for (int i = 0; i < head->n_attrs; i++) {
        const kn_attr *src = &head->attrs[i];
        if (dropped(src->name, drop)) continue;
        kn_attr *a = kn_node_add_attr(n, src->name, src->kind);
        if (!a) {
            kn_error(KN_ERR_NOMEM, "out of memory");
            return NULL;
        }
        const char *name = a->name;
        *a = *src; /* lists and strings live in the model's arena, like the head's */
        a->name = name;
    }
    if (kn_model_opset(g->model, oi->domain) == 0 && kn_model_set_opset(g->model, oi->domain, 1)) return NULL;
    ctx->rewrites += n_nodes - 1;
    return n;
}

int kn_fuse_commit(kn_pass_ctx *ctx, kn_graph *g, kn_fuse_chain *ch, kn_op op, kn_value *const *ins, int n_ins,
                   const char *const *drop)
{
    kn_value *in[4] = {0};
    for (int i = 0; i < n_ins && i < 2; i++) in[i] = ins[i];
    in[2] = ch->bias;
    in[3] = ch->residual;
    int n_in = ch->residual ? 4 : ch->bias ? 3 : 2;
    kn_node *n = kn_fuse_replace(ctx, g, ch->head, ch->nodes, ch->n_nodes, ch->out, op, in, n_in, drop);
    return n ? kn_fuse_set_posts(n, ch->post, ch->n_post) : KN_ERR_NOMEM;
}
