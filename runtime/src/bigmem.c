/* kiln runtime: long-lived buffers on transparent huge pages (bigmem.h). */
#include "bigmem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A 2 MiB slab: blocks are cut from its start (bump allocation); freed
 * blocks are only counted, and the slab is reused or released once none is
 * left. */
typedef struct slab {
    char *base;
    size_t used; /* bytes cut so far */
    size_t live; /* blocks not yet freed */
    struct slab *next;
} slab;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static slab *g_slabs; /* every slab held */
static slab *g_cur;   /* the one blocks are cut from */
static int g_huge = 1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *e = getenv("KILN_HUGEPAGES");
    if (e && strcmp(e, "0") == 0) g_huge = 0;
}

/* n bytes (a multiple of KN_HUGE_PAGE) on a 2 MiB boundary, marked for huge
 * pages. glibc serves a block this large from a mapping of its own: the
 * padding to the alignment is address space, not memory. */
static void *huge_block(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, KN_HUGE_PAGE, n)) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

static void *slab_cut(size_t n)
{
    if (!g_cur || g_cur->used + n > KN_HUGE_PAGE) {
        slab *s = calloc(1, sizeof *s);
        if (!s || !(s->base = huge_block(KN_HUGE_PAGE))) {
            free(s);
            return NULL;
        }
        s->next = g_slabs;
        g_slabs = g_cur = s;
    }
    void *p = g_cur->base + g_cur->used;
    g_cur->used += n;
    g_cur->live++;
    return p;
}

void *kn_big_alloc(size_t n)
{
    pthread_once(&g_once, read_env);
    if (n == 0) n = 64;
    if (n > SIZE_MAX - KN_HUGE_PAGE) return NULL;
    if (!g_huge) {
        void *p = NULL;
        return posix_memalign(&p, 64, n) ? NULL : p;
    }
    if (n >= KN_BIG_MIN) return huge_block((n + KN_HUGE_PAGE - 1) & ~(KN_HUGE_PAGE - 1));
    pthread_mutex_lock(&g_lock);
    void *p = slab_cut((n + 63) & ~(size_t)63);
    pthread_mutex_unlock(&g_lock);
    return p;
}

void kn_big_free(void *p)
{
    if (!p) return;
    pthread_mutex_lock(&g_lock);
    slab **link = &g_slabs;
    while (*link && !((char *)p >= (*link)->base && (char *)p < (*link)->base + KN_HUGE_PAGE)) link = &(*link)->next;
    slab *s = *link;
    if (s && --s->live == 0) {
        if (s == g_cur) {
            s->used = 0; /* kept: the next blocks start over */
        } else {
            *link = s->next;
            free(s->base);
            free(s);
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (!s) free(p); /* a block of its own, or malloc's */
}

int kn_big_slab_count(void)
{
    pthread_mutex_lock(&g_lock);
    int n = 0;
    for (slab *s = g_slabs; s; s = s->next) n++;
    pthread_mutex_unlock(&g_lock);
    return n;
}
