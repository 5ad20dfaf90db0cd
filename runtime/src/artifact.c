/*
 * runtime/src/artifact.c — loading a compiled model: check that a shared
 * artifact is a whole ELF file (dlopen maps it and would die of SIGBUS on
 * a truncated one, or block on a FIFO), dlopen it (or wrap a static one's
 * descriptor), then check everything the
 * runtime will trust before any generated code runs: magic, ABI version,
 * the serialized meta, the CPU features the code was compiled for, the
 * weights (embedded or an external file mmapped read-only, hashed either
 * way: kn_weights_hash, runtime/src/hash.c), the
 * memory references of oneDNN records, that every runtime-kernel node
 * has a kernel here, and that the table of step functions (for profiling)
 * matches the meta's steps. Each refusal names the file and says what to do, so a
 * foreign, damaged or mismatched artifact is a message, never a crash or an
 * illegal instruction.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_internal.h"

#define AVX512_BITS                                                                                           \
    (KN_CPU_AVX512F | KN_CPU_AVX512BW | KN_CPU_AVX512DQ | KN_CPU_AVX512VL | KN_CPU_AVX512VNNI |              \
     KN_CPU_AVX512BF16 | KN_CPU_AVX512FP16)
#define AVX2_BITS (KN_CPU_AVX | KN_CPU_AVX2 | KN_CPU_FMA | KN_CPU_F16C)

static const char *const k_cpu_names[] = {
    "SSE4.2", "AVX", "AVX2", "FMA", "F16C", "AVX512F", "AVX512BW", "AVX512DQ", "AVX512VL", "AVX512VNNI",
    "AVX512BF16", "AVX512FP16",
};

/* The name a message uses for the artifact. */
static const char *label_of(const kn_artifact *a) { return a->path ? a->path : "static artifact"; }

/* The CPU features the artifact needs, against this CPU's. n_bf16: its
 * oneDNN records and Attention nodes computing in bf16 (kiln compile
 * --precision), which need AVX512-BF16 whatever the target. */
static int check_cpu(const char *label, uint64_t needed, int n_bf16)
{
    uint64_t missing = needed & ~kn_cpu_features();
    if (!missing) return KN_OK;
    char list[512] = "";
    size_t at = 0;
    for (int b = 0; b < 64 && at < sizeof list - 32; b++) {
        if (!(missing & (1ull << b))) continue;
        int n = b < (int)(sizeof k_cpu_names / sizeof *k_cpu_names)
                    ? snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", k_cpu_names[b])
                    : snprintf(list + at, sizeof list - at, "%sfeature bit %d", at ? ", " : "", b);
        at += (size_t)n;
    }
    /* suggest the highest portable target that avoids what is missing */
    const char *hint = !(missing & ~(uint64_t)AVX512_BITS) ? "--target x86-64-v3 or native"
                       : !(missing & ~(uint64_t)(AVX512_BITS | AVX2_BITS)) ? "--target x86-64-v2 or native"
                                                                             : "--target native";
    if (n_bf16 && (missing & KN_CPU_AVX512BF16))
        return kn_error(KN_ERR_UNSUPPORTED,
                        "%s: needs %s which this CPU lacks (its %d bf16 matrix products need AVX512-BF16); recompile "
                        "with --precision fp32 and %s",
                        label, list, n_bf16, hint);
    return kn_error(KN_ERR_UNSUPPORTED, "%s: needs %s which this CPU lacks; recompile with %s", label, list, hint);
}

/* What a path that is not a regular file is, for messages. */
static const char *file_kind(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISDIR(mode) ? "a directory" : S_ISCHR(mode) ? "a character device"
           : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a file";
}

/* Opens path read-only if it is a regular file; *out_size: its size. On
 * failure returns -1 with why[] saying what is wrong ("cannot be opened:
 * ...", "is not a regular file (a FIFO)"). O_NONBLOCK keeps a FIFO from
 * blocking the open (it would wait for a writer forever); fstat on the
 * descriptor then refuses it, and checks the very file that was opened. */
static int open_regular(const char *path, int *out_fd, off_t *out_size, char *why, size_t why_len)
{
    *out_fd = -1;
    *out_size = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "cannot be opened: %s", strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        snprintf(why, why_len, "cannot be read: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(why, why_len, "is not a regular file (%s)", file_kind(sb.st_mode));
        close(fd);
        return -1;
    }
    *out_fd = fd;
    *out_size = sb.st_size;
    return 0;
}

