/*
 * frontend/onnx/onnx_tensor.c — ONNX TensorProto → kn_tensor: every typed
 * data field, raw_data, external data files (confined to the model's folder),
 * and the loader for standalone tensor files (the node test suite's *.pb).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_import.h"
#include "onnx_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; the importer would need byte swapping on this host"
#endif

/* Largest element count a tensor may declare; matches kn_tensor_alloc's cap
 * so that a shape is rejected up front with a message naming the tensor. */
#define MAX_ELEMS (((int64_t)1 << 40) / 8)

/* Rejects dtypes kiln cannot hold, naming the tensor. */
static int check_dtype(int dt, const char *what)
{
    if (dt == KN_DT_UNDEFINED) return kn_error(KN_ERR_INVALID, "%s has no data_type", what);
    if (kn_dtype_valid(dt)) return KN_OK;
    const char *name = kn_onnx_type_name(dt);
    if (name) return kn_error(KN_ERR_UNSUPPORTED, "%s has dtype %s, which kiln does not support", what, name);
    return kn_error(KN_ERR_UNSUPPORTED, "%s has unknown dtype %d", what, dt);
}

/* Validates rank and dims, returning the element count in *out_n. */
static int check_shape(const Onnx__TensorProto *tp, const char *what, int64_t *out_n)
{
    if (tp->n_dims > KN_MAX_RANK)
        return kn_error(KN_ERR_UNSUPPORTED, "%s has rank %zu, over kiln's maximum of %d", what,
                        tp->n_dims, KN_MAX_RANK);
    for (size_t i = 0; i < tp->n_dims; i++)
        if (tp->dims[i] < 0)
            return kn_error(KN_ERR_INVALID, "%s has negative dim %zu (%lld)", what, i,
                            (long long)tp->dims[i]);
    int64_t n = kn_shape_numel((int)tp->n_dims, tp->dims);
    if (n < 0 || n > MAX_ELEMS)
        return kn_error(KN_ERR_INVALID, "%s has an absurd shape (element count %s)", what,
                        n < 0 ? "overflows" : "is too large");
    *out_n = n;
    return KN_OK;
}

/* ---- external data ------------------------------------------------------ */

typedef struct ext_info {
    const char *location;
    int64_t offset, length; /* length -1: not given */
} ext_info;

static int parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s) return -1;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return 0;
}

static int ext_parse(const Onnx__TensorProto *tp, const char *what, ext_info *e)
{
    e->location = NULL;
    e->offset = 0;
    e->length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const char *k = tp->external_data[i]->key, *v = tp->external_data[i]->value;
        if (!k) continue;
        if (strcmp(k, "location") == 0) e->location = v;
        else if (strcmp(k, "offset") == 0 && parse_i64(v, &e->offset))
            return kn_error(KN_ERR_INVALID, "%s: external data offset '%s' is not a number", what, v ? v : "");
        else if (strcmp(k, "length") == 0 && parse_i64(v, &e->length))
            return kn_error(KN_ERR_INVALID, "%s: external data length '%s' is not a number", what, v ? v : "");
    }
    if (!e->location || !*e->location)
        return kn_error(KN_ERR_INVALID, "%s: external data has no location", what);
    return KN_OK;
}

/* The location must name a file inside base_dir: no absolute path, no ".."
 * component, and (after resolving symlinks) still under base_dir. Returns a
 * malloc'd resolved path. */
