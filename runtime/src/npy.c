/* numpy .npy reader and writer (see kiln/npy.h). */
#include "kiln/file.h"
#include "kiln/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

/* ---- the header ------------------------------------------------------------
 *
 * The header is the repr() of a Python dict with exactly the keys 'descr' (a
 * dtype string), 'fortran_order' (True or False) and 'shape' (a tuple of
 * non-negative ints), padded with spaces and ending in a newline. It is
 * parsed as that grammar, not searched for substrings: a search for
 * "'shape':" finds it inside another key's string value too, and a file
 * that numpy itself would refuse must not load here. */

/* A cursor over the header bytes; src names the file in messages. */
typedef struct hdr_cur {
    const char *p, *begin, *end;
    const char *src;
} hdr_cur;

/* What the header says. */
typedef struct npy_header {
    kn_dtype dtype;
    char order; /* '<', '>', '|' or '=' */
    bool fortran;
    int rank;
    int64_t dims[KN_MAX_RANK];
} npy_header;

static int malformed(const hdr_cur *c, const char *what)
{
    return kn_error(KN_ERR_INVALID, "%s: malformed .npy header: %s at byte %zu of the header", c->src, what,
                    (size_t)(c->p - c->begin));
}

static void skip_ws(hdr_cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

/* Skips white space, then consumes ch if it is next. */
static bool eat(hdr_cur *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A Python string literal in single or double quotes, without escapes (no
 * key or dtype string numpy writes has one); *out_s points into the header. */
static int parse_str(hdr_cur *c, const char **out_s, size_t *out_len)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return malformed(c, "expected a quoted string");
    char q = *c->p++;
    const char *s = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n' || *c->p == '\0') return malformed(c, "unsupported character in a string");
        c->p++;
    }
    if (c->p >= c->end) return malformed(c, "unterminated string");
    *out_s = s;
    *out_len = (size_t)(c->p - s);
    c->p++;
    return KN_OK;
}

static bool word_is(const char *s, size_t len, const char *w) { return strlen(w) == len && !memcmp(s, w, len); }

static int parse_descr(hdr_cur *c, npy_header *h)
{
    skip_ws(c);
    if (c->p < c->end && (*c->p == '[' || *c->p == '{'))
        return kn_error(KN_ERR_UNSUPPORTED, "%s: structured numpy dtypes are not supported", c->src);
    const char *s;
    size_t len;
    int st = parse_str(c, &s, &len);
    if (st) return st;
    if (len == 3 && strchr("<>|=", s[0]))
        for (size_t i = 0; i < sizeof k_descr / sizeof k_descr[0]; i++)
            if (!memcmp(s + 1, k_descr[i].descr, 2)) {
                h->dtype = k_descr[i].dt;
                h->order = s[0];
                return KN_OK;
            }
    return kn_error(KN_ERR_UNSUPPORTED, "%s: numpy dtype '%.*s' is not supported", c->src, (int)(len < 32 ? len : 32),
                    s);
}

static int parse_bool(hdr_cur *c, bool *out)
{
    skip_ws(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && !memcmp(c->p, "True", 4)) *out = true, c->p += 4;
    else if (left >= 5 && !memcmp(c->p, "False", 5)) *out = false, c->p += 5;
    else return malformed(c, "'fortran_order' is not True or False");
    return KN_OK;
}

/* A non-negative decimal int as Python writes it (no sign, no leading zero). */
static int parse_dim(hdr_cur *c, int64_t *out)
{
    skip_ws(c);
    const char *s = c->p;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int d = *c->p - '0';
        if (v > (INT64_MAX - d) / 10) return malformed(c, "a dimension of the shape is too large");
        v = v * 10 + d;
        c->p++;
    }
    if (c->p == s || (c->p - s > 1 && *s == '0')) return malformed(c, "expected a non-negative integer in the shape");
    *out = v;
    return KN_OK;
}

/* A tuple: "()", "(3,)", "(2, 3)", "(2, 3,)"; "(3)" is an int, not a tuple. */
static int parse_shape(hdr_cur *c, npy_header *h)
{
    if (!eat(c, '(')) return malformed(c, "'shape' is not a tuple");
    h->rank = 0;
    if (eat(c, ')')) return KN_OK;
    for (;;) {
        if (h->rank == KN_MAX_RANK)
            return kn_error(KN_ERR_UNSUPPORTED, "%s: rank above %d", c->src, KN_MAX_RANK);
        int st = parse_dim(c, &h->dims[h->rank++]);
        if (st) return st;
        bool comma = eat(c, ',');
        if (eat(c, ')')) {
            if (h->rank == 1 && !comma) return malformed(c, "'shape' is not a tuple (one dimension needs a comma)");
            return KN_OK;
        }
        if (!comma) return malformed(c, "expected ',' or ')' in the shape");
    }
}

