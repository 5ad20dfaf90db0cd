/*
 * k_util.h — small helpers the plain C reference kernels share (util.c).
 * Private to runtime/kernels/ref.
 */
#ifndef KILN_K_UTIL_H
#define KILN_K_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

/* True for the floating-point dtypes. */
bool kn_k_is_float(kn_dtype dt);
/* Copies element si of src to element di of dst (both of element size esz). */
void kn_k_copy_elem(const kn_tensor *src, size_t si, kn_tensor *dst, size_t di, size_t esz);
/* Fails (KN_ERR_UNSUPPORTED, naming `what`) when t's dtype has no byte size
 * (a sub-byte or string type these kernels copy by element). */
int kn_k_need_bytes(const kn_tensor *t, const char *what);
/* -1, 0 or 1 comparing elements a and b of x: integers exactly (u64 as
 * unsigned), floats as double. NaN is the caller's to handle. */
int kn_k_cmp_elems(const kn_tensor *x, size_t a, size_t b);

#endif
