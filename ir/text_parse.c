/* The IR text parser (grammar in docs/ir.md; API in text.h). A hand-written
 * recursive-descent parser over a one-token lookahead lexer. Value references
 * are resolved after the whole text is read, so a graph printed in any node
 * order (and subgraphs that use outer values) reads back as it was. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* ---- lexer -------------------------------------------------------------- */

typedef enum tkind { T_EOF, T_VALUE, T_WORD, T_STRING, T_NUMBER, T_PUNCT } tkind;

typedef struct tok {
    tkind k;
    int line, col;
    const char *s; /* arena copy: name, word, decoded string, number text, punct */
    size_t n;      /* byte length of s (strings may hold NULs) */
    bool is_float; /* for T_NUMBER */
} tok;

/* A value reference to resolve once every value exists. */
typedef struct pending {
    kn_graph *g;
    kn_node *node; /* NULL: graph output number `index` of g */
    int index;
    const char *name;
    int line, col;
} pending;

typedef struct parser {
    const char *src, *p, *line_start, *end;
    const char *name;
    int line;
    unsigned flags;
    kn_model *m;
    kn_arena *a;
    tok t;
    pending *pend;
    int n_pend, cap_pend;
} parser;

static int perr_at(parser *P, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int perr_at(parser *P, int line, int col, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kn_error(KN_ERR_INVALID, "%s:%d:%d: %s", P->name, line, col, msg);
}

/* Describes the current token for "expected X, found Y" messages. */
static const char *tok_desc(const tok *t, char *buf, size_t len)
{
    switch (t->k) {
    case T_EOF: return "end of input";
    case T_VALUE: snprintf(buf, len, "value '%%%s'", t->s); return buf;
    case T_STRING: snprintf(buf, len, "string \"%.40s\"", t->s); return buf;
    default: snprintf(buf, len, "'%.40s'", t->s); return buf;
    }
}

static int expected(parser *P, const char *what)
{
    char buf[96];
    return perr_at(P, P->t.line, P->t.col, "expected %s, found %s", what,
                   tok_desc(&P->t, buf, sizeof buf));
}

static bool is_alpha_(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_value_char(int c)
{
    return is_alpha_(c) || is_digit(c) || c == '.' || c == '-' || c == '/';
}

static void skip_space(parser *P)
{
    for (;;) {
        char c = *P->p;
        if (c == '\n') {
            P->p++;
            P->line++;
            P->line_start = P->p;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            P->p++;
        } else if (c == '/' && P->p[1] == '/') {
            while (*P->p && *P->p != '\n') P->p++;
        } else {
            return;
        }
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes a quoted string starting at P->p (on the opening quote). */
static int lex_string(parser *P, tok *t)
{
    const char *q = P->p + 1;
    size_t cap = 0;
    for (const char *c = q; *c && *c != '"'; c++, cap++)
        if (*c == '\\' && c[1]) c++;
    char *out = kn_arena_alloc(P->a, cap + 1);
    if (!out) return kn_error(KN_ERR_NOMEM, "out of memory");
    size_t n = 0;
    while (*q != '"') {
        if (!*q || *q == '\n')
            return perr_at(P, t->line, t->col, "unterminated string");
        if (*q != '\\') {
            out[n++] = *q++;
            continue;
        }
        q++;
        switch (*q) {
        case 'n': out[n++] = '\n'; q++; break;
        case 't': out[n++] = '\t'; q++; break;
        case 'r': out[n++] = '\r'; q++; break;
        case '"': case '\\': out[n++] = *q++; break;
        case 'x': {
            int h = hexval(q[1]), l = h >= 0 ? hexval(q[2]) : -1;
            if (l < 0)
                return perr_at(P, P->line, (int)(q - P->line_start) + 1,
                               "expected two hex digits after \\x");
            out[n++] = (char)(h * 16 + l);
            q += 3;
            break;
        }
        default:
            return perr_at(P, P->line, (int)(q - P->line_start) + 1,
                           "unknown escape '\\%c' in string", *q ? *q : '0');
        }
    }
    out[n] = 0;
    t->s = out;
    t->n = n;
    P->p = q + 1;
    return KN_OK;
}

static int lex_number(parser *P, tok *t)
{
    const char *q = P->p;
    if (*q == '-' || *q == '+') q++;
    int digits = 0;
    if (!strncmp(q, "inf", 3) || !strncmp(q, "nan", 3)) {
        q += 3;
        digits = 1;
        t->is_float = true;
    } else {
        for (; is_digit(*q); q++) digits++;
        if (*q == '.') {
            t->is_float = true;
            for (q++; is_digit(*q); q++) digits++;
        }
        if (digits && (*q == 'e' || *q == 'E')) {
            t->is_float = true;
            q++;
            if (*q == '-' || *q == '+') q++;
            if (!is_digit(*q)) return perr_at(P, t->line, t->col, "malformed number");
            while (is_digit(*q)) q++;
        }
    }
    if (!digits || is_alpha_(*q) || is_digit(*q) || *q == '.')
        return perr_at(P, t->line, t->col, "malformed number");
    t->s = kn_arena_strndup(P->a, P->p, (size_t)(q - P->p));
    t->n = (size_t)(q - P->p);
    P->p = q;
    return t->s ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
}

/* A bare value name after '%': a ':' belongs to it only when another name
 * character follows (so "%y: f32" ends at "y"). */
static int lex_value(parser *P, tok *t)
{
    P->p++;
    if (*P->p == '"') return lex_string(P, t);
    const char *q = P->p;
    while (is_value_char(*q) || (*q == ':' && (is_value_char(q[1]) || q[1] == ':'))) q++;
    if (q > P->p && q[-1] == ':') q--;
    if (q == P->p) return perr_at(P, t->line, t->col, "expected a value name after '%%'");
    t->s = kn_arena_strndup(P->a, P->p, (size_t)(q - P->p));
    t->n = (size_t)(q - P->p);
    P->p = q;
    return t->s ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
}

static int next(parser *P)
{
    skip_space(P);
    tok *t = &P->t;
    memset(t, 0, sizeof *t);
    t->line = P->line;
    t->col = (int)(P->p - P->line_start) + 1;
    char c = *P->p;
    if (!c) {
        t->k = T_EOF;
        t->s = "";
        return KN_OK;
    }
    if (c == '%') {
        t->k = T_VALUE;
        return lex_value(P, t);
    }
    if (c == '"') {
        t->k = T_STRING;
        return lex_string(P, t);
    }
    if (is_digit(c) || ((c == '-' || c == '+') && (is_digit(P->p[1]) || P->p[1] == '.' ||
                                                   !strncmp(P->p + 1, "inf", 3) ||
                                                   !strncmp(P->p + 1, "nan", 3)))) {
        t->k = T_NUMBER;
        return lex_number(P, t);
    }
    if (is_alpha_(c)) {
        const char *q = P->p;
        while (is_alpha_(*q) || is_digit(*q) || *q == '.') q++;
        t->k = T_WORD;
        t->s = kn_arena_strndup(P->a, P->p, (size_t)(q - P->p));
        t->n = (size_t)(q - P->p);
        P->p = q;
        return t->s ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    }
    t->k = T_PUNCT;
    size_t len = 1;
    if (c == ':' && P->p[1] == ':') len = 2;
    else if (c == '.' && P->p[1] == '.' && P->p[2] == '.') len = 3;
    else if (!strchr("()[]{},=:#?@", c)) {
        if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
            return perr_at(P, t->line, t->col, "unexpected character 0x%02x", (unsigned char)c);
        return perr_at(P, t->line, t->col, "unexpected character '%c'", c);
    }
    t->s = kn_arena_strndup(P->a, P->p, len);
    t->n = len;
    P->p += len;
    return t->s ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
}

static bool is_punct(const parser *P, const char *s) { return P->t.k == T_PUNCT && !strcmp(P->t.s, s); }
static bool is_word(const parser *P, const char *s) { return P->t.k == T_WORD && !strcmp(P->t.s, s); }

/* Consumes punctuation s or fails with "expected 's'". */
static int expect_punct(parser *P, const char *s)
{
    if (!is_punct(P, s)) {
        char what[16];
        snprintf(what, sizeof what, "'%s'", s);
        return expected(P, what);
    }
    return next(P);
}

/* A name written bare (word) or quoted (string); copied by the lexer. */
static int take_name(parser *P, const char *what, const char **out)
{
    if (P->t.k != T_WORD && P->t.k != T_STRING) return expected(P, what);
    *out = P->t.s;
    return next(P);
}

static int take_int(parser *P, const char *what, int64_t *out)
{
    if (P->t.k != T_NUMBER || P->t.is_float) return expected(P, what);
    errno = 0;
    char *end;
    long long v = strtoll(P->t.s, &end, 10);
    if (errno || *end) return perr_at(P, P->t.line, P->t.col, "integer %s out of range", P->t.s);
    *out = v;
    return next(P);
}

static int grow(parser *P, void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return KN_OK;
    int ncap = *cap ? *cap * 2 : 8;
    while (ncap < need) ncap *= 2;
    void *p = kn_arena_alloc(P->a, elem * (size_t)ncap);
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (*arr && *cap) memcpy(p, *arr, elem * (size_t)*cap);
    *arr = p;
    *cap = ncap;
    return KN_OK;
}

/* Prefixes the current IR error (duplicate name, ...) with a location. */
static int at_loc(parser *P, int line, int col, int st)
{
    kn_error_prefix("%s:%d:%d: ", P->name, line, col);
    return st;
}

/* ---- types -------------------------------------------------------------- */

static int parse_dtype(parser *P, kn_dtype *out)
{
    if (is_punct(P, "?")) {
        *out = KN_DT_UNDEFINED;
        return next(P);
    }
    if (P->t.k != T_WORD) return expected(P, "a dtype (f32, i64, ...)");
    kn_dtype dt = kn_dtype_from_name(P->t.s);
    if (dt == KN_DT_UNDEFINED && strcmp(P->t.s, "string") != 0)
        return perr_at(P, P->t.line, P->t.col, "unknown dtype '%s'", P->t.s);
    if (strcmp(P->t.s, "string") == 0) dt = KN_STRING;
    *out = dt;
    return next(P);
}

/* "[d0,d1,...]" where a dim is an integer, a symbol or '?'; absent → unknown rank. */
static int parse_shape(parser *P, kn_shape *s, bool static_only)
{
    *s = kn_shape_unknown();
    if (!is_punct(P, "[")) return KN_OK;
    int st = next(P);
    s->rank = 0;
    while (!st && !is_punct(P, "]")) {
        if (s->rank && (st = expect_punct(P, ","))) return st;
        if (s->rank == KN_MAX_RANK)
            return perr_at(P, P->t.line, P->t.col, "rank above the maximum of %d", KN_MAX_RANK);
        int line = P->t.line, col = P->t.col;
        int i = s->rank++;
        if (P->t.k == T_NUMBER) {
            if ((st = take_int(P, "a dimension", &s->dims[i]))) return st;
            if (s->dims[i] < 0) return perr_at(P, line, col, "negative dimension %" PRId64, s->dims[i]);
        } else if (static_only) {
            return expected(P, "a constant dimension");
        } else if (is_punct(P, "?")) {
            s->dims[i] = -1;
            st = next(P);
        } else if (P->t.k == T_WORD || P->t.k == T_STRING) {
            s->dims[i] = -1;
            s->sym[i] = P->t.s;
            st = next(P);
        } else {
            return expected(P, "a dimension (integer, symbol or ?)");
        }
    }
    return st ? st : expect_punct(P, "]");
}

/* ": dtype[shape]" (optional as a whole). */
static int parse_opt_type(parser *P, kn_dtype *dt, kn_shape *s)
{
    *dt = KN_DT_UNDEFINED;
    *s = kn_shape_unknown();
    if (!is_punct(P, ":")) return KN_OK;
    int st = next(P);
    if (!st) st = parse_dtype(P, dt);
    if (!st) st = parse_shape(P, s, false);
    return st;
}

/* ---- tensor literals ---------------------------------------------------- */

static int int_range(kn_dtype dt, int64_t *lo, int64_t *hi)
{
    const kn_dtype_traits *tr = kn_dtype_info(dt);
    unsigned b = tr->bits;
    if (dt == KN_BOOL) {
        *lo = 0, *hi = 1;
    } else if (tr->is_signed) {
        *lo = b >= 64 ? INT64_MIN : -((int64_t)1 << (b - 1));
        *hi = b >= 64 ? INT64_MAX : ((int64_t)1 << (b - 1)) - 1;
    } else {
        *lo = 0;
        *hi = b >= 63 ? INT64_MAX : ((int64_t)1 << b) - 1;
    }
    return KN_OK;
}

static int parse_element(parser *P, kn_tensor *t, size_t i)
{
    const kn_dtype_traits *tr = kn_dtype_info(t->dtype);
    const tok *k = &P->t;
    if (t->dtype == KN_BOOL && (is_word(P, "true") || is_word(P, "false"))) {
        kn_store_i64(t->dtype, t->data, i, is_word(P, "true"));
        return next(P);
    }
    if (k->k == T_WORD && tr->is_float && (!strcmp(k->s, "inf") || !strcmp(k->s, "nan"))) {
        kn_store_f64(t->dtype, t->data, i, !strcmp(k->s, "inf") ? INFINITY : NAN);
        return next(P);
    }
    if (k->k != T_NUMBER) return expected(P, "a tensor element");
    char *end;
    errno = 0;
    if (tr->is_float) {
        if (t->dtype == KN_F64) kn_store_f64(t->dtype, t->data, i, strtod(k->s, &end));
        else if (t->dtype == KN_F32) ((float *)t->data)[i] = strtof(k->s, &end);
        else kn_store_f64(t->dtype, t->data, i, strtof(k->s, &end));
        return next(P);
    }
    if (k->is_float) return perr_at(P, k->line, k->col, "%s element '%s' is not an integer", tr->name, k->s);
    if (t->dtype == KN_U64) {
        if (k->s[0] == '-') return perr_at(P, k->line, k->col, "u64 element '%s' is negative", k->s);
        unsigned long long v = strtoull(k->s, &end, 10);
        if (errno) return perr_at(P, k->line, k->col, "u64 element %s out of range", k->s);
        kn_store_u64(t->dtype, t->data, i, v);
        return next(P);
    }
    long long v = strtoll(k->s, &end, 10);
    int64_t lo, hi;
    int_range(t->dtype, &lo, &hi);
    if (errno || v < lo || v > hi)
        return perr_at(P, k->line, k->col, "element %s out of range for %s", k->s, tr->name);
    kn_store_i64(t->dtype, t->data, i, v);
    return next(P);
}

/* "{... fnv1a=HEX}": skipped raw, since the hash is not a token. */
static int parse_summary(parser *P, kn_tensor *t, int line, int col)
{
    if (!(P->flags & KN_IR_PARSE_PLACEHOLDERS))
        return perr_at(P, line, col,
                       "constant data was printed as a summary ({...}); the text cannot be read "
                       "back exactly (print with all data inline, or parse with placeholders)");
    if (t->dtype == KN_STRING) return perr_at(P, line, col, "string tensors are not supported");
    /* the lexer stands just after '{' */
    while (*P->p && *P->p != '}' && *P->p != '\n') P->p++;
    if (*P->p != '}') return perr_at(P, line, col, "unterminated constant summary");
    P->p++;
    return next(P);
}

/* "dtype[dims] [e0, e1, ...]" or "dtype[dims] {... fnv1a=...}" → a tensor
 * adopted by the model (so any later error frees it with the model). */
static int parse_tensor(parser *P, kn_tensor **out)
{
    int line = P->t.line, col = P->t.col;
    kn_dtype dt;
    kn_shape s;
    int st = parse_dtype(P, &dt);
    if (!st) st = parse_shape(P, &s, true);
    if (st) return st;
    if (dt == KN_DT_UNDEFINED) return perr_at(P, line, col, "a constant needs a dtype");
    if (s.rank < 0) return perr_at(P, line, col, "a constant needs a shape ([] for a scalar)");
    /* Each inline element takes at least two characters: refuse absurd
     * shapes before allocating for them. */
    int64_t want = kn_shape_numel(s.rank, s.dims);
    if (want < 0) return perr_at(P, line, col, "the number of elements of this %s tensor overflows", kn_dtype_name(dt));
    if (is_punct(P, "[") && want > (int64_t)(P->end - P->p))
        return perr_at(P, line, col, "a %s tensor of %" PRId64 " elements does not fit in the text",
                       kn_dtype_name(dt), want);
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (dt == KN_STRING) {
        t->dtype = dt;
        t->rank = s.rank;
        memcpy(t->dims, s.dims, sizeof t->dims);
    } else if ((st = kn_tensor_alloc(t, dt, s.rank, s.dims))) {
        free(t);
        return at_loc(P, line, col, st);
    }
    if (!kn_model_adopt_tensor(P->m, t)) return KN_ERR_NOMEM;
    *out = t;
    int sl = P->t.line, sc = P->t.col;
    if (is_punct(P, "{")) return parse_summary(P, t, sl, sc);
    if (dt == KN_STRING) return perr_at(P, sl, sc, "string tensors are not supported");
    if ((st = expect_punct(P, "["))) return st;
    int64_t numel = kn_tensor_numel(t), i = 0;
    for (; !is_punct(P, "]"); i++) {
        if (i && (st = expect_punct(P, ","))) return st;
        if (i >= numel)
            return perr_at(P, P->t.line, P->t.col, "more than %" PRId64 " elements for a %s tensor",
                           numel, kn_dtype_name(dt));
        if ((st = parse_element(P, t, (size_t)i))) return st;
    }
    if (i != numel)
        return perr_at(P, P->t.line, P->t.col, "%" PRId64 " elements given, the shape needs %" PRId64,
                       i, numel);
    return next(P);
}

/* ---- attributes --------------------------------------------------------- */

static int parse_graph(parser *P, kn_graph *parent, kn_node *owner, kn_graph **out);

typedef struct attr_list {
    int n, cap;
    kn_attr_kind kind;
    double *f;
    int64_t *i;
    const char **s;
    kn_tensor **t;
    kn_graph **g;
} attr_list;

static int list_elem(parser *P, kn_node *n, attr_list *L)
{
    kn_attr_kind k;
    if (P->t.k == T_STRING) k = KN_ATTR_STRINGS;
    else if (is_word(P, "tensor")) k = KN_ATTR_TENSORS;
    else if (is_word(P, "graph")) k = KN_ATTR_GRAPHS;
    else if (P->t.k == T_NUMBER || is_word(P, "inf") || is_word(P, "nan")) k = KN_ATTR_INTS;
    else return expected(P, "a list element");
    bool numeric = k == KN_ATTR_INTS;
    bool was_numeric = L->kind == KN_ATTR_INTS || L->kind == KN_ATTR_FLOATS;
    if (L->n && (numeric != was_numeric || (!numeric && k != L->kind)))
        return perr_at(P, P->t.line, P->t.col, "list elements of different kinds");
    if (!L->n) L->kind = k;
    int cap = L->cap, st;
    if ((st = grow(P, (void **)&L->f, &cap, L->n + 1, sizeof *L->f))) return st;
    cap = L->cap;
    if ((st = grow(P, (void **)&L->i, &cap, L->n + 1, sizeof *L->i))) return st;
    cap = L->cap;
    if ((st = grow(P, (void **)&L->s, &cap, L->n + 1, sizeof *L->s))) return st;
    cap = L->cap;
    if ((st = grow(P, (void **)&L->t, &cap, L->n + 1, sizeof *L->t))) return st;
    cap = L->cap;
    if ((st = grow(P, (void **)&L->g, &cap, L->n + 1, sizeof *L->g))) return st;
    L->cap = cap;
    int j = L->n++;
    if (k == KN_ATTR_STRINGS) {
        L->s[j] = P->t.s;
        return next(P);
    }
    if (k == KN_ATTR_TENSORS) {
        st = next(P);
        return st ? st : parse_tensor(P, &L->t[j]);
    }
    if (k == KN_ATTR_GRAPHS) return parse_graph(P, n->graph, n, &L->g[j]);
    /* numbers: the list is floats as soon as one element is written as a float */
    if (P->t.k == T_WORD || P->t.is_float) L->kind = KN_ATTR_FLOATS;
    L->f[j] = P->t.k == T_WORD ? (!strcmp(P->t.s, "inf") ? INFINITY : NAN) : strtof(P->t.s, NULL);
    if (P->t.k == T_NUMBER && !P->t.is_float) {
        errno = 0;
        L->i[j] = strtoll(P->t.s, NULL, 10);
        if (errno) return perr_at(P, P->t.line, P->t.col, "integer %s out of range", P->t.s);
    }
    return next(P);
}

static int fill_list(parser *P, kn_attr *a, attr_list *L)
{
    a->kind = L->kind;
    a->n = L->n;
    size_t n = (size_t)(L->n ? L->n : 1);
    switch (L->kind) {
    case KN_ATTR_FLOATS:
        a->floats = kn_arena_alloc(P->a, n * sizeof(float));
        if (!a->floats) return kn_error(KN_ERR_NOMEM, "out of memory");
        for (int j = 0; j < L->n; j++) a->floats[j] = (float)L->f[j];
        return KN_OK;
    case KN_ATTR_INTS: a->ints = L->n ? L->i : kn_arena_alloc(P->a, sizeof(int64_t)); return a->ints ? KN_OK : KN_ERR_NOMEM;
    case KN_ATTR_STRINGS: a->strings = L->n ? L->s : kn_arena_alloc(P->a, sizeof(char *)); return a->strings ? KN_OK : KN_ERR_NOMEM;
    case KN_ATTR_TENSORS: a->tensors = L->n ? L->t : kn_arena_alloc(P->a, sizeof(kn_tensor *)); return a->tensors ? KN_OK : KN_ERR_NOMEM;
    default: a->graphs = L->n ? L->g : kn_arena_alloc(P->a, sizeof(kn_graph *)); return a->graphs ? KN_OK : KN_ERR_NOMEM;
    }
}

static const struct { const char *name; kn_attr_kind kind; } k_empty_lists[] = {
    {"ints", KN_ATTR_INTS},       {"floats", KN_ATTR_FLOATS}, {"strings", KN_ATTR_STRINGS},
    {"tensors", KN_ATTR_TENSORS}, {"graphs", KN_ATTR_GRAPHS},
};

static int parse_list(parser *P, kn_node *n, kn_attr *a)
{
    attr_list L;
    memset(&L, 0, sizeof L);
    for (size_t k = 0; k < sizeof k_empty_lists / sizeof k_empty_lists[0]; k++)
        if (is_word(P, k_empty_lists[k].name)) {
            int st = next(P);
            if (!st) st = expect_punct(P, "[");
            if (!st && !is_punct(P, "]")) return expected(P, "']' (a typed list prefix is only for empty lists)");
            if (!st) st = next(P);
            L.kind = k_empty_lists[k].kind;
            return st ? st : fill_list(P, a, &L);
        }
    int st = expect_punct(P, "[");
    while (!st && !is_punct(P, "]")) {
        if (L.n && (st = expect_punct(P, ","))) return st;
        st = list_elem(P, n, &L);
    }
    if (st) return st;
    if (!L.n) return expected(P, "a list element (write an empty list as ints[], floats[], ...)");
    st = next(P);
    return st ? st : fill_list(P, a, &L);
}

static int parse_attr_value(parser *P, kn_node *n, kn_attr *a)
{
    tok *t = &P->t;
    if (t->k == T_NUMBER && !t->is_float) {
        a->kind = KN_ATTR_INT;
        return take_int(P, "an integer", &a->i);
    }
    if (t->k == T_NUMBER || is_word(P, "inf") || is_word(P, "nan")) {
        a->kind = KN_ATTR_FLOAT;
        a->f = t->k == T_WORD ? (!strcmp(t->s, "inf") ? INFINITY : NAN) : strtof(t->s, NULL);
        return next(P);
    }
    if (t->k == T_STRING) {
        a->kind = KN_ATTR_STRING;
        a->s = t->s;
        a->s_len = t->n;
        return next(P);
    }
    if (is_word(P, "tensor")) {
        a->kind = KN_ATTR_TENSOR;
        int st = next(P);
        return st ? st : parse_tensor(P, &a->t);
    }
    if (is_word(P, "graph")) {
        a->kind = KN_ATTR_GRAPH;
        return parse_graph(P, n->graph, n, &a->g);
    }
    if (is_word(P, "undefined")) {
        a->kind = KN_ATTR_UNDEFINED;
        return next(P);
    }
    for (size_t k = 0; t->k == T_WORD && k < sizeof k_empty_lists / sizeof k_empty_lists[0]; k++)
        if (!strcmp(t->s, k_empty_lists[k].name)) return parse_list(P, n, a);
    if (is_punct(P, "[")) return parse_list(P, n, a);
    return expected(P, "an attribute value (number, \"string\", [list], tensor ..., graph ...)");
}

/* "{name=value, ...}" after a node's inputs. */
static int parse_attrs(parser *P, kn_node *n)
{
    int st = next(P); /* '{' */
    while (!st && !is_punct(P, "}")) {
        if (n->n_attrs && (st = expect_punct(P, ","))) return st;
        int line = P->t.line, col = P->t.col;
        const char *name = NULL;
        if ((st = take_name(P, "an attribute name", &name))) return st;
        if ((st = expect_punct(P, "="))) return st;
        if (kn_node_attr(n, name)) return perr_at(P, line, col, "attribute '%s' given twice", name);
        kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_UNDEFINED);
        if (!a) return at_loc(P, line, col, KN_ERR_NOMEM);
        st = parse_attr_value(P, n, a);
    }
    return st ? st : next(P);
}

/* ---- quantization parameters ------------------------------------------- */

/* Optional " quant(scale=T, zero_point=T, axis=A, block_size=B)" after a
 * value's type; every part is optional, axis defaults to -1. */
static int parse_opt_quant(parser *P, kn_qparams **out)
{
    *out = NULL;
    if (!is_word(P, "quant")) return KN_OK;
    kn_qparams *q = kn_arena_alloc(P->a, sizeof *q);
    if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
    q->axis = -1;
    int st = next(P);
    if (!st) st = expect_punct(P, "(");
    for (int i = 0; !st && !is_punct(P, ")"); i++) {
        if (i && (st = expect_punct(P, ","))) return st;
        int line = P->t.line, col = P->t.col;
        const char *key = NULL;
        int64_t v;
        if ((st = take_name(P, "a quant parameter", &key)) || (st = expect_punct(P, "="))) return st;
        if (!strcmp(key, "scale")) st = parse_tensor(P, &q->scale);
        else if (!strcmp(key, "zero_point")) st = parse_tensor(P, &q->zero_point);
        else if (!strcmp(key, "axis") || !strcmp(key, "block_size")) {
            if ((st = take_int(P, "an integer", &v))) return st;
            if (v < -KN_MAX_RANK || v > INT32_MAX) return perr_at(P, line, col, "%s %" PRId64 " out of range", key, v);
            *(key[0] == 'a' ? &q->axis : &q->block_size) = (int)v;
        } else {
            return perr_at(P, line, col, "unknown quant parameter '%s' (scale, zero_point, axis, block_size)", key);
        }
    }
    if (st || (st = next(P))) return st;
    *out = q;
    return KN_OK;
}

/* ---- statements --------------------------------------------------------- */

static int add_pending(parser *P, kn_graph *g, kn_node *n, int index, const tok *t)
{
    int st = grow(P, (void **)&P->pend, &P->cap_pend, P->n_pend + 1, sizeof *P->pend);
    if (st) return st;
    P->pend[P->n_pend++] = (pending){g, n, index, t->s, t->line, t->col};
    return KN_OK;
}

typedef struct out_decl {
    const char *name; /* NULL for '_' */
    kn_dtype dt;
    kn_shape shape;
    kn_qparams *q;
} out_decl;

/* "%w = const TENSOR": a new constant, or the data of a declared input. */
static int parse_const(parser *P, kn_graph *g, const tok *name_tok, bool init)
{
    kn_tensor *t = NULL;
    kn_qparams *q = NULL;
    int st = next(P);
    if (!st) st = parse_tensor(P, &t);
    if (!st) st = parse_opt_quant(P, &q);
    if (st) return st;
    kn_value *v = kn_graph_lookup_local(g, name_tok->s);
    if (v && (v->flags & KN_VALUE_GRAPH_INPUT) && !v->const_data) {
        v->const_data = t; /* an initializer that is also an overridable input */
    } else {
        /* the tensor already belongs to the model: hand a copy-free alias */
        kn_shape s;
        kn_shape_set(&s, t->rank, t->dims);
        v = kn_graph_new_value(g, name_tok->s, t->dtype, &s);
        if (!v) return at_loc(P, name_tok->line, name_tok->col, KN_ERR_INVALID);
        v->const_data = t;
    }
    if (init) v->flags |= KN_VALUE_INITIALIZER;
    if (q) v->q = q;
    return KN_OK;
}

/* "[domain::]Op(inputs) [{attrs}] [#"name"]" given the parsed outputs. */
static int parse_call(parser *P, kn_graph *g, int n_out, const out_decl *outs)
{
    int line = P->t.line, col = P->t.col;
    const char *domain = "", *op = NULL;
    int st = take_name(P, "an op name", &op);
    if (!st && is_punct(P, "::")) {
        domain = op;
        if ((st = next(P)) || (st = take_name(P, "an op name after '::'", &op))) return st;
    }
    if (!st) st = expect_punct(P, "(");
    tok *ins = NULL;
    int n_in = 0, cap_in = 0;
    while (!st && !is_punct(P, ")")) {
        if (n_in && (st = expect_punct(P, ","))) return st;
        if (P->t.k != T_VALUE && !is_word(P, "_")) return expected(P, "an input (%name or _)");
        if ((st = grow(P, (void **)&ins, &cap_in, n_in + 1, sizeof *ins))) return st;
        ins[n_in++] = P->t;
        st = next(P);
    }
    if (st || (st = next(P))) return st;
    const char **names = kn_arena_alloc(P->a, sizeof(char *) * (size_t)(n_out + 1));
    if (!names) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_out; i++) names[i] = outs[i].name;
    kn_node *n = kn_node_create_named(g, op, domain, NULL, n_in, NULL, n_out, names);
    if (!n) return at_loc(P, line, col, KN_ERR_INVALID);
    for (int i = 0; i < n_out; i++)
        if (n->outputs[i]) {
            n->outputs[i]->dtype = outs[i].dt;
            n->outputs[i]->shape = outs[i].shape;
            n->outputs[i]->q = outs[i].q;
        }
    for (int i = 0; i < n_in; i++)
        if (ins[i].k == T_VALUE && (st = add_pending(P, g, n, i, &ins[i]))) return st;
    if (is_punct(P, "{") && (st = parse_attrs(P, n))) return st;
    if (is_punct(P, "#")) {
        if ((st = next(P))) return st;
        if (P->t.k != T_STRING) return expected(P, "a quoted node name after '#'");
        n->name = P->t.s;
        if ((st = next(P))) return st;
    }
    if (is_punct(P, "@")) { /* the compute precision (passes/autocast.c) */
        if ((st = next(P))) return st;
        if (!is_word(P, "bf16")) return expected(P, "bf16 after '@' (the node's compute precision)");
        n->compute = KN_BF16;
        return next(P);
    }
    return KN_OK;
}

/* One statement of a graph body (the current token starts it). */
static int parse_stmt(parser *P, kn_graph *g)
{
    out_decl *outs = NULL;
    int n_out = 0, cap = 0, st = KN_OK;
    if (P->t.k == T_VALUE) {
        tok first = P->t;
        if ((st = next(P))) return st;
        if (is_punct(P, "=")) {
            if ((st = next(P))) return st;
            if (is_word(P, "const") || is_word(P, "init"))
                return parse_const(P, g, &first, is_word(P, "init"));
            out_decl d = {first.s, KN_DT_UNDEFINED, kn_shape_unknown(), NULL};
            return parse_call(P, g, 1, &d);
        }
        if ((st = grow(P, (void **)&outs, &cap, 1, sizeof *outs))) return st;
        outs[n_out].name = first.s;
        if ((st = parse_opt_type(P, &outs[n_out].dt, &outs[n_out].shape)) ||
            (st = parse_opt_quant(P, &outs[n_out].q)))
            return st;
        n_out++;
    } else if (is_word(P, "_")) {
        /* first output omitted: fall into the list loop below */
    } else if (P->t.k == T_WORD || P->t.k == T_STRING) {
        return parse_call(P, g, 0, NULL);
    } else {
        return expected(P, "a statement (%name = ..., Op(...), or return)");
    }
    while (n_out == 0 || is_punct(P, ",")) {
        if (n_out && (st = next(P))) return st;
        if ((st = grow(P, (void **)&outs, &cap, n_out + 1, sizeof *outs))) return st;
        out_decl *d = &outs[n_out++];
        d->dt = KN_DT_UNDEFINED;
        d->shape = kn_shape_unknown();
        d->name = NULL;
        d->q = NULL;
        if (is_word(P, "_")) {
            if ((st = next(P))) return st;
            continue;
        }
        if (P->t.k != T_VALUE) return expected(P, "an output (%name or _)");
        d->name = P->t.s;
        if ((st = next(P)) || (st = parse_opt_type(P, &d->dt, &d->shape)) ||
            (st = parse_opt_quant(P, &d->q)))
            return st;
    }
    if ((st = expect_punct(P, "="))) return st;
    return parse_call(P, g, n_out, outs);
}

/* "graph NAME(%in: T, ...) { stmt* return %a, ... }" */
static int parse_graph(parser *P, kn_graph *parent, kn_node *owner, kn_graph **out)
{
    if (!is_word(P, "graph")) return expected(P, "'graph'");
    const char *name = NULL;
    int st = next(P);
    if (!st) st = take_name(P, "a graph name", &name);
    if (st) return st;
    kn_graph *g = parent ? kn_graph_create_sub(parent, name) : P->m->graph;
    if (!g) return KN_ERR_NOMEM;
    if (!parent) g->name = name;
    g->parent_node = owner;
    *out = g;
    if ((st = expect_punct(P, "("))) return st;
    for (int i = 0; !is_punct(P, ")"); i++) {
        if (i && (st = expect_punct(P, ","))) return st;
        if (P->t.k != T_VALUE) return expected(P, "a graph input (%name: type)");
        tok nt = P->t;
        kn_dtype dt;
        kn_shape s;
        kn_qparams *q = NULL;
        if ((st = next(P)) || (st = parse_opt_type(P, &dt, &s)) || (st = parse_opt_quant(P, &q)))
            return st;
        kn_value *in = kn_graph_add_input(g, nt.s, dt, &s);
        if (!in) return at_loc(P, nt.line, nt.col, KN_ERR_INVALID);
        in->q = q;
    }
    if ((st = next(P)) || (st = expect_punct(P, "{"))) return st;
    while (!is_word(P, "return")) {
        if (P->t.k == T_EOF || is_punct(P, "}")) return expected(P, "'return' before the end of the graph");
        if ((st = parse_stmt(P, g))) return st;
    }
    if ((st = next(P))) return st;
    int n_out = 0;
    while (P->t.k == T_VALUE) {
        if ((st = add_pending(P, g, NULL, n_out++, &P->t)) || (st = next(P))) return st;
        if (!is_punct(P, ",")) break;
        if ((st = next(P))) return st;
        if (P->t.k != T_VALUE) return expected(P, "a graph output (%name) after ','");
    }
    if (!is_punct(P, "}"))
        return expected(P, n_out ? "',' or '}' after a graph output" : "a graph output (%name) or '}'");
    return next(P);
}

/* ---- model -------------------------------------------------------------- */

static int parse_header(parser *P)
{
    skip_space(P);
    if (strncmp(P->p, "kiln-ir", 7) != 0)
        return perr_at(P, P->line, (int)(P->p - P->line_start) + 1,
                       "expected the header 'kiln-ir v1'");
    P->p += 7;
    int st = next(P);
    if (st) return st;
    if (!is_word(P, "v1")) {
        if (P->t.k == T_WORD && P->t.s[0] == 'v')
            return perr_at(P, P->t.line, P->t.col, "unsupported kiln-ir version '%s' (this is v1)", P->t.s);
        return expected(P, "'v1' after 'kiln-ir'");
    }
    return next(P);
}

static int parse_model_lines(parser *P)
{
    int st = KN_OK;
    while (!st && !is_word(P, "graph")) {
        if (is_word(P, "ir_version")) {
            if (!(st = next(P))) st = take_int(P, "an IR version", &P->m->ir_version);
        } else if (is_word(P, "producer")) {
            if ((st = next(P))) return st;
            if (P->t.k != T_STRING) return expected(P, "a quoted producer name");
            P->m->producer_name = P->t.s;
            if ((st = next(P))) return st;
            if (P->t.k != T_STRING) return expected(P, "a quoted producer version");
            P->m->producer_version = P->t.s;
            st = next(P);
        } else if (is_word(P, "opset")) {
            if ((st = next(P))) return st;
            if (P->t.k != T_STRING) return expected(P, "a quoted domain (\"\" for ONNX)");
            const char *dom = P->t.s;
            int64_t v;
            if ((st = next(P)) || (st = take_int(P, "an opset version", &v))) return st;
            st = kn_model_set_opset(P->m, dom, v);
        } else {
            return expected(P, "'opset', 'producer', 'ir_version' or 'graph'");
        }
    }
    return st;
}

static int resolve_pending(parser *P)
{
    for (int i = 0; i < P->n_pend; i++) {
        const pending *r = &P->pend[i];
        kn_value *v = kn_graph_lookup(r->g, r->name);
        if (!v) return perr_at(P, r->line, r->col, "value '%%%s' is not defined", r->name);
        if (r->node) {
            kn_node_set_input(r->node, r->index, v);
        } else {
            int st = kn_graph_add_output(r->g, v);
            if (st) return st;
        }
    }
    return KN_OK;
}

int kn_ir_parse_ex(const char *text, const char *source_name, unsigned flags, kn_model **out_model)
{
    *out_model = NULL;
    if (!text) return kn_error(KN_ERR_INVALID, "kn_ir_parse: no text");
    kn_model *m = kn_model_create();
    if (!m) return kn_error(KN_ERR_NOMEM, "out of memory");
    parser P;
    memset(&P, 0, sizeof P);
    P.src = P.p = P.line_start = text;
    P.end = text + strlen(text);
    P.name = source_name ? source_name : "<input>";
    P.line = 1;
    P.flags = flags;
    P.m = m;
    P.a = &m->arena;
    kn_graph *g;
    int st = parse_header(&P);
    if (!st) st = parse_model_lines(&P);
    if (!st) st = parse_graph(&P, NULL, NULL, &g);
    if (!st && P.t.k != T_EOF) st = expected(&P, "end of input after the main graph");
    if (!st) st = resolve_pending(&P);
    if (st) {
        kn_model_free(m);
        return st;
    }
    *out_model = m;
    return KN_OK;
}

int kn_ir_parse(const char *text, const char *source_name, kn_model **out_model)
{
    return kn_ir_parse_ex(text, source_name, 0, out_model);
}

int kn_ir_parse_file(const char *path, unsigned flags, kn_model **out_model)
{
    *out_model = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return kn_error(KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return kn_error(KN_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return kn_error(KN_ERR_IO, "%s: read error", path);
    }
    buf[len] = 0;
    if (strlen(buf) != len) {
        free(buf);
        return kn_error(KN_ERR_INVALID, "%s: contains a NUL byte", path);
    }
    int st = kn_ir_parse_ex(buf, path, flags, out_model);
    free(buf);
    return st;
}
