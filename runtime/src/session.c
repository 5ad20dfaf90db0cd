/*
 * runtime/src/session.c — sessions: the per-thread state a compiled model
 * runs in (its 64-byte aligned arena, its oneDNN engine/stream and the
 * primitives of the artifact's oneDNN records, created once here), the two
 * ways to run (raw buffers, or tensors checked against the compiled
 * signature) and the runtime's version numbers.
 *
 * Values whose shape depends on input data live in the session's slots
 * (kiln/abi.h): a slot holds the tensor a runtime kernel produced until the
 * next run replaces it or the session is freed. Graph outputs among them can
 * only be returned as tensors (kn_session_run_tensors), with their actual
 * shapes; kn_session_run, whose caller sized the buffers, refuses them.
 *
 * Dynamic dims (`kiln compile --max NAME=N`): kn_session_run_tensors derives
 * each symbol's value from the input shapes (every input that has the dim
 * must agree), refuses values outside [1, max], and sizes the outputs for
 * it; kn_session_run uses the values set with kn_session_set_dim (the
 * maximum until then).
 *
 * The artifact is only read, so any number of sessions of one artifact run
 * concurrently. One session runs on one thread at a time: the run entry
 * points claim the session with an atomic flag and refuse a second thread
 * instead of letting both write the same arena (outputs silently corrupted).
 * The flag costs one atomic exchange per run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "config.h"
#include "kiln/profile.h"
#include "rt_internal.h"

#define KN_RUNTIME_VERSION "0.1.0"
#define KN_MAX_THREADS 4096

const char *kn_runtime_version(void) { return KN_RUNTIME_VERSION; }
uint32_t kn_runtime_abi_version(void) { return KN_ABI_VERSION; }

static const char *label_of(const kn_artifact *a)
{
    return a->path ? a->path : a->meta.name ? a->meta.name : "static artifact";
}

/* True if record r's output is read by record r + 1 alone, from the meta's
 * steps and buffers: r and r + 1 are the only records of two consecutive
 * steps, and r's dst is an arena value live through those two steps only. */
static bool read_by_next_alone(const kn_meta *m, int r)
{
    int st = -1;
    for (int i = 0; i + 1 < m->n_steps && st < 0; i++)
        if (m->steps[i].dnnl == r) st = i;
    if (st < 0 || m->steps[st + 1].dnnl != r + 1) return false;
    /* step st + 1 runs record r + 1 alone: the next record is the next step's */
    int after = m->n_dnnl;
    for (int i = st + 2; i < m->n_steps && after == m->n_dnnl; i++)
        if (m->steps[i].dnnl >= 0) after = m->steps[i].dnnl;
    if (after != r + 2) return false;
    const char *name = m->dnnl[r].dst.name;
    if (!name || !m->dnnl[r + 1].src.name || strcmp(name, m->dnnl[r + 1].src.name)) return false;
    for (int i = 0; i < m->n_buffers; i++) {
        const kn_abi_buffer *b = &m->buffers[i];
        if (b->name && !strcmp(b->name, name)) return b->first_step == st && b->last_step == st + 1;
    }
    return false;
}

/* Pairs of records that run as one kernel (kn_dnnl_prim_fuse). */
static int fuse_prims(kn_session *s)
{
    const kn_meta *m = &s->art->meta;
    for (int r = 0; r + 1 < m->n_dnnl; r++) {
        if (!read_by_next_alone(m, r)) continue;
        int st = kn_dnnl_prim_fuse(s->dnnl, s->prims[r], s->prims[r + 1]);
        if (st == KN_OK) r++;
        else if (st == KN_ERR_UNSUPPORTED) kn_error_clear();
        else {
            kn_error_prefix("%s: oneDNN primitives %d and %d: ", label_of(s->art), r, r + 1);
            return st;
        }
    }
    return KN_OK;
}

static int create_prims(kn_session *s)
{
    const kn_artifact *a = s->art;
    int n = a->meta.n_dnnl;
    if (n == 0) return KN_OK;
    int st = kn_dnnl_session_init(&s->dnnl);
    if (st) {
        kn_error_prefix("%s: ", label_of(a));
        return st;
    }
    s->prims = calloc((size_t)n, sizeof *s->prims);
    if (!s->prims) return kn_error(KN_ERR_NOMEM, "%s: out of memory", label_of(a));
    for (int i = 0; i < n; i++)
        if ((st = kn_dnnl_prim_create(s->dnnl, &a->meta.dnnl[i], a->weights, &s->prims[i]))) {
            kn_error_prefix("%s: oneDNN primitive %d: ", label_of(a), i);
            return st;
        }
    return fuse_prims(s);
}

