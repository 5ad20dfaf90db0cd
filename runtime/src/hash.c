/*
 * runtime/src/hash.c — the two digests an artifact is checked with at load
 * time (kiln/abi.h): kn_weights_hash over the weight bytes, and
 * kn_meta_io_hash over the I/O contract that a generated header compiles
 * into an application.
 *
 * Why a hash of our own for the weights: byte-wise FNV-1a is a chain of
 * dependent multiplies, one per byte (about 1 GB/s); hashing 100 MB of
 * embedded weights at every open would cost ~0.1 s. kn_weights_hash runs
 * four independent lanes over 64-bit words, one multiply per word, so it
 * goes at the speed the pages come in. Each step is a bijection of the
 * word for a fixed lane state and of the lane state for a fixed word, and
 * the final combination is a bijection of each lane, so a change confined
 * to one 8-byte word (every single flipped bit) always changes the hash;
 * other changes go unnoticed with a probability of about 2^-64.
 */
#include <string.h>

#include "kiln/abi.h"

#define WH_LANES 4
#define WH_K1 0x9e3779b97f4a7c15ull /* odd: multiplying by it is a bijection */
#define WH_K2 0xbf58476d1ce4e5b9ull
#define WH_K3 0x94d049bb133111ebull

static inline uint64_t rotl64(uint64_t v, int r) { return (v << r) | (v >> (64 - r)); }

/* Little-endian, so that a hash written on one machine is the one read on
 * another. */
static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t lane_step(uint64_t acc, uint64_t word) { return rotl64(acc ^ word, 29) * WH_K1; }

uint64_t kn_weights_hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t lane[WH_LANES];
    for (int i = 0; i < WH_LANES; i++) lane[i] = WH_K2 * (uint64_t)(i + 1);
    size_t words = len / 8, i = 0;
    for (; i + WH_LANES <= words; i += WH_LANES) {
        lane[0] = lane_step(lane[0], load_le64(p + 8 * i));
        lane[1] = lane_step(lane[1], load_le64(p + 8 * i + 8));
        lane[2] = lane_step(lane[2], load_le64(p + 8 * i + 16));
        lane[3] = lane_step(lane[3], load_le64(p + 8 * i + 24));
    }
    for (; i < words; i++) lane[i % WH_LANES] = lane_step(lane[i % WH_LANES], load_le64(p + 8 * i));
    if (len % 8) { /* the tail, zero-padded; the length below tells it from real zeros */
        unsigned char tail[8] = {0};
        memcpy(tail, p + 8 * words, len % 8);
        lane[words % WH_LANES] = lane_step(lane[words % WH_LANES], load_le64(tail));
    }
    uint64_t h = (uint64_t)len * WH_K3;
    for (int k = 0; k < WH_LANES; k++) {
        h = rotl64(h, 23) ^ lane[k];
        h *= WH_K2;
    }
    /* avalanche: xor-shifts and odd multiplies, each a bijection */
    h ^= h >> 31;
    h *= WH_K3;
    h ^= h >> 29;
    h *= WH_K1;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    /* the terminator keeps "ab"+"c" apart from "a"+"bc" */
    return s ? kn_fnv1a(h, s, strlen(s) + 1) : kn_fnv1a(h, "\xff", 1);
}

static uint64_t hash_i64(uint64_t h, int64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    return kn_fnv1a(h, b, sizeof b);
}

static uint64_t hash_tensor(uint64_t h, const kn_abi_tensor *t)
{
    h = hash_str(h, t->name);
    h = hash_i64(h, t->dtype);
    h = hash_i64(h, t->rank);
    h = hash_i64(h, t->slot > 0); /* data-dependent shape or not; the slot number is internal */
    for (int d = 0; d < t->rank && d < 8; d++) {
        h = hash_i64(h, t->dims[d]);
        h = hash_i64(h, t->dim_sym[d]);
        h = hash_i64(h, t->dim_a[d]);
    }
    return h;
}

uint64_t kn_meta_io_hash(const kn_meta *m)
{
    uint64_t h = hash_i64(KN_FNV_INIT, m->n_inputs);
    h = hash_i64(h, m->n_outputs);
    for (int i = 0; i < m->n_inputs; i++) h = hash_tensor(h, &m->inputs[i]);
    for (int i = 0; i < m->n_outputs; i++) h = hash_tensor(h, &m->outputs[i]);
    h = hash_i64(h, m->n_syms);
    for (int k = 0; k < m->n_syms; k++) {
        h = hash_str(h, m->syms[k].name);
        h = hash_i64(h, m->syms[k].max);
        h = hash_i64(h, m->syms[k].min);
        h = hash_i64(h, m->syms[k].align);
        h = hash_i64(h, m->syms[k].from_data);
    }
    return h;
}