/* Maps dir/meta.weights_file read-only and checks its size and hash. */
static int map_external_weights(kn_artifact *a, const char *dir)
{
    const kn_meta *m = &a->meta;
    const char *label = label_of(a);
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : ".", m->weights_file);
    if (n < 0 || (size_t)n >= sizeof path)
        return kn_error(KN_ERR_IO, "%s: path of the weights file '%s' is too long", label, m->weights_file);
    int fd;
    off_t size;
    char why[256];
    if (open_regular(path, &fd, &size, why, sizeof why) != 0)
        return kn_error(KN_ERR_IO, "%s: external weights file '%s' %s", label, path, why);
    /* the file is written with the artifact, exactly weights_bytes long */
    if ((uint64_t)size != (uint64_t)m->weights_bytes) {
        close(fd);
        return kn_error(KN_ERR_IO, "%s: external weights file '%s' is %lld bytes, the artifact %s %lld %s", label,
                        path, (long long)size, size < m->weights_bytes ? "needs" : "expects",
                        (long long)m->weights_bytes,
                        size < m->weights_bytes ? "(truncated?)" : "(written for another artifact?)");
    }
    if (m->weights_bytes > 0) {
        void *p = mmap(NULL, (size_t)m->weights_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return kn_error(KN_ERR_IO, "%s: external weights file '%s' cannot be mapped: %s", label, path, strerror(e));
        }
        a->weights_map = p;
        a->weights_map_len = (size_t)m->weights_bytes;
        a->weights = p;
    }
    close(fd);
    uint64_t h = kn_weights_hash(a->weights, a->weights_map_len);
    if (h != m->weights_hash)
        return kn_error(KN_ERR_INVALID,
                        "%s: external weights file '%s' does not belong to this artifact (hash %016llx, expected "
                        "%016llx): use the weights written with it, or recompile",
                        label, path, (unsigned long long)h, (unsigned long long)m->weights_hash);
    return KN_OK;
}

static int attach_weights(kn_artifact *a, const char *dir)
{
    const kn_meta *m = &a->meta;
    if (m->weights_file) return map_external_weights(a, dir);
    if (m->weights_bytes > 0 && (!a->desc->weights || a->desc->weights_len < (uint64_t)m->weights_bytes))
        return kn_error(KN_ERR_INVALID, "%s: embedded weights hold %llu bytes, the model needs %lld", label_of(a),
                        a->desc->weights ? (unsigned long long)a->desc->weights_len : 0ull,
                        (long long)m->weights_bytes);
    /* generated code may use aligned vector loads on weights */
    if ((uintptr_t)a->desc->weights % 64 != 0)
        return kn_error(KN_ERR_INVALID, "%s: embedded weights are not 64-byte aligned", label_of(a));
    /* one flipped bit in the weights would otherwise run, silently, with
     * another answer; the hash costs about what paging the weights in does */
    if (m->weights_bytes > 0) {
        uint64_t h = kn_weights_hash(a->desc->weights, (size_t)m->weights_bytes);
        if (h != m->weights_hash)
            return kn_error(KN_ERR_INVALID,
                            "%s: the embedded weights (%lld bytes) do not match their hash (%016llx, expected "
                            "%016llx): the artifact is damaged; recompile it",
                            label_of(a), (long long)m->weights_bytes, (unsigned long long)h,
                            (unsigned long long)m->weights_hash);
    }
    a->weights = a->desc->weights;
    return KN_OK;
}

/* Weights a oneDNN record points at are read when its primitive is created
 * (reordered once), so they must lie inside the weights. Other locations
 * are only pointers the generated code passes at run time. */
static int check_weight_ref(const kn_artifact *a, int index, const char *what, const kn_abi_ref *r, int64_t nbytes)
{
    int64_t limit = a->meta.weights_bytes;
    if (r->loc != KN_LOC_WEIGHTS || (r->offset <= limit && nbytes <= limit - r->offset)) return KN_OK;
    return kn_error(KN_ERR_INVALID,
                    "%s: oneDNN record %d: %s (offset %lld, %lld bytes) lies outside the %lld bytes of weights",
                    label_of(a), index, what, (long long)r->offset, (long long)nbytes, (long long)limit);
}

