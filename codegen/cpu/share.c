/*
 * codegen/cpu/share.c — one function for nodes that compile to the same code.
 *
 * Graphs repeat themselves: the twelve layers of an encoder, the blocks of
 * a ResNet, a chain of a hundred thousand elementwise steps. Their nodes
 * differ in where their operands live, which operand mode (cg.h) takes out
 * of the body, and often in nothing else. LLVM's optimizer and code
 * generator then cost about 3 ms per function at -O3 whatever its size, so
 * compiling each repeat again is most of the compile time of a long graph
 * (a 100k-node chain: 3,125 fused bodies, 11 s).
 *
 * A function's structure is written as a sequence of words: per
 * instruction its opcode, type, the details the C API exposes (predicates,
 * alignments, source element types, callee types, phi blocks, shuffle
 * masks, indices) and its operands, each as what it is: an earlier
 * instruction or block by position, a parameter by index, anything else
 * (constants, globals, callees: uniqued by LLVM within a context) by
 * identity, but a function of the same node's body (a parallel body's
 * chunk and unit functions) by its position in that body. Two bodies with
 * equal words and equal `extra` words (the alias classes of the operands,
 * which the loads' metadata encodes and the words leave out) compute the
 * same thing. The table keeps a hash of each body's words and compares the
 * words in full on a match, so a collision costs time, never correctness.
 * A body is shared whole or not at all: sharing a unit function between
 * two bodies that cut their rows differently would keep it from being
 * inlined into either (a MaxPool ran 25% slower so).
 *
 * Metadata attachments other than alias scopes (loop hints) are left out:
 * they change how a loop is optimized, not what it computes. LLVM 16's C
 * API cannot read wrap or fast-math flags; kiln sets neither.
 */
#include "cg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- words ------------------------------------------------------------------ */

typedef struct words {
    uint64_t *w;
    size_t n, cap;
    bool nomem;
} words;

static void put(words *s, uint64_t v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        uint64_t *w = realloc(s->w, cap * sizeof *w);
        if (!w) {
            s->nomem = true;
            return;
        }
        s->w = w;
        s->cap = cap;
    }
    s->w[s->n++] = v;
}

static void put_ptr(words *s, const void *p) { put(s, (uint64_t)(uintptr_t)p); }

/* Positions of the function's blocks and instructions: an open-addressing
 * map from the LLVM object to its index. */
typedef struct posmap {
    const void **key;
    int *val;
    size_t cap;
} posmap;

static size_t slot_of(const posmap *m, const void *k)
{
    uint64_t h = (uint64_t)(uintptr_t)k * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 17) & (m->cap - 1);
    while (m->key[i] && m->key[i] != k) i = (i + 1) & (m->cap - 1);
    return i;
}

static void map_put(posmap *m, const void *k, int v)
{
    size_t i = slot_of(m, k);
    m->key[i] = k;
    m->val[i] = v;
}

static int map_get(const posmap *m, const void *k)
{
    size_t i = slot_of(m, k);
    return m->key[i] ? m->val[i] : -1;
}

enum { TAG_INST = 1, TAG_BLOCK, TAG_PARAM, TAG_MEMBER, TAG_OTHER, TAG_END };

/* The functions of the group being written: a reference to one is written
 * as its position, so that two groups with the same structure compare
 * equal although each calls its own helpers. */
typedef struct group {
    LLVMValueRef *fns;
    int n;
} group;

static void put_operand(words *s, const posmap *m, const group *gr, LLVMValueRef fn, LLVMValueRef op)
{
    if (!op) {
        put(s, TAG_OTHER);
        put(s, 0);
        return;
    }
    int pos = map_get(m, op);
    if (pos >= 0) {
        put(s, LLVMValueIsBasicBlock(op) ? TAG_BLOCK : TAG_INST);
        put(s, (uint64_t)pos);
        return;
    }
    for (int k = 0; k < gr->n; k++)
        if (gr->fns[k] == op) {
            put(s, TAG_MEMBER);
            put(s, (uint64_t)k);
            return;
        }
    if (LLVMIsAArgument(op)) {
        unsigned n = LLVMCountParams(fn);
        for (unsigned k = 0; k < n; k++)
            if (LLVMGetParam(fn, k) == op) {
                put(s, TAG_PARAM);
                put(s, k);
                return;
            }
    }
    put(s, TAG_OTHER);
    put_ptr(s, op);
}

