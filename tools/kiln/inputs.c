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

static int random_input(const kn_io_info *info, uint64_t *seed, kn_tensor *out)
{
    int st = kn_tensor_alloc(out, info->dtype, info->rank, info->dims);
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

int kn_cli_artifact_inputs(const kn_artifact *art, int n_specs, char *const *specs, kn_tensor *out)
{
    int n_in = kn_artifact_num_inputs(art);
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
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; !st && i < n_in; i++) {
        kn_io_info info;
        kn_artifact_input_info(art, i, &info);
        const char *file = NULL;
        for (int k = 0; k < n_specs; k++)
            if (idx[k] == i) file = files[k];
        st = file ? kn_npy_read(file, &out[i]) : random_input(&info, &seed, &out[i]);
        if (!st && (out[i].dtype != info.dtype || (size_t)out[i].nbytes != info.nbytes))
            st = kn_error(KN_ERR_INVALID, "input '%s': expected %s with %zu bytes", info.name,
                          kn_dtype_name(info.dtype), info.nbytes);
    }
    if (st)
        for (int j = 0; j < n_in; j++) kn_tensor_free(&out[j]);
    free(names), free(files), free(idx);
    return st;
}
