/*
 * tests/runtime/test_hostile_artifact.c — what hostile or careless input does
 * to artifact loading and sessions (issue 14's review), each case asserted by
 * its message:
 *   - truncated or damaged shared artifacts, and paths that are no regular
 *     file (FIFO, directory, device), refused before dlopen maps them (a
 *     cut .so used to die of SIGBUS, a FIFO used to hang);
 *   - external weights that are a FIFO or of the wrong size;
 *   - one flipped bit in embedded weights (static and shared artifacts);
 *   - one session run from two threads at once: refused, never corrupted.
 * Cases that crashed or hung before their fix run in a child process with
 * a watchdog, so that a regression is a failure that names the signal.
 *
 * The artifacts are made by hand: a meta serialized with kn_meta_write and
 * a run function computing y = x + w[0..3] (w: the weights).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln/kiln.h"

#define N 4
#define BIG_WEIGHTS (1u << 20) /* bytes of the shared artifact's weights */
#define RACE_ERROR "session used by two threads at once; create one session per thread"

static char g_dir[64];

static const char *tmp_path(const char *name)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_file(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size > 0);
    rewind(f);
    unsigned char *p = malloc((size_t)size);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *out_len = (size_t)size;
    return p;
}

static void fill_random(unsigned char *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (unsigned char)(seed >> 16);
    }
}

static void expect_message(const char *text)
{
    if (!strstr(kn_last_error(), text)) fail_msg("message '%s' lacks '%s'", kn_last_error(), text);
}

/* ---- a hand-made model: y = x + w[0..3] ------------------------------------- */

static kn_abi_tensor f32_1x4(const char *name)
{
    return (kn_abi_tensor){.name = name, .dtype = KN_F32, .rank = 2, .dims = {1, N}, .nbytes = 4 * N};
}

/* Meta with `weights_bytes` of weights hashing to `hash` (in `file` when not
 * NULL) and an arena of arena_bytes. */
static void add_meta(int64_t weights_bytes, uint64_t hash, const char *file, int64_t arena_bytes,
                     unsigned char **bytes, size_t *len)
{
    static kn_abi_tensor x, y;
    x = f32_1x4("x");
    y = f32_1x4("y");
    kn_meta m = {.model_hash = 7, .name = "add", .target = "x86-64", .kiln_version = "0.1.0", .n_inputs = 1,
                 .n_outputs = 1, .inputs = &x, .outputs = &y, .arena_bytes = arena_bytes,
                 .intermediate_bytes = arena_bytes, .weights_bytes = weights_bytes, .weights_file = file,
                 .weights_hash = hash};
    assert_int_equal(kn_meta_write(&m, bytes, len), 0);
}

static int run_add(kn_exec *ex, char *arena, const char *weights, void *const *inputs, void *const *outputs)
{
    (void)ex;
    (void)arena;
    const float *x = inputs[0], *w = (const float *)weights;
    float *y = outputs[0];
    for (int i = 0; i < N; i++) y[i] = x[i] + w[i];
    return 0;
}

static kn_artifact_desc make_desc(const unsigned char *meta, size_t len, const void *weights, size_t wlen,
                                  kn_abi_run_fn run)
{
    return (kn_artifact_desc){KN_ABI_MAGIC, KN_ABI_VERSION, meta, len, weights, wlen, run, NULL, 0};
}

/* ---- running a case in a child, with a watchdog ------------------------------ */

typedef int (*child_fn)(const void *arg);

typedef struct child_result {
    int status;     /* what fn returned */
    char msg[1024]; /* kn_last_error() after it */
} child_result;

/* Runs fn(arg) in a child process: a crash or a hang there fails the test
 * with the signal's name instead of taking the test program down. */
static child_result in_child(const char *what, child_fn fn, const void *arg)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        /* cmocka catches these to report a failing test; in the child they
         * must kill it, for the parent to see and name */
        const int sigs[] = {SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGABRT, SIGSYS};
        for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], SIG_DFL);
        alarm(60); /* a watchdog for a hang, not a time limit on the work */
        child_result r = {0};
        r.status = fn(arg);
        snprintf(r.msg, sizeof r.msg, "%s", kn_last_error());
        ssize_t wrote = write(fds[1], &r, sizeof r);
        _exit(wrote == (ssize_t)sizeof r ? 0 : 3);
    }
    close(fds[1]);
    child_result r = {0};
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    if (WIFSIGNALED(wst))
        fail_msg("%s: the child was killed by signal %d (%s)%s", what, WTERMSIG(wst), strsignal(WTERMSIG(wst)),
                 WTERMSIG(wst) == SIGALRM ? ": it hung" : "");
    if (got != (ssize_t)sizeof r || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0)
        fail_msg("%s: the child exited without a result", what);
    return r;
}

