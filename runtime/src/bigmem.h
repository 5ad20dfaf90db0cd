/* kiln runtime: memory for a session's buffers that live as long as it
 * (arena, packed weights, scratch) on transparent huge pages.
 *
 * A model's arena and packed weights are megabytes read once per run. With
 * 4 KiB pages every run walks thousands of page-table entries, and on a
 * shared machine the TLB and the caches holding those walks are gone after a
 * few milliseconds of another process: a run after 100 ms of rest took 3-6%
 * longer on 4 KiB pages than on 2 MiB ones (docs/kernels.md, "Memory").
 * Linux's default THP mode, "madvise", gives huge pages only to ranges that
 * ask, and malloc does not ask; these functions do.
 *
 * Blocks from KN_BIG_MIN bytes on get a mapping of their own, rounded up to
 * whole 2 MiB pages; smaller ones are cut from shared 2 MiB slabs (a
 * MobileNet's dozens of packed layers share a few pages instead of each
 * taking 4 KiB ones). A slab goes back when its last block is freed. A
 * process that uses kiln so holds at most one partly used slab beyond its
 * blocks: up to 2 MiB more resident memory than malloc would take. */
#ifndef KN_RT_BIGMEM_H
#define KN_RT_BIGMEM_H

#include <stddef.h>

/* At least n bytes, 64-byte aligned, not zeroed; free with kn_big_free
 * (never free() or realloc()). The huge pages are a hint: with THP off,
 * or none to be had, the kernel gives 4 KiB pages and nothing else changes.
 * KILN_HUGEPAGES=0 in the environment turns the hint off (then every block
 * is malloc's). NULL when out of memory. Thread-safe. */
void *kn_big_alloc(size_t n);

/* Frees a block of kn_big_alloc; NULL is fine. */
void kn_big_free(void *p);

/* The size from which a block gets its own mapping; below it, slabs. */
#define KN_BIG_MIN ((size_t)1 << 20)
/* A huge page, and a slab. */
#define KN_HUGE_PAGE ((size_t)2 << 20)

/* For tests: the slabs held now. */
int kn_big_slab_count(void);

#endif