/* What the runtime-kernel nodes keep across runs (opdesc.h); the recurrent
 * ops' and Attention's fast paths (rnn.c, attention.c) read KILN_RNN and
 * KILN_ATTENTION, checked here so that a bad value
 * fails the session's creation rather than its first run. */
static int create_opsess(kn_session *s)
{
    const kn_artifact *a = s->art;
    int n = a->meta.n_opnodes;
    if (n <= 0) return KN_OK;
    if (!(s->opsess = calloc((size_t)n, sizeof *s->opsess))) return kn_error(KN_ERR_NOMEM, "%s: out of memory", label_of(a));
    bool recurrent = false, attention = false;
    for (int i = 0; i < n; i++) {
        s->opsess[i].threads = s->threads;
        s->opsess[i].weights = a->weights;
        s->opsess[i].weights_len = a->weights && a->meta.weights_bytes > 0 ? (size_t)a->meta.weights_bytes : 0;
        kn_op op = a->opnodes[i].desc.op;
        recurrent |= op == KN_OP_LSTM || op == KN_OP_GRU || op == KN_OP_RNN;
        attention |= op == KN_OP_Attention || op == KN_OP_PackedAttention;
    }
    int st = recurrent ? kn_config_check_rnn() : KN_OK;
    if (!st && attention) st = kn_config_check_attention();
    if (st) kn_error_prefix("%s: ", label_of(a));
    return st;
}

int kn_session_create(const kn_artifact *a, kn_session **out)
{
    if (out) *out = NULL;
    if (!a || !out) return kn_error(KN_ERR_INVALID, "kn_session_create: NULL argument");
    kn_session *s = calloc(1, sizeof *s);
    if (!s) return kn_error(KN_ERR_NOMEM, "out of memory");
    s->art = a;
    atomic_init(&s->running, 0);
    s->exec.session = s;
    s->threads = s->run_threads = 1;
    for (int k = 0; k < a->meta.n_syms; k++) s->exec.syms[k] = a->meta.syms[k].max;
    int64_t bytes = a->meta.arena_bytes;
    if (bytes > 0) {
        /* rounded up so that the generated code may run vector loops to the end */
        if ((uint64_t)bytes > SIZE_MAX - 64) {
            kn_session_free(s);
            return kn_error(KN_ERR_NOMEM, "%s: arena of %lld bytes is too large", label_of(a), (long long)bytes);
        }
        size_t size = ((size_t)bytes + 63) & ~(size_t)63;
        void *p = kn_big_alloc(size);
        if (!p) {
            kn_session_free(s);
            return kn_error(KN_ERR_NOMEM, "%s: arena of %zu bytes: out of memory", label_of(a), size);
        }
        memset(p, 0, size); /* never let garbage leak into results: runs stay deterministic */
        s->arena = p;
    }
    int n_slots = a->meta.n_slots;
    if (n_slots > 0 && !(s->slots = calloc((size_t)n_slots, sizeof *s->slots))) {
        kn_session_free(s);
        return kn_error(KN_ERR_NOMEM, "%s: out of memory", label_of(a));
    }
    for (int i = 0; i < n_slots; i++) s->slots[i].rank = -1; /* not computed yet */
    kn_thread_policy policy = KN_THREADS_ADAPTIVE;
    int st = kn_config_thread_policy(&policy);
    if (st) kn_error_prefix("%s: ", label_of(a));
    kn_gov_init(&s->gov, 1, policy == KN_THREADS_FIXED);
    if (!st) st = create_opsess(s);
    if (!st) st = create_prims(s);
    if (st) {
        kn_session_free(s);
        return st;
    }
    *out = s;
    return KN_OK;
}

