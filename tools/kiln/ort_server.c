/*
 * tools/kiln/ort_server.c — the onnxruntime child of `kiln bench --vs-ort`
 * (see ort_server.h for the protocol and the contract).
 */
#include "ort_server.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln/status.h"

extern char **environ;

/* How long a child that should be exiting (it said EOF, or was told `quit`)
 * gets before it is killed: Python and onnxruntime take some hundred ms to
 * tear down, and nothing here may wait forever. */
enum { KN_ORT_EXIT_GRACE_MS = 5000 };

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* Reaps pid, killing it after grace_ms; returns its wait status, -1 if lost. */
static int reap(pid_t pid, int grace_ms)
{
    int status = -1;
    for (int waited = 0; waited < grace_ms; waited += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0 && errno != EINTR) return -1;
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return status;
}

static void describe_status(int status, char *buf, size_t cap)
{
    if (status == -1) snprintf(buf, cap, "exit status unknown");
    else if (WIFEXITED(status)) snprintf(buf, cap, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "killed by signal %d, %s", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(buf, cap, "wait status %#x", status);
}

/* The end of the child's stderr on one line: the script's last words are
 * its `ort_bench: ...` message (or a traceback's last line). */
static void stderr_tail(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    long start = 0;
    if (fseek(f, 0, SEEK_END) == 0) {
        long end = ftell(f);
        start = end > (long)cap - 1 ? end - ((long)cap - 1) : 0;
        if (fseek(f, start, SEEK_SET) != 0) start = 0, rewind(f);
    }
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* a line cut by the window is dropped whole; trailing blanks go */
    char *nl = start > 0 ? strchr(buf, '\n') : NULL;
    if (nl) memmove(buf, nl + 1, strlen(nl + 1) + 1);
    for (size_t len = strlen(buf); len && strchr(" \t\r\n", buf[len - 1]); len--) buf[len - 1] = '\0';
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
}

static void close_pipes(kn_ort_server *s)
{
    if (s->cmd) fclose(s->cmd);
    if (s->reply) fclose(s->reply);
    s->cmd = s->reply = NULL;
}

/* Stops what is left of the child (grace_ms for it to exit by itself) and
 * restores SIGPIPE; returns the wait status. */
static int stop(kn_ort_server *s, int grace_ms)
{
    close_pipes(s);
    int status = -1;
    if (s->pid > 0) {
        status = reap(s->pid, grace_ms);
        sigaction(SIGPIPE, &s->old_sigpipe, NULL);
    }
    s->pid = 0;
    return status;
}

/* The error for a child that ended with wait status `status` after `what`:
 * its exit status and the end of what it printed. */
static int report(const kn_ort_server *s, int status, const char *what)
{
    char how[96], said[700];
    describe_status(status, how, sizeof how);
    stderr_tail(s->stderr_path, said, sizeof said);
    return kn_error(KN_ERR_IO, "onnxruntime on %s %s (%s)%s%s", s->model, what, how,
                    said[0] ? ": " : ", it printed nothing", said);
}

/* The child misbehaved (`what` says how): reaps it, then reports it. */
static int child_failed(kn_ort_server *s, const char *what) { return report(s, stop(s, KN_ORT_EXIT_GRACE_MS), what); }

/* The next line from the child without its newline (*out_line: free it), or
 * NULL at end of file. */
static char *read_line(kn_ort_server *s, char **out_line, size_t *cap)
{
    ssize_t n = getline(out_line, cap, s->reply);
    if (n < 0) return NULL;
    if (n > 0 && (*out_line)[n - 1] == '\n') (*out_line)[n - 1] = '\0';
    return *out_line;
}

/* Starts `python ort_bench.py MODEL --serve ...` with the pipes and the
 * stderr file as its fds 0, 1 and 2; every other fd of ours is close-on-exec. */
static int spawn(const kn_ort_server_args *a, const char *py, char **argv, kn_ort_server *s)
{
    int to[2] = {-1, -1}, from[2] = {-1, -1}, err = -1, e = 0;
    if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC) ||
        (err = open(a->stderr_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
        e = errno;
    posix_spawn_file_actions_t fa;
    if (!e && !(e = posix_spawn_file_actions_init(&fa))) {
        if (!(e = posix_spawn_file_actions_adddup2(&fa, to[0], 0)) &&
            !(e = posix_spawn_file_actions_adddup2(&fa, from[1], 1)) &&
            !(e = posix_spawn_file_actions_adddup2(&fa, err, 2)))
            e = posix_spawn(&s->pid, py, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
    }
    int ours[] = {to[0], from[1], err};
    for (int i = 0; i < 3; i++)
        if (ours[i] >= 0) close(ours[i]);
    if (!e && (!(s->cmd = fdopen(to[1], "w")) || !(s->reply = fdopen(from[0], "r")))) e = errno;
    if (e) {
        if (!s->cmd && to[1] >= 0) close(to[1]);
        if (!s->reply && from[0] >= 0) close(from[0]);
        close_pipes(s);
        if (s->pid > 0) reap(s->pid, 0);
        s->pid = 0;
        return kn_error(KN_ERR_IO, "cannot start onnxruntime for %s: %s: %s (KILN_PYTHON names the python to use)",
                        a->model, py, strerror(e));
    }
    return KN_OK;
}

int kn_ort_server_start(const kn_ort_server_args *a, kn_ort_server *out_srv)
{
    memset(out_srv, 0, sizeof *out_srv);
    out_srv->model = a->model;
    if (strlen(a->stderr_path) >= sizeof out_srv->stderr_path)
        return kn_error(KN_ERR_INVALID, "onnxruntime on %s: path too long: %s", a->model, a->stderr_path);
    strcpy(out_srv->stderr_path, a->stderr_path);
    const char *py = getenv("KILN_PYTHON");
    char pybuf[4096], script[4096], threads[16], warmup[16];
    if (!py || !*py) {
        snprintf(pybuf, sizeof pybuf, "%s/.venv/bin/python", KILN_SOURCE_DIR);
        py = pybuf;
    }
    snprintf(script, sizeof script, "%s/scripts/ort_bench.py", KILN_SOURCE_DIR);
    snprintf(threads, sizeof threads, "%d", a->threads);
    snprintf(warmup, sizeof warmup, "%d", a->warmup);
    char **argv = calloc(9 + 2 * (size_t)a->n_inputs, sizeof *argv);
    if (!argv) return kn_error(KN_ERR_NOMEM, "out of memory");
    int n = 0;
    char *fixed[] = {(char *)py, script, (char *)a->model, "--serve", "--threads", threads, "--warmup", warmup};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) argv[n++] = fixed[i];
    for (int i = 0; i < a->n_inputs; i++) argv[n++] = "--input", argv[n++] = a->inputs[i];
    int st = spawn(a, py, argv, out_srv);
    free(argv);
    if (st) return st;
    /* a write to a child that died must fail with EPIPE, not kill kiln */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &out_srv->old_sigpipe);
    char *line = NULL;
    size_t cap = 0;
    if (!read_line(out_srv, &line, &cap)) st = child_failed(out_srv, "stopped before it was ready");
    else if (strcmp(line, "ready")) {
        char what[160];
        snprintf(what, sizeof what, "said '%.100s' instead of 'ready'", line);
        st = child_failed(out_srv, what);
    }
    free(line);
    return st;
}

/* Reads n times from a `{"times_ms": [t0, t1, ...]}` reply (json.dumps). */
static bool parse_times(const char *line, int n, double *out_ms)
{
    static const char head[] = "{\"times_ms\": [";
    if (strncmp(line, head, sizeof head - 1)) return false;
    const char *p = line + sizeof head - 1;
    for (int i = 0; i < n; i++) {
        char *end;
        out_ms[i] = strtod(p, &end);
        if (end == p || !(out_ms[i] >= 0) || *end != (i + 1 < n ? ',' : ']')) return false;
        p = end + 1;
    }
    return !strcmp(p, "}");
}

int kn_ort_server_run(kn_ort_server *srv, int n, double *out_ms)
{
    char what[160];
    if (!srv->pid) return kn_error(KN_ERR_INTERNAL, "onnxruntime on %s: the server is not running", srv->model);
    if (fprintf(srv->cmd, "run %d\n", n) < 0 || fflush(srv->cmd) != 0) {
        snprintf(what, sizeof what, "could not be sent 'run %d' (%s)", n, strerror(errno));
        return child_failed(srv, what);
    }
    char *line = NULL;
    size_t cap = 0;
    int st = KN_OK;
    if (!read_line(srv, &line, &cap)) {
        snprintf(what, sizeof what, "stopped during 'run %d'", n);
        st = child_failed(srv, what);
    } else if (!parse_times(line, n, out_ms)) {
        snprintf(what, sizeof what, "answered 'run %d' with '%.100s'", n, line);
        st = child_failed(srv, what);
    }
    free(line);
    return st;
}

int kn_ort_server_finish(kn_ort_server *srv)
{
    if (!srv->pid) return KN_OK;
    /* a failed write shows up as the exit status below */
    if (fputs("quit\n", srv->cmd) >= 0) fflush(srv->cmd);
    int status = stop(srv, KN_ORT_EXIT_GRACE_MS);
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return KN_OK;
    return report(srv, status, "failed on 'quit'");
}

void kn_ort_server_abort(kn_ort_server *srv) { stop(srv, 0); }
