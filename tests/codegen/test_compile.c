/* Unit tests of the CPU compiler driver (codegen/cpu/compile.c): small models
 * built with the IR API are compiled to a .so (or .a + header) in a temporary
 * folder, opened with libkiln_rt, run, and compared with the reference
 * evaluator (floats within 1e-6 relative, integers exactly). Failing compiles
 * must leave no file behind. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cg.h"
#include "eval.h"
#include "kiln/kiln.h"

static char g_dir[256];

static int setup_dir(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/kiln-test-compile-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int count_files(void)
{
    DIR *d = opendir(g_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void remove_files(void)
{
    DIR *d = opendir(g_dir);
    char p[600];
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
}

static int teardown_dir(void **state)
{
    (void)state;
    remove_files();
    rmdir(g_dir);
    return 0;
}

/* ---- model building ------------------------------------------------------------ */

static uint32_t g_seed = 7;
static float rnd(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 65536.0f * 4.0f - 2.0f;
}

static kn_model *new_model(void)
{
    kn_model *m = kn_model_create();
    assert_non_null(m);
    assert_int_equal(kn_model_set_opset(m, "", 17), 0);
    return m;
}

static kn_value *add_const_f32(kn_model *m, const char *name, int rank, const int64_t *dims)
{
    kn_tensor *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(kn_tensor_alloc(t, KN_F32, rank, dims), 0);
    for (int64_t i = 0; i < kn_tensor_numel(t); i++) ((float *)t->data)[i] = rnd();
    kn_value *v = kn_graph_add_constant(m->graph, name, t);
    assert_non_null(v);
    return v;
}

static kn_value *add_const_i64(kn_model *m, const char *name, int n, const int64_t *vals)
{
    kn_tensor *t = malloc(sizeof *t);
    assert_non_null(t);
    int64_t d = n;
    assert_int_equal(kn_tensor_alloc(t, KN_I64, 1, &d), 0);
    memcpy(t->data, vals, sizeof(int64_t) * (size_t)n);
    kn_value *v = kn_graph_add_constant(m->graph, name, t);
    assert_non_null(v);
    return v;
}

static kn_value *add_input(kn_model *m, const char *name, int rank, const int64_t *dims)
{
    kn_shape s = {.rank = rank};
    memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
    kn_value *v = kn_graph_add_input(m->graph, name, KN_F32, &s);
    assert_non_null(v);
    return v;
}

static kn_node *node(kn_model *m, kn_op op, const char *name, int n_in, kn_value **ins, int n_out)
{
    kn_node *n = kn_node_create(m->graph, op, name, n_in, ins, n_out);
    assert_non_null(n);
    return n;
}

/* ---- compile, run, compare ------------------------------------------------------- */

typedef struct io {
    int n_in;
    const char *names[4];
    kn_tensor in[4];
} io;

static void make_inputs(kn_model *m, io *x)
{
    x->n_in = m->graph->n_inputs;
    for (int i = 0; i < x->n_in; i++) {
        kn_value *v = m->graph->inputs[i];
        x->names[i] = v->name;
        assert_int_equal(kn_tensor_alloc(&x->in[i], v->dtype, v->shape.rank, v->shape.dims), 0);
        for (int64_t k = 0; k < kn_tensor_numel(&x->in[i]); k++) ((float *)x->in[i].data)[k] = rnd();
    }
}

static void compare(const kn_tensor *ref, const void *got)
{
    int64_t n = kn_tensor_numel(ref);
    for (int64_t i = 0; i < n; i++) {
        if (ref->dtype == KN_F32) {
            float a = ((const float *)ref->data)[i], b = ((const float *)got)[i];
            if (!(fabsf(a - b) <= 1e-6f * fmaxf(1.0f, fabsf(a))))
                fail_msg("element %lld: expected %.9g, got %.9g", (long long)i, a, b);
        } else {
            assert_memory_equal(ref->data, got, ref->nbytes);
            return;
        }
    }
}