static int open_path(const void *arg)
{
    kn_artifact *a = NULL;
    int st = kn_artifact_open(arg, &a);
    if (!st && !a) return 99;
    kn_artifact_close(a);
    return st;
}

/* Opening path must fail with `code` and a message naming path and holding
 * text; a signal or a hang fails the test. */
static void expect_open_refused(const char *path, int code, const char *text)
{
    child_result r = in_child(path, open_path, path);
    if (r.status != code) fail_msg("%s: status %d (expected %d): '%s'", path, r.status, code, r.msg);
    if (!strstr(r.msg, text)) fail_msg("%s: message '%s' lacks '%s'", path, r.msg, text);
    if (!strstr(r.msg, path)) fail_msg("message '%s' does not name '%s'", r.msg, path);
}

/* ---- shared artifacts with 1 MiB of embedded weights -------------------------- */

/* C source of a shared artifact: the meta as a byte array, the weights
 * taken from weights_bin with .incbin (64-byte aligned, read-only). */
static void write_big_source(const char *path, const unsigned char *meta, size_t len, const char *weights_bin,
                             size_t wlen)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#include \"kiln/abi.h\"\nstatic const unsigned char meta[%zu] = {", len);
    for (size_t i = 0; i < len; i++) fprintf(f, "%s%u", i == 0 ? "\n" : i % 24 ? "," : ",\n", meta[i]);
    fprintf(f, "};\n"
               "__asm__(\".section .rodata\\n.balign 64\\n.globl kn_test_w\\n.hidden kn_test_w\\n"
               "kn_test_w:\\n.incbin \\\"%s\\\"\\n.previous\");\n"
               "extern const unsigned char kn_test_w[];\n"
               "static int run(kn_exec *ex, char *arena, const char *w, void *const *in, void *const *out) {\n"
               "    (void)ex; (void)arena; const float *x = in[0]; float *y = out[0];\n"
               "    for (int i = 0; i < %d; i++) y[i] = x[i] + ((const float *)w)[i];\n"
               "    return 0;\n}\n"
               "const kn_artifact_desc kn_artifact_descriptor =\n"
               "    {KN_ABI_MAGIC, %uu, meta, sizeof meta, kn_test_w, %zuu, run, 0, 0};\n",
            weights_bin, N, KN_ABI_VERSION, wlen);
    assert_int_equal(fclose(f), 0);
}

static int build_so(const char *src, const char *so)
{
    const char *root = getenv("KILN_SRC");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -O1 -I'%s/runtime/include' -o '%s' '%s'", root ? root : "..", so, src);
    return system(cmd);
}

static unsigned char *g_big_w; /* the weights of big.so */

/* Builds big.so (once) and returns its bytes. */
static unsigned char *big_so(size_t *out_len)
{
    const char *so = tmp_path("big.so");
    if (access(so, R_OK) != 0) {
        g_big_w = malloc(BIG_WEIGHTS);
        assert_non_null(g_big_w);
        fill_random(g_big_w, BIG_WEIGHTS, 1234);
        write_file(tmp_path("big.bin"), g_big_w, BIG_WEIGHTS);
        unsigned char *meta;
        size_t len;
        add_meta(BIG_WEIGHTS, kn_weights_hash(g_big_w, BIG_WEIGHTS), NULL, 64, &meta, &len);
        write_big_source(tmp_path("big.c"), meta, len, tmp_path("big.bin"), BIG_WEIGHTS);
        free(meta);
        assert_int_equal(build_so(tmp_path("big.c"), so), 0);
    }
    return read_file(so, out_len);
}

static void run_big(const char *path)
{
    kn_artifact *a;
    if (kn_artifact_open(path, &a)) fail_msg("%s", kn_last_error());
    kn_session *s;
    assert_int_equal(kn_session_create(a, &s), 0);
    float x[N] = {1, -2, 3, -4}, y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(kn_session_run(s, in, out), 0);
    for (int i = 0; i < N; i++) {
        float w;
        memcpy(&w, g_big_w + 4 * i, 4);
        assert_true(y[i] == x[i] + w);
    }
    kn_session_free(s);
    kn_artifact_close(a);
}