/* The whole dict: each of the three keys exactly once, nothing else. */
static int parse_header(const char *hdr, size_t len, const char *src, npy_header *out)
{
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    hdr_cur c = {.p = hdr, .begin = hdr, .end = hdr + len, .src = src};
    bool seen[3] = {false, false, false};
    memset(out, 0, sizeof *out);
    if (!eat(&c, '{')) return malformed(&c, "expected '{'");
    while (!eat(&c, '}')) {
        const char *k;
        size_t klen;
        int st = parse_str(&c, &k, &klen), key = 0;
        if (st) return st;
        while (key < 3 && !word_is(k, klen, keys[key])) key++;
        if (key == 3)
            return kn_error(KN_ERR_INVALID, "%s: malformed .npy header: unknown key '%.*s'", src,
                            (int)(klen < 64 ? klen : 64), k);
        if (seen[key]) return kn_error(KN_ERR_INVALID, "%s: malformed .npy header: key '%s' given twice", src, keys[key]);
        seen[key] = true;
        if (!eat(&c, ':')) return malformed(&c, "expected ':'");
        st = key == 0 ? parse_descr(&c, out) : key == 1 ? parse_bool(&c, &out->fortran) : parse_shape(&c, out);
        if (st) return st;
        if (eat(&c, ',')) continue;
        if (eat(&c, '}')) break;
        return malformed(&c, "expected ',' or '}'");
    }
    skip_ws(&c);
    if (c.p != c.end) return malformed(&c, "unexpected bytes after the dict");
    for (int k = 0; k < 3; k++)
        if (!seen[k]) return kn_error(KN_ERR_INVALID, "%s: malformed .npy header: no '%s' key", src, keys[k]);
    if (out->fortran)
        return kn_error(KN_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported; save with C order", src);
    return KN_OK;
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
    npy_header h;
    int st = parse_header((const char *)b + off, hlen, source, &h);
    if (st) return st;
    /* the element count and byte size, overflow-checked: the shape comes
     * from the file, and a product that wraps would pass the size check */
    size_t es = kn_dtype_size(h.dtype), data_len = len - off - hlen;
    uint64_t numel = 1;
    for (int i = 0; i < h.rank; i++) {
        uint64_t d = (uint64_t)h.dims[i];
        if (d && numel > (uint64_t)INT64_MAX / d)
            return kn_error(KN_ERR_INVALID, "%s: the shape's element count overflows", source);
        numel *= d;
    }
    if (numel > SIZE_MAX / es || numel * es != data_len)
        return kn_error(KN_ERR_INVALID, "%s: file holds %zu data bytes, shape needs %llu elements of %zu bytes",
                        source, data_len, (unsigned long long)numel, es);
    st = kn_tensor_alloc(out, h.dtype, h.rank, h.dims);
    if (st) return st;
    memcpy(out->data, b + off + hlen, data_len);
    if (h.order == '>' && es > 1) byteswap(out->data, (size_t)numel, es);
    return KN_OK;
}

/* What kind of file st is, for a message saying it is not a regular one. */
static const char *file_kind(const struct stat *st)
{
    if (S_ISDIR(st->st_mode)) return "a directory";
    if (S_ISFIFO(st->st_mode)) return "a FIFO";
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) return "a device";
    if (S_ISSOCK(st->st_mode)) return "a socket";
    return "not a regular file";
}

int kn_npy_read(const char *path, kn_tensor *out)
{
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: opening a FIFO with no writer would wait forever; the
     * fstat below then refuses anything that is not a regular file */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return kn_error(KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return kn_error(KN_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return kn_error(KN_ERR_INVALID, "%s: is %s, not a regular .npy file", path, file_kind(&sb));
    }
    size_t sz = (size_t)sb.st_size;
    void *buf = (uint64_t)sb.st_size < SIZE_MAX ? malloc(sz + 1) : NULL;
    if (!buf) {
        close(fd);
        return kn_error(KN_ERR_NOMEM, "%s: out of memory reading %lld bytes", path, (long long)sb.st_size);
    }
    size_t got = 0;
    int e = 0;
    while (got < sz) {
        ssize_t r = read(fd, (char *)buf + got, sz - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) e = errno;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    int st = got == sz ? kn_npy_parse(buf, sz, path, out)
                       : kn_error(KN_ERR_IO, "%s: short read (%zu of %zu bytes): %s", path, got, sz,
                                  e ? strerror(e) : "the file shrank while it was read");
    free(buf);
    return st;
}

/* Creates a new file beside path, under a name nobody could have planted:
 * a random suffix, opened with O_CREAT|O_EXCL|O_NOFOLLOW so that an
 * existing file or symlink of that name is never opened, let alone
 * followed (a predictable "path.tmp.<pid>" let anyone who can write to the
 * folder point it at any file the user can write). Not mkstemp: its 0600
 * would be the final file's mode; this one gets 0666 less the umask, as
 * fopen would give it. *out_tmp is owned by the caller. */
static int create_temp(const char *path, char **out_tmp, FILE **out_f)
{
    static _Atomic unsigned counter;
    static const char k_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t len = strlen(path) + 16;
    char *tmp = malloc(len);
    if (!tmp) return kn_error(KN_ERR_NOMEM, "out of memory");
    int e = EEXIST;
    for (int attempt = 0; attempt < 100 && e == EEXIST; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec << 20 ^
                     (uint64_t)getpid() << 32 ^ (uint64_t)counter++ * 0xbf58476d1ce4e5b9ull;
        char suffix[9];
        for (int i = 0; i < 8; i++, r /= 62) suffix[i] = k_chars[r % 62];
        suffix[8] = '\0';
        snprintf(tmp, len, "%s.tmp-%s", path, suffix);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            FILE *f = fdopen(fd, "wb");
            if (!f) {
                e = errno;
                close(fd);
                unlink(tmp);
                break;
            }
            *out_tmp = tmp;
            *out_f = f;
            return KN_OK;
        }
        e = errno;
    }
    free(tmp);
    return kn_error(KN_ERR_IO, "%s: cannot create: %s", path, strerror(e));
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
    char *tmp = NULL;
    FILE *f = NULL;
    int st = kn_output_path_check(path);
    if (!st) st = create_temp(path, &tmp, &f);
    if (st) {
        kn_tensor_free(&conv);
        return st;
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
        free(tmp);
        return kn_error(KN_ERR_IO, "%s: write failed: %s", path, strerror(e ? e : EIO));
    }
    free(tmp);
    return KN_OK;
}
