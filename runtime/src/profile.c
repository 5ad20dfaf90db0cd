/*
 * runtime/src/profile.c — kn_session_profile: the model's steps run one by
 * one with CLOCK_MONOTONIC read around each (kiln/profile.h). Only the clock
 * reads are added between steps, so the times add up to a normal run's;
 * kn_session_run itself stays uninstrumented.
 */
#include <stdio.h>
#include <string.h>

#include "kiln/profile.h"
#include "rt_internal.h"

const kn_meta *kn_artifact_meta(const kn_artifact *a) { return a ? &a->meta : NULL; }

const char *kn_session_step_impl(const kn_session *s, int step)
{
    if (!s || step < 0 || step >= s->art->meta.n_steps) return NULL;
    const kn_meta *m = &s->art->meta;
    int d = m->steps[step].dnnl;
    if (d < 0) {
        /* a node run by its runtime kernel names what ran it when that is not
         * its plain C kernel (the recurrent ops' fast path, rnn.c); steps
         * carry their node's name */
        const char *name = m->steps[step].name;
        for (int i = 0; name && s->opsess && i < m->n_opnodes; i++)
            if (s->opsess[i].impl && s->art->opnodes[i].desc.name && !strcmp(s->art->opnodes[i].desc.name, name))
                return s->opsess[i].impl;
        return NULL;
    }
    if (d >= m->n_dnnl || !s->prims || !s->prims[d]) return NULL;
    return kn_dnnl_prim_impl(s->prims[d]);
}

int kn_session_profile(kn_session *s, const void *const *inputs, void *const *outputs, int n_steps,
                       int64_t *out_step_ns)
{
    if (out_step_ns && n_steps > 0) memset(out_step_ns, 0, sizeof *out_step_ns * (size_t)n_steps);
    if (!s || !out_step_ns) return kn_error(KN_ERR_INVALID, "kn_session_profile: NULL argument");
    const kn_artifact *a = s->art;
    const kn_meta *m = &a->meta;
    const char *label = a->path ? a->path : m->name ? m->name : "static artifact";
    if (n_steps != m->n_steps)
        return kn_error(KN_ERR_INVALID, "%s: kn_session_profile: room for %d step times, the model has %d steps",
                        label, n_steps, m->n_steps);
    if (m->n_steps == 0 && m->n_inputs + m->n_outputs > 0)
        return kn_error(KN_ERR_UNSUPPORTED, "%s: the artifact has no step table: recompile it with this kiln",
                        label);
    int st = kn_rt_check_buffers(s, inputs, outputs);
    if (st) return st;
    kn_error_clear();
    kn_rt_set_run_threads(s, s->threads); /* every step on the session's threads */
    const kn_abi_run_fn *steps = a->desc->step_fns;
    for (int i = 0; i < n_steps; i++) {
        int64_t t0 = kn_rt_now_ns();
        st = steps[i](&s->exec, s->arena, (const char *)a->weights, (void *const *)inputs, outputs);
        out_step_ns[i] = kn_rt_now_ns() - t0;
        if (st) {
            if (!*kn_last_error()) kn_error(KN_ERR_INTERNAL, "step failed with status %d", st);
            kn_error_prefix("%s: step %d '%s' (%s): ", label, i, m->steps[i].name, m->steps[i].op_type);
            return st;
        }
    }
    return KN_OK;
}
