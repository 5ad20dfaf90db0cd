/*
 * codegen/cpu/alias.c — telling LLVM which memory a node's loads and stores
 * can touch.
 *
 * A node function reaches every operand through one of a few base pointers
 * (cg.h): the arena at a planned offset, the weights, a user buffer loaded
 * from the inputs/outputs slot arrays. LLVM sees only `arena + 332928` and
 * `arena + 289920` and must assume that a store through one may change what
 * a load through the other reads: it reloads a broadcast operand on every
 * iteration, and guards every vectorized loop with run-time overlap checks
 * and a scalar copy of the loop (a parallel elementwise node grew from 30
 * lines of IR to 2,000, and most of the -O3 compile time of a random graph
 * went into those copies).
 *
 * The memory plan knows better: operands of one node that live in different
 * arena blocks never overlap (blocks are disjoint while live; a view or an
 * in-place residual has its root's offset, so it lands in the same class),
 * the weights and the slot arrays are never written by generated code, and
 * user buffers are not kiln's memory. So after a node's function is
 * emitted, each load and store is given the class of the base it derives
 * from, as LLVM scoped-noalias metadata:
 *
 *     !alias.scope = {its class}   !noalias = {every class it cannot overlap}
 *
 * An access whose base is anything else (a pointer argument of a helper, a
 * computed arena offset, a dynamic slot) gets no metadata and stays under
 * LLVM's own analysis. User buffers are one class, as a caller may pass one
 * buffer as two of them.
 *
 * In operand mode (cg.h, share.c) an operand's address is loaded from slot
 * k of the `inputs` argument; the access then gets the class of the k-th
 * operand. Since the body may serve other nodes, kn_cg_alias_key gives the
 * share table the classes it was tagged with: a body is only reused by a
 * node whose operands overlap the same way.
 */
#include "cg.h"

#include <llvm-c/DebugInfo.h>
#include <stdio.h>
#include <string.h>

enum { CLASS_UNKNOWN = -1, CLASS_WEIGHTS = 0, CLASS_SLOTS = 1, CLASS_USER = 2, CLASS_FIRST_ARENA = 3 };
#define MAX_OPERANDS 64 /* a node with more (a long Concat) is left untagged */
#define MAX_CLASSES (CLASS_FIRST_ARENA + MAX_OPERANDS)

/* The node function's base pointers (its parameters, cg.h) and the arena
 * blocks of the node's operands: [off, off + bytes). */
typedef struct alias_blocks {
    LLVMValueRef arena, weights, inputs, outputs;
    int64_t off[MAX_OPERANDS], bytes[MAX_OPERANDS];
    int n;
    /* operand mode (cg.h): the class of the operand whose address slot k
     * of `inputs` holds */
    int op_class[MAX_OPERANDS];
    int n_ops;
} alias_blocks;

static void add_block(const kn_cg *cg, alias_blocks *b, const kn_value *v)
{
    if (!v || v->id < 0 || v->id >= cg->plan->n_where || v->const_data) return;
    const kn_abi_ref *r = &cg->plan->where[v->id];
    int64_t nb = kn_shape_nbytes(v->dtype, &v->shape);
    if (r->loc != KN_LOC_ARENA || nb <= 0) return;
    for (int i = 0; i < b->n; i++)
        if (b->off[i] == r->offset) {
            if (nb > b->bytes[i]) b->bytes[i] = nb;
            return;
        }
    if (b->n < MAX_OPERANDS) {
        b->off[b->n] = r->offset;
        b->bytes[b->n++] = nb;
    }
}

static bool overlap(const alias_blocks *b, int i, int j)
{
    return b->off[i] < b->off[j] + b->bytes[j] && b->off[j] < b->off[i] + b->bytes[i];
}

/* The GEP instruction's single constant index, or false. */
static bool const_index(LLVMValueRef gep, int64_t *out)
{
    if (LLVMGetNumOperands(gep) != 2) return false;
    LLVMValueRef idx = LLVMGetOperand(gep, 1);
    if (!LLVMIsAConstantInt(idx)) return false;
    *out = LLVMConstIntGetSExtValue(idx);
    return true;
}