static int check_dnnl_refs(const kn_artifact *a)
{
    for (int i = 0; i < a->meta.n_dnnl; i++) {
        const kn_abi_dnnl *d = &a->meta.dnnl[i];
        int st = check_weight_ref(a, i, "weight", &d->wei_ref, d->wei.nbytes);
        if (!st && d->bias.nbytes > 0) st = check_weight_ref(a, i, "bias", &d->bias_ref, d->bias.nbytes);
        if (st) return st;
    }
    return KN_OK;
}

/* The op enum may be renumbered between kiln versions: trust the name. */
static kn_op resolve_op(const kn_abi_opnode *o)
{
    if (o->op > 0 && o->op < KN_OP_COUNT && strcmp(kn_op_type_name((kn_op)o->op), o->op_type) == 0)
        return (kn_op)o->op;
    static const char *const domains[] = {"", "kiln", "com.microsoft"};
    for (size_t i = 0; i < sizeof domains / sizeof *domains; i++) {
        kn_op op = kn_op_from_name(o->op_type, domains[i]);
        if (op != KN_OP_UNKNOWN) return op;
    }
    return KN_OP_UNKNOWN;
}

/* A Concat's or Split's attributes with the axis mapped to NHWC order, for
 * a node that runs on NHWC dims (kn_rt_opnode.nhwc_attrs); an axis out of
 * range is left for the kernel to report. */
static int map_nhwc_axis(kn_rt_opnode *rt)
{
    static const int to_nhwc[4] = {0, 3, 1, 2};
    const kn_opdesc *d = &rt->desc;
    bool all = rt->abi->nhwc == KN_OPNODE_NHWC_ALL || rt->abi->nhwc == KN_OPNODE_NATIVE_ALL;
    if (!all || (d->op != KN_OP_Concat && d->op != KN_OP_Split)) return KN_OK;
    kn_attr *a = calloc((size_t)d->n_attrs + 1, sizeof *a);
    if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (d->n_attrs) memcpy(a, d->attrs, sizeof *a * (size_t)d->n_attrs);
    int n = d->n_attrs, at = -1;
    for (int k = 0; k < n; k++)
        if (a[k].name && !strcmp(a[k].name, "axis")) at = k;
    int64_t axis = at >= 0 ? a[at].i : d->op == KN_OP_Concat ? 1 : 0;
    if ((at < 0 || a[at].kind == KN_ATTR_INT) && axis >= -4 && axis < 4) {
        if (at < 0) at = n++, a[at].name = "axis", a[at].kind = KN_ATTR_INT;
        a[at].i = to_nhwc[axis < 0 ? axis + 4 : axis];
    }
    rt->nhwc_attrs = a, rt->n_nhwc_attrs = n;
    return KN_OK;
}

static int prepare_opnode(kn_artifact *a, int i)
{
    const kn_abi_opnode *o = &a->meta.opnodes[i];
    kn_rt_opnode *rt = &a->opnodes[i];
    rt->abi = o;
    kn_op op = resolve_op(o);
    if (op == KN_OP_UNKNOWN || !kn_op_exec(op))
        return kn_error(KN_ERR_UNSUPPORTED, "%s: node '%s' (%s): this libkiln_rt has no kernel for the op; "
                        "use a runtime as new as the compiler",
                        label_of(a), o->name, o->op_type);
    rt->has_output = calloc((size_t)o->n_outputs + 1, sizeof *rt->has_output);
    if (!rt->has_output) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int k = 0; k < o->n_outputs; k++) rt->has_output[k] = o->outputs[k].rank >= 0 || o->outputs[k].slot > 0;
    kn_attr *attrs = NULL;
    int n_attrs = 0;
    if (o->attrs_len > 0 && kn_attrs_read(o->attrs, (size_t)o->attrs_len, &attrs, &n_attrs, &rt->attrs_block)) {
        kn_error_prefix("%s: node '%s' (%s): ", label_of(a), o->name, o->op_type);
        return KN_ERR_INVALID;
    }
    rt->desc = (kn_opdesc){
        .op = op,
        .name = o->name,
        .op_type = o->op_type,
        .domain = "",
        .opset = o->opset,
        .n_inputs = o->n_inputs - o->n_captures, /* the op's own; the captures follow */
        .n_outputs = o->n_outputs,
        .has_output = rt->has_output,
        .attrs = attrs,
        .n_attrs = n_attrs,
        .compute = o->compute,
        .nhwc = o->nhwc,
    };
    if (kn_op_check_arity(&rt->desc)) { /* kernels index their inputs by position */
        kn_error_prefix("%s: ", label_of(a));
        return KN_ERR_INVALID;
    }
    return map_nhwc_axis(rt);
}