static int ext_resolve(const char *base_dir, const char *loc, const char *what, char **out_path)
{
    *out_path = NULL;
    if (loc[0] == '/')
        return kn_error(KN_ERR_INVALID, "%s: external data location '%s' is an absolute path; it must be relative to the model's folder",
                        what, loc);
    for (const char *p = loc; *p;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return kn_error(KN_ERR_INVALID, "%s: external data location '%s' leaves the model's folder", what, loc);
        p += len + (end ? 1 : 0);
    }
    char *base_real = realpath(base_dir, NULL);
    if (!base_real)
        return kn_error(KN_ERR_IO, "%s: model folder '%s': %s", what, base_dir, strerror(errno));
    size_t n = strlen(base_real) + strlen(loc) + 2;
    char *joined = malloc(n);
    if (!joined) {
        free(base_real);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    snprintf(joined, n, "%s/%s", base_real, loc);
    char *real = realpath(joined, NULL);
    int st = KN_OK;
    if (!real) {
        st = kn_error(KN_ERR_IO, "%s: external data file '%s' cannot be opened: %s", what, loc, strerror(errno));
    } else {
        size_t bl = strlen(base_real);
        bool inside = strncmp(real, base_real, bl) == 0 && (real[bl] == '/' || (bl == 1 && base_real[0] == '/'));
        if (!inside)
            st = kn_error(KN_ERR_INVALID, "%s: external data location '%s' resolves outside the model's folder", what, loc);
    }
    free(base_real);
    free(joined);
    if (st) free(real);
    else *out_path = real;
    return st;
}

static int read_exact(int fd, void *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, off + (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

#define NOT_REGULAR (-2)

/* What a path that is not a regular file is, for messages. */
static const char *not_regular(mode_t mode)
{
    return S_ISDIR(mode) ? "it is a directory" : S_ISFIFO(mode) ? "it is a FIFO" : S_ISCHR(mode) ? "it is a character device"
         : S_ISBLK(mode) ? "it is a block device" : S_ISSOCK(mode) ? "it is a socket" : "it is not a regular file";
}

/* Opens path for reading only if it is a regular file: returns the fd, -1
 * with errno set, or NOT_REGULAR with sb->st_mode telling what it is.
 * O_NONBLOCK keeps open() from waiting forever for a FIFO's writer (or a
 * device); fstat on the open fd then checks the very file that will be read. */
static int open_regular(const char *path, struct stat *sb)
{
    memset(sb, 0, sizeof *sb);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return -1;
    if (fstat(fd, sb) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    if (!S_ISREG(sb->st_mode)) {
        close(fd);
        return NOT_REGULAR;
    }
    /* regular files never block; clear the flag so reads behave as usual */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* Allocates *t (shape from tp, nbytes long) and fills it from the external
 * file, after checking that the file holds that many bytes: a hostile shape
 * must not make us allocate before the data is known to exist. */
static int ext_load(const Onnx__TensorProto *tp, const char *what, const char *base_dir, size_t nbytes,
                    kn_tensor *t)
{
    ext_info e;
    int st = ext_parse(tp, what, &e);
    if (st) return st;
    if (!base_dir)
        return kn_error(KN_ERR_INVALID, "%s: external data '%s' but the model was not loaded from a file", what,
                        e.location);
    if (e.length >= 0 && (uint64_t)e.length != nbytes)
        return kn_error(KN_ERR_INVALID, "%s: external data length is %lld bytes, expected %zu for its shape", what,
                        (long long)e.length, nbytes);
    char *path = NULL;
    st = ext_resolve(base_dir, e.location, what, &path);
    if (st) return st;
    struct stat sb;
    int fd = open_regular(path, &sb);
    if (fd < 0) {
        st = kn_error(KN_ERR_IO, "%s: external data file '%s' cannot be read: %s", what, e.location,
                      fd == NOT_REGULAR ? not_regular(sb.st_mode) : strerror(errno));
    } else if ((uint64_t)e.offset > (uint64_t)sb.st_size || nbytes > (uint64_t)sb.st_size - (uint64_t)e.offset) {
        st = kn_error(KN_ERR_IO, "%s: external data file '%s' is too short (%lld bytes; need %zu at offset %lld)", what,
                      e.location, (long long)sb.st_size, nbytes, (long long)e.offset);
    } else if ((st = kn_tensor_alloc(t, (kn_dtype)tp->data_type, (int)tp->n_dims, tp->dims)) != KN_OK) {
        kn_error_prefix("%s: ", what);
    } else if (nbytes && read_exact(fd, t->data, nbytes, (off_t)e.offset)) {
        st = kn_error(KN_ERR_IO, "%s: reading external data file '%s' failed", what, e.location);
    }
    if (fd >= 0) close(fd);
    free(path);
    return st;
}

/* ---- typed fields ------------------------------------------------------- */

static int count_mismatch(const char *what, const char *field, size_t have, int64_t want)
{
    return kn_error(KN_ERR_INVALID, "%s: %s has %zu values, expected %lld for its shape", what, field, have,
                    (long long)want);
}

/* The typed field ONNX uses for dt: its value count and name. */
static size_t typed_count(const Onnx__TensorProto *tp, kn_dtype dt, const char **field)
{
    switch (dt) {
    case KN_F32: *field = "float_data"; return tp->n_float_data;
    case KN_F64: *field = "double_data"; return tp->n_double_data;
    case KN_I64: *field = "int64_data"; return tp->n_int64_data;
    case KN_U32:
    case KN_U64: *field = "uint64_data"; return tp->n_uint64_data;
    case KN_INT4:
    case KN_UINT4: *field = "int32_data (packed 4-bit)"; return tp->n_int32_data;
    default: *field = "int32_data"; return tp->n_int32_data;
    }
}

/* Copies the typed field that ONNX uses for t's dtype into t->data (the
 * counts were checked by the caller; the checks here are a second guard). */
static int load_typed(const Onnx__TensorProto *tp, const char *what, kn_tensor *t, int64_t n)
{
    kn_dtype dt = t->dtype;
    switch (dt) {
    case KN_F32:
        if (tp->n_float_data != (size_t)n) return count_mismatch(what, "float_data", tp->n_float_data, n);
        if (n) memcpy(t->data, tp->float_data, t->nbytes);
        return KN_OK;
    case KN_F64:
        if (tp->n_double_data != (size_t)n) return count_mismatch(what, "double_data", tp->n_double_data, n);
        if (n) memcpy(t->data, tp->double_data, t->nbytes);
        return KN_OK;
    case KN_I64:
        if (tp->n_int64_data != (size_t)n) return count_mismatch(what, "int64_data", tp->n_int64_data, n);
        if (n) memcpy(t->data, tp->int64_data, t->nbytes);
        return KN_OK;
    case KN_U32:
    case KN_U64:
        if (tp->n_uint64_data != (size_t)n) return count_mismatch(what, "uint64_data", tp->n_uint64_data, n);
        for (int64_t i = 0; i < n; i++) kn_store_u64(dt, t->data, (size_t)i, tp->uint64_data[i]);
        return KN_OK;
    case KN_INT4:
    case KN_UINT4: {
        /* int32_data holds the packed bytes, two elements per entry */
        size_t want = t->nbytes;
        if (tp->n_int32_data != want) return count_mismatch(what, "int32_data (packed 4-bit)", tp->n_int32_data, (int64_t)want);
        for (size_t i = 0; i < want; i++) ((uint8_t *)t->data)[i] = (uint8_t)tp->int32_data[i];
        return KN_OK;
    }
    case KN_F16:
    case KN_BF16:
        if (tp->n_int32_data != (size_t)n) return count_mismatch(what, "int32_data", tp->n_int32_data, n);
        for (int64_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = (uint16_t)tp->int32_data[i];
        return KN_OK;
    case KN_BOOL:
        if (tp->n_int32_data != (size_t)n) return count_mismatch(what, "int32_data", tp->n_int32_data, n);
        for (int64_t i = 0; i < n; i++) ((uint8_t *)t->data)[i] = tp->int32_data[i] != 0;
        return KN_OK;
    case KN_I32:
    case KN_I16:
    case KN_I8:
    case KN_U16:
    case KN_U8:
        if (tp->n_int32_data != (size_t)n) return count_mismatch(what, "int32_data", tp->n_int32_data, n);
        for (int64_t i = 0; i < n; i++) kn_store_i64(dt, t->data, (size_t)i, tp->int32_data[i]);
        return KN_OK;
    default:
        return kn_error(KN_ERR_UNSUPPORTED, "%s has dtype %s, which kiln does not support", what, kn_dtype_name(dt));
    }
}

int kn_onnx_tensor_from_proto(const Onnx__TensorProto *tp, const char *what, const char *base_dir,
                              kn_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (tp->segment) return kn_error(KN_ERR_UNSUPPORTED, "%s is a segment of a tensor, which kiln does not support", what);
    int st = check_dtype(tp->has_data_type ? tp->data_type : 0, what);
    if (st) return st;
    int64_t n = 0;
    st = check_shape(tp, what, &n);
    if (st) return st;
    kn_dtype dt = (kn_dtype)tp->data_type;
    size_t nbytes = kn_dtype_nbytes(dt, (size_t)n);
    /* every source is size-checked before the tensor is allocated */
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        st = ext_load(tp, what, base_dir, nbytes, out);
    } else if (tp->has_raw_data) {
        if (tp->raw_data.len != nbytes)
            return kn_error(KN_ERR_INVALID, "%s: raw_data has %zu bytes, expected %zu for %s", what, tp->raw_data.len,
                            nbytes, kn_dtype_name(dt));
        st = kn_tensor_alloc(out, dt, (int)tp->n_dims, tp->dims);
        if (!st && nbytes) memcpy(out->data, tp->raw_data.data, nbytes);
    } else {
        const char *field;
        size_t have = typed_count(tp, dt, &field);
        size_t want = (dt == KN_INT4 || dt == KN_UINT4) ? nbytes : (size_t)n;
        if (have != want) return count_mismatch(what, field, have, (int64_t)want);
        st = kn_tensor_alloc(out, dt, (int)tp->n_dims, tp->dims);
        if (!st) st = load_typed(tp, what, out, n);
    }
    if (!st && out->dtype == KN_BOOL) /* keep bools 0/1 whatever the file held */
        for (size_t i = 0; i < out->nbytes; i++) ((uint8_t *)out->data)[i] = ((uint8_t *)out->data)[i] != 0;
    if (st) kn_tensor_free(out);
    return st;
}

/* ---- files -------------------------------------------------------------- */

int kn_onnx_read_file(const char *path, size_t max_len, uint8_t **out_data, size_t *out_len)
{
    *out_data = NULL;
    *out_len = 0;
    struct stat sb;
    int fd = open_regular(path, &sb);
    if (fd == NOT_REGULAR) return kn_error(KN_ERR_IO, "%s: cannot read: %s", path, not_regular(sb.st_mode));
    if (fd < 0) return kn_error(KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if ((uint64_t)sb.st_size > max_len) {
        close(fd);
        return kn_error(KN_ERR_UNSUPPORTED, "%s: file is %lld bytes, over the %zu-byte protobuf limit (store weights as external data)",
                        path, (long long)sb.st_size, max_len);
    }
    size_t len = (size_t)sb.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return kn_error(KN_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, len);
    }
    int bad = len ? read_exact(fd, buf, len, 0) : 0;
    close(fd);
    if (bad) {
        free(buf);
        return kn_error(KN_ERR_IO, "%s: read failed", path);
    }
    *out_data = buf;
    *out_len = len;
    return KN_OK;
}

/* ---- wire-format sniffing for tensor files ------------------------------ */

static int wire_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= len) return -1;
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* SequenceProto and OptionalProto (onnx-data.proto) share the layout
 * {1: name, 2: elem_type (0-5), 3..7: values} and can half-parse as a
 * TensorProto. Called only after the TensorProto reading failed, to say
 * what the file really holds. */
static bool looks_like_sequence(const uint8_t *p, size_t len)
{
    size_t pos = 0;
    bool has_elem_type = false;
    while (pos < len) {
        uint64_t key, v;
        if (wire_varint(p, len, &pos, &key)) return false;
        unsigned field = (unsigned)(key >> 3), wt = key & 7;
        if (field == 2 && wt == 0) {
            if (wire_varint(p, len, &pos, &v) || v > 5) return false;
            has_elem_type = true;
        } else if (field >= 1 && field <= 7 && field != 2 && wt == 2) {
            if (wire_varint(p, len, &pos, &v) || v > len - pos) return false;
            pos += (size_t)v;
        } else {
            return false;
        }
    }
    return has_elem_type;
}

static int seq_error(const char *path)
{
    return kn_error(KN_ERR_UNSUPPORTED,
                    "%s: holds a SequenceProto or OptionalProto, not a TensorProto; kiln supports only tensors", path);
}

/* Reads a TensorProto from bytes; `name` prefixes messages and base_dir is
 * where external data lives (NULL: refused). */
static int tensor_from_bytes(const uint8_t *buf, size_t len, const char *name, const char *base_dir,
                             kn_tensor *out, char **out_name)
{
    memset(out, 0, sizeof *out);
    if (out_name) *out_name = NULL;
    if (len > KN_ONNX_MAX_PROTO_BYTES)
        return kn_error(KN_ERR_UNSUPPORTED, "%s: %zu bytes is over the 2 GiB protobuf limit", name, len);
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    bool seq = looks_like_sequence(buf, len);
    if (!tp) {
        if (seq) return seq_error(name);
        return kn_error(KN_ERR_INVALID, "%s: not a valid ONNX TensorProto (protobuf parse failed)", name);
    }
    char what[300];
    snprintf(what, sizeof what, "tensor '%.200s'", tp->name ? tp->name : "");
    int st = kn_onnx_tensor_from_proto(tp, what, base_dir, out);
    if (!st && out_name) {
        *out_name = strdup(tp->name ? tp->name : "");
        if (!*out_name) {
            kn_tensor_free(out);
            st = kn_error(KN_ERR_NOMEM, "out of memory");
        }
    }
    onnx__tensor_proto__free_unpacked(tp, NULL);
    if (st && seq) return seq_error(name); /* the tensor reading was nonsense */
    if (st) kn_error_prefix("%s: ", name);
    return st;
}

int kn_onnx_load_tensor_bytes(const void *data, size_t len, kn_tensor *out, char **out_name)
{
    return tensor_from_bytes(data, len, "<memory>", NULL, out, out_name);
}

int kn_onnx_load_tensor_file(const char *path, kn_tensor *out, char **out_name)
{
    memset(out, 0, sizeof *out);
    if (out_name) *out_name = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int st = kn_onnx_read_file(path, KN_ONNX_MAX_PROTO_BYTES, &buf, &len);
    if (st) return st;
    /* external data of a tensor file lives beside it, like a model's */
    char *dir = strdup(path);
    if (!dir) {
        free(buf);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    st = tensor_from_bytes(buf, len, path, slash ? (dir[0] ? dir : "/") : ".", out, out_name);
    free(dir);
    free(buf);
    return st;
}
