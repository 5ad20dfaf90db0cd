/*
 * runtime/src/file.c — the output path check (kiln/file.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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
