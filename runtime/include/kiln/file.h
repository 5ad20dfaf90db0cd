/*
 * kiln/file.h — what every writer of kiln's output files checks first.
 *
 * kiln writes an output whole, under a temporary name beside it, and
 * renames it into place: a failed write never leaves half a file. Renaming
 * over a device, a FIFO or a socket would replace that node itself (run as
 * root, `-o /dev/null` would leave /dev/null a regular file), so such paths
 * are refused instead.
 *
 *     if (kn_output_path_check(path)) return ...;   // error names the path
 *     if (kn_write_file_atomic(path, bytes, n)) ...;  // the whole file or none
 */
#include <stddef.h>
#ifndef KILN_FILE_H
#define KILN_FILE_H

#ifdef __cplusplus
extern "C" {
#endif

/* KN_OK if path does not exist or is a regular file or a symbolic link;
 * otherwise KN_ERR_INVALID naming the path and what it is. */
int kn_output_path_check(const char *path);

/* Writes len bytes to path whole: a temporary file beside it (mode 0666
 * less the umask), synced, renamed into place. On failure no temporary is
 * left and an existing path is untouched; the error names the path. Checks
 * path with kn_output_path_check first. */
int kn_write_file_atomic(const char *path, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
