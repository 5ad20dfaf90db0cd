/* quant/table.c — the calibration table's JSON writer and strict reader. */
#include "kiln/file.h"
#include "table.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/abi.h"
#include "kiln/status.h"

int kn_calib_hash_file(const char *path, uint64_t *out_hash)
{
    *out_hash = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return kn_error(KN_ERR_IO, "%s: %s", path, strerror(errno));
    uint64_t h = KN_FNV_INIT;
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) h = kn_fnv1a(h, buf, got);
    int bad = ferror(f);
    fclose(f);
    if (bad) return kn_error(KN_ERR_IO, "%s: read error", path);
    *out_hash = h;
    return KN_OK;
}

int kn_calib_table_add(kn_calib_table *t, const kn_calib_entry *e)
{
    if (t->n_tensors == t->cap_tensors) {
        int cap = t->cap_tensors ? 2 * t->cap_tensors : 16;
        kn_calib_entry *p = realloc(t->tensors, sizeof *p * (size_t)cap);
        if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
        t->tensors = p;
        t->cap_tensors = cap;
    }
    kn_calib_entry c = *e;
    c.name = strdup(e->name);
    if (!c.name) return kn_error(KN_ERR_NOMEM, "out of memory");
    t->tensors[t->n_tensors++] = c;
    return KN_OK;
}

int kn_calib_table_add_keep(kn_calib_table *t, const char *item)
{
    char **p = realloc(t->keep_float, sizeof *p * ((size_t)t->n_keep + 1));
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
    t->keep_float = p;
    if (!(p[t->n_keep] = strdup(item))) return kn_error(KN_ERR_NOMEM, "out of memory");
    t->n_keep++;
    return KN_OK;
}

const kn_calib_entry *kn_calib_table_find(const kn_calib_table *t, const char *name)
{
    for (int i = 0; i < t->n_tensors; i++)
        if (!strcmp(t->tensors[i].name, name)) return &t->tensors[i];
    return NULL;
}

void kn_calib_table_free(kn_calib_table *t)
{
    for (int i = 0; i < t->n_tensors; i++) free(t->tensors[i].name);
    for (int i = 0; i < t->n_keep; i++) free(t->keep_float[i]);
    free(t->tensors);
    free(t->keep_float);
    memset(t, 0, sizeof *t);
}

/* ---- writer ------------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void sb_string(sbuf *b, const char *s)
{
    sb_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') sb_printf(b, "\\%c", *c);
        else if (*c < 0x20) sb_printf(b, "\\u%04x", *c);
        else sb_printf(b, "%c", *c);
    }
    sb_printf(b, "\"");
}

/* %.9g round-trips a float; -0 is written as 0 so that equal tables print alike */
static void sb_float(sbuf *b, double v) { sb_printf(b, "%.9g", v == 0 ? 0.0 : v); }