/* The opnode after which each dynamic value can be freed within a run
 * (opnodes run in their recorded order). Graph outputs are kept for
 * kn_session_run_tensors; an order that lies only makes a run fail with
 * "not computed", never read freed memory. */
static int plan_slot_frees(kn_artifact *a)
{
    const kn_meta *m = &a->meta;
    a->slot_last_use = calloc((size_t)m->n_slots + 1, sizeof *a->slot_last_use);
    if (!a->slot_last_use) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_slots; i++) a->slot_last_use[i] = -1;
    for (int i = 0; i < m->n_opnodes; i++)
        for (int k = 0; k < m->opnodes[i].n_inputs; k++) {
            int slot = m->opnodes[i].inputs[k].slot;
            if (slot > 0) a->slot_last_use[slot - 1] = i;
        }
    for (int i = 0; i < m->n_outputs; i++)
        if (m->outputs[i].slot > 0) a->slot_last_use[m->outputs[i].slot - 1] = -1;
    return KN_OK;
}

static int prepare_opnodes(kn_artifact *a)
{
    int n = a->meta.n_opnodes;
    a->opnodes = calloc((size_t)n + 1, sizeof *a->opnodes);
    if (!a->opnodes) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        int st = prepare_opnode(a, i);
        if (st) return st;
    }
    return KN_OK;
}

static int check_desc(const kn_artifact_desc *d, const char *label)
{
    if (d->magic != KN_ABI_MAGIC)
        return kn_error(KN_ERR_INVALID,
                        "%s: bad descriptor magic 0x%08x (expected 0x%08x): not a kiln artifact, or damaged",
                        label, d->magic, KN_ABI_MAGIC);
    if (d->abi_version != KN_ABI_VERSION)
        return kn_error(KN_ERR_UNSUPPORTED, "%s: was built for kiln ABI v%u; this runtime reads v%u: recompile it",
                        label,
                        d->abi_version, KN_ABI_VERSION);
    if (!d->meta || !d->run) return kn_error(KN_ERR_INVALID, "%s: descriptor has no meta or no run function", label);
    return KN_OK;
}

/* ---- a shared artifact's pointers must lie inside the library ------------- */

typedef struct seg_query {
    uintptr_t base;
    const char *name;
    uintptr_t lo;
    size_t len;
    int need_exec;
    int found_object, inside;
} seg_query;

static int seg_visit(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    seg_query *q = data;
    if (info->dlpi_addr != q->base || !info->dlpi_name || strcmp(info->dlpi_name, q->name) != 0) return 0;
    q->found_object = 1;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || (q->need_exec && !(ph->p_flags & PF_X))) continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (q->lo >= start && q->lo <= end && q->len <= end - q->lo) q->inside = 1;
    }
    return 1;
}

/* False only when the library was found and [p, p+len) is in none of its
 * loaded segments (executable ones if need_exec). */
static bool inside_library(const struct link_map *lm, const void *p, uint64_t len, int need_exec)
{
    if (len > SIZE_MAX) return false;
    seg_query q = {.base = lm->l_addr, .name = lm->l_name, .lo = (uintptr_t)p, .len = (size_t)len,
                   .need_exec = need_exec};
    dl_iterate_phdr(seg_visit, &q);
    return !q.found_object || q.inside;
}

/* A damaged .so may carry a meta length or weights size that runs past its
 * mapping; reading it would crash, so each range is checked first. */
