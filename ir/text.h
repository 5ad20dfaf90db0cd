/*
 * ir/text.h — the IR's text form (printer and parser) and its Graphviz DOT
 * writer. The grammar is described for users in docs/ir.md.
 *
 * The printer is deterministic: the same model always prints to the same
 * bytes, and parsing what it printed gives a model that prints the same
 * again (print(parse(print(m))) == print(m)), as long as every constant was
 * printed inline. Constants larger than a threshold are printed as a summary
 * with a content hash; the parser refuses a summary unless asked for
 * zero-filled placeholders (KN_IR_PARSE_PLACEHOLDERS).
 *
 *     kiln-ir v1
 *     opset "" 17
 *     graph main(%x: f32[1,3,8,8]) {
 *       %w = const f32[2,3,1,1] [1.0, 0.5, 0.25, -1.0, 2.0, 0.0]
 *       %y: f32[1,2,8,8] = Conv(%x, %w, _) {kernel_shape=[1,1]} #"conv0"
 *       return %y
 *     }
 *
 *     kn_model *m = NULL;
 *     if (kn_ir_parse(text, "model.kir", &m)) {
 *         fprintf(stderr, "%s\n", kn_last_error()); // "model.kir:3:14: expected ..."
 *         return 1;
 *     }
 *     kn_ir_print(m, stdout);
 *     kn_model_free(m);
 */
#ifndef KILN_IR_TEXT_H
#define KILN_IR_TEXT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Constants (and tensor attributes) with more elements than this are printed
 * as a summary by default. */
#define KN_IR_INLINE_DEFAULT 256

typedef struct kn_ir_print_opts {
    /* Tensors with more elements are summarized ({... hash}); a negative
     * value prints every tensor in full. */
    int64_t max_inline_elems;
} kn_ir_print_opts;

/* Default options (max_inline_elems = KN_IR_INLINE_DEFAULT). */
kn_ir_print_opts kn_ir_print_defaults(void);

/* Prints m in text form to f with default options. Returns KN_ERR_IO if
 * writing fails, KN_ERR_INVALID if the model cannot be printed. */
int kn_ir_print(const kn_model *m, FILE *f);
/* Same with explicit options (opts NULL → defaults). */
int kn_ir_print_ex(const kn_model *m, const kn_ir_print_opts *opts, FILE *f);
/* Prints m into a malloc'd NUL-terminated string stored in *out_text (the
 * caller frees it with free()); *out_text is NULL on failure. */
int kn_ir_print_string(const kn_model *m, const kn_ir_print_opts *opts, char **out_text);
/* Prints one graph (and its subgraphs) as the `graph ... { }` block alone,
 * indented by `indent` spaces; for debugging passes. */
int kn_ir_print_graph(const kn_graph *g, const kn_ir_print_opts *opts, int indent, FILE *f);

enum {
    /* Accept constant summaries ({... hash}) by creating zero-filled tensors
     * of the printed dtype and shape. Printing such a model gives a different
     * hash than the original: meant for structure-only uses. */
    KN_IR_PARSE_PLACEHOLDERS = 1u << 0,
};

/* Parses text (NUL-terminated) into a new model stored in *out_model (the
 * caller frees it with kn_model_free()); *out_model is NULL on failure, and
 * the error reads "SOURCE_NAME:LINE:COL: what was expected". source_name
 * may be NULL ("<input>"). */
int kn_ir_parse(const char *text, const char *source_name, kn_model **out_model);
/* Same with KN_IR_PARSE_* flags. */
int kn_ir_parse_ex(const char *text, const char *source_name, unsigned flags,
                   kn_model **out_model);
/* Reads a whole file and parses it (the file name is the source name). */
int kn_ir_parse_file(const char *path, unsigned flags, kn_model **out_model);

/* Writes m as a Graphviz digraph: nodes labeled "Op\nname", edges labeled
 * with the value's dtype/shape, graph inputs, constants and outputs styled
 * apart, subgraphs as clusters. */
int kn_ir_write_dot(const kn_model *m, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