static void put_attributes(words *s, LLVMValueRef fn)
{
    unsigned n_params = LLVMCountParams(fn);
    for (long idx = -1; idx <= (long)n_params; idx++) { /* function, return, parameters */
        LLVMAttributeIndex ai = idx < 0 ? (LLVMAttributeIndex)LLVMAttributeFunctionIndex : (LLVMAttributeIndex)idx;
        unsigned n = LLVMGetAttributeCountAtIndex(fn, ai);
        put(s, TAG_END);
        if (!n) continue;
        LLVMAttributeRef attrs[64];
        if (n > 64) {
            put_ptr(s, fn); /* more than we list: never equal to another function */
            continue;
        }
        LLVMGetAttributesAtIndex(fn, ai, attrs);
        for (unsigned k = 0; k < n; k++) put_ptr(s, attrs[k]);
    }
}

/* The words of instruction `in` beyond its opcode, type and operands. */
static void put_details(words *s, const posmap *m, LLVMValueRef in, LLVMOpcode op)
{
    switch (op) {
    case LLVMICmp: put(s, (uint64_t)LLVMGetICmpPredicate(in)); break;
    case LLVMFCmp: put(s, (uint64_t)LLVMGetFCmpPredicate(in)); break;
    case LLVMAlloca:
        put_ptr(s, LLVMGetAllocatedType(in));
        put(s, LLVMGetAlignment(in));
        break;
    case LLVMLoad:
    case LLVMStore:
        put(s, LLVMGetAlignment(in));
        put(s, (uint64_t)LLVMGetVolatile(in));
        put(s, (uint64_t)LLVMGetOrdering(in));
        break;
    case LLVMGetElementPtr:
        put_ptr(s, LLVMGetGEPSourceElementType(in));
        put(s, (uint64_t)LLVMIsInBounds(in));
        break;
    case LLVMCall:
        put_ptr(s, LLVMGetCalledFunctionType(in));
        put(s, LLVMGetInstructionCallConv(in));
        put(s, (uint64_t)LLVMIsTailCall(in));
        break;
    case LLVMPHI: {
        unsigned n = LLVMCountIncoming(in);
        for (unsigned k = 0; k < n; k++)
            put(s, (uint64_t)map_get(m, LLVMBasicBlockAsValue(LLVMGetIncomingBlock(in, k))));
        break;
    }
    case LLVMShuffleVector: {
        unsigned n = LLVMGetNumMaskElements(in);
        for (unsigned k = 0; k < n; k++) put(s, (uint64_t)(int64_t)LLVMGetMaskValue(in, k));
        break;
    }
    case LLVMExtractValue:
    case LLVMInsertValue: {
        unsigned n = LLVMGetNumIndices(in);
        const unsigned *idx = LLVMGetIndices(in);
        for (unsigned k = 0; k < n; k++) put(s, idx[k]);
        break;
    }
    case LLVMAtomicRMW:
    case LLVMAtomicCmpXchg:
    case LLVMFence:
    case LLVMCallBr:
    case LLVMInvoke:
    case LLVMLandingPad:
        put_ptr(s, in); /* kiln emits none of these: a function with one is never shared */
        break;
    default: break;
    }
}

/* fn's words appended to s; false when out of memory. */
static bool function_words(LLVMValueRef fn, const group *gr, words *s)
{
    size_t count = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        count++;
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) count++;
    }
    posmap m = {.cap = 16};
    while (m.cap < count * 2) m.cap *= 2;
    m.key = calloc(m.cap, sizeof *m.key);
    m.val = malloc(m.cap * sizeof *m.val);
    if (!m.key || !m.val) {
        free(m.key);
        free(m.val);
        return false;
    }
    int pos = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        map_put(&m, LLVMBasicBlockAsValue(bb), pos++);
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) map_put(&m, in, pos++);
    }
    put_ptr(s, LLVMGlobalGetValueType(fn));
    put_attributes(s, fn);
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        put(s, TAG_BLOCK);
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMOpcode op = LLVMGetInstructionOpcode(in);
            put(s, TAG_INST);
            put(s, (uint64_t)op);
            put_ptr(s, LLVMTypeOf(in));
            put_details(s, &m, in, op);
            int n = LLVMGetNumOperands(in);
            put(s, (uint64_t)n);
            for (int k = 0; k < n; k++) put_operand(s, &m, gr, fn, LLVMGetOperand(in, (unsigned)k));
        }
    }
    put(s, TAG_END);
    free(m.key);
    free(m.val);
    return !s->nomem;
}

