/*
 * tools/kiln/cli.h — the verbs of the kiln command and what they share.
 * Each verb is `int kn_cmd_<verb>(int argc, char **argv)` with argv[0] the
 * verb itself; it returns the process exit status (0 ok, 1 failure, 2 usage).
 */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "ir.h"

int kn_cmd_inspect(int argc, char **argv);
int kn_cmd_run(int argc, char **argv);
int kn_cmd_conformance(int argc, char **argv);
int kn_cmd_difftest(int argc, char **argv);
int kn_cmd_compile(int argc, char **argv);
int kn_cmd_bench(int argc, char **argv);
int kn_cmd_profile(int argc, char **argv);
int kn_cmd_calibrate(int argc, char **argv);
int kn_cmd_compare(int argc, char **argv);
int kn_cmd_export(int argc, char **argv);

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
    /* quantization (docs/quantization.md), applied after import and
     * KN_QUANT_PREPASSES, before the pipeline */
    const char *quantize;    /* --quantize dynamic-int8|static-int8, or NULL */
    const char *calib;       /* --calib TABLE.json (static-int8) */
    const char *keep_float;  /* --keep-float LIST: node names or op types (comma-separated) */
    bool per_channel;        /* --per-channel: MatMul/Gemm weights per output channel */
    int weight_bits;         /* --weight-bits 7|8; 0: kn_cli_weight_bits decides */
    int precision;           /* --precision: a kn_precision (passes/pass.h) */
    bool pack_tokens;        /* --pack-tokens (passes/pack_tokens.c) */
} kn_cli_passes;

/* The weight width quantization uses: cp->weight_bits when given, else 8
 * when the artifact runs only on this CPU (target NULL or "native") and it
 * has VNNI, else 7: without VNNI, u8 x s8 products are summed in pairs in
 * saturating 16-bit lanes (oneDNN's kernels as onnxruntime's), which 7-bit
 * weights never overflow (docs/quantization.md). */
int kn_cli_weight_bits(const kn_cli_passes *cp, const char *target);

/* kn_cli_compile_model with pass options (NULL: defaults). With
 * opts->report, the passes' remarks (near misses) follow the report. */
int kn_cli_compile_model_ex(const char *path, int n_shapes, char **shapes, struct kn_compile_opts *opts,
                            const kn_cli_passes *passes);
/* Rewrites m (imported from path, inferred) into QDQ form as `kiln compile
 * --quantize` does: cp->quantize, cp->calib (checked against path's bytes),
 * cp->keep_float and cp->per_channel; KN_QUANT_PREPASSES run first. */
int kn_cli_quantize(const char *path, const kn_cli_passes *cp, kn_model *m);
/* A tensor name as a file name (kiln run --output-dir, kiln calibrate's
 * data folders): '_' for anything but [A-Za-z0-9_.-], and for a leading '.'
 * or an empty name (run.c). */
void kn_cli_safe_name(const char *name, char *buf, size_t len);
/* True if path names a compiled artifact (ELF shared object) rather than ONNX. */
bool kn_cli_is_artifact(const char *path);

struct kn_artifact;
/* Fills out[0..num_inputs) for art (inputs.c): from the .npy file of each
 * NAME=FILE spec, random with a fixed seed (floats in [-1,1), integers in
 * [0,10)) for inputs not given, in the artifact's shape or the one a
 * NAME=DIMS shape spec gives (1x3x256x160). A spec naming no input, a file
 * of the wrong dtype or rank, or an input given twice is an error (out is
 * then freed). *other_shape: some input is not in the artifact's shape (a
 * run-time size of a dynamic dim, which the session checks against the
 * compiled range: run once with kn_session_run_tensors to set it). The
 * caller frees the tensors. */
int kn_cli_artifact_inputs(const struct kn_artifact *art, int n_specs, char *const *specs, int n_shapes,
                           char *const *shapes, kn_tensor *out, bool *other_shape);

