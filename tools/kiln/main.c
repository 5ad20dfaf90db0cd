/* kiln — the command-line program: dispatches to one verb per file. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "onnx_import.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} k_verbs[] = {
    {"inspect", kn_cmd_inspect, "show a model's opsets, I/O, op histogram, parameters, FLOPs"},
    {"compile", kn_cmd_compile, "compile a model to a .so/.a artifact and a C header"},
    {"calibrate", kn_cmd_calibrate, "measure activation ranges over data into a calibration table (quantization)"},
    {"compare", kn_cmd_compare, "compare two models' outputs on data: errors, cosine, SQNR, top-1; per layer"},
    {"export", kn_cmd_export, "write a model quantized with a calibration table as a QDQ ONNX model"},
    {"run", kn_cmd_run, "run a model or an artifact on .npy inputs"},
    {"bench", kn_cmd_bench, "time a model or an artifact (optionally against onnxruntime)"},
    {"profile", kn_cmd_profile, "time a compiled model step by step; trace and arena drawing"},
    {"conformance", kn_cmd_conformance, "run the ONNX backend node test suite"},
    {"difftest", kn_cmd_difftest, "run generated test cases through the evaluator and compiled artifacts"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: kiln <verb> [options]\n\nverbs:\n");
    for (size_t i = 0; i < sizeof k_verbs / sizeof k_verbs[0]; i++)
        fprintf(f, "  %-12s %s\n", k_verbs[i].name, k_verbs[i].summary);
    fprintf(f, "\n`kiln <verb> --help` describes each verb.\n");
}

void kn_cli_report(const char *context)
{
    if (context) fprintf(stderr, "kiln: error: %s: %s\n", context, kn_last_error());
    else fprintf(stderr, "kiln: error: %s\n", kn_last_error());
}

bool kn_cli_is_help(const char *arg) { return !strcmp(arg, "-h") || !strcmp(arg, "--help"); }

bool kn_cli_is_artifact(const char *path)
{
    unsigned char magic[4] = {0};
    /* O_NONBLOCK and a regular file only: fopen of a FIFO waits for a writer
     * forever; whatever this refuses, the model loader then names */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat sb;
    ssize_t got = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? read(fd, magic, 4) : -1;
    close(fd);
    return got == 4 && !memcmp(magic, "\x7f" "ELF", 4);
}

int kn_cli_load_model(const char *path, bool require_supported, kn_model **out_model)
{
    *out_model = NULL;
    kn_model *m = NULL;
    int st = kn_cli_check_regular(path);
    if (st) return st;
    st = kn_onnx_load_file(path, &m);
    if (!st && require_supported) st = kn_onnx_check_supported(m);
    if (st) {
        kn_model_free(m);
        return st;
    }
    *out_model = m;
    return KN_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2 || kn_cli_is_help(argv[1])) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kiln 0.1.0\n");
        return 0;
    }
    for (size_t i = 0; i < sizeof k_verbs / sizeof k_verbs[0]; i++)
        if (!strcmp(argv[1], k_verbs[i].name)) return k_verbs[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kiln: unknown verb '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