int kn_session_set_threads(kn_session *s, int threads)
{
    if (!s) return kn_error(KN_ERR_INVALID, "kn_session_set_threads: NULL session");
    if (threads < 1 || threads > KN_MAX_THREADS)
        return kn_error(KN_ERR_INVALID, "kn_session_set_threads: %d threads (expected 1..%d)", threads, KN_MAX_THREADS);
    for (int i = 0; i < s->art->meta.n_dnnl; i++) {
        int st = s->prims[i] ? kn_dnnl_prim_set_threads(s->dnnl, s->prims[i], threads) : KN_OK;
        if (st) return st;
    }
    s->threads = threads;
    kn_gov_init(&s->gov, threads, s->gov.fixed);
    kn_rt_set_run_threads(s, threads);
    return KN_OK;
}

int kn_session_set_thread_policy(kn_session *s, kn_thread_policy policy)
{
    if (!s) return kn_error(KN_ERR_INVALID, "kn_session_set_thread_policy: NULL session");
    if (policy != KN_THREADS_ADAPTIVE && policy != KN_THREADS_FIXED)
        return kn_error(KN_ERR_INVALID, "kn_session_set_thread_policy: unknown policy %d", (int)policy);
    kn_gov_init(&s->gov, s->threads, policy == KN_THREADS_FIXED);
    kn_rt_set_run_threads(s, s->threads);
    return KN_OK;
}

int kn_session_thread_stats(const kn_session *s, int64_t *runs, int64_t *solo_runs)
{
    if (!s || !runs || !solo_runs) return kn_error(KN_ERR_INVALID, "kn_session_thread_stats: NULL argument");
    *runs = s->gov.runs;
    *solo_runs = s->gov.solo_runs;
    return KN_OK;
}

void kn_rt_set_run_threads(kn_session *s, int threads)
{
    if (s->run_threads == threads) return;
    s->run_threads = threads;
    for (int i = 0; s->opsess && i < s->art->meta.n_opnodes; i++) s->opsess[i].threads = threads;
}

int kn_rt_check_buffers(const kn_session *s, const void *const *inputs, void *const *outputs)
{
    const kn_meta *m = &s->art->meta;
    if ((m->n_inputs && !inputs) || (m->n_outputs && !outputs))
        return kn_error(KN_ERR_INVALID, "%s: kn_session_run: NULL input or output array", label_of(s->art));
    for (int i = 0; i < m->n_inputs; i++)
        if (!inputs[i] && m->inputs[i].nbytes > 0)
            return kn_error(KN_ERR_INVALID, "input '%s': NULL buffer", m->inputs[i].name);
    for (int i = 0; i < m->n_outputs; i++)
        if (!outputs[i] && m->outputs[i].nbytes > 0 && m->outputs[i].slot == 0)
            return kn_error(KN_ERR_INVALID, "output '%s': NULL buffer", m->outputs[i].name);
    return KN_OK;
}

/* kn_session_run without the refusal of dynamic outputs (their buffers are
 * ignored: run_tensors takes them from the slots). */
static int run_raw(kn_session *s, const void *const *inputs, void *const *outputs)
{
    int st = kn_rt_check_buffers(s, inputs, outputs);
    if (st) return st;
    kn_error_clear();
    /* the governor's choice of threads (governor.h), and what it learns from
     * the run: its time per byte of input, leaving out primitives built
     * during it; whether a worker had to wait for a CPU */
    int64_t begin = kn_rt_now_ns();
    int threads = kn_gov_begin(&s->gov, s->last_end_ns ? begin - s->last_end_ns : -1);
    kn_rt_set_run_threads(s, threads);
    uint64_t late = kn_rt_contention_count();
    kn_rt_team_check(threads);
    int64_t built = kn_dnnl_build_ns(s->dnnl), t0 = kn_rt_now_ns();
    /* the ABI passes inputs as void *const *; the generated code never writes them */
    st = s->art->desc->run(&s->exec, s->arena, (const char *)s->art->weights, (void *const *)inputs, outputs);
    int64_t ns = kn_rt_now_ns() - t0 - (kn_dnnl_build_ns(s->dnnl) - built);
    double bytes = 0;
    for (int i = 0; i < s->art->meta.n_inputs; i++)
        bytes += (double)kn_rt_tensor_nbytes(&s->exec, &s->art->meta.inputs[i]);
    kn_gov_end(&s->gov, st ? -1.0 : (double)ns / (bytes > 0 ? bytes : 1.0), kn_rt_contention_count() != late);
    s->last_end_ns = kn_rt_now_ns();
    if (st && !*kn_last_error())
        kn_error(KN_ERR_INTERNAL, "%s: the model's run function failed with status %d", label_of(s->art), st);
    return st;
}

