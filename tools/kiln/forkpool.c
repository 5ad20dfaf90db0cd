/* tools/kiln/forkpool.c — jobs in forked children with a pipe each, polled
 * by the parent, killed at their deadline. See forkpool.h. */
#include "forkpool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX 8192

typedef struct slot {
    pid_t pid;       /* 0: free */
    int fd;          /* read end; -1 once the child closed it */
    int index;
    int64_t deadline; /* ms on the monotonic clock; INT64_MAX: none */
    size_t used;
    char buf[ANSWER_MAX];
} slot;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *kn_forkpool_signal_name(int sig, char *buf, size_t len)
{
    static const struct {
        int sig;
        const char *name;
    } k_names[] = {
        {SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGILL, "SIGILL"},   {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGALRM, "SIGALRM"},
        {SIGPIPE, "SIGPIPE"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},   {SIGINT, "SIGINT"},
    };
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (k_names[i].sig == sig) return k_names[i].name;
    snprintf(buf, len, "signal %d", sig);
    return buf;
}

/* Never returns: the child's side of one job. */
static void run_child(const kn_forkpool *p, int index, int fd)
{
    p->child(index, fd, p->ctx);
    fflush(NULL);
    exit(0);
}

static int start(const kn_forkpool *p, slot *s, int index)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    if (p->before) p->before(index, p->ctx);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        run_child(p, index, fds[1]);
    }
    close(fds[1]);
    *s = (slot){.pid = pid, .fd = fds[0], .index = index,
                .deadline = p->timeout_s > 0 ? now_ms() + (int64_t)p->timeout_s * 1000 : INT64_MAX};
    return 0;
}

/* Reports a child that waitpid says has ended, and frees its slot. */
static void report(const kn_forkpool *p, slot *s, int status, bool timed_out)
{
    if (s->fd >= 0) close(s->fd);
    s->buf[s->used] = '\0';
    kn_forkpool_result r = {.index = s->index, .answer = s->buf, .answer_len = s->used};
    if (timed_out) r.end = KN_FORKPOOL_TIMEOUT, r.code = SIGKILL;
    else if (WIFSIGNALED(status)) r.end = KN_FORKPOOL_SIGNALED, r.code = WTERMSIG(status);
    else r.end = KN_FORKPOOL_EXITED, r.code = WEXITSTATUS(status);
    s->pid = 0;
    s->fd = -1;
    p->done(&r, p->ctx);
}

/* Reads what is there; at end of file closes the read end. Text past
 * ANSWER_MAX is read and dropped so that the child never blocks on a full
 * pipe. */
static void drain(slot *s)
{
    char scratch[4096];
    for (;;) {
        size_t room = ANSWER_MAX - 1 - s->used;
        char *dst = room ? s->buf + s->used : scratch;
        ssize_t got = read(s->fd, dst, room ? room : sizeof scratch);
        if (got < 0 && errno == EINTR) continue;
        if (got > 0) {
            if (room) s->used += (size_t)got;
            return; /* poll again before blocking */
        }
        close(s->fd);
        s->fd = -1;
        return;
    }
}

/* One round: waits for output, an exit or a deadline, and handles it.
 * Returns the number of jobs that ended. */
static int step(const kn_forkpool *p, slot *slots, int n_slots, struct pollfd *pfd, int *map)
{
    int np = 0, ended = 0;
    int64_t now = now_ms(), wait = -1;
    for (int i = 0; i < n_slots; i++) {
        slot *s = &slots[i];
        if (!s->pid) continue;
        if (now >= s->deadline) {
            kill(s->pid, SIGKILL);
            int status;
            while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {}
            report(p, s, status, true);
            ended++;
            continue;
        }
        int64_t left = s->deadline == INT64_MAX ? -1 : s->deadline - now;
        if (s->fd >= 0) pfd[np] = (struct pollfd){.fd = s->fd, .events = POLLIN}, map[np++] = i;
        else left = left < 0 || left > 10 ? 10 : left; /* closed its pipe, not yet gone: look again soon */
        if (left >= 0 && (wait < 0 || left < wait)) wait = left;
    }
    if (ended) return ended;
    if (poll(pfd, (nfds_t)np, (int)wait) < 0 && errno != EINTR) return 0;
    for (int k = 0; k < np; k++)
        if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) drain(&slots[map[k]]);
    for (int i = 0; i < n_slots; i++) {
        slot *s = &slots[i];
        int status;
        if (s->pid && s->fd < 0 && waitpid(s->pid, &status, WNOHANG) == s->pid) {
            report(p, s, status, false);
            ended++;
        }
    }
    return ended;
}

int kn_forkpool_run(const kn_forkpool *p, int n)
{
    int jobs = p->jobs < 1 ? 1 : p->jobs;
    if (jobs > n) jobs = n > 0 ? n : 1;
    slot *slots = calloc((size_t)jobs, sizeof *slots);
    struct pollfd *pfd = calloc((size_t)jobs, sizeof *pfd);
    int *map = calloc((size_t)jobs, sizeof *map);
    if (!slots || !pfd || !map) {
        free(slots), free(pfd), free(map);
        errno = ENOMEM;
        return -1;
    }
    int next = 0, active = 0, rc = 0, err = 0;
    while (next < n || active > 0) {
        for (int i = 0; i < jobs && next < n && !rc; i++) {
            if (slots[i].pid) continue;
            if (start(p, &slots[i], next) != 0) {
                err = errno;
                rc = -1; /* start no more; finish the ones running */
                break;
            }
            next++;
            active++;
        }
        if (rc) next = n;
        if (active) active -= step(p, slots, jobs, pfd, map);
    }
    free(slots);
    free(pfd);
    free(map);
    if (rc) errno = err;
    return rc;
}