/* Runs an opened artifact on x and checks every output against the evaluator. */
static void run_artifact(kn_model *m, kn_artifact *art, io *x)
{
    int n_out = m->graph->n_outputs;
    kn_tensor ref[4] = {0};
    assert_int_equal(kn_eval_model(m, x->n_in, x->names, x->in, ref), 0);
    kn_session *s = NULL;
    if (kn_session_create(art, &s)) fail_msg("session: %s", kn_last_error());
    const void *ins[4];
    void *outs[4];
    for (int i = 0; i < x->n_in; i++) ins[i] = x->in[i].data;
    for (int i = 0; i < n_out; i++) {
        outs[i] = calloc(1, ref[i].nbytes + 1);
        assert_non_null(outs[i]);
    }
    if (kn_session_run(s, ins, outs)) fail_msg("run: %s", kn_last_error());
    for (int i = 0; i < n_out; i++) {
        compare(&ref[i], outs[i]);
        free(outs[i]);
        kn_tensor_free(&ref[i]);
    }
    kn_session_free(s);
}

static void compile_run(kn_model *m, const char *file, bool external)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    io x = {0};
    make_inputs(m, &x);
    kn_compile_opts o = {.output = path, .opt_level = 3, .target = "native", .external_weights = external};
    if (kn_compile_cpu(m, &o)) fail_msg("compile: %s", kn_last_error());
    kn_artifact *art = NULL;
    if (kn_artifact_open(path, &art)) fail_msg("open: %s", kn_last_error());
    run_artifact(m, art, &x);
    kn_artifact_close(art);
    for (int i = 0; i < x.n_in; i++) kn_tensor_free(&x.in[i]);
    kn_model_free(m);
}

/* ---- tests --------------------------------------------------------------------- */

/* x + c → relu → + x → relu: generated elementwise code and arena reuse. */
static void test_add_relu_chain(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t d[2] = {4, 33};
    kn_value *x = add_input(m, "x", 2, d), *c = add_const_f32(m, "c", 2, d);
    kn_value *a[2] = {x, c};
    kn_node *add0 = node(m, KN_OP_Add, "add0", 2, a, 1);
    kn_node *r0 = node(m, KN_OP_Relu, "relu0", 1, add0->outputs, 1);
    kn_value *b[2] = {r0->outputs[0], x};
    kn_node *add1 = node(m, KN_OP_Add, "add1", 2, b, 1);
    kn_node *r1 = node(m, KN_OP_Relu, "relu1", 1, add1->outputs, 1);
    assert_int_equal(kn_graph_add_output(m->graph, r1->outputs[0]), 0);
    compile_run(m, "chain.so", false);
}

static void test_matmul(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t dx[2] = {3, 5}, dw[2] = {5, 7};
    kn_value *a[2] = {add_input(m, "x", 2, dx), add_const_f32(m, "w", 2, dw)};
    kn_node *mm = node(m, KN_OP_MatMul, "mm0", 2, a, 1);
    assert_int_equal(kn_graph_add_output(m->graph, mm->outputs[0]), 0);
    compile_run(m, "matmul.so", false);
}

