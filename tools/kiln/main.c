/* kiln — the command-line program: dispatches to one verb per file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "onnx_import.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} k_verbs[] = {
    {"inspect", kn_cmd_inspect, "show a model's opsets, I/O, op histogram, parameters, FLOPs"},
    {"run", kn_cmd_run, "run a model on .npy inputs with the reference evaluator"},
    {"conformance", kn_cmd_conformance, "run the ONNX backend node test suite"},
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

int kn_cli_load_model(const char *path, bool require_supported, kn_model **out_model)
{
    *out_model = NULL;
    kn_model *m = NULL;
    int st = kn_onnx_load_file(path, &m);
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