static bool is_gep(LLVMValueRef v)
{
    return LLVMIsAGetElementPtrInst(v) != NULL;
}

/* The class of the memory that ptr points into. */
static int class_of(const alias_blocks *b, LLVMValueRef ptr)
{
    LLVMValueRef last_gep = NULL;
    while (is_gep(ptr)) {
        last_gep = ptr;
        ptr = LLVMGetOperand(ptr, 0);
    }
    if (ptr == b->weights) return CLASS_WEIGHTS;
    if (ptr == b->inputs || ptr == b->outputs) return CLASS_SLOTS;
    if (LLVMIsAGlobalVariable(ptr) && LLVMIsGlobalConstant(ptr)) return CLASS_WEIGHTS; /* a constant table */
    if (LLVMIsALoadInst(ptr)) { /* a user buffer: loaded from inputs[k] or outputs[k] */
        LLVMValueRef slot = LLVMGetOperand(ptr, 0), slot_gep = NULL;
        while (is_gep(slot)) {
            slot_gep = slot;
            slot = LLVMGetOperand(slot, 0);
        }
        if (b->n_ops > 0 && slot == b->inputs) { /* operand mode: slot k holds operand k */
            int64_t k = 0;
            if (slot_gep && !const_index(slot_gep, &k)) return CLASS_UNKNOWN;
            return k >= 0 && k < b->n_ops ? b->op_class[k] : CLASS_UNKNOWN;
        }
        return slot == b->inputs || slot == b->outputs ? CLASS_USER : CLASS_UNKNOWN;
    }
    int64_t off;
    if (ptr != b->arena || !last_gep || !const_index(last_gep, &off)) return CLASS_UNKNOWN;
    for (int i = 0; i < b->n; i++)
        if (b->off[i] == off) return CLASS_FIRST_ARENA + i;
    return CLASS_UNKNOWN;
}

/* Whether classes a and b can never overlap. */
static bool disjoint(const alias_blocks *b, int x, int y)
{
    if (x == y) return false;
    if (x == CLASS_USER && y == CLASS_USER) return false;
    if (x >= CLASS_FIRST_ARENA && y >= CLASS_FIRST_ARENA)
        return !overlap(b, x - CLASS_FIRST_ARENA, y - CLASS_FIRST_ARENA);
    return true; /* weights, slots, user buffers and the arena are separate memory */
}

/* A new scope (self-referencing, like a loop ID) in domain. */
static LLVMMetadataRef new_scope(kn_cg *cg, LLVMMetadataRef domain, const char *name)
{
    LLVMMetadataRef self = LLVMTemporaryMDNode(cg->ctx, NULL, 0);
    LLVMMetadataRef str = LLVMMDStringInContext2(cg->ctx, name, strlen(name));
    LLVMMetadataRef ops[3] = {self, domain ? domain : str, str}; /* a domain: {self, name} */
    LLVMMetadataRef node = LLVMMDNodeInContext2(cg->ctx, ops, domain ? 3 : 2);
    LLVMMetadataReplaceAllUsesWith(self, node);
    return node;
}

/* The arena blocks of n's operands and, in operand mode, the class of each
 * operand slot; false when n has too many operands to describe. */
static bool find_blocks(const kn_cg *cg, const kn_node *n, alias_blocks *b)
{
    if (n->n_inputs + n->n_outputs > MAX_OPERANDS || (cg->ops && cg->n_ops > MAX_OPERANDS)) return false;
    for (int i = 0; i < n->n_inputs; i++) add_block(cg, b, n->inputs[i]);
    for (int i = 0; i < n->n_outputs; i++) add_block(cg, b, n->outputs[i]);
    b->n_ops = cg->ops ? cg->n_ops : 0;
    for (int k = 0; k < b->n_ops; k++) {
        const kn_value *v = cg->ops[k];
        const kn_abi_ref *r = v->id >= 0 && v->id < cg->plan->n_where ? &cg->plan->where[v->id] : NULL;
        b->op_class[k] = CLASS_UNKNOWN;
        if (!r) continue;
        if (r->loc == KN_LOC_WEIGHTS) b->op_class[k] = CLASS_WEIGHTS;
        else if (r->loc == KN_LOC_INPUT || r->loc == KN_LOC_OUTPUT) b->op_class[k] = CLASS_USER;
        else if (r->loc == KN_LOC_ARENA && !v->const_data)
            for (int i = 0; i < b->n; i++)
                if (b->off[i] == r->offset) b->op_class[k] = CLASS_FIRST_ARENA + i;
    }
    return true;
}