static void test_truncated_artifact(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = big_so(&size);
    run_big(tmp_path("big.so"));
    /* `head -c $((size/2)) big.so > cut.so`, and cuts at other places: the
     * ELF header, the program headers, the weights, the last byte */
    const size_t cuts[] = {size / 2, size / 4, 3 * size / 4, size - 1, 100, 63, 0};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_file(tmp_path("cut.so"), bytes, cuts[i]);
        expect_open_refused(tmp_path("cut.so"), KN_ERR_IO, cuts[i] < 64 ? "not an ELF file" : "truncated");
    }
    free(bytes);
}

/* Little-endian field access into an ELF64 image. */
static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void put_le(unsigned char *p, int n, uint64_t v)
{
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void test_damaged_elf(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = big_so(&size);
    unsigned char *copy = malloc(size);
    assert_non_null(copy);
    const char *bad = tmp_path("bad.so");

    /* the program headers' table past the end of the file */
    memcpy(copy, bytes, size);
    put_le(copy + 32, 8, size - 8); /* e_phoff */
    write_file(bad, copy, size);
    expect_open_refused(bad, KN_ERR_IO, "program headers");

    /* a loadable segment that says it runs past the end of the file */
    memcpy(copy, bytes, size);
    uint64_t phoff = get_le(copy + 32, 8);
    unsigned phnum = (unsigned)get_le(copy + 56, 2), last_load = phnum;
    for (unsigned i = 0; i < phnum; i++)
        if (get_le(copy + phoff + 56 * i, 4) == 1 /* PT_LOAD */) last_load = i;
    assert_true(last_load < phnum);
    unsigned char *ph = copy + phoff + 56 * last_load;
    put_le(ph + 32, 8, get_le(ph + 32, 8) + size); /* p_filesz */
    put_le(ph + 40, 8, get_le(ph + 40, 8) + size); /* p_memsz */
    write_file(bad, copy, size);
    expect_open_refused(bad, KN_ERR_IO, "segment");

    /* a wrong program-header entry size, and a 32-bit class */
    memcpy(copy, bytes, size);
    put_le(copy + 54, 2, 12); /* e_phentsize */
    write_file(bad, copy, size);
    expect_open_refused(bad, KN_ERR_IO, "damaged ELF header");
    memcpy(copy, bytes, size);
    copy[4] = 1; /* ELFCLASS32 */
    write_file(bad, copy, size);
    expect_open_refused(bad, KN_ERR_IO, "64-bit");
    free(copy);
    free(bytes);
}

static void test_not_a_regular_file(void **state)
{
    (void)state;
    const char *fifo = tmp_path("fifo.so");
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_open_refused(fifo, KN_ERR_IO, "is not a regular file (a FIFO)");
    const char *dir = tmp_path("dir.so");
    assert_int_equal(mkdir(dir, 0700), 0);
    expect_open_refused(dir, KN_ERR_IO, "is not a regular file (a directory)");
    if (access("/dev/zero", R_OK) == 0) expect_open_refused("/dev/zero", KN_ERR_IO, "is not a regular file");
    expect_open_refused(tmp_path("missing.so"), KN_ERR_IO, "No such file");
}

/* ---- external weights ---------------------------------------------------------- */

typedef struct from_desc_arg {
    const kn_artifact_desc *desc;
    const char *dir;
} from_desc_arg;

static int open_desc(const void *arg)
{
    const from_desc_arg *f = arg;
    kn_artifact *a = NULL;
    int st = kn_artifact_from_descriptor(f->desc, f->dir, &a);
    kn_artifact_close(a);
    return st;
}

static void test_external_weights_checked(void **state)
{
    (void)state;
    float w[N] = {0.5f, -10, 2, 3};
    unsigned char *meta;
    size_t len;
    add_meta(sizeof w, kn_weights_hash(w, sizeof w), "ext.weights", 64, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, NULL, 0, run_add);
    from_desc_arg arg = {&d, g_dir};

    /* a FIFO there must not hang the open */
    unlink(tmp_path("ext.weights"));
    assert_int_equal(mkfifo(tmp_path("ext.weights"), 0600), 0);
    child_result r = in_child("FIFO weights", open_desc, &arg);
    assert_int_equal(r.status, KN_ERR_IO);
    if (!strstr(r.msg, "ext.weights' is not a regular file (a FIFO)")) fail_msg("message: '%s'", r.msg);
    unlink(tmp_path("ext.weights"));

    /* longer than the artifact's weights: not the file written with it */
    float more[N + 1] = {0.5f, -10, 2, 3, 9};
    write_file(tmp_path("ext.weights"), more, sizeof more);
    assert_int_equal(open_desc(&arg), KN_ERR_IO);
    expect_message("ext.weights' is 20 bytes, the artifact expects 16");

    write_file(tmp_path("ext.weights"), w, sizeof w);
    kn_artifact *a;
    assert_int_equal(kn_artifact_from_descriptor(&d, g_dir, &a), 0);
    kn_artifact_close(a);
    free(meta);
}

/* ---- embedded weights: one flipped bit ------------------------------------------ */

static void test_weights_hash(void **state)
{
    (void)state;
    enum { LEN = 1000 };
    unsigned char buf[LEN + 8];
    fill_random(buf, sizeof buf, 77);
    uint64_t h = kn_weights_hash(buf, LEN);
    /* every single-bit flip, in whole words and in the tail */
    for (size_t bit = 0; bit < 8 * LEN; bit++) {
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        if (kn_weights_hash(buf, LEN) == h) fail_msg("flipping bit %zu leaves the hash unchanged", bit);
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    /* the same bytes at an unaligned address hash alike */
    memmove(buf + 1, buf, LEN);
    assert_true(kn_weights_hash(buf + 1, LEN) == h);
    /* zero bytes of every length from 0 to 64 hash apart: the length counts */
    unsigned char zeros[64] = {0};
    uint64_t seen[65];
    for (int n = 0; n <= 64; n++) {
        seen[n] = kn_weights_hash(zeros, (size_t)n);
        for (int k = 0; k < n; k++) assert_true(seen[k] != seen[n]);
    }
    /* two words swapped between positions */
    uint64_t words[8] = {1, 2, 3, 4, 5, 6, 7, 8}, swapped[8] = {2, 1, 3, 4, 5, 6, 7, 8};
    assert_true(kn_weights_hash(words, sizeof words) != kn_weights_hash(swapped, sizeof swapped));
}

static void test_embedded_bit_flip(void **state)
{
    (void)state;
    enum { W = 256 };
    static _Alignas(64) unsigned char w[W];
    fill_random(w, W, 5);
    unsigned char *meta;
    size_t len;
    add_meta(W, kn_weights_hash(w, W), NULL, 64, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, w, W, run_add);
    kn_artifact *a;
    assert_int_equal(kn_artifact_from_descriptor(&d, NULL, &a), 0);
    kn_artifact_close(a);
    for (size_t bit = 0; bit < 8 * W; bit++) {
        w[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        a = (kn_artifact *)1;
        int st = kn_artifact_from_descriptor(&d, NULL, &a);
        if (st != KN_ERR_INVALID || a) fail_msg("bit %zu flipped: status %d", bit, st);
        expect_message("static artifact: the embedded weights (256 bytes) do not match their hash");
        w[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    free(meta);

    /* the same in a shared artifact's file: one bit in the middle of 1 MiB */
    size_t size;
    unsigned char *bytes = big_so(&size);
    unsigned char *at = memmem(bytes, size, g_big_w + BIG_WEIGHTS / 2, 64);
    assert_non_null(at);
    at[17] ^= 0x10;
    write_file(tmp_path("flip.so"), bytes, size);
    expect_open_refused(tmp_path("flip.so"), KN_ERR_INVALID, "the embedded weights (1048576 bytes) do not match");
    free(bytes);
}

/* ---- one session, two threads ----------------------------------------------------- */

#define ARENA_FLOATS (1 << 15)

/* A run long enough for two threads to meet in it: fills the arena from x,
 * then sums it back into y (another thread's x there shows in y). */
static int run_slow(kn_exec *ex, char *arena, const char *weights, void *const *inputs, void *const *outputs)
{
    (void)ex;
    (void)weights;
    const float *x = inputs[0];
    volatile float *t = (float *)arena;
    float *y = outputs[0];
    for (int i = 0; i < ARENA_FLOATS; i++) t[i] = x[i % N] * (float)(i % 7 + 1);
    for (int j = 0; j < N; j++) y[j] = 0;
    for (int i = 0; i < ARENA_FLOATS; i++) y[i % N] += t[i];
    return 0;
}

typedef struct racer {
    kn_session *s;
    int tensors; /* use kn_session_run_tensors */
    float x[N], want[N];
    atomic_int *refusals_total;
    int max_runs;
    int runs, refusals, corrupt, other_errors;
    char other[256];
} racer;

static int racer_run(racer *r, float *y)
{
    if (!r->tensors) {
        const void *in[1] = {r->x};
        void *out[1] = {y};
        return kn_session_run(r->s, in, out);
    }
    kn_tensor in = {.dtype = KN_F32, .rank = 2, .dims = {1, N}, .data = r->x, .nbytes = sizeof r->x}, out = {0};
    int st = kn_session_run_tensors(r->s, 1, &in, 1, &out);
    if (!st) memcpy(y, out.data, sizeof(float) * N);
    kn_tensor_free(&out);
    return st;
}

/* Runs until it has seen a refusal (any thread's) and done 200 runs, or
 * max_runs runs. */
static void *racer_main(void *arg)
{
    racer *r = arg;
    while (r->runs < r->max_runs && (r->runs < 200 || atomic_load(r->refusals_total) == 0)) {
        float y[N] = {0};
        int st = racer_run(r, y);
        r->runs++;
        if (st == KN_ERR_INVALID && strstr(kn_last_error(), RACE_ERROR)) {
            r->refusals++;
            atomic_fetch_add(r->refusals_total, 1);
        } else if (st) {
            if (!r->other_errors++) snprintf(r->other, sizeof r->other, "%s", kn_last_error());
        } else if (memcmp(y, r->want, sizeof y)) {
            r->corrupt++;
        }
    }
    return NULL;
}

static void expected_output(kn_session *s, const float *x, float *y)
{
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(kn_session_run(s, in, out), 0);
}

/* Two racers on s_a and s_b (the same session or two), until done. */
static void race(kn_session *s_a, kn_session *s_b, int max_runs, racer *r)
{
    static atomic_int total;
    atomic_store(&total, 0);
    const float xs[2][N] = {{1, 2, 3, 4}, {-5, 6.5f, -7, 8}};
    for (int k = 0; k < 2; k++) {
        r[k] = (racer){.s = k ? s_b : s_a, .tensors = k, .refusals_total = &total, .max_runs = max_runs};
        memcpy(r[k].x, xs[k], sizeof r[k].x);
        expected_output(r[k].s, r[k].x, r[k].want);
    }
    pthread_t th[2];
    for (int k = 0; k < 2; k++) assert_int_equal(pthread_create(&th[k], NULL, racer_main, &r[k]), 0);
    for (int k = 0; k < 2; k++) assert_int_equal(pthread_join(th[k], NULL), 0);
    for (int k = 0; k < 2; k++) {
        if (r[k].other_errors) fail_msg("racer %d: %d unexpected errors, first: '%s'", k, r[k].other_errors, r[k].other);
        if (r[k].corrupt) fail_msg("racer %d: %d of %d runs returned a corrupted output", k, r[k].corrupt, r[k].runs);
    }
}

static void test_session_two_threads(void **state)
{
    (void)state;
    static _Alignas(64) const float w[N] = {0};
    unsigned char *meta;
    size_t len;
    add_meta(sizeof w, kn_weights_hash(w, sizeof w), NULL, 4 * ARENA_FLOATS, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, w, sizeof w, run_slow);
    kn_artifact *a;
    assert_int_equal(kn_artifact_from_descriptor(&d, NULL, &a), 0);
    kn_session *s, *s2;
    assert_int_equal(kn_session_create(a, &s), 0);
    assert_int_equal(kn_session_create(a, &s2), 0);

    /* one session hammered by two threads: refusals, never a wrong answer */
    racer r[2];
    race(s, s, 50000, r);
    if (r[0].refusals + r[1].refusals == 0)
        fail_msg("%d + %d runs of one session on two threads, never refused", r[0].runs, r[1].runs);
    /* a refused call leaves the session usable */
    float y[N];
    expected_output(s, r[0].x, y);
    assert_memory_equal(y, r[0].want, sizeof y);

    /* a session each: never refused (and never a wrong answer) */
    race(s, s2, 2000, r);
    assert_true(r[0].runs == 2000 && r[1].runs == 2000);
    assert_int_equal(r[0].refusals + r[1].refusals, 0);
    kn_session_free(s);
    kn_session_free(s2);
    kn_artifact_close(a);
    free(meta);
}

/* ---- setup ------------------------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln_test_hostile_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    /* kiln itself links artifacts with cc: a machine without one cannot run these cases */
    write_file(tmp_path("probe.c"), "int probe;\n", 11);
    if (build_so(tmp_path("probe.c"), tmp_path("probe.so")) != 0) {
        fprintf(stderr, "test_hostile_artifact: no working cc to build shared artifacts with\n");
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(g_big_w);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_artifact),  cmocka_unit_test(test_damaged_elf),
        cmocka_unit_test(test_not_a_regular_file),  cmocka_unit_test(test_external_weights_checked),
        cmocka_unit_test(test_weights_hash),        cmocka_unit_test(test_embedded_bit_flip),
        cmocka_unit_test(test_session_two_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
