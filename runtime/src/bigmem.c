/* kiln runtime: large buffers on transparent huge pages (bigmem.h). */
#include "bigmem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int g_huge = 1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *e = getenv("KILN_HUGEPAGES");
    if (e && strcmp(e, "0") == 0) g_huge = 0;
}

void *kn_big_alloc(size_t n)
{
    void *p = NULL;
    if (n == 0) n = 64;
    pthread_once(&g_once, read_env);
    if (!g_huge || n < KN_BIG_MIN) return posix_memalign(&p, 64, n) ? NULL : p;
    /* glibc serves a block this large from its own mapping: the padding up
     * to the alignment is address space, not memory */
    if (posix_memalign(&p, KN_BIG_MIN, n)) return NULL;
#ifdef MADV_HUGEPAGE
    /* only the 2 MiB pages that lie wholly inside the block: the tail page
     * stays in 4 KiB pages, so at most n bytes are ever touched */
    madvise(p, n & ~(KN_BIG_MIN - 1), MADV_HUGEPAGE);
#endif
    return p;
}
