/* The bump allocator that owns every IR object of a model. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

struct kn_arena_block {
    kn_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define KN_ARENA_BLOCK 65536

void *kn_arena_alloc(kn_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    kn_arena_block *b = a->head;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > KN_ARENA_BLOCK ? size : KN_ARENA_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    a->total += size;
    memset(p, 0, size);
    return p;
}

char *kn_arena_strndup(kn_arena *a, const char *s, size_t n)
{
    if (!s) return NULL;
    char *p = kn_arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *kn_arena_strdup(kn_arena *a, const char *s)
{
    return s ? kn_arena_strndup(a, s, strlen(s)) : NULL;
}

void *kn_arena_memdup(kn_arena *a, const void *p, size_t size)
{
    void *q = kn_arena_alloc(a, size ? size : 1);
    if (q && size) memcpy(q, p, size);
    return q;
}

void kn_arena_release(kn_arena *a)
{
    kn_arena_block *b = a->head;
    while (b) {
        kn_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}
