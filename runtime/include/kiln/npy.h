/*
 * kiln/npy.h — reading and writing numpy's .npy files (format 1.0–3.0).
 *
 *     kn_tensor t = {0};
 *     if (kn_npy_read("x.npy", &t)) fprintf(stderr, "%s\n", kn_last_error());
 *     kn_npy_write("y.npy", &t);   // atomically: temp file + rename
 *     kn_tensor_free(&t);
 *
 * Little-endian and big-endian data are read; C order only (a Fortran-order
 * file is refused with a message). bf16 has no numpy type and is written as
 * float32; packed 4-bit types are written unpacked as int8/uint8.
 */
#ifndef KILN_NPY_H
#define KILN_NPY_H

#include <stddef.h>

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads path into *out (owned). Errors name the file and the problem. */
int kn_npy_read(const char *path, kn_tensor *out);
/* Parses .npy bytes (source names them in errors). */
int kn_npy_parse(const void *data, size_t len, const char *source, kn_tensor *out);
/* Writes t to path through a temporary file renamed into place. */
int kn_npy_write(const char *path, const kn_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
