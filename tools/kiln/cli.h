/*
 * tools/kiln/cli.h — the verbs of the kiln command and what they share.
 * Each verb is `int kn_cmd_<verb>(int argc, char **argv)` with argv[0] the
 * verb itself; it returns the process exit status (0 ok, 1 failure, 2 usage).
 */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

#include <stdbool.h>

#include "ir.h"

int kn_cmd_inspect(int argc, char **argv);
int kn_cmd_run(int argc, char **argv);
int kn_cmd_conformance(int argc, char **argv);
int kn_cmd_difftest(int argc, char **argv);
int kn_cmd_compile(int argc, char **argv);
int kn_cmd_bench(int argc, char **argv);
int kn_cmd_profile(int argc, char **argv);

struct kn_compile_opts;
/* Pins input shapes / symbolic dims from --shape specs. */
int kn_cli_apply_shapes(kn_model *m, int n, char **specs);
/* Loads, pins, infers and compiles a model with opts (model_hash is set),
 * running the graph passes of opts->opt_level's pipeline first. */
int kn_cli_compile_model(const char *path, int n_shapes, char **shapes, struct kn_compile_opts *opts);

/* What `kiln compile` lets a user say about the graph passes. */
typedef struct kn_cli_passes {
    const char *passes;      /* --passes LIST: replaces the -O pipeline; NULL: the -O pipeline */
    const char *print_after; /* --print-after PASS|all: text IR to stderr after it */
    bool verify_each;        /* --verify-each */
    bool stats;              /* --stats: per-pass table to stderr */
} kn_cli_passes;

/* kn_cli_compile_model with pass options (NULL: defaults). With
 * opts->report, the passes' remarks (near misses) follow the report. */
int kn_cli_compile_model_ex(const char *path, int n_shapes, char **shapes, struct kn_compile_opts *opts,
                            const kn_cli_passes *passes);
/* True if path names a compiled artifact (ELF shared object) rather than ONNX. */
bool kn_cli_is_artifact(const char *path);

struct kn_artifact;
/* Fills out[0..num_inputs) for art (inputs.c): from the .npy file of each
 * NAME=FILE spec, random with a fixed seed (floats in [-1,1), integers in
 * [0,10)) for inputs not given. A spec naming no input, or a file of the
 * wrong dtype or size, is an error (out is then freed). The caller frees
 * the tensors. */
int kn_cli_artifact_inputs(const struct kn_artifact *art, int n_specs, char *const *specs, kn_tensor *out);

/* Prints "kiln: error: <kn_last_error()>" (with an optional context) to stderr. */
void kn_cli_report(const char *context);

/* True if arg is "-h" or "--help". */
bool kn_cli_is_help(const char *arg);

/* Loads an ONNX model and checks that every op is known; prints the error. */
int kn_cli_load_model(const char *path, bool require_supported, kn_model **out_model);

#endif
