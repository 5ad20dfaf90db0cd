/*
 * codegen/cpu/driver.h — private to the CPU compiler driver (compile.c,
 * link.c, header.c, profile_info.c): atomic output files, running the
 * system linker, writing the generated header and the profiling records.
 */
#ifndef KILN_CODEGEN_CPU_DRIVER_H
#define KILN_CODEGEN_CPU_DRIVER_H

#include "cg.h"

/* Output files written under temporary names beside their final path and
 * renamed into place only when every one of them is complete. */
typedef struct kn_outset {
    char *tmp[8];
    char *final[8];
    int n;
} kn_outset;

/* Reserves a temporary path for `final` (in the same folder, so rename() is
 * atomic); *out_tmp is owned by the set. */
int kn_outset_add(kn_outset *s, const char *final, const char **out_tmp);
/* Renames every temporary into place. On failure removes what is left. */
int kn_outset_commit(kn_outset *s);
/* Deletes every temporary (and nothing else) and frees the set. */
void kn_outset_abort(kn_outset *s);

/* Links obj into a shared library at out (cc -shared ... -lm). */
int kn_link_shared(const char *obj, const char *out);
/* Archives obj into a static library at out (ar rcs). */
int kn_link_static(const char *obj, const char *out);

/* Writes the C header for meta to path. static_desc: the artifact is a
 * static archive exporting kn_artifact_<meta->name>. */
int kn_header_write(const kn_meta *meta, bool static_desc, const char *path);

/* Fills meta->steps and meta->buffers (profile_info.c) for a model whose
 * run calls, in order, the nodes with has_step[node index] set (node_dnnl:
 * each node's first oneDNN record, -1 for none) and then,
 * when copy_bytes > 0, a function copying that many bytes of outputs.
 * meta->arena_bytes must be set. Strings point into g. Free with
 * kn_cg_profile_info_free. */
int kn_cg_profile_info(const kn_graph *g, const kn_plan *p, const bool *has_step, const int32_t *node_dnnl,
                       int64_t copy_bytes, kn_meta *meta);
void kn_cg_profile_info_free(kn_meta *meta);

#endif
