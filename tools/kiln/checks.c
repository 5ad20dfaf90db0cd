/* The checks every verb makes on what the command line names (cli.h):
 * numeric flags parsed whole and in range, input files that must be regular
 * files, and output paths that must not be an input or another output. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/file.h"
#include "cli.h"

bool kn_cli_parse_int(const char *verb, const char *flag, const char *s, long long min, long long max, int *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* strtoll skips leading white space and takes a sign: neither belongs in a count */
    bool ok = *s >= '0' && *s <= '9' && end != s && !*end && !errno && v >= min && v <= max;
    if (ok) {
        *out = (int)v;
        return true;
    }
    char want[96], upto[48] = "";
    if (max < INT_MAX) snprintf(upto, sizeof upto, " up to %lld", max);
    if (min == 1) snprintf(want, sizeof want, "a positive integer%s", upto);
    else if (min == 0) snprintf(want, sizeof want, "a non-negative integer%s", upto);
    else snprintf(want, sizeof want, "an integer from %lld to %lld", min, max);
    fprintf(stderr, "kiln %s: %s: expected %s, got '%s'\n", verb, flag, want, s);
    return false;
}

bool kn_cli_needs_value(const char *verb, int i, int argc, char **argv)
{
    if (i + 1 < argc) return true;
    fprintf(stderr, "kiln %s: %s needs a value\n", verb, argv[i]);
    return false;
}

static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int kn_cli_check_regular(const char *path)
{
    struct stat sb;
    /* stat, not open: opening a FIFO waits for a writer */
    if (stat(path, &sb) != 0) return kn_error(KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return kn_error(KN_ERR_INVALID, "%s: is %s, not a regular file", path, file_kind(sb.st_mode));
    return KN_OK;
}

/* The absolute path without symlinks that `path` names: realpath() of the
 * whole when it exists, else of its folder followed by its last component
 * (an output that is not there yet). NULL if neither resolves. Owned by the
 * caller. */
static char *resolve(const char *path)
{
    char *r = realpath(path, NULL);
    if (r) return r;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) return NULL;
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    char *rdir = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!rdir) return NULL;
    size_t len = strlen(rdir) + strlen(base) + 2;
    char *out = malloc(len);
    if (out) snprintf(out, len, "%s%s%s", rdir, strcmp(rdir, "/") ? "/" : "", base);
    free(rdir);
    return out;
}

bool kn_cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    /* two existing names: the same file, hard links and symlinks included */
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ra = resolve(a), *rb = resolve(b);
    bool same = ra && rb ? !strcmp(ra, rb) : !strcmp(a, b);
    free(ra);
    free(rb);
    return same;
}

int kn_cli_check_distinct(const kn_cli_file *files, int n)
{
    for (int i = 0; i < n; i++) {
        if (!files[i].output || !files[i].path) continue;
        for (int j = 0; j < n; j++) {
            if (j == i || !files[j].path || (files[j].output && j > i)) continue;
            if (!kn_cli_same_file(files[i].path, files[j].path)) continue;
            if (files[j].output)
                return kn_error(KN_ERR_INVALID, "%s '%s' and %s '%s' name the same file: each output needs its own path",
                                files[j].arg, files[j].path, files[i].arg, files[i].path);
            return kn_error(KN_ERR_INVALID, "%s '%s' names the same file as %s '%s': refusing to overwrite an input",
                            files[i].arg, files[i].path, files[j].arg, files[j].path);
        }
    }
    return KN_OK;
}

/* "a, b, c" (the first names that fit in len) for messages. */
static void join_names(int n, const char *const *names, const bool *required, char *buf, size_t len)
{
    size_t u = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (required && !required[i]) continue;
        int w = snprintf(buf + u, len - u, "%s%s", u ? ", " : "", names[i]);
        if (w < 0 || (size_t)w >= len - u) {
            snprintf(buf + (len > 5 ? len - 5 : 0), len > 5 ? 5 : len, "...");
            return;
        }
        u += (size_t)w;
    }
    if (!u) snprintf(buf, len, "none");
}

int kn_cli_match_inputs(const char *what, int n, const char *const *names, const bool *required, int n_specs,
                        char *const *specs, bool allow_bare, int *out_idx, const char **out_file)
{
    char list[1024];
    int n_required = 0, only = -1;
    for (int i = 0; i < n; i++)
        if (!required || required[i]) n_required++, only = i;
    for (int k = 0; k < n_specs; k++) {
        const char *spec = specs[k];
        /* the longest input name followed by '=': names may hold '=' too */
        int idx = -1;
        size_t best = 0;
        for (int i = 0; i < n; i++) {
            size_t l = strlen(names[i]);
            if (l >= best && !strncmp(spec, names[i], l) && spec[l] == '=') idx = i, best = l;
        }
        const char *eq = strchr(spec, '=');
        if (idx < 0 && !eq) {
            if (!allow_bare || n_specs != 1 || n_required != 1) {
                join_names(n, names, required, list, sizeof list);
                return kn_error(KN_ERR_INVALID, "--input '%s': give it as NAME=FILE.npy (the model's inputs: %s)",
                                spec, list);
            }
            idx = only;
        } else if (idx < 0) {
            join_names(n, names, required, list, sizeof list);
            return kn_error(KN_ERR_INVALID, "%s: the model has no input named '%.*s' (its inputs: %s)", what,
                            (int)(eq - spec), spec, list);
        }
        const char *file = eq ? spec + best + 1 : spec; /* bare: the whole spec is the file */
        if (!*file) return kn_error(KN_ERR_INVALID, "--input '%s': no file after '='", spec);
        for (int j = 0; j < k; j++)
            if (out_idx[j] == idx)
                return kn_error(KN_ERR_INVALID, "--input %s is given twice ('%s' and '%s'): give each input once",
                                names[idx], specs[j], spec);
        out_idx[k] = idx;
        out_file[k] = file;
    }
    return KN_OK;
}

int kn_cli_create_beside(const char *path, char **out_tmp, FILE **out_f)
{
    int st0 = kn_output_path_check(path);
    if (st0) return st0;
    *out_tmp = NULL;
    *out_f = NULL;
    size_t len = strlen(path) + 16;
    char *tmp = malloc(len);
    if (!tmp) return kn_error(KN_ERR_NOMEM, "out of memory");
    snprintf(tmp, len, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    FILE *f = NULL;
    if (fd >= 0) {
        /* mkstemp's 0600 would stay the file's mode: give it fopen's */
        mode_t mask = umask(0);
        umask(mask);
        if (fchmod(fd, 0666 & ~mask) != 0 || !(f = fdopen(fd, "w"))) {
            int e = errno;
            close(fd);
            unlink(tmp);
            errno = e;
        }
    }
    if (!f) {
        int st = kn_error(KN_ERR_IO, "%s: cannot be written: %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    *out_tmp = tmp;
    *out_f = f;
    return KN_OK;
}

int kn_cli_commit_file(char *tmp, FILE *f, const char *path, bool ok)
{
    int e = ok ? 0 : EIO;
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) unlink(tmp);
    free(tmp);
    return e ? kn_error(KN_ERR_IO, "%s: cannot be written: %s", path, strerror(e)) : KN_OK;
}
