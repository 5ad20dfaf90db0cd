/* The little-endian byte writer behind runtime/src/wbuf.h. */
#include "wbuf.h"

#include <stdlib.h>
#include <string.h>

#include "kiln/status.h"

void kn_wbuf_bytes(kn_wbuf *w, const void *src, size_t n)
{
    if (w->err || n == 0) return;
    if (n > SIZE_MAX / 2 - w->len) {
        w->err = kn_error(KN_ERR_NOMEM, "%s: too large to serialize", w->what);
        return;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n) cap *= 2;
        unsigned char *p = realloc(w->p, cap);
        if (!p) {
            w->err = kn_error(KN_ERR_NOMEM, "%s: out of memory (%zu bytes)", w->what, cap);
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

void kn_wbuf_u32(kn_wbuf *w, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
    kn_wbuf_bytes(w, b, 4);
}

void kn_wbuf_u64(kn_wbuf *w, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    kn_wbuf_bytes(w, b, 8);
}

void kn_wbuf_f32(kn_wbuf *w, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    kn_wbuf_u32(w, u);
}
