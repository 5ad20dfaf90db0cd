/*
 * kiln/kiln.h — the public API of libkiln_rt, what an application uses to run
 * a model compiled by `kiln compile`.
 *
 *     kn_artifact *art;
 *     if (kn_artifact_open("resnet50.so", &art)) {
 *         fprintf(stderr, "%s\n", kn_last_error());   // e.g. ABI or CPU mismatch
 *         return 1;
 *     }
 *     kn_session *s;
 *     kn_session_create(art, &s);
 *     const void *in[] = {image};                      // shapes as compiled
 *     void *out[] = {logits};
 *     if (kn_session_run(s, in, out)) fprintf(stderr, "%s\n", kn_last_error());
 *     kn_session_free(s);
 *     kn_artifact_close(art);
 *
 * A loaded artifact is immutable and may be shared by threads; a session
 * owns its arena and scratch, so each thread runs its own session. Results
 * are deterministic for a given artifact, input and thread count.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/abi.h"
#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_artifact kn_artifact;
typedef struct kn_session kn_session;

/* What an input or output looks like (strings owned by the artifact). */
typedef struct kn_io_info {
    const char *name;
    kn_dtype dtype;
    int rank;
    int64_t dims[KN_MAX_RANK];
    size_t nbytes;
} kn_io_info;

/* Opens a shared artifact (.so) by path. Checks the ABI version, the CPU
 * features it needs and, for external weights, the weights file. On failure
 * *out is NULL and kn_last_error() says why, naming the file. */
int kn_artifact_open(const char *path, kn_artifact **out);

/* Wraps the descriptor of a statically linked artifact (kn_artifact_<name>,
 * declared by its generated header). weights_dir: folder of the external
 * weights file, or NULL. Same checks as kn_artifact_open. */
int kn_artifact_from_descriptor(const kn_artifact_desc *desc, const char *weights_dir, kn_artifact **out);

/* Checks that a is the artifact a generated header was written for: the
 * header (`kiln compile --emit-header`) records the model hash and
 * kn_meta_io_hash of the artifact compiled with it, and its open function
 * calls this, so that an application built against one model's header
 * cannot run another model's artifact (wrong buffer sizes: a crash, or a
 * silently wrong answer). header: the header's name, for the message. */
int kn_artifact_check_header(const kn_artifact *a, const char *header, uint64_t model_hash, uint64_t io_hash);

/* Closes an artifact; every session of it must be freed first. NULL is fine. */
void kn_artifact_close(kn_artifact *a);

/* The descriptor (for tools: arena size, weights, names). */
const kn_artifact_desc *kn_artifact_descriptor(const kn_artifact *a);

int kn_artifact_num_inputs(const kn_artifact *a);
int kn_artifact_num_outputs(const kn_artifact *a);
/* Fills *out for input/output i; KN_ERR_INVALID if i is out of range. */
int kn_artifact_input_info(const kn_artifact *a, int i, kn_io_info *out);
int kn_artifact_output_info(const kn_artifact *a, int i, kn_io_info *out);
/* Index of the input/output named `name`, or -1. */
int kn_artifact_find_input(const kn_artifact *a, const char *name);
int kn_artifact_find_output(const kn_artifact *a, const char *name);

/* Creates a session: its arena, scratch and oneDNN primitives. */
int kn_session_create(const kn_artifact *a, kn_session **out);
/* Threads used by the session's kernels (default 1). */
int kn_session_set_threads(kn_session *s, int threads);
/* How a session of more than one thread picks each run's thread count. */
typedef enum kn_thread_policy {
    /* The default: the session's threads, or the calling thread alone while
     * that is measured to be faster: when other processes want the CPUs, a
     * worker waiting for one delays every parallel step of a run. A run's
     * outputs are the same bitwise on any thread count wherever kiln's own
     * kernels run it; a oneDNN product may split its sums differently. */
    KN_THREADS_ADAPTIVE = 0,
    /* Every run on the session's threads. */
    KN_THREADS_FIXED = 1,
} kn_thread_policy;
/* Sets the policy (a new session's is KN_THREADS_ADAPTIVE, or what the
 * environment variable KILN_THREADS says: "adaptive" or "fixed"). */
int kn_session_set_thread_policy(kn_session *s, kn_thread_policy policy);
/* Sets dynamic dim `name` (`kiln compile --max name=N`) for the following
 * kn_session_run calls, 1 <= value <= N (default N; kn_session_run_tensors
 * sets it from its inputs); the buffers passed to kn_session_run must then
 * have the shapes for that value. */
int kn_session_set_dim(kn_session *s, const char *name, int64_t value);
/* Runs the model on raw buffers in the compiled shapes and dtypes: inputs[i]
 * and outputs[i] follow the artifact's input/output order. A session runs
 * on one thread at a time: a call while another thread is running the same
 * session is refused (KN_ERR_INVALID) instead of corrupting both runs. */
int kn_session_run(kn_session *s, const void *const *inputs, void *const *outputs);
/* Runs on tensors, checking every input's dtype and shape; outputs[i] are
 * allocated (owned by the caller, kn_tensor_free). For an artifact with
 * dynamic dims (`kiln compile --max NAME=N`) each dim's value is taken from
 * the inputs' shapes; a value above the compiled maximum is refused. */
int kn_session_run_tensors(kn_session *s, int n_inputs, const kn_tensor *inputs, int n_outputs,
                           kn_tensor *outputs);
void kn_session_free(kn_session *s);

/* Version of libkiln_rt ("0.1.0") and the artifact ABI it reads. */
const char *kn_runtime_version(void);
uint32_t kn_runtime_abi_version(void);

#ifdef __cplusplus
}
#endif
#endif
