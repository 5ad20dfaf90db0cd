/*
 * kiln/status.h — status codes and the thread-local error message.
 *
 * Every kiln function that can fail returns an int status: KN_OK (0) on
 * success, one of the KN_ERR_* codes otherwise. The failing function records
 * a formatted message that names the file, node or argument at fault; the
 * caller reads it with kn_last_error() and may add outer context with
 * kn_error_prefix().
 *
 *     if (x->rank != 4)
 *         return kn_error(KN_ERR_INVALID, "node '%s' (Conv): weight rank %d, expected 4",
 *                         name, x->rank);
 *     ...
 *     int st = kn_something(...);
 *     if (st) { fprintf(stderr, "error: %s\n", kn_last_error()); return 1; }
 */
#ifndef KILN_STATUS_H
#define KILN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KN_OK = 0,
    KN_ERR_INVALID = 1,     /* malformed input: model, tensor, argument */
    KN_ERR_UNSUPPORTED = 2, /* valid but not (yet) handled: op, dtype, mode */
    KN_ERR_IO = 3,          /* file could not be read or written */
    KN_ERR_NOMEM = 4,       /* allocation failed or size overflowed */
    KN_ERR_INTERNAL = 5,    /* a kiln bug: an invariant did not hold */
};

/* Records a printf-style message for the calling thread; returns `code`. */
int kn_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepends printf-style context to the current message ("file.onnx: ..."). */
void kn_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The calling thread's last message; "" if none. Valid until the next error. */
const char *kn_last_error(void);

/* Forgets the calling thread's last message. */
void kn_error_clear(void);

/* A short name for a status code ("invalid", "unsupported", ...). */
const char *kn_status_name(int code);

#ifdef __cplusplus
}
#endif
#endif