static uint64_t hash_words(const uint64_t *w, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) {
        h ^= w[i];
        h *= 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

/* The words of every function of the group, in order. */
static bool group_words(const group *gr, words *s)
{
    s->n = 0;
    s->nomem = false;
    for (int k = 0; k < gr->n; k++)
        if (!function_words(gr->fns[k], gr, s)) return false;
    return true;
}

/* ---- the table ---------------------------------------------------------------- */

typedef struct entry {
    uint64_t hash;
    LLVMValueRef *fns; /* the group; fns[n - 1] is its entry; NULL: empty slot */
    int n;
    uint64_t *extra;
    int n_extra;
} entry;

struct kn_cg_share {
    entry *e; /* open addressing on hash */
    size_t cap, n;
    words a, b;
    int deleted; /* functions removed as repeats */
};

kn_cg_share *kn_cg_share_new(void) { return calloc(1, sizeof(kn_cg_share)); }

void kn_cg_share_free(kn_cg_share *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->cap; i++) {
        free(t->e[i].fns);
        free(t->e[i].extra);
    }
    free(t->e);
    free(t->a.w);
    free(t->b.w);
    free(t);
}

int kn_cg_share_count(const kn_cg_share *t) { return t ? t->deleted : 0; }

static bool grow(kn_cg_share *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    entry *e = calloc(cap, sizeof *e);
    if (!e) return false;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->e[i].fns) continue;
        size_t j = (size_t)t->e[i].hash & (cap - 1);
        while (e[j].fns) j = (j + 1) & (cap - 1);
        e[j] = t->e[i];
    }
    free(t->e);
    t->e = e;
    t->cap = cap;
    return true;
}

static bool same_extra(const entry *c, const uint64_t *extra, int n_extra)
{
    return c->n_extra == n_extra && (!n_extra || !memcmp(c->extra, extra, sizeof *extra * (size_t)n_extra));
}

LLVMValueRef kn_cg_share_group(kn_cg_share *t, LLVMValueRef *fns, int n, const uint64_t *extra, int n_extra)
{
    if (!t || n < 1 || n_extra < 0) return n >= 1 ? fns[n - 1] : NULL;
    group gr = {fns, n};
    if (!group_words(&gr, &t->a)) return fns[n - 1]; /* out of memory: kept, unshared */
    uint64_t h = hash_words(t->a.w, t->a.n, hash_words(extra, (size_t)n_extra, 0xcbf29ce484222325ull));
    for (size_t j = t->cap ? (size_t)h & (t->cap - 1) : 0; t->cap && t->e[j].fns; j = (j + 1) & (t->cap - 1)) {
        entry *c = &t->e[j];
        if (c->hash != h || c->n != n || !same_extra(c, extra, n_extra)) continue;
        group cg = {c->fns, c->n};
        if (!group_words(&cg, &t->b) || t->b.n != t->a.n || memcmp(t->a.w, t->b.w, sizeof *t->a.w * t->a.n)) continue;
        /* callers before callees; references between members go with them */
        for (int k = n - 1; k >= 0; k--) {
            LLVMReplaceAllUsesWith(fns[k], c->fns[k]);
            LLVMDeleteFunction(fns[k]);
        }
        t->deleted += n;
        return c->fns[n - 1];
    }
    if ((t->n + 1) * 2 > t->cap && !grow(t)) return fns[n - 1];
    LLVMValueRef *copy = malloc(sizeof *copy * (size_t)n);
    uint64_t *xcopy = n_extra ? malloc(sizeof *xcopy * (size_t)n_extra) : NULL;
    if (!copy || (n_extra && !xcopy)) {
        free(copy);
        free(xcopy);
        return fns[n - 1];
    }
    memcpy(copy, fns, sizeof *copy * (size_t)n);
    if (n_extra) memcpy(xcopy, extra, sizeof *xcopy * (size_t)n_extra);
    size_t j = (size_t)h & (t->cap - 1);
    while (t->e[j].fns) j = (j + 1) & (t->cap - 1);
    t->e[j] = (entry){h, copy, n, xcopy, n_extra};
    t->n++;
    return fns[n - 1];
}

void kn_cg_share_finish(kn_cg_share *t)
{
    if (!t) return;
    LLVMAttributeRef noinline = NULL;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->e[i].fns) continue;
        LLVMValueRef fn = t->e[i].fns[t->e[i].n - 1];
        int uses = 0;
        for (LLVMUseRef u = LLVMGetFirstUse(fn); u && uses < 2; u = LLVMGetNextUse(u)) uses++;
        if (uses < 2) continue;
        if (!noinline)
            noinline = LLVMCreateEnumAttribute(LLVMGetTypeContext(LLVMTypeOf(fn)),
                                               LLVMGetEnumAttributeKindForName("noinline", 8), 0);
        LLVMAddAttributeAtIndex(fn, (LLVMAttributeIndex)LLVMAttributeFunctionIndex, noinline);
    }
}
