/* tools/kiln/qdata.c — calibration data, one sample at a time (qtool.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kiln/npy.h"
#include "qtool.h"

/* A .npy file of stacked samples: its header, parsed just enough to cut it. */
typedef struct stacked {
    char *path;
    int fd;
    char descr[32];
    int rank;                  /* of one sample */
    int64_t dims[KN_MAX_RANK]; /* of one sample */
    int64_t n;                 /* samples */
    size_t sample_bytes;
    off_t data_off;
} stacked;

struct kn_samples {
    int n_in;
    bool dir_mode;
    /* DIR mode: path of input k of sample i is paths[i * n_in + k] */
    char **paths;
    /* stacked mode */
    stacked *files;
    int64_t n;
};

/* ---- DIR mode ------------------------------------------------------------------ */

typedef struct dir_entry {
    int input;
    long long index;
    char *path;
} dir_entry;

static int cmp_entry(const void *a, const void *b)
{
    const dir_entry *x = a, *y = b;
    if (x->index != y->index) return x->index < y->index ? -1 : 1;
    return x->input - y->input;
}

static int open_dir(const char *dir, int n, const char *const *names, kn_samples *s)
{
    DIR *d = opendir(dir);
    if (!d) return kn_error(KN_ERR_IO, "--data %s: %s", dir, strerror(errno));
    char safe[KN_MAX_RANK > 0 ? 512 : 1];
    dir_entry *ents = NULL;
    size_t ne = 0, cap = 0;
    int st = KN_OK;
    struct dirent *de;
    while (!st && (de = readdir(d))) {
        const char *f = de->d_name;
        size_t fl = strlen(f);
        if (fl < 5 || strcmp(f + fl - 4, ".npy")) continue;
        /* the longest input name that fits <name>_<digits>.npy */
        int best = -1;
        size_t best_len = 0;
        long long idx = -1;
        for (int k = 0; k < n; k++) {
            kn_cli_safe_name(names[k], safe, sizeof safe);
            size_t sl = strlen(safe);
            if (sl + 6 > fl || strncmp(f, safe, sl) || f[sl] != '_') continue;
            const char *p = f + sl + 1;
            if (p == f + fl - 4) continue;
            bool digits = true;
            for (const char *q = p; q < f + fl - 4; q++) digits &= *q >= '0' && *q <= '9';
            if (!digits || (f + fl - 4 - p) > 15) continue;
            if (sl >= best_len) best = k, best_len = sl, idx = strtoll(p, NULL, 10);
        }
        if (best < 0) continue;
        if (ne == cap) {
            cap = cap ? cap * 2 : 64;
            dir_entry *e = realloc(ents, sizeof *e * cap);
            if (!e) {
                st = kn_error(KN_ERR_NOMEM, "out of memory");
                break;
            }
            ents = e;
        }
        if (asprintf(&ents[ne].path, "%s/%s", dir, f) < 0) {
            st = kn_error(KN_ERR_NOMEM, "out of memory");
            break;
        }
        ents[ne].input = best;
        ents[ne++].index = idx;
    }
    closedir(d);
    if (!st && ne == 0) {
        kn_cli_safe_name(names[0], safe, sizeof safe);
        st = kn_error(KN_ERR_INVALID, "--data %s: no <input>_<index>.npy files for this model's inputs (e.g. %s_0.npy)",
                      dir, safe);
    }
    if (!st) qsort(ents, ne, sizeof *ents, cmp_entry);
    /* every index must have every input, once */
    if (!st) {
        s->paths = calloc(ne + 1, sizeof *s->paths);
        if (!s->paths) st = kn_error(KN_ERR_NOMEM, "out of memory");
    }
    size_t i = 0;
    while (!st && i < ne) {
        long long index = ents[i].index;
        for (int k = 0; k < n && !st; k++) {
            kn_cli_safe_name(names[k], safe, sizeof safe);
            if (i < ne && ents[i].index == index && ents[i].input == k) {
                s->paths[s->n * n + k] = ents[i].path;
                ents[i++].path = NULL;
                if (i < ne && ents[i].index == index && ents[i].input == k)
                    st = kn_error(KN_ERR_INVALID, "--data %s: sample %lld of input '%s' is given twice (%s)", dir,
                                  index, names[k], ents[i].path);
            } else {
                st = kn_error(KN_ERR_INVALID, "--data %s: sample %lld has no file for input '%s' (%s_%lld.npy)", dir,
                              index, names[k], safe, index);
            }
        }
        s->n++;
    }
    for (size_t j = 0; j < ne; j++) free(ents[j].path);
    free(ents);
    s->dir_mode = true;
    return st;
}

