/*
 * runtime/src/file.c — the output path check (kiln/file.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/file.h"
#include "kiln/status.h"

int kn_output_path_check(const char *path)
{
    struct stat sb;
    if (!path || !*path) return kn_error(KN_ERR_INVALID, "empty output path");
    if (lstat(path, &sb) != 0) return KN_OK; /* does not exist (or the write will say why) */
    if (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) return KN_OK;
    const char *what = S_ISDIR(sb.st_mode)   ? "a folder"
                       : S_ISCHR(sb.st_mode) ? "a character device"
                       : S_ISBLK(sb.st_mode) ? "a block device"
                       : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                              : "not a regular file";
    return kn_error(KN_ERR_INVALID,
                    "%s: is %s; kiln writes an output under a temporary name and renames it into place, which would "
                    "replace it (give a file path)",
                    path, what);
}

int kn_write_file_atomic(const char *path, const void *data, size_t len)
{
    int st = kn_output_path_check(path);
    if (st) return st;
    size_t tlen = strlen(path) + 16;
    char *tmp = malloc(tlen);
    if (!tmp) return kn_error(KN_ERR_NOMEM, "out of memory");
    /* beside path, since rename() cannot cross file systems */
    snprintf(tmp, tlen, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = kn_error(KN_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    /* mkstemp makes 0600; an output is an ordinary file */
    mode_t um = umask(0);
    umask(um);
    bool ok = fchmod(fd, 0666 & ~um) == 0;
    const char *p = data;
    while (ok && len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            ok = false;
            break;
        }
        p += w, len -= (size_t)w;
    }
    ok = ok && fsync(fd) == 0;
    int e = ok ? 0 : errno;
    if (close(fd) != 0 && ok) ok = false, e = errno;
    if (ok && rename(tmp, path) != 0) ok = false, e = errno;
    if (!ok) {
        unlink(tmp);
        st = kn_error(KN_ERR_IO, "%s: cannot write: %s", path, strerror(e ? e : EIO));
    }
    free(tmp);
    return st;
}