int kn_cg_alias_key(const kn_cg *cg, const kn_node *n, uint64_t *out)
{
    alias_blocks b = {.n = 0};
    if (!find_blocks(cg, n, &b)) return -1;
    int m = 0;
    out[m++] = (uint64_t)b.n_ops;
    out[m++] = (uint64_t)b.n;
    for (int k = 0; k < b.n_ops; k++) out[m++] = (uint64_t)(int64_t)b.op_class[k];
    uint64_t bits = 0;
    int nbits = 0;
    for (int i = 0; i < b.n; i++)
        for (int j = i + 1; j < b.n; j++) {
            bits = bits << 1 | (uint64_t)overlap(&b, i, j);
            if (++nbits == 64) {
                out[m++] = bits;
                bits = 0;
                nbits = 0;
            }
        }
    if (nbits) out[m++] = bits;
    return m;
}

void kn_cg_tag_aliases(kn_cg *cg, LLVMValueRef fn, const kn_node *n)
{
    if (LLVMCountParams(fn) < 5) return;
    alias_blocks b = {.arena = LLVMGetParam(fn, 1), .weights = LLVMGetParam(fn, 2), .inputs = LLVMGetParam(fn, 3),
                      .outputs = LLVMGetParam(fn, 4), .n = 0};
    if (!find_blocks(cg, n, &b)) return;
    int n_classes = CLASS_FIRST_ARENA + b.n;
    LLVMMetadataRef scope[MAX_CLASSES] = {0}, alias_md[MAX_CLASSES] = {0}, noalias_md[MAX_CLASSES] = {0};
    unsigned k_scope = LLVMGetMDKindIDInContext(cg->ctx, "alias.scope", 11);
    unsigned k_noalias = LLVMGetMDKindIDInContext(cg->ctx, "noalias", 7);
    char name[96];
    snprintf(name, sizeof name, "kn.%s", LLVMGetValueName(fn));
    LLVMMetadataRef domain = NULL;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMValueRef ptr = LLVMIsALoadInst(in) ? LLVMGetOperand(in, 0)
                               : LLVMIsAStoreInst(in) ? LLVMGetOperand(in, 1)
                                                       : NULL;
            int c = ptr ? class_of(&b, ptr) : CLASS_UNKNOWN;
            if (c == CLASS_UNKNOWN) continue;
            if (!domain) {
                domain = new_scope(cg, NULL, name);
                for (int k = 0; k < n_classes; k++) {
                    char sn[128];
                    snprintf(sn, sizeof sn, "%s.%d", name, k);
                    scope[k] = new_scope(cg, domain, sn);
                }
            }
            if (!alias_md[c]) {
                LLVMMetadataRef others[MAX_CLASSES];
                int m = 0;
                for (int k = 0; k < n_classes; k++)
                    if (disjoint(&b, c, k)) others[m++] = scope[k];
                alias_md[c] = LLVMMDNodeInContext2(cg->ctx, &scope[c], 1);
                noalias_md[c] = LLVMMDNodeInContext2(cg->ctx, others, (size_t)m);
            }
            LLVMSetMetadata(in, k_scope, LLVMMetadataAsValue(cg->ctx, alias_md[c]));
            LLVMSetMetadata(in, k_noalias, LLVMMetadataAsValue(cg->ctx, noalias_md[c]));
        }
}
