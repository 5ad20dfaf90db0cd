/*
 * runtime/src/rbuf.h — a bounds-checked little-endian byte reader, shared by
 * the two serialized formats of libkiln_rt (artifact meta and op attributes;
 * wbuf.h writes them). Every read checks the bytes left first and fails
 * with KN_ERR_INVALID and "malformed <what>: <field>: <problem>", so a
 * truncated or hostile blob gets a message, never a read past its end.
 */
#ifndef KILN_RT_RBUF_H
#define KILN_RT_RBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct kn_rbuf {
    const unsigned char *p;
    size_t len, pos;
    const char *what; /* "meta", "attributes": prefixes error messages */
} kn_rbuf;

/* The n-byte little-endian unsigned integer at p. */
static inline uint64_t kn_le(const unsigned char *p, int n)
{
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x |= (uint64_t)p[i] << (8 * i);
    return x;
}

/* Fails with "malformed <r->what>: <field>: <message>". */
int kn_rbuf_bad(const kn_rbuf *r, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* KN_OK if n more bytes are left. */
int kn_rbuf_need(const kn_rbuf *r, uint64_t n, const char *field);
int kn_rbuf_u32(kn_rbuf *r, uint32_t *v, const char *field);
int kn_rbuf_u64(kn_rbuf *r, uint64_t *v, const char *field);
int kn_rbuf_i32(kn_rbuf *r, int32_t *v, const char *field);
int kn_rbuf_i64(kn_rbuf *r, int64_t *v, const char *field);
int kn_rbuf_f32(kn_rbuf *r, float *v, const char *field);
/* A u32 list length in [0, max] that leaves at least count * min_size bytes
 * (min_size >= 1), so that a lying count fails before any allocation. */
int kn_rbuf_count(kn_rbuf *r, int32_t max, size_t min_size, int32_t *out, const char *field);

/* Returns the status of `call` from the calling function if it failed. */
#define KN_RD(call)                 \
    do {                            \
        int st_ = (call);           \
        if (st_) return st_;        \
    } while (0)

#endif
