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

/* Prints "kiln: error: <kn_last_error()>" (with an optional context) to stderr. */
void kn_cli_report(const char *context);

/* True if arg is "-h" or "--help". */
bool kn_cli_is_help(const char *arg);

/* Loads an ONNX model and checks that every op is known; prints the error. */
int kn_cli_load_model(const char *path, bool require_supported, kn_model **out_model);

#endif