/* Claims s for the calling thread's run; a second thread gets an error and
 * must not touch the session (nor release the claim). Acquire/release order
 * the two runs' arena writes when one thread hands a session to another. */
static int session_enter(kn_session *s, const char *fn)
{
    if (atomic_exchange_explicit(&s->running, 1, memory_order_acquire) == 0) return KN_OK;
    return kn_error(KN_ERR_INVALID, "%s: %s: session used by two threads at once; create one session per thread",
                    label_of(s->art), fn);
}

static void session_leave(kn_session *s) { atomic_store_explicit(&s->running, 0, memory_order_release); }

int kn_session_run(kn_session *s, const void *const *inputs, void *const *outputs)
{
    if (!s) return kn_error(KN_ERR_INVALID, "kn_session_run: NULL session");
    const kn_meta *m = &s->art->meta;
    for (int i = 0; i < m->n_outputs; i++)
        if (m->outputs[i].slot > 0)
            return kn_error(KN_ERR_UNSUPPORTED, "%s: output '%s' has a data-dependent shape: use kn_session_run_tensors",
                            label_of(s->art), m->outputs[i].name);
    int st = session_enter(s, "kn_session_run");
    if (st) return st;
    st = run_raw(s, inputs, outputs);
    session_leave(s);
    return st;
}

int kn_session_set_dim(kn_session *s, const char *name, int64_t value)
{
    if (!s || !name) return kn_error(KN_ERR_INVALID, "kn_session_set_dim: NULL argument");
    const kn_meta *m = &s->art->meta;
    for (int k = 0; k < m->n_syms; k++) {
        const kn_abi_sym *y = &m->syms[k];
        if (strcmp(y->name, name) != 0) continue;
        if (y->from_data)
            return kn_error(KN_ERR_INVALID, "%s: dynamic dim '%s' is set by the data in each run, not by the caller",
                            label_of(s->art), name);
        /* the value is the dim's (a multiple of the alignment); the symbol holds dim / align */
        if (value % y->align != 0 || value < y->min * y->align || value > y->max * y->align)
            return kn_error(KN_ERR_INVALID, "%s: dynamic dim '%s' set to %lld, the artifact was compiled for %lld to "
                            "%lld%s%.0lld", label_of(s->art), name, (long long)value, (long long)(y->min * y->align),
                            (long long)(y->max * y->align), y->align > 1 ? " in steps of " : "",
                            y->align > 1 ? (long long)y->align : 0LL);
        s->exec.syms[k] = value / y->align;
        return KN_OK;
    }
    return kn_error(KN_ERR_INVALID, "%s: the artifact has no dynamic dim named '%s'", label_of(s->art), name);
}

/* "f32[1,3,224,224]"; a dynamic dim reads "batch<=8" */
static char *sig_str(const kn_meta *m, int dtype, int rank, const int64_t *dims, const int32_t *sym, char *buf,
                     size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "%s[", kn_dtype_name(dtype));
    for (int i = 0; i < rank && at < len; i++) {
        int k = sym ? sym[i] : 0;
        if (k > 0 && k <= m->n_syms)
            at += (size_t)snprintf(buf + at, len - at, "%s%s<=%lld", i ? "," : "", m->syms[k - 1].name,
                                   (long long)dims[i]);
        else at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? "," : "", (long long)dims[i]);
    }
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

/* The value of a dynamic dim that an input's size `got` implies
 * (size = dims[d] + a * (n - max)), or a message. seen[k]: the input that
 * set symbol k first in this run (-1: none yet). The range is said in the
 * dim's own units when the dim is the symbol's (A*n: `x.2` from 32 to 256
 * in steps of 32), else in the symbol's. */
