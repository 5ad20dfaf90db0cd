/*
 * runtime/ops/select_int.h — private to the 'select' family: the attribute
 * rule that both its execution (runtime/ops/select.c) and its type/shape
 * inference (ir/ops/select.c) need.
 */
#ifndef KILN_RUNTIME_SELECT_INT_H
#define KILN_RUNTIME_SELECT_INT_H

#include "opdesc.h"

/* Most outputs an op of this family has (Unique). */
#define KN_SEL_MAX_OUTPUTS 4

/* The optional 'axis' of Compress and Unique, normalized: -1 when absent
 * (flatten), -2 on error. rank < 0 (unknown) accepts any axis. */
int kn_sel_opt_axis(const kn_opdesc *d, int rank);

#endif
