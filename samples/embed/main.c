/*
 * samples/embed — an application that embeds a model compiled by kiln.
 *
 * Build steps (see README.md): `kiln compile samples/digits/digits.onnx
 * --shape N=1 -o digits.so --emit-header digits.h --name digits`, then build
 * this file against an installed kiln (CMake's find_package(kiln) or
 * pkg-config). At run time it needs only libkiln_rt and digits.so: no
 * Python, no ONNX parser, no compiler.
 *
 * usage: embed_digits digits.so heldout_images.npy heldout_labels.npy
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <kiln/kiln.h>
#include <kiln/npy.h>

#include "digits.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s digits.so heldout_images.npy heldout_labels.npy\n", argv[0]);
        return 2;
    }
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    kn_tensor images = {0}, labels = {0};
    if (digits_open(argv[1], &art) || kn_session_create(art, &s) || kn_npy_read(argv[2], &images) ||
        kn_npy_read(argv[3], &labels)) {
        fprintf(stderr, "embed: %s\n", kn_last_error());
        return 1;
    }
    if (images.dtype != KN_F32 || images.rank != 4 || labels.dtype != KN_I64 || labels.dims[0] != images.dims[0]) {
        fprintf(stderr, "embed: expected f32 images [N,1,8,8] and i64 labels [N]\n");
        return 1;
    }
    int64_t n = images.dims[0], per = images.dims[1] * images.dims[2] * images.dims[3];
    double *ms = calloc((size_t)n, sizeof *ms);
    int correct = 0;
    for (int64_t i = 0; i < n; i++) {
        float probs[10];
        double t0 = now_ms();
        /* the typed entry point from the generated header */
        if (digits_run(s, (const float *)images.data + i * per, probs)) {
            fprintf(stderr, "embed: image %lld: %s\n", (long long)i, kn_last_error());
            return 1;
        }
        ms[i] = now_ms() - t0;
        int best = 0;
        for (int k = 1; k < 10; k++)
            if (probs[k] > probs[best]) best = k;
        correct += best == ((const int64_t *)labels.data)[i];
        if (i < 5) printf("image %lld: predicted %d, label %lld\n", (long long)i, best, (long long)((const int64_t *)labels.data)[i]);
    }
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    struct stat sb;
    long long size = stat(argv[1], &sb) == 0 ? (long long)sb.st_size : -1;
    printf("embed: %d/%lld correct (%.1f%%), median latency %.3f ms per image, artifact %lld bytes\n", correct,
           (long long)n, 100.0 * correct / (double)n, ms[n / 2], size);
    free(ms);
    kn_tensor_free(&images);
    kn_tensor_free(&labels);
    kn_session_free(s);
    kn_artifact_close(art);
    return 0;
}
