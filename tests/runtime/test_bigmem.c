/*
 * tests/runtime/test_bigmem.c — runtime/src/bigmem.c: a session's buffers
 * (arena, packed weights, scratch) are 64-byte aligned and marked for
 * transparent huge pages (the "hg" flag of their mapping in
 * /proc/self/smaps), unless KILN_HUGEPAGES=0: from KN_BIG_MIN bytes on each
 * in a mapping of its own starting on a 2 MiB boundary, smaller ones cut
 * from shared 2 MiB slabs without overlapping; a slab goes back once its
 * last block is freed, and the one in use starts over. Every block is
 * writable to its last byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bigmem.h"

/* Whether this kernel has transparent huge pages at all (where it has none,
 * madvise(MADV_HUGEPAGE) fails and no mapping carries the flag). */
static int thp_available(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    fclose(f);
    return 1;
}

/* 1 if the mapping holding address p has the VmFlags "hg" (MADV_HUGEPAGE),
 * 0 if not, -1 if smaps cannot tell. */
static int marked_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int inside = 0, found = -1;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            inside = a >= lo && a < hi;
            continue;
        }
        if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

static void fill_and_check(unsigned char *p, size_t n)
{
    memset(p, 0xa5, n);
    assert_int_equal(p[0], 0xa5);
    assert_int_equal(p[n - 1], 0xa5);
}

/* Blocks cut from slabs: aligned, marked, disjoint, and the slabs given
 * back when every block is freed. */
static void test_small_blocks_share_slabs(void **st)
{
    (void)st;
    enum { N = 600 };
    static unsigned char *p[N];
    static size_t len[N];
    int before = kn_big_slab_count();
    for (int i = 0; i < N; i++) {
        len[i] = i % 7 == 0 ? 0 : (size_t)(i * 977) % 20000 + 1; /* 0 is served as 64 */
        p[i] = kn_big_alloc(len[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 64, 0);
        if (!len[i]) len[i] = 64;
        memset(p[i], i & 0xff, len[i]);
        if (thp_available()) assert_int_equal(marked_huge(p[i]), 1);
    }
    /* about 6 MB: several slabs, and no block overwrote another */
    assert_true(kn_big_slab_count() >= before + 2);
    for (int i = 0; i < N; i++) {
        assert_int_equal(p[i][0], i & 0xff);
        assert_int_equal(p[i][len[i] - 1], i & 0xff);
    }
    for (int i = 0; i < N; i++) kn_big_free(p[i]);
    /* only the slab in use stays */
    assert_true(kn_big_slab_count() <= 1);
    /* it starts over: the next block is its first */
    unsigned char *a = kn_big_alloc(100), *b = kn_big_alloc(100);
    assert_int_equal((uintptr_t)a % (2u << 20), 0);
    assert_ptr_equal(b, a + 128);
    kn_big_free(b);
    kn_big_free(a);
    kn_big_free(NULL);
}

/* A block that does not fit what is left of a slab starts a new one; the
 * full one goes back when its blocks do, the new one stays. */
static void test_full_slab_released(void **st)
{
    (void)st;
    unsigned char *a = kn_big_alloc(700000), *b = kn_big_alloc(700000), *c = kn_big_alloc(700000);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    int n = kn_big_slab_count();
    assert_true(n >= 2);
    memset(c, 3, 700000);
    kn_big_free(a);
    kn_big_free(b);
    assert_int_equal(kn_big_slab_count(), n - 1);
    assert_int_equal(c[699999], 3);
    kn_big_free(c);
}

static void test_large_blocks_on_huge_pages(void **st)
{
    (void)st;
    size_t sizes[] = {KN_BIG_MIN, KN_HUGE_PAGE, KN_HUGE_PAGE + 4096, 5 * KN_HUGE_PAGE + 12345};
    int slabs = kn_big_slab_count();
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *p = kn_big_alloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % KN_HUGE_PAGE, 0);
        fill_and_check(p, sizes[i]);
        if (thp_available()) assert_int_equal(marked_huge(p), 1);
        kn_big_free(p);
    }
    assert_int_equal(kn_big_slab_count(), slabs); /* none from a slab */
    if (!thp_available()) print_message("no transparent huge pages here: the hint itself is not checked\n");
}

/* Run as a child with KILN_HUGEPAGES=0: a large block, not marked. */
static int child_env_off(void)
{
    unsigned char *p = kn_big_alloc(3 * KN_BIG_MIN), *q = kn_big_alloc(1000);
    int ok = p && q && (uintptr_t)p % 64 == 0 && (uintptr_t)q % 64 == 0 && marked_huge(p) == 0 &&
             marked_huge(q) == 0 && kn_big_slab_count() == 0;
    if (p) memset(p, 1, 3 * KN_BIG_MIN);
    kn_big_free(p);
    kn_big_free(q);
    return ok ? 0 : 1;
}

/* KILN_HUGEPAGES is read once per process: a fresh one (this program run
 * again) reads the 0. */
static void test_env_turns_the_hint_off(void **st)
{
    (void)st;
    if (!thp_available()) skip();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("KILN_HUGEPAGES", "0", 1);
        execl("/proc/self/exe", "test_bigmem", "--env-off", (char *)NULL);
        _exit(2);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--env-off") == 0) return child_env_off();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_blocks_share_slabs),
        cmocka_unit_test(test_full_slab_released),
        cmocka_unit_test(test_large_blocks_on_huge_pages),
        cmocka_unit_test(test_env_turns_the_hint_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
