/* `kiln export`: MODEL.onnx + calibration table → a QDQ ONNX model with
 * kiln's scales (s8 weight initializers + DequantizeLinear, u8 activation
 * QuantizeLinear → DequantizeLinear pairs), for onnxruntime or for
 * quantization-aware fine-tuning elsewhere. The graph is the one `kiln
 * compile --quantize static-int8` hands to its pipeline: imported, through
 * KN_QUANT_PREPASSES, QDQ inserted; no kiln-only op in it. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "onnx_export.h"

static void export_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln export MODEL.onnx --calib TABLE.json -o OUT.onnx [--per-channel] [--keep-float LIST]\n"
            "        [--weight-bits 7|8]\n"
            "\n"
            "Writes MODEL quantized as `kiln compile --quantize static-int8 --calib TABLE.json`\n"
            "quantizes it, as a standard ONNX QDQ model that onnxruntime runs: the activations\n"
            "of the table as QuantizeLinear -> DequantizeLinear (u8, the table's scale and zero\n"
            "point), weights as s8 initializers + DequantizeLinear (Conv per output channel),\n"
            "Conv/Gemm biases as int32 + DequantizeLinear. BatchNormalization is folded into the\n"
            "convolutions and constants are folded first (docs/quantization.md). Nothing is\n"
            "written unless the whole export succeeds.\n"
            "\n"
            "  --calib TABLE.json    the table `kiln calibrate` wrote for MODEL (required)\n"
            "  -o OUT.onnx           the QDQ model\n"
            "  --per-channel         MatMul/Gemm weights per output channel (also if the table says so)\n"
            "  --weight-bits 7|8     weight width (default: 8 on a CPU with VNNI, else 7; kiln compile --help)\n"
            "  --keep-float LIST     comma-separated node names or op types to leave in float\n"
            "                        (added to the table's own list)\n");
}

/* onnxruntime and the other ONNX consumers know only the standard domains:
 * a kiln-domain node in the export is refused, named. */
static int check_standard_ops(const char *path, const kn_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const kn_node *n = g->nodes[i];
        if (!strcmp(n->domain, "kiln"))
            return kn_error(KN_ERR_UNSUPPORTED, "%s: node '%s' (%s) is a kiln-only op, which ONNX consumers cannot run",
                            path, n->name, n->op_type);
    }
    return KN_OK;
}

static int export_model(const char *model, const kn_cli_passes *cp, const char *out)
{
    kn_model *m = NULL;
    int st = kn_cli_load_model(model, true, &m);
    if (!st && (st = kn_graph_infer(m->graph))) kn_error_prefix("%s: type/shape inference: ", model);
    if (!st) st = kn_cli_quantize(model, cp, m);
    if (!st) st = check_standard_ops(model, m->graph);
    if (!st) st = kn_onnx_save_file(m, out);
    kn_model_free(m);
    return st;
}

int kn_cmd_export(int argc, char **argv)
{
    kn_cli_passes cp = {.quantize = "static-int8"};
    const char *model = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-o") || !strcmp(a, "--calib") || !strcmp(a, "--keep-float") || !strcmp(a, "--weight-bits")) &&
            !kn_cli_needs_value("export", i, argc, argv))
            return 2;
        if (kn_cli_is_help(a)) {
            export_usage(stdout);
            return 0;
        } else if (!strcmp(a, "-o")) out = argv[++i];
        else if (!strcmp(a, "--calib")) cp.calib = argv[++i];
        else if (!strcmp(a, "--keep-float")) cp.keep_float = argv[++i];
        else if (!strcmp(a, "--per-channel")) cp.per_channel = true;
        else if (!strcmp(a, "--weight-bits")) {
            const char *b = argv[++i];
            cp.weight_bits = !strcmp(b, "7") ? 7 : !strcmp(b, "8") ? 8 : -1;
            if (cp.weight_bits < 0) {
                fprintf(stderr, "kiln export: --weight-bits takes 7 or 8, not '%s'\n", b);
                return 2;
            }
        } else if (a[0] == '-' || model) {
            fprintf(stderr, "kiln export: unexpected argument '%s'\n", a);
            export_usage(stderr);
            return 2;
        } else model = a;
    }
    if (!model || !out || !cp.calib) {
        if (model) fprintf(stderr, "kiln export: give %s\n\n", !cp.calib ? "--calib TABLE.json (made by kiln calibrate)"
                                                                         : "-o OUT.onnx");
        export_usage(stderr);
        return 2;
    }
    cp.weight_bits = kn_cli_weight_bits(&cp, NULL); /* for this CPU, as a native artifact */
    const kn_cli_file files[] = {{"MODEL", model, false}, {"--calib", cp.calib, false}, {"-o", out, true}};
    if (kn_cli_check_distinct(files, 3)) {
        kn_cli_report(NULL);
        return 2;
    }
    if (export_model(model, &cp, out)) {
        kn_cli_report(NULL);
        return 1;
    }
    return 0;
}