static int check_mapped(const kn_artifact *a)
{
    struct link_map *lm = NULL;
    if (!a->dl || dlinfo(a->dl, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return KN_OK;
    const kn_artifact_desc *d = a->desc;
    const char *bad = !inside_library(lm, d, sizeof *d, 0)                                 ? "descriptor"
                      : !inside_library(lm, d->meta, d->meta_len, 0)                       ? "meta"
                      : d->weights && !inside_library(lm, d->weights, d->weights_len, 0) ? "weights"
                      : !inside_library(lm, (const void *)d->run, 1, 1)                  ? "run function"
                                                                                           : NULL;
    if (!bad && d->step_fns && d->n_step_fns <= SIZE_MAX / sizeof *d->step_fns) {
        if (!inside_library(lm, d->step_fns, d->n_step_fns * sizeof *d->step_fns, 0)) bad = "step table";
        for (uint64_t i = 0; !bad && i < d->n_step_fns; i++)
            if (!d->step_fns[i] || !inside_library(lm, (const void *)d->step_fns[i], 1, 1)) bad = "step function";
    }
    if (bad)
        return kn_error(KN_ERR_INVALID, "%s: the descriptor's %s lies outside the library: a damaged artifact",
                        label_of(a), bad);
    return KN_OK;
}

/* kn_session_profile calls step_fns[i] for meta step i: the counts must agree. */
static int check_steps(const kn_artifact *a)
{
    const kn_artifact_desc *d = a->desc;
    if (d->n_step_fns != (uint64_t)a->meta.n_steps || (d->n_step_fns && !d->step_fns))
        return kn_error(KN_ERR_INVALID, "%s: the descriptor has %llu step functions, the meta %d steps: a damaged "
                        "artifact", label_of(a), (unsigned long long)d->n_step_fns, a->meta.n_steps);
    return KN_OK;
}

/* Runs every check and fills a; on failure the caller closes a. */
static int artifact_init(kn_artifact *a, const char *weights_dir)
{
    const char *label = label_of(a);
    int st = check_mapped(a);
    if (st) return st;
    if ((st = check_desc(a->desc, label))) return st;
    if (a->desc->meta_len > SIZE_MAX / 8)
        return kn_error(KN_ERR_INVALID, "%s: meta of %llu bytes is implausible", label,
                        (unsigned long long)a->desc->meta_len);
    if ((st = kn_meta_read(a->desc->meta, (size_t)a->desc->meta_len, &a->meta))) {
        kn_error_prefix("%s: ", label);
        return st;
    }
    int n_bf16 = 0;
    for (int i = 0; i < a->meta.n_dnnl; i++) n_bf16 += a->meta.dnnl[i].compute == KN_BF16;
    for (int i = 0; i < a->meta.n_opnodes; i++) n_bf16 += a->meta.opnodes[i].compute == KN_BF16;
    if ((st = check_cpu(label, a->meta.cpu_features, n_bf16)) || (st = check_steps(a))) return st;
    if ((st = attach_weights(a, weights_dir))) return st;
    if ((st = check_dnnl_refs(a)) || (st = plan_slot_frees(a))) return st;
    return prepare_opnodes(a);
}

int kn_artifact_from_descriptor(const kn_artifact_desc *desc, const char *weights_dir, kn_artifact **out)
{
    if (out) *out = NULL;
    if (!desc || !out) return kn_error(KN_ERR_INVALID, "kn_artifact_from_descriptor: NULL argument");
    kn_artifact *a = calloc(1, sizeof *a);
    if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
    a->desc = desc;
    int st = artifact_init(a, weights_dir);
    if (st) {
        kn_artifact_close(a);
        return st;
    }
    *out = a;
    return KN_OK;
}

/* The folder of path ("." if it has none), malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* ---- a shared artifact must be a whole ELF file before dlopen maps it ------- */

#if defined(__x86_64__)
#define HOST_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_ELF_MACHINE EM_AARCH64
#endif

/* Reads len bytes at off, all of them or an error. */
static int read_at(int fd, void *buf, size_t len, off_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t got = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        done += (size_t)got;
    }
    return 0;
}

/* A table of n entries of entsize bytes at off ends inside a file of size
 * bytes; *out_end: where it ends (for the message). */
static bool inside_file(uint64_t off, uint64_t n, uint64_t entsize, uint64_t size, uint64_t *out_end)
{
    *out_end = UINT64_MAX;
    if (entsize && n > UINT64_MAX / entsize) return false;
    if (off > UINT64_MAX - n * entsize) return false;
    *out_end = off + n * entsize;
    return *out_end <= size;
}

static int truncated(const char *path, const char *what, uint64_t end, off_t size)
{
    if (end == UINT64_MAX)
        return kn_error(KN_ERR_IO, "%s: cannot be loaded: truncated or damaged: %s lies beyond any file", path, what);
    return kn_error(KN_ERR_IO, "%s: cannot be loaded: truncated or damaged: %s ends at byte %llu, the file has %lld "
                    "bytes", path, what, (unsigned long long)end, (long long)size);
}

static int check_elf_header(const char *path, const ElfW(Ehdr) *eh, off_t size)
{
    if ((size_t)size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return kn_error(KN_ERR_IO, "%s: cannot be loaded: not an ELF file (%lld bytes%s)", path, (long long)size,
                        (size_t)size < sizeof *eh ? ", shorter than an ELF header" : ", no ELF magic");
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                                                                              ? ELFDATA2LSB : ELFDATA2MSB))
        return kn_error(KN_ERR_IO, "%s: cannot be loaded: not a 64-bit ELF file of this machine's byte order", path);
#ifdef HOST_ELF_MACHINE
    if (eh->e_machine != HOST_ELF_MACHINE)
        return kn_error(KN_ERR_IO, "%s: cannot be loaded: built for another machine (ELF machine %u, this one is %u)",
                        path, (unsigned)eh->e_machine, (unsigned)HOST_ELF_MACHINE);
#endif
    if (eh->e_type != ET_DYN)
        return kn_error(KN_ERR_IO, "%s: cannot be loaded: not a shared library (ELF type %u)", path,
                        (unsigned)eh->e_type);
    if (eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phnum == 0 || eh->e_phnum == PN_XNUM ||
        (eh->e_shnum && eh->e_shentsize != sizeof(ElfW(Shdr))))
        return kn_error(KN_ERR_IO, "%s: cannot be loaded: damaged ELF header (%u program headers of %u bytes, %u "
                        "section headers of %u bytes)", path, (unsigned)eh->e_phnum, (unsigned)eh->e_phentsize,
                        (unsigned)eh->e_shnum, (unsigned)eh->e_shentsize);
    return KN_OK;
}

