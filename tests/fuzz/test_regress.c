/*
 * tests/fuzz/test_regress.c — replays every input under tests/fuzz/regress/
 * TARGET/ (a fuzzer's finding, kept after its fix) through the same entry
 * point of fuzz_one.h that found it. Each was a crash or a sanitizer report
 * before its fix; under ASan/UBSan (make test-asan) a regression fails
 * here, and in a plain build a crash does. Each must also be refused with
 * a message, as every finding so far was malformed input: a parser that
 * accepts one has lost a check.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fuzz/fuzz_one.h"
#include "kiln/status.h"

typedef int (*entry_fn)(const uint8_t *data, size_t size);

static unsigned char *read_all(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap && !(buf = realloc(buf, cap = cap * 2 + 4096))) fail_msg("out of memory");
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    *out_len = len;
    return buf;
}

/* Replays regress/DIR/ *; returns how many inputs it ran. */
static int replay(const char *dir, entry_fn fn)
{
    char path[4096];
    snprintf(path, sizeof path, "fuzz/regress/%s", dir);
    DIR *d = opendir(path);
    if (!d) return 0; /* no finding for this target yet */
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "fuzz/regress/%s/%s", dir, e->d_name);
        size_t len = 0;
        unsigned char *bytes = read_all(path, &len);
        int st = fn(bytes, len);
        free(bytes);
        if (st == KN_OK) fail_msg("%s: accepted, expected an error", path);
        if (!*kn_last_error()) fail_msg("%s: refused without a message", path);
        n++;
    }
    closedir(d);
    return n;
}

static void test_replay_all(void **state)
{
    (void)state;
    static const struct {
        const char *dir;
        entry_fn fn;
    } targets[] = {{"npy", kn_fuzz_npy}, {"meta", kn_fuzz_meta}, {"attrs", kn_fuzz_attrs}, {"onnx", kn_fuzz_onnx}};
    int n = 0;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) n += replay(targets[i].dir, targets[i].fn);
    print_message("replayed %d regression inputs\n", n);
    assert_true(n > 0); /* the folder moved or emptied: nothing was tested */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_all)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