int kn_calib_table_format(const kn_calib_table *t, char **out_text)
{
    *out_text = NULL;
    sbuf b = {0};
    sb_printf(&b, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n", KN_CALIB_FORMAT, KN_CALIB_VERSION);
    sb_printf(&b, "  \"model_hash\": \"%016llx\",\n", (unsigned long long)t->model_hash);
    sb_printf(&b, "  \"method\": \"%s\",\n", kn_calib_method_name(t->method) ? kn_calib_method_name(t->method) : "?");
    if (t->method == KN_CALIB_PERCENTILE) {
        sb_printf(&b, "  \"percentile\": ");
        sb_float(&b, t->percentile);
        sb_printf(&b, ",\n");
    }
    sb_printf(&b, "  \"per_channel\": %s,\n  \"samples\": %llu,\n  \"keep_float\": [", t->per_channel ? "true" : "false",
              (unsigned long long)t->samples);
    for (int i = 0; i < t->n_keep; i++) {
        if (i) sb_printf(&b, ", ");
        sb_string(&b, t->keep_float[i]);
    }
    sb_printf(&b, "],\n  \"tensors\": {");
    for (int i = 0; i < t->n_tensors; i++) {
        const kn_calib_entry *e = &t->tensors[i];
        sb_printf(&b, "%s\n    ", i ? "," : "");
        sb_string(&b, e->name);
        sb_printf(&b, ": {\"min\": ");
        sb_float(&b, e->min);
        sb_printf(&b, ", \"max\": ");
        sb_float(&b, e->max);
        sb_printf(&b, ", \"scale\": ");
        sb_float(&b, e->scale);
        sb_printf(&b, ", \"zero_point\": %d, \"dtype\": \"%s\", \"hist\": {\"count\": %llu, \"bins\": %d, \"range\": ",
                  (int)e->zero_point, e->dtype == KN_I8 ? "i8" : "u8", (unsigned long long)e->count, e->bins);
        sb_float(&b, e->range);
        sb_printf(&b, "}}");
    }
    sb_printf(&b, "%s}\n}\n", t->n_tensors ? "\n  " : "");
    if (b.oom) {
        free(b.p);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    *out_text = b.p;
    return KN_OK;
}

int kn_calib_table_write(const char *path, const kn_calib_table *t)
{
    char *text;
    int st = kn_output_path_check(path); /* before the work of formatting */
    if (!st) st = kn_calib_table_format(t, &text);
    if (st) return st;
    st = kn_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

/* ---- a small strict JSON parser ---------------------------------------------- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jv {
    jtype type;
    double num;
    bool b, integral; /* integral: written without '.', 'e' */
    char *str;        /* J_STR */
    int n;            /* items of J_ARR / J_OBJ */
    char **keys;      /* J_OBJ */
    struct jv *items;
} jv;

typedef struct jp {
    const char *s, *end, *src;
    int depth;
} jp;

static int jp_fail(const jp *p, const char *at, const char *what)
{
    int line = 1, col = 1;
    for (const char *c = p->s; c < at && c < p->end; c++) {
        if (*c == '\n') line++, col = 1;
        else col++;
    }
    (void)col;
    return kn_error(KN_ERR_INVALID, "%s: line %d: %s", p->src, line, what);
}

static void jv_free(jv *v)
{
    if (!v) return;
    free(v->str);
    for (int i = 0; i < v->n; i++) {
        if (v->keys) free(v->keys[i]);
        jv_free(&v->items[i]);
    }
    free(v->keys);
    free(v->items);
    memset(v, 0, sizeof *v);
}

static const char *skip_ws(const jp *p, const char *c)
{
    while (c < p->end && (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r')) c++;
    return c;
}

static int parse_value(jp *p, const char **pc, jv *out);

static int parse_string(jp *p, const char **pc, char **out)
{
    const char *c = *pc + 1;
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    if (!s) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (;;) {
        if (c >= p->end) {
            free(s);
            return jp_fail(p, c, "unterminated string");
        }
        unsigned char ch = (unsigned char)*c++;
        if (ch == '"') break;
        if (ch < 0x20) {
            free(s);
            return jp_fail(p, c, "control character in a string");
        }
        if (ch == '\\') {
            if (c >= p->end) {
                free(s);
                return jp_fail(p, c, "unterminated string");
            }
            char e = *c++;
            if (e == 'u') {
                unsigned v = 0;
                for (int k = 0; k < 4; k++, c++) {
                    int d = c >= p->end ? -1 : *c >= '0' && *c <= '9' ? *c - '0'
                                           : (*c | 32) >= 'a' && (*c | 32) <= 'f' ? (*c | 32) - 'a' + 10 : -1;
                    if (d < 0) {
                        free(s);
                        return jp_fail(p, c, "bad \\u escape");
                    }
                    v = v * 16 + (unsigned)d;
                }
                if (v == 0 || v >= 0x80) { /* names are ASCII or raw UTF-8 in kiln's tables */
                    free(s);
                    return jp_fail(p, c, "\\u escape outside ASCII (write the UTF-8 bytes)");
                }
                ch = (unsigned char)v;
            } else {
                switch (e) {
                case '"': ch = '"'; break;
                case '\\': ch = '\\'; break;
                case '/': ch = '/'; break;
                case 'b': ch = '\b'; break;
                case 'f': ch = '\f'; break;
                case 'n': ch = '\n'; break;
                case 'r': ch = '\r'; break;
                case 't': ch = '\t'; break;
                default: free(s); return jp_fail(p, c, "bad escape in a string");
                }
            }
        }
        if (n + 2 > cap) {
            char *q = realloc(s, cap *= 2);
            if (!q) {
                free(s);
                return kn_error(KN_ERR_NOMEM, "out of memory");
            }
            s = q;
        }
        s[n++] = (char)ch;
    }
    s[n] = '\0';
    *pc = c;
    *out = s;
    return KN_OK;
}

static int parse_number(jp *p, const char **pc, jv *out)
{
    const char *c = *pc, *start = c;
    bool integral = true;
    if (c < p->end && *c == '-') c++;
    if (c >= p->end || *c < '0' || *c > '9') return jp_fail(p, c, "expected a value");
    if (*c == '0') c++;
    else
        while (c < p->end && *c >= '0' && *c <= '9') c++;
    if (c < p->end && *c == '.') {
        integral = false;
        c++;
        if (c >= p->end || *c < '0' || *c > '9') return jp_fail(p, c, "bad number");
        while (c < p->end && *c >= '0' && *c <= '9') c++;
    }
    if (c < p->end && (*c == 'e' || *c == 'E')) {
        integral = false;
        c++;
        if (c < p->end && (*c == '+' || *c == '-')) c++;
        if (c >= p->end || *c < '0' || *c > '9') return jp_fail(p, c, "bad number");
        while (c < p->end && *c >= '0' && *c <= '9') c++;
    }
    char buf[64];
    if ((size_t)(c - start) >= sizeof buf) return jp_fail(p, start, "number too long");
    memcpy(buf, start, (size_t)(c - start));
    buf[c - start] = '\0';
    out->type = J_NUM;
    out->num = strtod(buf, NULL);
    out->integral = integral;
    *pc = c;
    return KN_OK;
}

static int parse_container(jp *p, const char **pc, jv *out, bool obj)
{
    const char *c = skip_ws(p, *pc + 1);
    out->type = obj ? J_OBJ : J_ARR;
    if (++p->depth > 16) return jp_fail(p, c, "nested too deeply");
    char close = obj ? '}' : ']';
    if (c < p->end && *c == close) {
        *pc = c + 1;
        p->depth--;
        return KN_OK;
    }
    for (;;) {
        jv *items = realloc(out->items, sizeof *items * ((size_t)out->n + 1));
        if (!items) return kn_error(KN_ERR_NOMEM, "out of memory");
        out->items = items;
        memset(&items[out->n], 0, sizeof *items);
        if (obj) {
            char **keys = realloc(out->keys, sizeof *keys * ((size_t)out->n + 1));
            if (!keys) return kn_error(KN_ERR_NOMEM, "out of memory");
            out->keys = keys;
            keys[out->n] = NULL;
            if (c >= p->end || *c != '"') return jp_fail(p, c, "expected a key (a string)");
            int st = parse_string(p, &c, &keys[out->n]);
            if (st) return st;
            for (int i = 0; i < out->n; i++)
                if (!strcmp(keys[i], keys[out->n])) {
                    char msg[300];
                    snprintf(msg, sizeof msg, "key \"%.200s\" appears twice in one object", keys[i]);
                    out->n++;
                    return jp_fail(p, c, msg);
                }
            c = skip_ws(p, c);
            if (c >= p->end || *c != ':') {
                out->n++;
                return jp_fail(p, c, "expected ':'");
            }
            c = skip_ws(p, c + 1);
        }
        int st = parse_value(p, &c, &out->items[out->n]);
        out->n++;
        if (st) return st;
        c = skip_ws(p, c);
        if (c < p->end && *c == ',') {
            c = skip_ws(p, c + 1);
            continue;
        }
        if (c < p->end && *c == close) break;
        return jp_fail(p, c, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    *pc = c + 1;
    p->depth--;
    return KN_OK;
}

static int parse_value(jp *p, const char **pc, jv *out)
{
    const char *c = skip_ws(p, *pc);
    *pc = c;
    if (c >= p->end) return jp_fail(p, c, "unexpected end of file");
    if (*c == '{' || *c == '[') return parse_container(p, pc, out, *c == '{');
    if (*c == '"') {
        out->type = J_STR;
        return parse_string(p, pc, &out->str);
    }
    static const struct { const char *word; jtype t; bool b; } k_words[] = {
        {"true", J_BOOL, true}, {"false", J_BOOL, false}, {"null", J_NULL, false}};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(k_words[i].word);
        if ((size_t)(p->end - c) >= n && !memcmp(c, k_words[i].word, n)) {
            out->type = k_words[i].t;
            out->b = k_words[i].b;
            *pc = c + n;
            return KN_OK;
        }
    }
    return parse_number(p, pc, out);
}

/* ---- the table's schema -------------------------------------------------------- */

static const jv *get(const jv *obj, const char *key)
{
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

/* Refuses keys of obj that are not in allowed (NULL-terminated). */
static int only_keys(const char *src, const char *where, const jv *obj, const char *const *allowed)
{
    for (int i = 0; i < obj->n; i++) {
        bool ok = false;
        for (int k = 0; allowed[k]; k++) ok |= !strcmp(obj->keys[i], allowed[k]);
        if (!ok) return kn_error(KN_ERR_INVALID, "%s: %s%s: unknown field", src, where, obj->keys[i]);
    }
    return KN_OK;
}

static int need(const char *src, const char *where, const char *key, const jv *obj, jtype type, const jv **out)
{
    static const char *const k_names[] = {"null", "true or false", "a number", "a string", "an array", "an object"};
    *out = get(obj, key);
    if (!*out) return kn_error(KN_ERR_INVALID, "%s: %s%s: missing", src, where, key);
    if ((*out)->type != type)
        return kn_error(KN_ERR_INVALID, "%s: %s%s: expected %s", src, where, key, k_names[type]);
    return KN_OK;
}

static int need_finite(const char *src, const char *where, const char *key, const jv *obj, double *out)
{
    const jv *v;
    int st = need(src, where, key, obj, J_NUM, &v);
    if (st) return st;
    if (!isfinite(v->num) || fabs(v->num) > 3.4028234663852886e38)
        return kn_error(KN_ERR_INVALID, "%s: %s%s: not a finite float32", src, where, key);
    *out = v->num;
    return KN_OK;
}

static int need_uint(const char *src, const char *where, const char *key, const jv *obj, double max, uint64_t *out)
{
    const jv *v;
    int st = need(src, where, key, obj, J_NUM, &v);
    if (st) return st;
    if (!v->integral || v->num < 0 || v->num > max)
        return kn_error(KN_ERR_INVALID, "%s: %s%s: expected a whole number in [0, %.0f]", src, where, key, max);
    *out = (uint64_t)v->num;
    return KN_OK;
}

static int read_tensor(const char *src, const char *name, const jv *o, kn_calib_entry *e)
{
    static const char *const keys[] = {"min", "max", "scale", "zero_point", "dtype", "hist", NULL};
    static const char *const hkeys[] = {"count", "bins", "range", NULL};
    char where[400], hwhere[420];
    snprintf(where, sizeof where, "tensors.%.300s.", name);
    snprintf(hwhere, sizeof hwhere, "%shist.", where);
    if (o->type != J_OBJ) return kn_error(KN_ERR_INVALID, "%s: tensors.%s: expected an object", src, name);
    int st = only_keys(src, where, o, keys);
    double mn = 0, mx = 0, sc = 0, range = 0;
    const jv *v, *h = NULL;
    if (!st) st = need_finite(src, where, "min", o, &mn);
    if (!st) st = need_finite(src, where, "max", o, &mx);
    if (!st) st = need_finite(src, where, "scale", o, &sc);
    if (!st && mn > mx) st = kn_error(KN_ERR_INVALID, "%s: %smin: %.9g is above max %.9g", src, where, mn, mx);
    if (!st && !(sc > 0) ) st = kn_error(KN_ERR_INVALID, "%s: %sscale: must be positive, not %.9g", src, where, sc);
    if (!st) st = need(src, where, "dtype", o, J_STR, &v);
    if (!st) {
        if (!strcmp(v->str, "u8")) e->dtype = KN_U8;
        else if (!strcmp(v->str, "i8")) e->dtype = KN_I8;
        else st = kn_error(KN_ERR_INVALID, "%s: %sdtype: expected \"u8\" or \"i8\", not \"%s\"", src, where, v->str);
    }
    if (!st) st = need(src, where, "zero_point", o, J_NUM, &v);
    if (!st) {
        double lo = e->dtype == KN_U8 ? 0 : -128, hi = e->dtype == KN_U8 ? 255 : 127;
        if (!v->integral || v->num < lo || v->num > hi)
            st = kn_error(KN_ERR_INVALID, "%s: %szero_point: expected a whole number in [%g, %g]", src, where, lo, hi);
        else e->zero_point = (int32_t)v->num;
    }
    if (!st) st = need(src, where, "hist", o, J_OBJ, &h);
    if (!st) st = only_keys(src, hwhere, h, hkeys);
    uint64_t bins = 0;
    if (!st) st = need_uint(src, hwhere, "count", h, 9007199254740992.0, &e->count);
    if (!st) st = need_uint(src, hwhere, "bins", h, 1 << 20, &bins);
    if (!st) st = need_finite(src, hwhere, "range", h, &range);
    if (!st && range < 0) st = kn_error(KN_ERR_INVALID, "%s: %srange: negative", src, hwhere);
    e->min = (float)mn, e->max = (float)mx, e->scale = (float)sc, e->bins = (int)bins, e->range = range;
    return st;
}

static int read_table(const char *src, const jv *root, kn_calib_table *t)
{
    static const char *const keys[] = {"format", "version", "model_hash", "method", "percentile", "per_channel",
                                       "samples", "keep_float", "tensors", NULL};
    if (root->type != J_OBJ) return kn_error(KN_ERR_INVALID, "%s: expected a JSON object", src);
    int st = only_keys(src, "", root, keys);
    const jv *v;
    if (!st) st = need(src, "", "format", root, J_STR, &v);
    if (!st && strcmp(v->str, KN_CALIB_FORMAT))
        st = kn_error(KN_ERR_INVALID, "%s: format: \"%s\", expected \"%s\"", src, v->str, KN_CALIB_FORMAT);
    uint64_t u = 0;
    if (!st) st = need_uint(src, "", "version", root, 1e9, &u);
    if (!st && u != KN_CALIB_VERSION)
        st = kn_error(KN_ERR_UNSUPPORTED, "%s: version: %llu, this kiln reads version %d", src, (unsigned long long)u,
                      KN_CALIB_VERSION);
    if (!st) st = need(src, "", "model_hash", root, J_STR, &v);
    if (!st) {
        char *end = NULL;
        errno = 0;
        t->model_hash = strtoull(v->str, &end, 16);
        if (strlen(v->str) != 16 || *end || errno)
            st = kn_error(KN_ERR_INVALID, "%s: model_hash: expected 16 hex digits, not \"%s\"", src, v->str);
    }
    if (!st) st = need(src, "", "method", root, J_STR, &v);
    if (!st) {
        int m = kn_calib_method_from_name(v->str);
        if (m < 0) st = kn_error(KN_ERR_INVALID, "%s: method: unknown method \"%s\"", src, v->str);
        else t->method = (kn_calib_method)m;
    }
    if (!st && t->method == KN_CALIB_PERCENTILE) {
        double p = 0;
        st = need_finite(src, "", "percentile", root, &p);
        if (!st && !(p > 0 && p <= 100)) st = kn_error(KN_ERR_INVALID, "%s: percentile: %g is not in (0, 100]", src, p);
        t->percentile = p;
    } else if (!st && get(root, "percentile"))
        st = kn_error(KN_ERR_INVALID, "%s: percentile: only for method \"percentile\"", src);
    if (!st) st = need(src, "", "per_channel", root, J_BOOL, &v);
    if (!st) t->per_channel = v->b;
    if (!st) st = need_uint(src, "", "samples", root, 9007199254740992.0, &t->samples);
    if (!st) st = need(src, "", "keep_float", root, J_ARR, &v);
    for (int i = 0; !st && i < v->n; i++) {
        if (v->items[i].type != J_STR) st = kn_error(KN_ERR_INVALID, "%s: keep_float[%d]: expected a string", src, i);
        else st = kn_calib_table_add_keep(t, v->items[i].str);
    }
    if (!st) st = need(src, "", "tensors", root, J_OBJ, &v);
    for (int i = 0; !st && i < v->n; i++) {
        kn_calib_entry e = {.name = v->keys[i]};
        st = read_tensor(src, v->keys[i], &v->items[i], &e);
        if (!st) st = kn_calib_table_add(t, &e);
    }
    return st;
}

int kn_calib_table_parse(const char *text, size_t len, const char *source, kn_calib_table *out)
{
    memset(out, 0, sizeof *out);
    jp p = {.s = text, .end = text + len, .src = source};
    jv root = {0};
    const char *c = text;
    int st = parse_value(&p, &c, &root);
    if (!st && skip_ws(&p, c) != p.end) st = jp_fail(&p, c, "text after the table");
    if (!st) st = read_table(source, &root, out);
    jv_free(&root);
    if (st) kn_calib_table_free(out);
    return st;
}

int kn_calib_table_read(const char *path, kn_calib_table *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return kn_error(KN_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return kn_error(KN_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size > (1 << 28)) {
        fclose(f);
        return kn_error(KN_ERR_INVALID, "%s: %lld bytes, too large for a calibration table", path,
                        (long long)sb.st_size);
    }
    char *text = malloc((size_t)sb.st_size + 1);
    if (!text) {
        fclose(f);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    size_t got = fread(text, 1, (size_t)sb.st_size, f);
    fclose(f);
    int st = got == (size_t)sb.st_size ? kn_calib_table_parse(text, got, path, out)
                                        : kn_error(KN_ERR_IO, "%s: read error", path);
    free(text);
    return st;
}