/* Every segment's bytes must be in the file: dlopen maps them, and a page
 * past the end of the file is a SIGBUS when touched. */
static int check_segments(const char *path, int fd, const ElfW(Ehdr) *eh, off_t size)
{
    uint64_t end;
    if (!inside_file(eh->e_phoff, eh->e_phnum, sizeof(ElfW(Phdr)), (uint64_t)size, &end))
        return truncated(path, "its table of program headers", end, size);
    ElfW(Phdr) *ph = malloc((size_t)eh->e_phnum * sizeof *ph);
    if (!ph) return kn_error(KN_ERR_NOMEM, "%s: out of memory", path);
    int st = KN_OK;
    if (read_at(fd, ph, (size_t)eh->e_phnum * sizeof *ph, (off_t)eh->e_phoff) != 0)
        st = kn_error(KN_ERR_IO, "%s: cannot be loaded: its program headers cannot be read", path);
    for (unsigned i = 0; !st && i < eh->e_phnum; i++) {
        if (ph[i].p_filesz == 0 || inside_file(ph[i].p_offset, ph[i].p_filesz, 1, (uint64_t)size, &end)) continue;
        char what[64];
        const char *type = ph[i].p_type == PT_LOAD ? "loadable" : ph[i].p_type == PT_DYNAMIC ? "dynamic"
                           : ph[i].p_type == PT_NOTE ? "note" : NULL;
        if (type) snprintf(what, sizeof what, "segment %u (%s)", i, type);
        else snprintf(what, sizeof what, "segment %u (type 0x%x)", i, (unsigned)ph[i].p_type);
        st = truncated(path, what, end, size);
    }
    free(ph);
    return st;
}

/* The section headers sit at the end of the file, so a cut of even a few
 * bytes shows here first; dlopen does not need them, but a file without
 * its end is not the artifact that was written. */
