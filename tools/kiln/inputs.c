/* Inputs for the verbs that run a compiled artifact without caring about the
 * values (`kiln bench`, `kiln profile`): .npy files named on the command
 * line, random tensors with a fixed seed for the rest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kiln/kiln.h"
#include "kiln/npy.h"

/* xorshift: the same inputs on every run of a benchmark */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int random_input(const kn_io_info *info, const int64_t *dims, uint64_t *seed, kn_tensor *out)
{
    int st = kn_tensor_alloc(out, info->dtype, info->rank, dims);
    if (st) return st;
    int64_t n = kn_tensor_numel(out);
    bool is_float = kn_dtype_info(info->dtype)->is_float;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(seed);
        if (is_float) kn_store_f64(info->dtype, out->data, (size_t)i, (double)(r >> 11) / 9007199254740992.0 * 2 - 1);
        else kn_store_i64(info->dtype, out->data, (size_t)i, (int64_t)(r % 10));
    }
    return KN_OK;
}

/* The dims of a NAME=DIMS spec for input `info` ("1x3x256x160"), or an error
 * naming the spec. */
static int shape_dims(const char *spec, const kn_io_info *info, int64_t *dims)
{
    const char *p = spec + strlen(info->name) + 1;
    int r = 0;
    while (r < KN_MAX_RANK) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1) break;
        dims[r++] = v;
        if (*end == '\0') {
            if (r != info->rank) break;
            /* no dim above the artifact's maxima: the session would refuse it,
             * after a tensor of that size was made */
            for (int d = 0; d < r; d++)
                if (dims[d] > info->dims[d])
                    return kn_error(KN_ERR_INVALID, "--shape %s: dim %d is %lld, the artifact was compiled for at most %lld",
                                    spec, d, (long long)dims[d], (long long)info->dims[d]);
            return KN_OK;
        }
        if (*end != 'x') break;
        p = end + 1;
    }
    return kn_error(KN_ERR_INVALID, "--shape %s: expected %d dims of at least 1 separated by 'x' (input '%s')", spec,
                    info->rank, info->name);
}

int kn_cli_artifact_inputs(const kn_artifact *art, int n_specs, char *const *specs, int n_shapes,
                           char *const *shapes, kn_tensor *out, bool *other_shape)
{
    int n_in = kn_artifact_num_inputs(art);
    *other_shape = false;
    memset(out, 0, sizeof *out * (size_t)n_in);
    const char **names = calloc((size_t)n_in + 1, sizeof *names), **files = calloc((size_t)n_specs + 1, sizeof *files);
    int *idx = calloc((size_t)n_specs + 1, sizeof *idx);
    int st = names && files && idx ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < n_in; i++) {
        kn_io_info info;
        kn_artifact_input_info(art, i, &info);
        names[i] = info.name;
    }
    if (!st) st = kn_cli_match_inputs("the artifact", n_in, names, NULL, n_specs, specs, false, idx, files);
    int *sidx = calloc((size_t)n_shapes + 1, sizeof *sidx);
    const char **sfiles = calloc((size_t)n_shapes + 1, sizeof *sfiles);
    if (!st && (!sidx || !sfiles)) st = kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st && n_shapes) st = kn_cli_match_inputs("the artifact", n_in, names, NULL, n_shapes, shapes, false, sidx, sfiles);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; !st && i < n_in; i++) {
        kn_io_info info;
        kn_artifact_input_info(art, i, &info);
        const char *file = NULL, *shape = NULL;
        for (int k = 0; k < n_specs; k++)
            if (idx[k] == i) file = files[k];
        for (int k = 0; k < n_shapes; k++)
            if (sidx[k] == i) shape = shapes[k];
        int64_t dims[KN_MAX_RANK];
        memcpy(dims, info.dims, sizeof dims);
        if (file && shape)
            st = kn_error(KN_ERR_INVALID, "input '%s': given by a file and by --shape %s: drop one", info.name, shape);
        else if (shape)
            st = shape_dims(shape, &info, dims);
        if (!st) st = file ? kn_npy_read(file, &out[i]) : random_input(&info, dims, &seed, &out[i]);
        if (!st && (out[i].dtype != info.dtype || out[i].rank != info.rank))
            st = kn_error(KN_ERR_INVALID, "input '%s': expected %s of rank %d, got %s of rank %d", info.name,
                          kn_dtype_name(info.dtype), info.rank, kn_dtype_name(out[i].dtype), out[i].rank);
        if (!st && memcmp(out[i].dims, info.dims, sizeof(int64_t) * (size_t)info.rank)) *other_shape = true;
    }
    if (st)
        for (int j = 0; j < n_in; j++) kn_tensor_free(&out[j]);
    free(names), free(files), free(idx), free(sidx), free(sfiles);
    return st;
}
