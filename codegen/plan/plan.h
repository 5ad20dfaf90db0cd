/*
 * codegen/plan/plan.h — the static memory plan of a graph, which every
 * backend's code generator lowers against (codegen/cpu/ today; a CUDA
 * backend would place its device arena by the same plan). It depends on
 * the IR and the artifact ABI's kn_abi_ref only, not on LLVM.
 *
 *     kn_plan p;
 *     if (kn_plan_build(g, &p) == KN_OK) {
 *         ... p.where[v->id] is where value v lives (weights, arena, user
 *         buffer or session slot); p.arena_bytes the arena's peak ...
 *         kn_plan_free(&p);
 *     }
 */
#ifndef KILN_CODEGEN_PLAN_H
#define KILN_CODEGEN_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "ir.h"
#include "kiln/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_plan {
    kn_abi_ref *where;       /* indexed by value id; loc -1 for values never stored */
    int n_where;
    int64_t arena_bytes;     /* peak */
    int64_t intermediate_bytes; /* sum of all arena values (no reuse) */
    unsigned char *weights;  /* 64-byte aligned blob of every constant (malloc'd) */
    int64_t weights_bytes;
    int n_slots;             /* values in KN_LOC_DYNAMIC (offset = slot index) */
    /* per value id: for a value that owns an arena block (not an alias),
     * the index of the node that writes it and of the last node that reads
     * it or an alias of it; -1 for every other value */
    int *live_first, *live_last;
} kn_plan;

/* Plans g (main graph, static input shapes): constants → weights blob,
 * values whose shape is not static (it depends on data) → a session slot
 * each (KN_LOC_DYNAMIC), graph inputs/outputs → user buffers, everything
 * else → arena offsets (64-byte
 * aligned, reused once a value's last user has run). Reshape-like ops whose
 * output may share the input's bytes (Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity, inference Dropout) alias it when that is safe. */
int kn_plan_build(const kn_graph *g, kn_plan *out);
void kn_plan_free(kn_plan *p);
/* True if node n's output aliases its input in the plan (nothing to emit). */
bool kn_plan_is_alias(const kn_plan *p, const kn_node *n);

#ifdef __cplusplus
}
#endif
#endif
