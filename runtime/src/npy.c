/* numpy .npy reader and writer (see kiln/npy.h). */
#include "kiln/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/status.h"

static const struct {
    const char *descr; /* without byte-order character */
    kn_dtype dt;
} k_descr[] = {
    {"f4", KN_F32}, {"f8", KN_F64}, {"f2", KN_F16}, {"i1", KN_I8},  {"u1", KN_U8},
    {"i2", KN_I16}, {"u2", KN_U16}, {"i4", KN_I32}, {"u4", KN_U32}, {"i8", KN_I64},
    {"u8", KN_U64}, {"b1", KN_BOOL},
};

/* Finds `'key':` in the header dict and returns a pointer past the colon. */
static const char *dict_value(const char *hdr, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p) return NULL;
    p = strchr(p + strlen(pat), ':');
    if (!p) return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

static void byteswap(void *data, size_t n, size_t es)
{
    unsigned char *p = data;
    for (size_t i = 0; i < n; i++, p += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

int kn_npy_parse(const void *data, size_t len, const char *source, kn_tensor *out)
{
    const unsigned char *b = data;
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return kn_error(KN_ERR_INVALID, "%s: not a .npy file (bad magic)", source);
    size_t hlen, off;
    if (b[6] == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        off = 10;
    } else if (b[6] == 2 || b[6] == 3) {
        if (len < 12) return kn_error(KN_ERR_INVALID, "%s: truncated .npy header", source);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        off = 12;
    } else {
        return kn_error(KN_ERR_UNSUPPORTED, "%s: .npy format version %d is not supported", source, b[6]);
    }
    if (hlen > len - off) return kn_error(KN_ERR_INVALID, "%s: truncated .npy header", source);
    char *hdr = malloc(hlen + 1);
    if (!hdr) return kn_error(KN_ERR_NOMEM, "out of memory");
    memcpy(hdr, b + off, hlen);
    hdr[hlen] = '\0';
    int st = KN_OK;
    const char *d = dict_value(hdr, "descr");
    const char *fo = dict_value(hdr, "fortran_order");
    const char *sh = dict_value(hdr, "shape");
    /* d[1] too: the dtype code is read from d + 2 on */
    if (!d || !fo || !sh || *d != '\'' || !d[1] || *sh != '(') {
        st = kn_error(KN_ERR_INVALID, "%s: malformed .npy header", source);
        goto out;
    }
    if (strncmp(fo, "True", 4) == 0) {
        st = kn_error(KN_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported; save with C order", source);
        goto out;
    }
    char order = d[1];
    const char *code = d + 2;
    kn_dtype dt = KN_DT_UNDEFINED;
    for (size_t i = 0; i < sizeof k_descr / sizeof k_descr[0]; i++)
        if (strncmp(code, k_descr[i].descr, 2) == 0 && code[2] == '\'') dt = k_descr[i].dt;
    if (!dt || (order != '<' && order != '>' && order != '|' && order != '=')) {
        const char *end = strchr(d + 1, '\'');
        st = kn_error(KN_ERR_UNSUPPORTED, "%s: numpy dtype %.*s is not supported", source,
                      end ? (int)(end - d + 1) : 8, d);
        goto out;
    }
    int64_t dims[KN_MAX_RANK];
    int rank = 0;
    const char *p = sh + 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0) {
            st = kn_error(KN_ERR_INVALID, "%s: malformed shape in .npy header", source);
            goto out;
        }
        if (rank == KN_MAX_RANK) {
            st = kn_error(KN_ERR_UNSUPPORTED, "%s: rank above %d", source, KN_MAX_RANK);
            goto out;
        }
        dims[rank++] = v;
        p = end;
    }
    int64_t numel = kn_shape_numel(rank, dims);
    size_t es = kn_dtype_size(dt);
    if (numel < 0 || (uint64_t)numel > (len - off - hlen) / es) {
        st = kn_error(KN_ERR_INVALID, "%s: file holds %zu data bytes, shape needs %lld elements of %zu bytes",
                      source, len - off - hlen, (long long)numel, es);
        goto out;
    }
    st = kn_tensor_alloc(out, dt, rank, dims);
    if (st) goto out;
    memcpy(out->data, b + off + hlen, (size_t)numel * es);
    if (order == '>' && es > 1) byteswap(out->data, (size_t)numel, es);
out:
    free(hdr);
    return st;
}

int kn_npy_read(const char *path, kn_tensor *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return kn_error(KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return kn_error(KN_ERR_IO, "%s: cannot seek", path);
    }
    long sz = ftell(f);
    rewind(f);
    if (sz < 0) {
        fclose(f);
        return kn_error(KN_ERR_IO, "%s: cannot tell size", path);
    }
    void *buf = malloc((size_t)sz + 1);
    if (!buf) {
        fclose(f);
        return kn_error(KN_ERR_NOMEM, "%s: out of memory reading %ld bytes", path, sz);
    }
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    int st = got == (size_t)sz ? kn_npy_parse(buf, (size_t)sz, path, out)
                               : kn_error(KN_ERR_IO, "%s: short read", path);
    free(buf);
    return st;
}

int kn_npy_write(const char *path, const kn_tensor *t)
{
    kn_tensor conv = {0};
    const kn_tensor *src = t;
    const char *descr = kn_dtype_info(t->dtype)->np_name;
    /* Types numpy cannot hold are widened to the nearest type it can. */
    if (t->dtype == KN_BF16 || t->dtype == KN_INT4 || t->dtype == KN_UINT4) {
        kn_dtype to = t->dtype == KN_BF16 ? KN_F32 : t->dtype == KN_INT4 ? KN_I8 : KN_U8;
        int st = kn_tensor_alloc(&conv, to, t->rank, t->dims);
        if (st) return st;
        int64_t n = kn_tensor_numel(t);
        for (int64_t i = 0; i < n; i++)
            if (to == KN_F32) kn_store_f64(to, conv.data, (size_t)i, kn_load_f64(t->dtype, t->data, (size_t)i));
            else kn_store_i64(to, conv.data, (size_t)i, kn_load_i64(t->dtype, t->data, (size_t)i));
        src = &conv;
        descr = kn_dtype_info(to)->np_name;
    }
    if (!descr) return kn_error(KN_ERR_UNSUPPORTED, "%s: dtype %s cannot be written as .npy", path, kn_dtype_name(t->dtype));
    char shape[KN_MAX_RANK * 24 + 8];
    size_t u = (size_t)snprintf(shape, sizeof shape, "(");
    for (int i = 0; i < src->rank; i++)
        u += (size_t)snprintf(shape + u, sizeof shape - u, "%lld,%s", (long long)src->dims[i],
                              i + 1 < src->rank ? " " : "");
    snprintf(shape + u, sizeof shape - u, ")");
    char hdr[512];
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    /* pad so that data starts at a multiple of 64 bytes, header ends in \n */
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    for (int i = 0; i < pad; i++) hdr[hl++] = ' ';
    hdr[hl++] = '\n';
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        kn_tensor_free(&conv);
        return kn_error(KN_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    }
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
    size_t nbytes = kn_dtype_nbytes(src->dtype, (size_t)kn_tensor_numel(src));
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)hl, f) == (size_t)hl &&
              (nbytes == 0 || fwrite(src->data, 1, nbytes, f) == nbytes);
    ok = (fclose(f) == 0) && ok;
    kn_tensor_free(&conv);
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return kn_error(KN_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return KN_OK;
}