/* TopK has no lowering: it runs through kn_rt_opnode_exec, two outputs. */
static void test_topk_fallback(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t dx[2] = {2, 10}, k = 3;
    kn_value *a[2] = {add_input(m, "x", 2, dx), add_const_i64(m, "k", 1, &k)};
    kn_node *r = node(m, KN_OP_Relu, "relu0", 1, a, 1);
    a[0] = r->outputs[0];
    kn_node *t = node(m, KN_OP_TopK, "topk0", 2, a, 2);
    assert_int_equal(kn_graph_add_output(m->graph, t->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(m->graph, t->outputs[1]), 0);
    compile_run(m, "topk.so", false);
}

/* Reshape aliases its input; an input and a constant are outputs too, and
 * the weights go to a side file. */
static void test_alias_io_external(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t dx[2] = {4, 6}, shape[2] = {6, 4};
    kn_value *x = add_input(m, "x", 2, dx), *c = add_const_f32(m, "c", 2, dx);
    kn_value *a[2] = {x, c};
    kn_node *add = node(m, KN_OP_Add, "add0", 2, a, 1);
    kn_value *b[2] = {add->outputs[0], add_const_i64(m, "shape", 2, shape)};
    kn_node *rs = node(m, KN_OP_Reshape, "reshape0", 2, b, 1);
    kn_node *r = node(m, KN_OP_Relu, "relu0", 1, rs->outputs, 1);
    assert_int_equal(kn_graph_add_output(m->graph, r->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(m->graph, x), 0);
    assert_int_equal(kn_graph_add_output(m->graph, c), 0);
    compile_run(m, "alias.so", true);
    char p[600];
    snprintf(p, sizeof p, "%s/alias.so.weights", g_dir);
    assert_int_equal(access(p, R_OK), 0);
}

/* A body op without a runtime kernel cannot be compiled: the error names
 * the node inside the body, and nothing is left. */
static void test_control_flow_leaves_nothing(void **state)
{
    (void)state;
    remove_files();
    kn_model *m = new_model();
    int64_t d[1] = {4};
    kn_value *x = add_input(m, "x", 1, d);
    kn_node *r = node(m, KN_OP_Relu, "relu0", 1, &x, 1);
    kn_value *ins[3] = {NULL, NULL, r->outputs[0]};
    kn_node *loop = node(m, KN_OP_Loop, "loop0", 3, ins, 1);
    kn_graph *body = kn_graph_create_sub(m->graph, "body");
    assert_non_null(body);
    kn_node_add_attr(loop, "body", KN_ATTR_GRAPH)->g = body;
    const char *names[1] = {"mystery_out"};
    assert_non_null(kn_node_create_named(body, "NoSuchOp", "", "mystery0", 1, &x, 1, names));
    loop->outputs[0]->dtype = KN_F32;
    kn_shape_set(&loop->outputs[0]->shape, 1, d);
    assert_int_equal(kn_graph_add_output(m->graph, loop->outputs[0]), 0);
    char so[600], h[600];
    snprintf(so, sizeof so, "%s/loop.so", g_dir);
    snprintf(h, sizeof h, "%s/loop.h", g_dir);
    kn_compile_opts o = {.output = so, .header = h, .opt_level = 3, .target = "native"};
    assert_int_not_equal(kn_compile_cpu(m, &o), 0);
    const char *want = "node 'mystery0' (NoSuchOp): (inside graph 'body') has no runtime kernel";
    if (!strstr(kn_last_error(), want)) fail_msg("message '%s' lacks '%s'", kn_last_error(), want);
    assert_int_equal(count_files(), 0);
    kn_model_free(m);
}

/* A dynamic input shape is refused with a hint naming the dim. */
static void test_dynamic_shape_refused(void **state)
{
    (void)state;
    kn_model *m = new_model();
    kn_shape s = {.rank = 2, .dims = {-1, 3}};
    s.sym[0] = "batch";
    kn_value *x = kn_graph_add_input(m->graph, "x", KN_F32, &s);
    kn_node *r = node(m, KN_OP_Relu, "relu0", 1, &x, 1);
    assert_int_equal(kn_graph_add_output(m->graph, r->outputs[0]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    char so[600];
    snprintf(so, sizeof so, "%s/dyn.so", g_dir);
    kn_compile_opts o = {.output = so, .opt_level = 3, .target = "native"};
    assert_int_not_equal(kn_compile_cpu(m, &o), 0);
    assert_non_null(strstr(kn_last_error(), "--shape batch="));
    assert_int_equal(access(so, F_OK), -1);
    kn_model_free(m);
}

/* Static archive + header for a portable target: the header declares the
 * descriptor and a typed run function, and compiles. */
static void test_static_and_header(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t d[2] = {2, 8};
    kn_value *x = add_input(m, "in.put-0", 2, d);
    kn_node *r = node(m, KN_OP_Relu, "relu0", 1, &x, 1);
    assert_int_equal(kn_graph_add_output(m->graph, r->outputs[0]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    char a[600], h[600], so[600];
    snprintf(a, sizeof a, "%s/libnet.a", g_dir);
    snprintf(h, sizeof h, "%s/net.h", g_dir);
    snprintf(so, sizeof so, "%s/net.so", g_dir);
    kn_compile_opts o = {.output = so, .static_output = a, .header = h, .name = "net", .opt_level = 2,
                         .target = "x86-64-v2"};
    if (kn_compile_cpu(m, &o)) fail_msg("compile: %s", kn_last_error());
    FILE *f = fopen(h, "r");
    assert_non_null(f);
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "extern const kn_artifact_desc kn_artifact_net;"));
    assert_non_null(strstr(text, "static inline int net_run(kn_session *s"));
    assert_non_null(strstr(text, "const float *in_put_0"));
    assert_int_equal(access(a, R_OK), 0);
    /* the .so of the same compile exports the shared descriptor name */
    kn_artifact *art = NULL;
    if (kn_artifact_open(so, &art)) fail_msg("open: %s", kn_last_error());
    kn_artifact_close(art);
    const char *src = getenv("KILN_SRC"), *build = getenv("KILN_BUILD");
    if (src && build) {
        /* an app linking the archive and libkiln_rt runs the model through the header */
        char app[600], exe[600], cmd[4096];
        snprintf(app, sizeof app, "%s/app.c", g_dir);
        snprintf(exe, sizeof exe, "%s/app", g_dir);
        f = fopen(app, "w");
        assert_non_null(f);
        fputs("#include <stdio.h>\n#include \"net.h\"\n"
              "int main(void) {\n"
              "    kn_artifact *a; kn_session *s; float x[16], y[16];\n"
              "    for (int i = 0; i < 16; i++) x[i] = (float)i - 7.5f;\n"
              "    if (net_open(&a) || kn_session_create(a, &s) || net_run(s, x, y)) {\n"
              "        fprintf(stderr, \"%s\\n\", kn_last_error()); return 1; }\n"
              "    for (int i = 0; i < 16; i++) if (y[i] != (x[i] > 0 ? x[i] : 0)) return 2;\n"
              "    kn_session_free(s); kn_artifact_close(a); return 0;\n}\n", f);
        fclose(f);
#if defined(__SANITIZE_ADDRESS__)
        const char *san = "-fsanitize=address,undefined"; /* as libkiln_rt was built */
#else
        const char *san = "";
#endif
        snprintf(cmd, sizeof cmd,
                 "cc -std=c11 -Wall -Werror %s -I%s/runtime/include -I%s -o %s %s %s -L%s -lkiln_rt -lm "
                 "-Wl,-rpath,%s && %s",
                 san, src, g_dir, exe, app, a, build, build, exe);
        assert_int_equal(system(cmd), 0);
    }
    kn_model_free(m);
}

/* Same model, same options: byte-identical artifacts. */
static void test_deterministic(void **state)
{
    (void)state;
    char p[2][600];
    for (int k = 0; k < 2; k++) {
        kn_model *m = new_model();
        g_seed = 99;
        int64_t d[2] = {3, 20};
        kn_value *a[2] = {add_input(m, "x", 2, d), add_const_f32(m, "c", 2, d)};
        kn_node *add = node(m, KN_OP_Mul, "mul0", 2, a, 1);
        assert_int_equal(kn_graph_add_output(m->graph, add->outputs[0]), 0);
        assert_int_equal(kn_graph_infer(m->graph), 0);
        snprintf(p[k], sizeof p[k], "%s/det%d.so", g_dir, k);
        kn_compile_opts o = {.output = p[k], .name = "det", .opt_level = 3, .target = "x86-64-v3"};
        if (kn_compile_cpu(m, &o)) fail_msg("compile: %s", kn_last_error());
        kn_model_free(m);
    }
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", p[0], p[1]);
    assert_int_equal(system(cmd), 0);
}

/* ---- data-dependent shapes ---------------------------------------------------- */

/* Compiles m (inferred by the caller) to file and opens it. */
static kn_artifact *compile_open(kn_model *m, const char *file)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    kn_compile_opts o = {.output = path, .opt_level = 2, .target = "native"};
    if (kn_compile_cpu(m, &o)) fail_msg("compile: %s", kn_last_error());
    kn_artifact *art = NULL;
    if (kn_artifact_open(path, &art)) fail_msg("open: %s", kn_last_error());
    return art;
}

/* Runs through kn_session_run_tensors and checks every output against the
 * evaluator, shapes included. */
static void run_tensors_check(kn_model *m, kn_session *s, int n_in, const char **names, kn_tensor *in)
{
    int n_out = m->graph->n_outputs;
    kn_tensor ref[4] = {0}, got[4] = {0};
    assert_int_equal(kn_eval_model(m, n_in, names, in, ref), 0);
    if (kn_session_run_tensors(s, n_in, in, n_out, got)) fail_msg("run: %s", kn_last_error());
    for (int i = 0; i < n_out; i++) {
        assert_int_equal(got[i].dtype, ref[i].dtype);
        assert_int_equal(got[i].rank, ref[i].rank);
        for (int d = 0; d < ref[i].rank; d++) assert_int_equal(got[i].dims[d], ref[i].dims[d]);
        compare(&ref[i], got[i].data);
        kn_tensor_free(&got[i]);
        kn_tensor_free(&ref[i]);
    }
}

static void expect_raw_run_refused(kn_session *s, const char *output, int n_in, kn_tensor *in)
{
    const void *ins[4];
    void *outs[4] = {0};
    char buf[256];
    for (int i = 0; i < n_in; i++) ins[i] = in[i].data;
    outs[0] = outs[1] = buf;
    assert_int_equal(kn_session_run(s, ins, outs), KN_ERR_UNSUPPORTED);
    char want[300];
    snprintf(want, sizeof want, "output '%s' has a data-dependent shape: use kn_session_run_tensors", output);
    if (!strstr(kn_last_error(), want)) fail_msg("message '%s' lacks '%s'", kn_last_error(), want);
}

/* Reshape to a shape that is a graph input: y (and what Relu makes of it) is
 * sized at run time; Shape(y) is a static output computed from a dynamic
 * value. Two shape values give two output shapes from one artifact. */
static void test_reshape_shape_input(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t dx[2] = {2, 6}, two = 2;
    kn_value *x = add_input(m, "x", 2, dx);
    kn_value *shape = kn_graph_add_input(m->graph, "shape", KN_I64, &(kn_shape){.rank = 1, .dims = {2}});
    assert_non_null(shape);
    kn_value *a[2] = {x, shape};
    kn_node *rs = node(m, KN_OP_Reshape, "reshape0", 2, a, 1);
    kn_node *r = node(m, KN_OP_Relu, "relu0", 1, rs->outputs, 1);
    kn_node *sh = node(m, KN_OP_Shape, "shape0", 1, r->outputs, 1);
    assert_int_equal(kn_graph_add_output(m->graph, r->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(m->graph, sh->outputs[0]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    kn_artifact *art = compile_open(m, "reshape_dyn.so");
    kn_io_info info;
    assert_int_equal(kn_artifact_output_info(art, 0, &info), 0);
    assert_int_equal(info.rank, 2);
    assert_int_equal(info.dims[0], -1);
    assert_int_equal(info.dims[1], -1);
    assert_int_equal(info.nbytes, 0);
    assert_int_equal(kn_artifact_output_info(art, 1, &info), 0);
    assert_int_equal(info.dims[0], two);
    kn_session *s = NULL;
    if (kn_session_create(art, &s)) fail_msg("session: %s", kn_last_error());
    kn_tensor in[2] = {0};
    const char *names[2] = {"x", "shape"};
    assert_int_equal(kn_tensor_alloc(&in[0], KN_F32, 2, dx), 0);
    assert_int_equal(kn_tensor_alloc(&in[1], KN_I64, 1, &two), 0);
    for (int i = 0; i < 12; i++) ((float *)in[0].data)[i] = rnd();
    static const int64_t shapes[3][2] = {{3, 4}, {12, 1}, {-1, 6}};
    for (int k = 0; k < 3; k++) {
        memcpy(in[1].data, shapes[k], sizeof shapes[k]);
        run_tensors_check(m, s, 2, names, in);
    }
    assert_int_equal(kn_artifact_output_info(art, 0, &info), 0);
    expect_raw_run_refused(s, info.name, 2, in);
    kn_session_free(s);
    kn_artifact_close(art);
    kn_tensor_free(&in[0]);
    kn_tensor_free(&in[1]);
    kn_model_free(m);
}

/* NonZero's output size depends on the data; Gather reads it (a runtime
 * kernel consuming a dynamic value) and both are outputs. */
static void test_nonzero_gather(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t dx[1] = {6};
    kn_value *x = add_input(m, "x", 1, dx);
    kn_node *nz = node(m, KN_OP_NonZero, "nz0", 1, &x, 1);
    kn_value *a[2] = {x, nz->outputs[0]};
    kn_node *g = node(m, KN_OP_Gather, "gather0", 2, a, 1);
    kn_node *r = node(m, KN_OP_Neg, "neg0", 1, g->outputs, 1);
    assert_int_equal(kn_graph_add_output(m->graph, r->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(m->graph, nz->outputs[0]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    kn_artifact *art = compile_open(m, "nonzero_dyn.so");
    kn_session *s = NULL;
    if (kn_session_create(art, &s)) fail_msg("session: %s", kn_last_error());
    kn_tensor in = {0};
    const char *names[1] = {"x"};
    assert_int_equal(kn_tensor_alloc(&in, KN_F32, 1, dx), 0);
    static const float data[3][6] = {{1, 0, 2, 0, 3, 4}, {0, 0, 5, 0, 0, 0}, {0, 0, 0, 0, 0, 0}};
    for (int k = 0; k < 3; k++) {
        memcpy(in.data, data[k], sizeof data[k]);
        run_tensors_check(m, s, 1, names, &in);
    }
    kn_io_info info;
    assert_int_equal(kn_artifact_output_info(art, 1, &info), 0);
    assert_int_equal(info.dims[1], -1);
    expect_raw_run_refused(s, "neg0:0", 1, &in);
    kn_session_free(s);
    kn_artifact_close(art);
    kn_tensor_free(&in);
    kn_model_free(m);
}

/* Adds a formal input to subgraph g. */
static kn_value *sub_input(kn_graph *g, const char *name, kn_dtype dt, int rank, int64_t dim)
{
    kn_shape sh = {.rank = rank, .dims = {dim}};
    kn_value *v = kn_graph_add_input(g, name, dt, &sh);
    assert_non_null(v);
    return v;
}

/* A branch of If computing op(a, b) (a and b read from enclosing graphs). */
static kn_graph *branch(kn_graph *parent, const char *name, kn_op op, kn_value *a, kn_value *b)
{
    kn_graph *g = kn_graph_create_sub(parent, name);
    assert_non_null(g);
    kn_value *ab[2] = {a, b};
    kn_node *n = kn_node_create(g, op, NULL, 2, ab, 1);
    assert_non_null(n);
    assert_int_equal(kn_graph_add_output(g, n->outputs[0]), 0);
    return g;
}

/* Loop(M, , y) whose body reads w (computed by the main graph, dead
 * otherwise), c (a weight) and y (an input), and holds an If that reads a
 * body value and main-graph values from its branches:
 *     t = v + w;  v' = iter < 1 ? t * c : t - y;  scan out: t
 * A Neg/Abs pair between Relu and Loop would take w's arena bytes if the
 * plan forgot that the Loop reads w. The trip count is an input, so the
 * stacked scan output is sized at run time. */
static void test_loop_if_captures(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t d[1] = {4}, one = 1;
    kn_value *x = add_input(m, "x", 1, d), *y = add_input(m, "y", 1, d);
    kn_value *trips = kn_graph_add_input(m->graph, "M", KN_I64, &(kn_shape){.rank = 1, .dims = {1}});
    kn_value *w = node(m, KN_OP_Relu, "relu0", 1, &x, 1)->outputs[0];
    kn_value *c = add_const_f32(m, "c", 1, d);
    kn_value *z = node(m, KN_OP_Neg, "neg0", 1, &x, 1)->outputs[0];
    kn_value *z2 = node(m, KN_OP_Abs, "abs0", 1, &z, 1)->outputs[0];
    kn_value *ins[3] = {trips, NULL, y};
    kn_node *loop = node(m, KN_OP_Loop, "loop0", 3, ins, 2);
    kn_graph *body = kn_graph_create_sub(m->graph, "body");
    assert_non_null(body);
    kn_node_add_attr(loop, "body", KN_ATTR_GRAPH)->g = body;
    kn_value *iter = sub_input(body, "iter", KN_I64, 0, 0), *cond = sub_input(body, "cond", KN_BOOL, 0, 0);
    kn_value *v = sub_input(body, "v", KN_F32, 1, 4);
    kn_tensor *t1 = malloc(sizeof *t1);
    assert_non_null(t1);
    assert_int_equal(kn_tensor_alloc(t1, KN_I64, 0, NULL), 0);
    ((int64_t *)t1->data)[0] = one;
    kn_value *vw[2] = {v, w}, *lt[2] = {iter, kn_graph_add_constant(body, "one", t1)};
    kn_value *t = kn_node_create(body, KN_OP_Add, "add_w", 2, vw, 1)->outputs[0];
    kn_node *first = kn_node_create(body, KN_OP_Less, "first", 2, lt, 1);
    kn_node *iff = kn_node_create(body, KN_OP_If, "if0", 1, first->outputs, 1);
    kn_node_add_attr(iff, "then_branch", KN_ATTR_GRAPH)->g = branch(body, "then", KN_OP_Mul, t, c);
    kn_node_add_attr(iff, "else_branch", KN_ATTR_GRAPH)->g = branch(body, "else", KN_OP_Sub, t, y);
    kn_node *keep = kn_node_create(body, KN_OP_Identity, "keep", 1, &cond, 1);
    kn_node *scan = kn_node_create(body, KN_OP_Identity, "scan", 1, &t, 1);
    assert_int_equal(kn_graph_add_output(body, keep->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(body, iff->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(body, scan->outputs[0]), 0);
    kn_value *sum[2] = {loop->outputs[0], z2};
    kn_node *out = node(m, KN_OP_Add, "add_out", 2, sum, 1);
    assert_int_equal(kn_graph_add_output(m->graph, out->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(m->graph, loop->outputs[1]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    assert_true(kn_shape_is_static(&loop->outputs[0]->shape));

    kn_artifact *art = compile_open(m, "loop_if.so");
    kn_session *s = NULL;
    if (kn_session_create(art, &s)) fail_msg("session: %s", kn_last_error());
    const char *names[3] = {"x", "y", "M"};
    kn_tensor in[3] = {0};
    assert_int_equal(kn_tensor_alloc(&in[0], KN_F32, 1, d), 0);
    assert_int_equal(kn_tensor_alloc(&in[1], KN_F32, 1, d), 0);
    assert_int_equal(kn_tensor_alloc(&in[2], KN_I64, 1, &one), 0);
    static const int64_t trip_counts[] = {3, 1, 0};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 4; i++) ((float *)in[0].data)[i] = rnd(), ((float *)in[1].data)[i] = rnd();
        ((int64_t *)in[2].data)[0] = trip_counts[k];
        run_tensors_check(m, s, 3, names, in);
    }
    kn_session_free(s);
    kn_artifact_close(art);
    for (int i = 0; i < 3; i++) kn_tensor_free(&in[i]);
    kn_model_free(m);
}

/* If whose branches give different shapes: then returns the outer input x
 * itself (a body output that is a capture), else Concat(x, y); the output
 * lives in a session slot and a Neg reads it there. Both branches run from
 * one artifact. */
static void test_if_dynamic_branches(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t d[1] = {3};
    kn_value *x = add_input(m, "x", 1, d), *y = add_input(m, "y", 1, d);
    kn_value *c = kn_graph_add_input(m->graph, "c", KN_BOOL, &(kn_shape){.rank = 0});
    kn_node *iff = node(m, KN_OP_If, "if0", 1, &c, 1);
    kn_graph *th = kn_graph_create_sub(m->graph, "then"), *el = kn_graph_create_sub(m->graph, "else");
    assert_non_null(th);
    assert_non_null(el);
    assert_int_equal(kn_graph_add_output(th, x), 0);
    kn_value *xy[2] = {x, y};
    kn_node *cat = kn_node_create(el, KN_OP_Concat, "cat0", 2, xy, 1);
    kn_node_add_attr(cat, "axis", KN_ATTR_INT)->i = 0;
    assert_int_equal(kn_graph_add_output(el, cat->outputs[0]), 0);
    kn_node_add_attr(iff, "then_branch", KN_ATTR_GRAPH)->g = th;
    kn_node_add_attr(iff, "else_branch", KN_ATTR_GRAPH)->g = el;
    kn_node *neg = node(m, KN_OP_Neg, "neg0", 1, iff->outputs, 1);
    assert_int_equal(kn_graph_add_output(m->graph, iff->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(m->graph, neg->outputs[0]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    assert_false(kn_shape_is_static(&iff->outputs[0]->shape));

    kn_artifact *art = compile_open(m, "if_dyn.so");
    kn_session *s = NULL;
    if (kn_session_create(art, &s)) fail_msg("session: %s", kn_last_error());
    const char *names[3] = {"x", "y", "c"};
    kn_tensor in[3] = {0};
    assert_int_equal(kn_tensor_alloc(&in[0], KN_F32, 1, d), 0);
    assert_int_equal(kn_tensor_alloc(&in[1], KN_F32, 1, d), 0);
    assert_int_equal(kn_tensor_alloc(&in[2], KN_BOOL, 0, NULL), 0);
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 3; i++) ((float *)in[0].data)[i] = rnd(), ((float *)in[1].data)[i] = rnd();
        ((uint8_t *)in[2].data)[0] = (uint8_t)(k & 1);
        run_tensors_check(m, s, 3, names, in);
    }
    kn_session_free(s);
    kn_artifact_close(art);
    for (int i = 0; i < 3; i++) kn_tensor_free(&in[i]);
    kn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_relu_chain),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_topk_fallback),
        cmocka_unit_test(test_alias_io_external),
        cmocka_unit_test(test_control_flow_leaves_nothing),
        cmocka_unit_test(test_dynamic_shape_refused),
        cmocka_unit_test(test_static_and_header),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_reshape_shape_input),
        cmocka_unit_test(test_nonzero_gather),
        cmocka_unit_test(test_loop_if_captures),
        cmocka_unit_test(test_if_dynamic_branches),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
