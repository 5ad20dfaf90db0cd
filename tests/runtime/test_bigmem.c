/*
 * tests/runtime/test_bigmem.c — runtime/src/bigmem.c: a session's large
 * buffers (arena, packed weights, scratch) are 64-byte aligned, and from
 * KN_BIG_MIN bytes on start on a 2 MiB boundary with their whole 2 MiB pages
 * marked for transparent huge pages (the "hg" flag of their mapping in
 * /proc/self/smaps), unless KILN_HUGEPAGES=0; small ones are plain blocks.
 * Every block is writable to its last byte and freed with free().
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

static void test_small_blocks(void **st)
{
    (void)st;
    size_t sizes[] = {0, 1, 63, 4096, 100000, KN_BIG_MIN - 1};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *p = kn_big_alloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        fill_and_check(p, sizes[i] ? sizes[i] : 64);
        free(p);
    }
}

static void test_large_blocks_on_huge_pages(void **st)
{
    (void)st;
    size_t sizes[] = {KN_BIG_MIN, KN_BIG_MIN + 4096, 5 * KN_BIG_MIN + 12345};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *p = kn_big_alloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % KN_BIG_MIN, 0);
        fill_and_check(p, sizes[i]);
        if (thp_available()) assert_int_equal(marked_huge(p), 1);
        free(p);
    }
    if (!thp_available()) print_message("no transparent huge pages here: the hint itself is not checked\n");
}

/* Run as a child with KILN_HUGEPAGES=0: a large block, not marked. */
static int child_env_off(void)
{
    unsigned char *p = kn_big_alloc(3 * KN_BIG_MIN);
    int ok = p && (uintptr_t)p % 64 == 0 && marked_huge(p) == 0;
    if (p) memset(p, 1, 3 * KN_BIG_MIN);
    free(p);
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
        cmocka_unit_test(test_small_blocks),
        cmocka_unit_test(test_large_blocks_on_huge_pages),
        cmocka_unit_test(test_env_turns_the_hint_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