static int check_sections(const char *path, int fd, const ElfW(Ehdr) *eh, off_t size)
{
    uint64_t end;
    if (eh->e_shoff == 0 && eh->e_shnum == 0) return KN_OK; /* stripped of them: nothing to check */
    if (!inside_file(eh->e_shoff, eh->e_shnum, sizeof(ElfW(Shdr)), (uint64_t)size, &end))
        return truncated(path, "its table of section headers", end, size);
    ElfW(Shdr) *sh = malloc((size_t)eh->e_shnum * sizeof *sh + 1);
    if (!sh) return kn_error(KN_ERR_NOMEM, "%s: out of memory", path);
    int st = KN_OK;
    if (read_at(fd, sh, (size_t)eh->e_shnum * sizeof *sh, (off_t)eh->e_shoff) != 0)
        st = kn_error(KN_ERR_IO, "%s: cannot be loaded: its section headers cannot be read", path);
    for (unsigned i = 0; !st && i < eh->e_shnum; i++) {
        if (sh[i].sh_type == SHT_NOBITS || sh[i].sh_size == 0 ||
            inside_file(sh[i].sh_offset, sh[i].sh_size, 1, (uint64_t)size, &end))
            continue;
        char what[64];
        snprintf(what, sizeof what, "section %u", i);
        st = truncated(path, what, end, size);
    }
    free(sh);
    return st;
}

/* Refuses, with a message, what dlopen would hang on (a FIFO), crash on (a
 * truncated file: SIGBUS when a mapped page past its end is touched) or
 * misread: path must be a regular 64-bit ELF shared library of this
 * machine whose segments and sections all lie inside the file. A file
 * changed between this check and dlopen is not caught; one changed while
 * mapped cannot be. */
static int check_elf_file(const char *open_path, const char *path)
{
    int fd;
    off_t size;
    char why[256];
    if (open_regular(open_path, &fd, &size, why, sizeof why) != 0)
        return kn_error(KN_ERR_IO, "%s: cannot be loaded: it %s", path, why);
    int st = KN_OK;
    ElfW(Ehdr) eh;
    memset(&eh, 0, sizeof eh);
    if ((size_t)size >= sizeof eh && read_at(fd, &eh, sizeof eh, 0) != 0)
        st = kn_error(KN_ERR_IO, "%s: cannot be loaded: its ELF header cannot be read", path);
    if (!st) st = check_elf_header(path, &eh, size);
    if (!st) st = check_segments(path, fd, &eh, size);
    if (!st) st = check_sections(path, fd, &eh, size);
    close(fd);
    return st;
}

/* Artifacts resolve kn_rt_* against libkiln_rt in the global scope; an app
 * that dlopen'd the runtime RTLD_LOCAL (Python's ctypes does) would make
 * every artifact fail to load, so the runtime promotes itself first. */
static void runtime_to_global_scope(void)
{
    Dl_info info;
    if (!dladdr((void *)kn_rt_opnode_exec, &info) || !info.dli_fname) return;
    void *self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
    if (self) dlclose(self); /* the promotion stays; only the extra reference goes */
}

static int load_error(const char *path)
{
    const char *e = dlerror();
    if (!e) e = "unknown dlopen error";
    const char *hint = strstr(e, "undefined symbol: kn_")
                           ? " (the application must link libkiln_rt, or export its symbols when linking it statically)"
                           : "";
    return kn_error(KN_ERR_IO, "%s: cannot be loaded: %s%s", path, e, hint);
}

