/*
 * kiln/profile.h — timing a compiled model step by step (what `kiln profile`
 * is built on).
 *
 * A compiled model's `run` calls one step function per node in order (a
 * oneDNN primitive, a generated loop nest or a runtime kernel), then copies
 * the outputs it did not compute in place. The artifact exports that table
 * of steps and describes each in its meta (kn_abi_step: node name, op type,
 * FLOPs, bytes read and written), with every arena block (kn_abi_buffer:
 * offset, size and the steps it is live through). kn_session_profile runs
 * the steps itself with a monotonic clock around each; kn_session_run is
 * not instrumented at all.
 *
 *     const kn_meta *m = kn_artifact_meta(art);
 *     int64_t *ns = calloc(m->n_steps, sizeof *ns);
 *     if (kn_session_profile(s, in, out, m->n_steps, ns) == KN_OK)
 *         for (int i = 0; i < m->n_steps; i++)
 *             printf("%-24s %-12s %.3f ms\n", m->steps[i].name, m->steps[i].op_type, ns[i] / 1e6);
 */
#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The artifact's parsed meta: steps, buffers, arena/intermediate/weight
 * sizes. Owned by the artifact (valid until kn_artifact_close); NULL for a
 * NULL artifact. */
const kn_meta *kn_artifact_meta(const kn_artifact *a);

/* Runs the model once on raw buffers, exactly as kn_session_run would, but
 * step by step: out_step_ns[i] receives the wall time of step i in
 * nanoseconds. n_steps must be kn_artifact_meta(...)->n_steps. On failure
 * the message names the step that failed; the remaining times are 0. */
int kn_session_profile(kn_session *s, const void *const *inputs, void *const *outputs, int n_steps,
                       int64_t *out_step_ns);

/* What runs step `step` when it is a oneDNN record: oneDNN's implementation
 * ("jit:avx2", "jit_1x1:avx2", "brg:avx512_core", ...) or kiln's own
 * ("winograd F(4x4,3x3)", "kiln 1x1:avx512"), as chosen when the session
 * was created or last changed its thread count; for a node run by a
 * runtime kernel, what ran it in the last run when that was not its plain
 * C kernel ("kiln lstm:avx2", ...: the recurrent ops, docs/kernels.md);
 * NULL for other steps (generated code, plain C runtime kernels) and
 * out-of-range arguments. A step
 * whose work the runtime does within the next step (a 1x1 convolution run
 * fused with the depthwise convolution after it, "kiln 1x1+dw:avx512")
 * names KN_IMPL_IN_NEXT_STEP: its time is then counted in the next step's. */
#define KN_IMPL_IN_NEXT_STEP "(in the next step)"

const char *kn_session_step_impl(const kn_session *s, int step);

/* How many of the session's runs since its last kn_session_set_threads
 * (or thread policy) there were, and how many of them the thread governor
 * ran on the calling thread alone (KN_THREADS_ADAPTIVE: kiln.h). */
int kn_session_thread_stats(const kn_session *s, int64_t *runs, int64_t *solo_runs);

#ifdef __cplusplus
}
#endif
#endif