static int derive_sym(kn_session *s, int input, int d, int64_t got, int *seen)
{
    const kn_meta *m = &s->art->meta;
    const kn_abi_tensor *t = &m->inputs[input];
    int k = t->dim_sym[d] - 1;
    const kn_abi_sym *sym = &m->syms[k];
    int64_t a = t->dim_a[d], diff = got - t->dims[d];
    int64_t n = sym->max + diff / a;
    bool own = a == sym->align && t->dims[d] == sym->max * sym->align; /* the dim is A*n */
    long long lo = (long long)(own ? sym->min * a : t->dims[d] - a * (sym->max - sym->min));
    long long hi = (long long)t->dims[d];
    if (own && diff % a != 0)
        return kn_error(KN_ERR_INVALID, "input '%s': dim %d (%s) is %lld, not a multiple of %lld (the artifact was "
                        "compiled for %s = %lld to %lld in steps of %lld)", t->name, d, sym->name, (long long)got,
                        (long long)a, sym->name, lo, hi, (long long)a);
    if (diff % a != 0)
        return kn_error(KN_ERR_INVALID, "input '%s': dim %d (%s) is %lld, which no value of %s from %lld to %lld gives",
                        t->name, d, sym->name, (long long)got, sym->name, (long long)(sym->min * sym->align),
                        (long long)(sym->max * sym->align));
    if (n < sym->min)
        return kn_error(KN_ERR_INVALID, "input '%s': dim %d (%s) is %lld, the artifact was compiled for at least %lld",
                        t->name, d, sym->name, (long long)got, lo);
    if (n > sym->max)
        return kn_error(KN_ERR_INVALID, "input '%s': dim %d (%s) is %lld, the artifact was compiled for at most %lld",
                        t->name, d, sym->name, (long long)got, hi);
    if (seen[k] >= 0 && s->exec.syms[k] != n)
        return kn_error(KN_ERR_INVALID, "input '%s': dim %d (%s) is %lld, but input '%s' gave %s = %lld", t->name, d,
                        sym->name, (long long)got, m->inputs[seen[k]].name, sym->name,
                        (long long)(s->exec.syms[k] * sym->align));
    s->exec.syms[k] = n;
    seen[k] = input;
    return KN_OK;
}

/* Checks input i's dtype, rank and fixed dims, and derives the dynamic dims'
 * values from it (they are checked against the other inputs'). */
static int check_input(kn_session *s, int i, const kn_tensor *got, int *seen)
{
    const kn_meta *m = &s->art->meta;
    const kn_abi_tensor *want = &m->inputs[i];
    bool same = (int)got->dtype == want->dtype && got->rank == want->rank;
    for (int k = 0; same && k < want->rank; k++) same = want->dim_sym[k] || got->dims[k] == want->dims[k];
    if (!same) {
        char a[256], b[256];
        int rank = got->rank >= 0 && got->rank <= KN_MAX_RANK ? got->rank : 0;
        return kn_error(KN_ERR_INVALID, "input '%s': expected %s, got %s", want->name,
                        sig_str(m, want->dtype, want->rank, want->dims, want->dim_sym, a, sizeof a),
                        sig_str(m, got->dtype, rank, got->dims, NULL, b, sizeof b));
    }
    for (int d = 0; d < want->rank; d++) {
        int st = want->dim_sym[d] ? derive_sym(s, i, d, got->dims[d], seen) : KN_OK;
        if (st) return st;
    }
    return KN_OK;
}

/* Every input holds the bytes its shape in this run needs. */
static int check_input_sizes(kn_session *s, int n, const kn_tensor *inputs)
{
    const kn_meta *m = &s->art->meta;
    for (int i = 0; i < n; i++) {
        size_t want = kn_rt_tensor_nbytes(&s->exec, &m->inputs[i]);
        if (want > 0 && (!inputs[i].data || inputs[i].nbytes < want))
            return kn_error(KN_ERR_INVALID, "input '%s': holds %zu bytes, expected %zu", m->inputs[i].name,
                            inputs[i].data ? inputs[i].nbytes : 0, want);
    }
    return KN_OK;
}

static void free_outputs(int n, kn_tensor *outputs)
{
    for (int i = 0; i < n; i++) kn_tensor_free(&outputs[i]);
}

/* Hands each dynamic output's slot to the caller: moved when no later output
 * is the same value, copied otherwise. */
static int take_dynamic_outputs(kn_session *s, int n, kn_tensor *outputs)
{
    const kn_meta *m = &s->art->meta;
    for (int i = 0; i < n; i++) {
        int slot = m->outputs[i].slot;
        if (slot <= 0) continue;
        kn_tensor *held = slot <= m->n_slots && s->slots ? &s->slots[slot - 1] : NULL;
        if (!held || held->rank < 0)
            return kn_error(KN_ERR_INTERNAL, "%s: output '%s' was not computed", label_of(s->art), m->outputs[i].name);
        bool again = false;
        for (int j = i + 1; j < n && !again; j++) again = m->outputs[j].slot == slot;
        if (again || held->own == KN_BORROWED) {
            int st = kn_tensor_copy(&outputs[i], held);
            if (st) return kn_error(st, "output '%s': out of memory", m->outputs[i].name);
            continue;
        }
        outputs[i] = *held;
        memset(held, 0, sizeof *held);
        held->rank = -1;
    }
    return KN_OK;
}

