/*
 * tools/kiln/ort_server.h — onnxruntime as a child process that `kiln bench
 * --vs-ort` drives a block of runs at a time, so that kiln's and
 * onnxruntime's timed runs interleave and both see the same machine.
 *
 * The child is `PYTHON scripts/ort_bench.py MODEL --serve ...` (PYTHON:
 * $KILN_PYTHON, else the source tree's .venv), started with posix_spawn and
 * no shell, its stdin and stdout two pipes and its stderr a file. It builds
 * its session, does its warm-up and says `ready`; each `run N` answers N
 * times in ms. A child that fails (bad model, no onnxruntime, dies mid-run)
 * is an error naming the model and quoting what the child printed, never a
 * hang: its closed stdout reads as end of file.
 *
 *     kn_ort_server srv;
 *     if (kn_ort_server_start(&args, &srv)) ...;     // waits for `ready`
 *     st = kn_ort_server_run(&srv, 5, times);        // 5 timed runs
 *     st = st ? (kn_ort_server_abort(&srv), st) : kn_ort_server_finish(&srv);
 *
 * While a server runs, SIGPIPE is ignored in this process (a write to a
 * dead child is then an error, not the end of kiln); finish and abort
 * restore it. One server at a time.
 */
#ifndef KILN_TOOLS_ORT_SERVER_H
#define KILN_TOOLS_ORT_SERVER_H

#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct kn_ort_server_args {
    const char *model;       /* the .onnx file onnxruntime loads */
    int threads;             /* intra_op_num_threads */
    int warmup;              /* untimed runs before `ready` */
    int n_inputs;            /* entries of inputs */
    char *const *inputs;     /* NAME=FILE.npy, one per model input */
    const char *stderr_path; /* the child's stderr goes here (created, truncated) */
} kn_ort_server_args;

enum { KN_ORT_PATH_MAX = 4096 };

typedef struct kn_ort_server {
    pid_t pid;                         /* 0: no child */
    FILE *cmd;                         /* the child's stdin */
    FILE *reply;                       /* the child's stdout */
    const char *model;                 /* args->model, for messages: it must outlive the server */
    char stderr_path[KN_ORT_PATH_MAX]; /* args->stderr_path, read for messages */
    struct sigaction old_sigpipe;
} kn_ort_server;

/* Starts the child and waits for its `ready`. On failure the child is
 * reaped and *out_srv is left stopped (abort and finish are no-ops). */
int kn_ort_server_start(const kn_ort_server_args *args, kn_ort_server *out_srv);

/* n timed runs in the child; their times (ms) go to out_ms[0..n). */
int kn_ort_server_run(kn_ort_server *srv, int n, double *out_ms);

/* Says `quit`, closes the pipes and reaps the child; an error if it did not
 * exit with status 0. */
int kn_ort_server_finish(kn_ort_server *srv);

/* For error paths: closes the pipes, kills the child and reaps it. */
void kn_ort_server_abort(kn_ort_server *srv);

#endif