/* ---- stacked mode ---------------------------------------------------------------- */

static int read_exact(int fd, void *buf, size_t n, off_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int open_stacked(const char *path, stacked *f)
{
    f->fd = -1;
    if (!(f->path = strdup(path))) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_cli_check_regular(path);
    if (st) return st;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return kn_error(KN_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char pre[12];
    if (read_exact(f->fd, pre, 12, 0) || memcmp(pre, "\x93NUMPY", 6))
        return kn_error(KN_ERR_INVALID, "%s: not a .npy file", path);
    size_t hlen, hoff;
    if (pre[6] == 1) hlen = pre[8] | (size_t)pre[9] << 8, hoff = 10;
    else if (pre[6] == 2 || pre[6] == 3) hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24, hoff = 12;
    else return kn_error(KN_ERR_INVALID, "%s: .npy version %d is not supported", path, pre[6]);
    if (hlen > 65536) return kn_error(KN_ERR_INVALID, "%s: .npy header of %zu bytes", path, hlen);
    char *h = malloc(hlen + 1);
    if (!h) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (read_exact(f->fd, h, hlen, (off_t)hoff)) {
        free(h);
        return kn_error(KN_ERR_INVALID, "%s: truncated .npy header", path);
    }
    h[hlen] = '\0';
    f->data_off = (off_t)(hoff + hlen);
    const char *d = strstr(h, "'descr': '"), *sh = strstr(h, "'shape': (");
    st = KN_OK;
    if (!d || !sh || strstr(h, "'fortran_order': True"))
        st = kn_error(KN_ERR_INVALID, "%s: expected a C-order .npy array with samples along its first axis", path);
    if (!st) {
        d += 10;
        size_t k = 0;
        while (d[k] && d[k] != '\'' && k + 1 < sizeof f->descr) f->descr[k] = d[k], k++;
        f->descr[k] = '\0';
        long item = k >= 2 ? strtol(f->descr + 2, NULL, 10) : 0;
        if (item <= 0 || item > 16) st = kn_error(KN_ERR_UNSUPPORTED, "%s: dtype '%s'", path, f->descr);
        f->sample_bytes = (size_t)item;
    }
    const char *p = sh ? sh + 10 : NULL;
    int rank = -1; /* counting the sample axis */
    int64_t dims[KN_MAX_RANK + 1];
    while (!st && *p != ')') {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || errno || rank + 1 > KN_MAX_RANK) {
            st = kn_error(KN_ERR_INVALID, "%s: malformed shape in the .npy header", path);
            break;
        }
        dims[++rank] = v;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    free(h);
    if (st) return st;
    if (rank < 0) return kn_error(KN_ERR_INVALID, "%s: a 0-d array has no sample axis", path);
    f->n = dims[0];
    f->rank = rank;
    for (int i = 0; i < rank; i++) {
        f->dims[i] = dims[i + 1];
        if (dims[i + 1] && f->sample_bytes > ((size_t)1 << 40) / (size_t)dims[i + 1])
            return kn_error(KN_ERR_INVALID, "%s: samples too large", path);
        f->sample_bytes *= (size_t)dims[i + 1];
    }
    struct stat sb;
    if (fstat(f->fd, &sb) || (uint64_t)sb.st_size < (uint64_t)f->data_off + (uint64_t)f->n * f->sample_bytes)
        return kn_error(KN_ERR_INVALID, "%s: shorter than its header says", path);
    return KN_OK;
}

/* Sample i of f as a tensor, through kn_npy_parse of a one-sample .npy. */
static int read_stacked(const stacked *f, int64_t i, kn_tensor *out)
{
    char shape[256] = "", hdr[512];
    size_t o = 0;
    for (int k = 0; k < f->rank; k++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%lld,%s", (long long)f->dims[k], k + 1 < f->rank ? " " : "");
    if (f->rank > 1) shape[o - 1] = '\0'; /* numpy writes (a, b) but (a,) */
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", f->descr, shape);
    size_t total = 10 + (size_t)hl + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)hl + pad + 1;
    size_t n = 10 + hlen + f->sample_bytes;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) return kn_error(KN_ERR_NOMEM, "out of memory");
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, hdr, (size_t)hl);
    memset(buf + 10 + hl, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    int st = KN_OK;
    if (read_exact(f->fd, buf + 10 + hlen, f->sample_bytes, f->data_off + (off_t)((size_t)i * f->sample_bytes)))
        st = kn_error(KN_ERR_IO, "%s: cannot read sample %lld", f->path, (long long)i);
    char src[4200];
    snprintf(src, sizeof src, "%s (sample %lld)", f->path, (long long)i);
    if (!st) st = kn_npy_parse(buf, n, src, out);
    free(buf);
    return st;
}

int kn_samples_open(int n_specs, char *const *specs, int n, const char *const *names, kn_samples **out)
{
    *out = NULL;
    kn_samples *s = calloc(1, sizeof *s);
    if (!s) return kn_error(KN_ERR_NOMEM, "out of memory");
    s->n_in = n;
    int st = KN_OK;
    struct stat sb;
    if (n_specs == 1 && stat(specs[0], &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = open_dir(specs[0], n, names, s);
    } else {
        int *idx = calloc((size_t)n_specs + 1, sizeof *idx);
        const char **files = calloc((size_t)n_specs + 1, sizeof *files);
        s->files = calloc((size_t)n + 1, sizeof *s->files);
        for (int k = 0; s->files && k < n; k++) s->files[k].fd = -1;
        if (!idx || !files || !s->files) st = kn_error(KN_ERR_NOMEM, "out of memory");
        if (!st) st = kn_cli_match_inputs("--data", n, names, NULL, n_specs, specs, true, idx, files);
        for (int k = 0; !st && k < n; k++) {
            int given = -1;
            for (int j = 0; j < n_specs; j++)
                if (idx[j] == k) given = j;
            if (given < 0) st = kn_error(KN_ERR_INVALID, "--data: no file for input '%s'", names[k]);
            else st = open_stacked(files[given], &s->files[k]);
            if (!st && k > 0 && s->files[k].n != s->files[0].n)
                st = kn_error(KN_ERR_INVALID, "--data: %s holds %lld samples, %s %lld", files[given],
                              (long long)s->files[k].n, s->files[0].path, (long long)s->files[0].n);
        }
        if (!st) s->n = s->files[0].n;
        free(idx);
        free(files);
    }
    if (!st && s->n == 0) st = kn_error(KN_ERR_INVALID, "--data: no samples");
    if (st) {
        kn_samples_close(s);
        return st;
    }
    *out = s;
    return KN_OK;
}

int64_t kn_samples_count(const kn_samples *s) { return s->n; }

int kn_samples_read(kn_samples *s, int64_t i, kn_tensor *out)
{
    memset(out, 0, sizeof *out * (size_t)s->n_in);
    int st = KN_OK;
    for (int k = 0; !st && k < s->n_in; k++)
        st = s->dir_mode ? kn_npy_read(s->paths[i * s->n_in + k], &out[k]) : read_stacked(&s->files[k], i, &out[k]);
    if (st)
        for (int k = 0; k < s->n_in; k++) kn_tensor_free(&out[k]);
    return st;
}

void kn_samples_close(kn_samples *s)
{
    if (!s) return;
    if (s->paths)
        for (int64_t i = 0; i < s->n * s->n_in; i++) free(s->paths[i]);
    free(s->paths);
    for (int k = 0; s->files && k < s->n_in; k++) {
        if (s->files[k].fd >= 0) close(s->files[k].fd);
        free(s->files[k].path);
    }
    free(s->files);
    free(s);
}

void kn_progress(const char *verb, int64_t i, int64_t n)
{
    if (!isatty(2)) return;
    fprintf(stderr, "\r%s: %lld/%lld samples", verb, (long long)i, (long long)n);
    if (i == n) fprintf(stderr, "\n");
    fflush(stderr);
}