/* kn_session_run_tensors once the calling thread holds the session. */
static int run_tensors(kn_session *s, int n_inputs, const kn_tensor *inputs, int n_outputs, kn_tensor *outputs)
{
    const kn_meta *m = &s->art->meta;
    if (n_outputs == m->n_outputs) memset(outputs, 0, sizeof *outputs * (size_t)n_outputs);
    if (n_inputs != m->n_inputs || n_outputs != m->n_outputs)
        return kn_error(KN_ERR_INVALID, "%s: given %d inputs and %d outputs, the model has %d and %d",
                        label_of(s->art), n_inputs, n_outputs, m->n_inputs, m->n_outputs);
    const void **in = calloc((size_t)n_inputs + 1, sizeof *in);
    void **out = calloc((size_t)n_outputs + 1, sizeof *out);
    int st = in && out ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    int seen[KN_MAX_SYMS];
    int64_t before[KN_MAX_SYMS]; /* a refused run leaves kn_session_set_dim's values */
    for (int k = 0; k < KN_MAX_SYMS; k++) seen[k] = -1;
    memcpy(before, s->exec.syms, sizeof before);
    for (int i = 0; i < n_inputs && !st; i++) {
        st = check_input(s, i, &inputs[i], seen);
        in[i] = inputs[i].data;
    }
    /* a symbol no input carries keeps its value (it cannot occur: symbols come from inputs) */
    if (!st) st = check_input_sizes(s, n_inputs, inputs);
    for (int i = 0; i < n_outputs && !st; i++) {
        const kn_abi_tensor *t = &m->outputs[i];
        if (t->slot > 0) continue; /* taken from its slot after the run */
        int64_t dims[KN_MAX_RANK];
        kn_rt_tensor_dims(&s->exec, t, dims);
        st = kn_tensor_alloc(&outputs[i], (kn_dtype)t->dtype, t->rank, dims);
        if (st) kn_error_prefix("output '%s': ", t->name);
        out[i] = outputs[i].data;
    }
    if (st) memcpy(s->exec.syms, before, sizeof before);
    if (!st) st = run_raw(s, in, out);
    if (!st) st = take_dynamic_outputs(s, n_outputs, outputs);
    if (st) free_outputs(n_outputs, outputs);
    free(in);
    free(out);
    return st;
}

int kn_session_run_tensors(kn_session *s, int n_inputs, const kn_tensor *inputs, int n_outputs, kn_tensor *outputs)
{
    if (!s || (n_inputs && !inputs) || (n_outputs && !outputs) || n_inputs < 0 || n_outputs < 0)
        return kn_error(KN_ERR_INVALID, "kn_session_run_tensors: bad arguments");
    /* the whole call is the run: it sets the dynamic dims and takes the slots */
    int st = session_enter(s, "kn_session_run_tensors");
    if (st) {
        if (n_outputs == s->art->meta.n_outputs) memset(outputs, 0, sizeof *outputs * (size_t)n_outputs);
        return st;
    }
    st = run_tensors(s, n_inputs, inputs, n_outputs, outputs);
    session_leave(s);
    return st;
}

void kn_session_free(kn_session *s)
{
    if (!s) return;
    if (s->prims)
        for (int i = 0; i < s->art->meta.n_dnnl; i++)
            if (s->prims[i]) kn_dnnl_prim_free(s->prims[i]);
    free(s->prims);
    kn_dynconv_free(s->dynconv); /* before the oneDNN session its primitives use */
    if (s->dnnl) kn_dnnl_session_free(s->dnnl);
    for (int i = 0; s->slots && i < s->art->meta.n_slots; i++) kn_tensor_free(&s->slots[i]);
    for (int i = 0; s->opsess && i < s->art->meta.n_opnodes; i++)
        if (s->opsess[i].free_state) s->opsess[i].free_state(s->opsess[i].state);
    free(s->opsess);
    free(s->slots);
    kn_big_free(s->arena);
    free(s);
}
