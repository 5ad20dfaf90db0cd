/*
 * tests/test_files.h — reading golden files, shared by the golden-file
 * tests (tests/ir/test_ir_text.c, tests/passes/test_golden.c).
 */
#ifndef KILN_TESTS_TEST_FILES_H
#define KILN_TESTS_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file as a NUL-terminated malloc'd string (the caller frees
 * it), or NULL if it cannot be opened. */
static inline char *kn_test_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

/* The text after the leading "//" comment lines. */
static inline const char *kn_test_skip_comments(const char *s)
{
    while (s[0] == '/' && s[1] == '/') {
        const char *nl = strchr(s, '\n');
        if (!nl) return s + strlen(s);
        s = nl + 1;
    }
    return s;
}

#endif
