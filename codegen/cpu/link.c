/*
 * codegen/cpu/link.c — turning the emitted object into an artifact: `cc
 * -shared` for a .so, `ar rcs` for a .a, run with posix_spawnp (no shell, so
 * paths need no quoting) with stderr captured for the error message; and the
 * temporary-then-rename discipline that keeps a failed compile from leaving
 * any output file behind.
 */
#include "kiln/file.h"
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- atomic outputs -------------------------------------------------------- */

/* Each temporary lives alone in a folder of its own, made with mkdtemp
 * beside the final path (rename() needs the same file system): the folder
 * is new, mode 0700 and randomly named, so nothing can be planted in it.
 * A predictable name beside the final path (it was "final.tmp-kiln-<pid>-<n>")
 * let anyone who can write to that folder plant a symlink there that the
 * linker, ar or fopen then followed, overwriting any file the user can
 * write. The file itself keeps the final name's base, so the linker and
 * ar see the name the user chose. */
int kn_outset_add(kn_outset *s, const char *final, const char **out_tmp)
{
    if (s->n >= (int)(sizeof s->tmp / sizeof s->tmp[0]))
        return kn_error(KN_ERR_INTERNAL, "too many output files");
    int st0 = kn_output_path_check(final);
    if (st0) return st0;
    const char *slash = strrchr(final, '/');
    const char *base = slash ? slash + 1 : final;
    if (!*base) return kn_error(KN_ERR_INVALID, "'%s' is not a file name", final);
    size_t len = 2 * strlen(final) + 32;
    char *tmp = malloc(len), *fin = strdup(final);
    if (!tmp || !fin) {
        free(tmp);
        free(fin);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, len, "%s.kiln-XXXXXX", final);
    if (!mkdtemp(tmp)) {
        int st = kn_error(KN_ERR_IO, "%s: cannot be written: cannot create a temporary folder beside it: %s", final,
                          strerror(errno));
        free(tmp);
        free(fin);
        return st;
    }
    size_t dl = strlen(tmp);
    snprintf(tmp + dl, len - dl, "/%s", base);
    s->tmp[s->n] = tmp;
    s->final[s->n] = fin;
    s->n++;
    *out_tmp = tmp;
    return KN_OK;
}

/* Removes temporary i's file (if still there) and its private folder. */
static void remove_tmp(kn_outset *s, int i)
{
    unlink(s->tmp[i]);
    char *slash = strrchr(s->tmp[i], '/');
    *slash = '\0';
    rmdir(s->tmp[i]);
    *slash = '/';
}

static void outset_free(kn_outset *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->tmp[i]);
        free(s->final[i]);
    }
    s->n = 0;
}

void kn_outset_abort(kn_outset *s)
{
    for (int i = 0; i < s->n; i++) remove_tmp(s, i);
    outset_free(s);
}

int kn_outset_commit(kn_outset *s)
{
    for (int i = 0; i < s->n; i++) {
        if (rename(s->tmp[i], s->final[i]) != 0) {
            int e = errno;
            /* the ones already renamed are complete files; remove them too so
             * a failed compile leaves nothing half-consistent behind */
            for (int j = 0; j < i; j++) unlink(s->final[j]);
            int st = kn_error(KN_ERR_IO, "%s: cannot be written: %s", s->final[i], strerror(e));
            for (int j = i; j < s->n; j++) remove_tmp(s, j);
            outset_free(s);
            return st;
        }
        remove_tmp(s, i); /* the file is gone: this removes the folder */
    }
    outset_free(s);
    return KN_OK;
}

/* ---- running a tool ---------------------------------------------------------- */

/* Runs argv[0] (looked up on PATH) and waits; on failure the message holds
 * the tool's stderr. */
static int run_tool(char *const *argv, const char *what)
{
    int pipefd[2];
    if (pipe(pipefd) != 0) return kn_error(KN_ERR_IO, "%s: cannot create a pipe: %s", what, strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, pipefd[1]);
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (e != 0) {
        close(pipefd[0]);
        if (e == ENOENT)
            return kn_error(KN_ERR_UNSUPPORTED, "%s: '%s' was not found on PATH; kiln needs it to build the artifact",
                            what, argv[0]);
        return kn_error(KN_ERR_IO, "%s: cannot run '%s': %s", what, argv[0], strerror(e));
    }
    char msg[2048];
    size_t len = 0;
    for (;;) {
        char buf[512];
        ssize_t got = read(pipefd[0], buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        size_t take = (size_t)got < sizeof msg - 1 - len ? (size_t)got : sizeof msg - 1 - len;
        memcpy(msg + len, buf, take);
        len += take;
    }
    close(pipefd[0]);
    msg[len] = '\0';
    while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' ')) msg[--len] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return kn_error(KN_ERR_IO, "%s: waiting for '%s': %s", what, argv[0], strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return KN_OK;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return kn_error(KN_ERR_UNSUPPORTED, "%s: '%s' could not be run: %s", what, argv[0], msg);
    return kn_error(KN_ERR_IO, "%s: '%s' failed (%s %d)%s%s", what, argv[0],
                    WIFEXITED(status) ? "exit status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), len ? ": " : "", msg);
}

int kn_link_shared(const char *obj, const char *out)
{
    /* KILN_CC lets a build without `cc` name its compiler driver */
    const char *cc = getenv("KILN_CC");
    char *argv[] = {(char *)(cc && *cc ? cc : "cc"), "-shared", "-o", (char *)out, (char *)obj, "-lm", NULL};
    return run_tool(argv, "linking the shared artifact");
}

int kn_link_static(const char *obj, const char *out)
{
    unlink(out); /* ar appends to an existing archive */
    char *argv[] = {"ar", "rcs", (char *)out, (char *)obj, NULL};
    return run_tool(argv, "archiving the static artifact");
}
