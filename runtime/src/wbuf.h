/*
 * runtime/src/wbuf.h — a growable little-endian byte writer, shared by the
 * two serialized formats of libkiln_rt (artifact meta and op attributes).
 * Errors are sticky: after the first failure every write is a no-op and
 * `err` holds the status (the message names `what`).
 */
#ifndef KILN_RT_WBUF_H
#define KILN_RT_WBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct kn_wbuf {
    unsigned char *p; /* malloc'd; the caller frees it */
    size_t len, cap;
    int err;
    const char *what; /* "meta", "attributes": prefixes error messages */
} kn_wbuf;

void kn_wbuf_bytes(kn_wbuf *w, const void *src, size_t n);
void kn_wbuf_u32(kn_wbuf *w, uint32_t v);
void kn_wbuf_u64(kn_wbuf *w, uint64_t v);
void kn_wbuf_f32(kn_wbuf *w, float f);

#endif
