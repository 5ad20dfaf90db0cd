/* kiln runtime: memory for a session's large buffers (arena, packed weights,
 * scratch) on transparent huge pages.
 *
 * A model's arena and packed weights are megabytes read once per run. With
 * 4 KiB pages every run walks thousands of page-table entries, and on a
 * shared machine the TLB and the caches holding those walks are gone after a
 * few milliseconds of another process: a run after 100 ms of rest took 4-8%
 * longer on 4 KiB pages than on 2 MiB ones (docs/kernels.md, "Memory").
 * Linux's default THP mode, "madvise", gives huge pages only to ranges that
 * ask, and malloc does not ask; these functions do. */
#ifndef KN_RT_BIGMEM_H
#define KN_RT_BIGMEM_H

#include <stddef.h>

/* At least n bytes, 64-byte aligned, freed with free(). From KN_BIG_MIN
 * bytes on, the block starts on a 2 MiB boundary and its whole 2 MiB pages
 * are marked for huge pages (a hint: with THP off, or none to be had, the
 * kernel gives 4 KiB pages and nothing else changes). KILN_HUGEPAGES=0 in the
 * environment turns the hint off. NULL when out of memory. */
void *kn_big_alloc(size_t n);

/* The size from which kn_big_alloc asks for huge pages: one huge page. */
#define KN_BIG_MIN ((size_t)2 << 20)

#endif
