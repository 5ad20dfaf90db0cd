/*
 * tests/runtime/rt_alone.c — libkiln_rt on its own: this program links
 * libkiln_rt and nothing else of kiln (no IR, passes, code generation or
 * frontend; rt_alone.cmake), loads an artifact that the kiln binary
 * compiled at test time, runs it through the public API (kiln/kiln.h) on
 * the digits sample's held-out images, and checks its predictions against
 * the labels (at least 290 of 300 right, the sample's known accuracy).
 *
 * usage: rt_alone ART.so IMAGES.npy LABELS.npy
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kiln/kiln.h"
#include "kiln/npy.h"

static int fail(const char *what)
{
    fprintf(stderr, "rt_alone: %s: %s\n", what, kn_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s ART.so IMAGES.npy LABELS.npy\n", argv[0]);
        return 2;
    }
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    kn_tensor images = {0}, labels = {0};
    if (kn_artifact_open(argv[1], &art)) return fail(argv[1]);
    if (kn_session_create(art, &s)) return fail("creating a session");
    if (kn_npy_read(argv[2], &images) || kn_npy_read(argv[3], &labels)) return fail("reading the data");
    kn_io_info in, out;
    if (kn_artifact_num_inputs(art) != 1 || kn_artifact_num_outputs(art) != 1 || kn_artifact_input_info(art, 0, &in) ||
        kn_artifact_output_info(art, 0, &out))
        return fail("the artifact's inputs and outputs");
    int64_t n = images.dims[0], per = images.rank == 4 ? images.dims[1] * images.dims[2] * images.dims[3] : 0;
    if (images.dtype != KN_F32 || images.rank != 4 || labels.dtype != KN_I64 || labels.dims[0] != n || n < 1) {
        fprintf(stderr, "rt_alone: expected f32 images [N, 1, 8, 8] and i64 labels [N]\n");
        return 1;
    }
    int correct = 0;
    for (int64_t i = 0; i < n; i++) {
        float probs[10] = {0};
        const void *inputs[1] = {(const float *)images.data + i * per};
        void *outputs[1] = {probs};
        if (kn_session_run(s, inputs, outputs)) return fail("running the model");
        int best = 0;
        double sum = 0;
        for (int k = 0; k < 10; k++) {
            if (!isfinite(probs[k])) {
                fprintf(stderr, "rt_alone: image %lld: output %d is %g\n", (long long)i, k, probs[k]);
                return 1;
            }
            sum += probs[k];
            if (probs[k] > probs[best]) best = k;
        }
        correct += best == ((const int64_t *)labels.data)[i];
    }
    printf("rt_alone: %d/%lld correct through libkiln_rt alone\n", correct, (long long)n);
    kn_tensor_free(&images);
    kn_tensor_free(&labels);
    kn_session_free(s);
    kn_artifact_close(art);
    return correct >= 290 && n == 300 ? 0 : 1;
}