int kn_artifact_open(const char *path, kn_artifact **out)
{
    if (out) *out = NULL;
    if (!path || !out) return kn_error(KN_ERR_INVALID, "kn_artifact_open: NULL argument");
    kn_artifact *a = calloc(1, sizeof *a);
    char *dir = dir_of(path);
    /* dlopen searches the library path for a name without a slash */
    size_t n = strlen(path) + 3;
    char *dlpath = malloc(n);
    if (a) a->path = strdup(path);
    if (!a || !dir || !dlpath || !a->path) {
        free(dir);
        free(dlpath);
        kn_artifact_close(a);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    snprintf(dlpath, n, "%s%s", strchr(path, '/') ? "" : "./", path);
    int st = check_elf_file(dlpath, path);
    if (!st) {
        runtime_to_global_scope();
        dlerror();
        a->dl = dlopen(dlpath, RTLD_NOW | RTLD_LOCAL);
    }
    free(dlpath);
    if (st) {
        /* refused before dlopen */
    } else if (!a->dl) {
        st = load_error(path);
    } else if (!(a->desc = dlsym(a->dl, "kn_artifact_descriptor"))) {
        st = kn_error(KN_ERR_INVALID, "%s: is not a kiln artifact (it exports no kn_artifact_descriptor)", path);
    } else {
        st = artifact_init(a, dir);
    }
    free(dir);
    if (st) {
        kn_artifact_close(a);
        return st;
    }
    *out = a;
    return KN_OK;
}

void kn_artifact_close(kn_artifact *a)
{
    if (!a) return;
    if (a->opnodes)
        for (int i = 0; i < a->meta.n_opnodes; i++) {
            kn_attrs_free(a->opnodes[i].attrs_block);
            free(a->opnodes[i].has_output);
            free(a->opnodes[i].nhwc_attrs);
        }
    free(a->opnodes);
    free(a->slot_last_use);
    kn_meta_free(&a->meta);
    if (a->weights_map) munmap(a->weights_map, a->weights_map_len);
    if (a->dl) dlclose(a->dl);
    free(a->path);
    free(a);
}

const kn_artifact_desc *kn_artifact_descriptor(const kn_artifact *a) { return a ? a->desc : NULL; }

int kn_artifact_num_inputs(const kn_artifact *a) { return a ? a->meta.n_inputs : 0; }
int kn_artifact_num_outputs(const kn_artifact *a) { return a ? a->meta.n_outputs : 0; }

static int io_info(const kn_abi_tensor *t, int n, int i, const char *what, kn_io_info *out)
{
    if (!out) return kn_error(KN_ERR_INVALID, "%s info: NULL output", what);
    memset(out, 0, sizeof *out);
    if (!t || i < 0 || i >= n) return kn_error(KN_ERR_INVALID, "%s %d out of range (the model has %d)", what, i, n);
    t += i;
    out->name = t->name;
    out->dtype = (kn_dtype)t->dtype;
    out->rank = t->rank;
    for (int k = 0; k < t->rank; k++) out->dims[k] = t->dims[k];
    out->nbytes = (size_t)t->nbytes; /* 0 for a data-dependent shape, whose unknown dims are -1 */
    return KN_OK;
}

int kn_artifact_input_info(const kn_artifact *a, int i, kn_io_info *out)
{
    return io_info(a ? a->meta.inputs : NULL, a ? a->meta.n_inputs : 0, i, "input", out);
}

int kn_artifact_output_info(const kn_artifact *a, int i, kn_io_info *out)
{
    return io_info(a ? a->meta.outputs : NULL, a ? a->meta.n_outputs : 0, i, "output", out);
}

static int find_io(const kn_abi_tensor *t, int n, const char *name)
{
    if (!t || !name) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return i;
    return -1;
}

int kn_artifact_find_input(const kn_artifact *a, const char *name)
{
    return a ? find_io(a->meta.inputs, a->meta.n_inputs, name) : -1;
}

int kn_artifact_find_output(const kn_artifact *a, const char *name)
{
    return a ? find_io(a->meta.outputs, a->meta.n_outputs, name) : -1;
}

int kn_artifact_check_header(const kn_artifact *a, const char *header, uint64_t model_hash, uint64_t io_hash)
{
    if (!a) return kn_error(KN_ERR_INVALID, "kn_artifact_check_header: NULL artifact");
    if (!header) header = "the generated header";
    uint64_t io = kn_meta_io_hash(&a->meta);
    if (io != io_hash)
        return kn_error(KN_ERR_INVALID,
                        "%s: is not the artifact '%s' was generated for: its inputs and outputs differ (I/O hash "
                        "%016llx, the header's %016llx); open the artifact compiled with that header, or "
                        "regenerate the header from this one and rebuild the application",
                        label_of(a), header, (unsigned long long)io, (unsigned long long)io_hash);
    if (a->meta.model_hash != model_hash)
        return kn_error(KN_ERR_INVALID,
                        "%s: is not the artifact '%s' was generated for: it was compiled from another model or "
                        "with other options (model hash %016llx, the header's %016llx); open the artifact compiled "
                        "with that header, or regenerate the header from this one and rebuild the application",
                        label_of(a), header, (unsigned long long)a->meta.model_hash,
                        (unsigned long long)model_hash);
    return KN_OK;
}