/* 0 if got equals want (dtype, shape, and every element: integers and bools
 * exactly, or within atol when atol >= 1 (a quantized output one step off);
 * floats both NaN, the same inf, or |got - want| <= atol +
 * rtol * |want|); else 1 and a one-line description in msg (compare.c). */
int kn_cli_compare(const char *what, const kn_tensor *want, const kn_tensor *got, double rtol, double atol, char *msg,
                   size_t len);
/* numpy has no bfloat16, so test data stores a bf16 tensor as its uint16
 * bit pattern: reads t as bf16 where bf16 (meant) is expected. */
void kn_cli_as_bf16_if_meant(kn_tensor *t, int meant);

/* Prints "kiln: error: <kn_last_error()>" (with an optional context) to stderr. */
void kn_cli_report(const char *context);

/* True if arg is "-h" or "--help". */
bool kn_cli_is_help(const char *arg);

/* Loads an ONNX model and checks that every op is known; prints the error.
 * A path that is not a regular file (a FIFO, a directory) is refused first. */
int kn_cli_load_model(const char *path, bool require_supported, kn_model **out_model);

/* ---- argument and file checks (checks.c) ---- */

/* The most --runs / --warmup a verb takes: more is a typo (and memory). */
#define KN_CLI_MAX_RUNS 1000000

/* Parses s, the value of numeric flag `flag` of verb `verb`, as a whole
 * decimal integer in [min, max] into *out. Otherwise prints
 * "kiln VERB: FLAG: expected a positive integer, got 'S'" (or the range)
 * and returns false. */
bool kn_cli_parse_int(const char *verb, const char *flag, const char *s, long long min, long long max, int *out);
/* True if argv[i] (a flag that takes a value) has one after it; otherwise
 * prints "kiln VERB: FLAG needs a value". */
bool kn_cli_needs_value(const char *verb, int i, int argc, char **argv);
/* KN_OK if path is a regular file; otherwise an error naming it and what it
 * is (a FIFO, a directory, a device). Never opens it: a FIFO would block. */
int kn_cli_check_regular(const char *path);
/* True if paths a and b name one file: by device and inode when both
 * exist, by their resolved absolute paths otherwise. */
bool kn_cli_same_file(const char *a, const char *b);

/* A path named on the command line, for kn_cli_check_distinct. */
typedef struct kn_cli_file {
    const char *arg;  /* how the user gave it: "-o", "--emit-header", "MODEL", "--input x" */
    const char *path; /* NULL: not given */
    bool output;      /* written by the verb */
} kn_cli_file;

/* Checks that no output among files[0..n) names the same file as an input
 * or as another output; the error names both arguments. Call it before
 * anything is written. */
int kn_cli_check_distinct(const kn_cli_file *files, int n);

/* Opens a new file beside path under a random name (mkstemp: never an
 * existing file or symlink) for writing, with the mode fopen would give;
 * *out_tmp (owned) is its name. Every output a verb writes goes through
 * one, so a failure never leaves half a file at path. */
int kn_cli_create_beside(const char *path, char **out_tmp, FILE **out_f);
/* Closes f and, if ok and the close succeeds, renames tmp to path;
 * otherwise removes tmp. Frees tmp. */
int kn_cli_commit_file(char *tmp, FILE *f, const char *path, bool ok);

/* Matches --input specs[0..n_specs) to a model's inputs names[0..n):
 * spec k gives input out_idx[k] from file out_file[k] (pointing into the
 * spec). NAME=FILE, where NAME may hold '=' itself (the longest input name
 * that fits wins); a bare FILE only with allow_bare, one spec and one
 * required input (required[i]: the input has no default; NULL: all are
 * required). An unknown name (the error lists the inputs), an input given
 * twice or an empty FILE is an error; `what` names the model in it. */
int kn_cli_match_inputs(const char *what, int n, const char *const *names, const bool *required, int n_specs,
                        char *const *specs, bool allow_bare, int *out_idx, const char **out_file);

#endif
