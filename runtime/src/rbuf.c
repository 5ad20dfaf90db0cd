/*
 * runtime/src/rbuf.c — the byte reader of rbuf.h.
 */
#include "rbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kiln/status.h"

int kn_rbuf_bad(const kn_rbuf *r, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kn_error(KN_ERR_INVALID, "malformed %s: %s: %s", r->what, field, msg);
}

int kn_rbuf_need(const kn_rbuf *r, uint64_t n, const char *field)
{
    if (n > r->len - r->pos)
        return kn_rbuf_bad(r, field, "truncated at byte %zu of %zu (needs %llu more)", r->pos, r->len,
                           (unsigned long long)n);
    return KN_OK;
}

int kn_rbuf_u32(kn_rbuf *r, uint32_t *v, const char *field)
{
    KN_RD(kn_rbuf_need(r, 4, field));
    *v = (uint32_t)kn_le(r->p + r->pos, 4);
    r->pos += 4;
    return KN_OK;
}

int kn_rbuf_u64(kn_rbuf *r, uint64_t *v, const char *field)
{
    KN_RD(kn_rbuf_need(r, 8, field));
    *v = kn_le(r->p + r->pos, 8);
    r->pos += 8;
    return KN_OK;
}

int kn_rbuf_i32(kn_rbuf *r, int32_t *v, const char *field)
{
    uint32_t u;
    KN_RD(kn_rbuf_u32(r, &u, field));
    *v = (int32_t)u;
    return KN_OK;
}

int kn_rbuf_i64(kn_rbuf *r, int64_t *v, const char *field)
{
    uint64_t u;
    KN_RD(kn_rbuf_u64(r, &u, field));
    *v = (int64_t)u;
    return KN_OK;
}

int kn_rbuf_f32(kn_rbuf *r, float *v, const char *field)
{
    uint32_t u;
    KN_RD(kn_rbuf_u32(r, &u, field));
    memcpy(v, &u, 4);
    return KN_OK;
}

int kn_rbuf_count(kn_rbuf *r, int32_t max, size_t min_size, int32_t *out, const char *field)
{
    uint32_t n;
    KN_RD(kn_rbuf_u32(r, &n, field));
    if (n > (uint32_t)(max < 0 ? 0 : max)) return kn_rbuf_bad(r, field, "count %u outside [0, %d]", n, max);
    if (n > (r->len - r->pos) / (min_size ? min_size : 1))
        return kn_rbuf_bad(r, field, "count %u does not fit in the %zu bytes left", n, r->len - r->pos);
    *out = (int32_t)n;
    return KN_OK;
}
