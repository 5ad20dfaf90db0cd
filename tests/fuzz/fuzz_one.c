/*
 * tests/fuzz/fuzz_one.c — the fuzz entry points of fuzz_one.h.
 */
#include "fuzz_one.h"

#include <stdlib.h>

#include "kiln/abi.h"
#include "kiln/npy.h"
#include "onnx_import.h"
#include "opdesc.h"

int kn_fuzz_npy(const uint8_t *data, size_t size)
{
    kn_tensor t = {0};
    int st = kn_npy_parse(data, size, "fuzz.npy", &t);
    if (st == KN_OK) kn_tensor_free(&t);
    return st;
}

int kn_fuzz_meta(const uint8_t *data, size_t size)
{
    kn_meta m = {0};
    int st = kn_meta_read(data, size, &m);
    if (st != KN_OK) return st;
    /* the runtime parses each op node's blob next (artifact.c) */
    for (int i = 0; i < m.n_opnodes; i++) {
        const kn_abi_opnode *o = &m.opnodes[i];
        int ast = o->attrs_len > 0 ? kn_fuzz_attrs(o->attrs, (size_t)o->attrs_len) : KN_OK;
        if (!st) st = ast;
    }
    kn_meta_free(&m);
    return st;
}

int kn_fuzz_attrs(const uint8_t *data, size_t size)
{
    kn_attr *attrs = NULL;
    int n = 0;
    void *block = NULL;
    int st = kn_attrs_read(data, size, &attrs, &n, &block);
    if (st == KN_OK) kn_attrs_free(block);
    return st;
}

int kn_fuzz_onnx(const uint8_t *data, size_t size)
{
    kn_model *m = NULL;
    /* no base folder: external data is refused without touching the disk */
    int st = kn_onnx_load_bytes(data, size, NULL, &m);
    if (st == KN_OK) {
        /* every step runs even after one fails (an odd but importable graph
         * may fail the support check and still reach inference through
         * `kiln inspect`), so that a crash in a later one is not missed */
        int s1 = kn_onnx_check_supported(m);
        int s2 = kn_graph_infer(m->graph);
        int s3 = kn_graph_verify(m->graph);
        st = s1 ? s1 : s2 ? s2 : s3;
        kn_model_free(m);
    }
    kn_tensor t;
    char *name = NULL;
    if (kn_onnx_load_tensor_bytes(data, size, &t, &name) == KN_OK) {
        kn_tensor_free(&t);
        free(name);
    }
    return st;
}
