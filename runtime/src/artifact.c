/*
 * runtime/src/artifact.c — loading a compiled model: dlopen a shared
 * artifact (or wrap a static one's descriptor), then check everything the
 * runtime will trust before any generated code runs: magic, ABI version,
 * the serialized meta, the CPU features the code was compiled for, the
 * weights (embedded, or an external file mmapped read-only and hashed), the
 * memory references of oneDNN records, that every runtime-kernel node
 * has a kernel here, and that the table of step functions (for profiling)
 * matches the meta's steps. Each refusal names the file and says what to do, so a
 * foreign, damaged or mismatched artifact is a message, never a crash or an
 * illegal instruction.
 */
#include <dlfcn.h>
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

static int check_cpu(const char *label, uint64_t needed)
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
    return kn_error(KN_ERR_UNSUPPORTED, "%s: needs %s which this CPU lacks; recompile with %s", label, list, hint);
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
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kn_error(KN_ERR_IO, "%s: external weights file '%s' cannot be opened: %s", label, path,
                        strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return kn_error(KN_ERR_IO, "%s: external weights file '%s' is not a regular file", label, path);
    }
    if ((uint64_t)sb.st_size < (uint64_t)m->weights_bytes) {
        close(fd);
        return kn_error(KN_ERR_IO, "%s: external weights file '%s' is %lld bytes, the artifact needs %lld (truncated?)",
                        label, path, (long long)sb.st_size, (long long)m->weights_bytes);
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
    uint64_t h = kn_fnv1a(KN_FNV_INIT, a->weights, a->weights_map_len);
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
    };
    if (kn_op_check_arity(&rt->desc)) { /* kernels index their inputs by position */
        kn_error_prefix("%s: ", label_of(a));
        return KN_ERR_INVALID;
    }
    return KN_OK;
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
    if ((st = check_cpu(label, a->meta.cpu_features)) || (st = check_steps(a))) return st;
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
    runtime_to_global_scope();
    dlerror();
    a->dl = dlopen(dlpath, RTLD_NOW | RTLD_LOCAL);
    free(dlpath);
    int st;
    if (!a->dl) {
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
