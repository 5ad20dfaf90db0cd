/* Thread-local error messages behind kiln/status.h. */
#include "kiln/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define KN_ERRMSG_MAX 2048

static _Thread_local char tl_msg[KN_ERRMSG_MAX];

int kn_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    va_end(ap);
    return code;
}

void kn_error_prefix(const char *fmt, ...)
{
    char prefix[KN_ERRMSG_MAX];
    char old[KN_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tl_msg, sizeof old);
    /* The end of a message says what went wrong; when context would push it
     * past the buffer, shorten the context instead. */
    size_t pl = strlen(prefix), ol = strlen(old);
    if (pl + ol >= KN_ERRMSG_MAX) {
        size_t keep = ol < KN_ERRMSG_MAX / 2 ? KN_ERRMSG_MAX - 1 - ol - 4 : KN_ERRMSG_MAX / 2;
        if (keep < pl) {
            memcpy(prefix + keep, "... ", 5);
        }
    }
    snprintf(tl_msg, sizeof tl_msg, "%s%s", prefix, old);
}

const char *kn_last_error(void) { return tl_msg; }

void kn_error_clear(void) { tl_msg[0] = '\0'; }

const char *kn_status_name(int code)
{
    switch (code) {
    case 0: return "ok";
    case 1: return "invalid";
    case 2: return "unsupported";
    case 3: return "io";
    case 4: return "out of memory";
    case 5: return "internal";
    default: return "unknown";
    }
}
