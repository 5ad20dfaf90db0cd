/*
 * tools/kiln/prof_files.c — the files `kiln profile` writes: a Chrome trace
 * (JSON trace-event format, "X" complete events and "C" counters, times in
 * microseconds) and an SVG drawing of the arena plan over the steps. Both
 * are built in memory and written under a temporary name in the target's
 * folder, then renamed, so a reader never sees half a file.
 */
#include "prof_report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kiln/status.h"

void kn_prof_live_bytes(const kn_meta *m, int64_t *out)
{
    memset(out, 0, sizeof *out * (size_t)m->n_steps);
    for (int b = 0; b < m->n_buffers; b++)
        for (int s = m->buffers[b].first_step; s <= m->buffers[b].last_step && s < m->n_steps; s++)
            out[s] += m->buffers[b].nbytes;
}

/* mkstemp's name beside path, then rename (cli.h): never a planted file,
 * never half a file, and the mode fopen would give. */
static int write_atomic(const char *path, const char *data, size_t len)
{
    char *tmp;
    FILE *f;
    int st = kn_cli_create_beside(path, &tmp, &f);
    if (st) return st;
    bool ok = len == 0 || fwrite(data, 1, len, f) == len;
    return kn_cli_commit_file(tmp, f, path, ok);
}

/* A string as a JSON string literal (quotes, backslashes, control bytes escaped). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* Text for XML character data and attribute values. */
static void xml_str(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* XML 1.0 allows no control characters but tab, newline, return */
            if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') fputc('?', f);
            else fputc(*p, f);
        }
    }
}

/* Builds a file's text with `fill` into memory, then writes it atomically. */
static int write_with(const char *path, const kn_prof *p, void (*fill)(FILE *, const kn_prof *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return kn_error(KN_ERR_NOMEM, "out of memory");
    fill(f, p);
    if (fclose(f) != 0) {
        free(buf);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    int st = write_atomic(path, buf, len);
    free(buf);
    return st;
}

/* ---- Chrome trace ----------------------------------------------------------- */

static void trace_step(FILE *f, const kn_prof *p, int run, int i, double ts_us, double dur_us)
{
    const kn_abi_step *t = &p->m->steps[i];
    fputs(",\n{\"name\":", f);
    json_str(f, t->name);
    fputs(",\"cat\":", f);
    json_str(f, t->op_type);
    fprintf(f, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":1,\"args\":{\"op\":", ts_us, dur_us);
    json_str(f, t->op_type);
    fprintf(f, ",\"step\":%d,\"run\":%d,\"flops\":%lld,\"bytes_read\":%lld,\"bytes_written\":%lld,"
               "\"bytes_live\":%lld}}",
            i, run, (long long)t->flops, (long long)t->bytes_read, (long long)t->bytes_written,
            (long long)p->live[i]);
    fprintf(f, ",\n{\"name\":\"arena bytes live\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":1,\"args\":{\"bytes\":%lld}}", ts_us,
            (long long)p->live[i]);
}

static void fill_trace(FILE *f, const kn_prof *p)
{
    int n = p->m->n_steps;
    fputs("{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":", f);
    char label[4200];
    snprintf(label, sizeof label, "kiln profile %s (%d thread%s)", p->path, p->threads, p->threads > 1 ? "s" : "");
    json_str(f, label);
    fputs("}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"steps\"}}", f);
    /* the runs back to back on one timeline, 10 us apart */
    double ts = 0;
    for (int r = 0; r < p->runs; r++) {
        for (int i = 0; i < n; i++) {
            double dur = (double)p->ns[(size_t)r * (size_t)n + (size_t)i] / 1e3;
            trace_step(f, p, r, i, ts, dur);
            ts += dur;
        }
        fprintf(f, ",\n{\"name\":\"arena bytes live\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":1,\"args\":{\"bytes\":0}}", ts);
        ts += 10;
    }
    fputs("\n],\"displayTimeUnit\":\"ms\"}\n", f);
}

int kn_prof_write_trace(const kn_prof *p, const char *path) { return write_with(path, p, fill_trace); }

/* ---- arena SVG -------------------------------------------------------------- */

enum { SVG_W = 1100, SVG_H = 640, LEFT = 110, RIGHT = 20, TOP = 50, BOTTOM = 60 };

static void svg_axes(FILE *f, const kn_prof *p, double pw, double ph)
{
    const kn_meta *m = p->m;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#444\"/>\n", LEFT,
            TOP, pw, ph);
    for (int k = 0; k <= 4; k++) {
        double y = TOP + ph * k / 4;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%.3g MiB</text>\n", LEFT - 6, y + 4,
                (double)m->arena_bytes * k / 4 / 1048576.0);
    }
    int ticks = m->n_steps < 10 ? m->n_steps : 10;
    for (int k = 0; k <= ticks; k++) {
        int s = ticks ? (int)((long long)m->n_steps * k / ticks) : 0;
        double x = LEFT + pw * s / (m->n_steps ? m->n_steps : 1);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">%d</text>\n", x,
                TOP + ph + 16, s);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">step (run order)</text>\n",
            LEFT + pw / 2, SVG_H - 18);
    fprintf(f, "<text x=\"20\" y=\"%.1f\" font-size=\"13\" transform=\"rotate(-90 20 %.1f)\" "
               "text-anchor=\"middle\">arena offset</text>\n", TOP + ph / 2, TOP + ph / 2);
    fputs("<text x=\"10\" y=\"24\" font-size=\"15\">", f);
    xml_str(f, p->path);
    fprintf(f, ": arena %lld bytes (peak) for %lld bytes of intermediates, %d steps</text>\n",
            (long long)m->arena_bytes, (long long)m->intermediate_bytes, m->n_steps);
}

static void svg_buffer(FILE *f, const kn_abi_buffer *b, const kn_meta *m, double pw, double ph)
{
    double sx = pw / (m->n_steps ? m->n_steps : 1), sy = m->arena_bytes ? ph / (double)m->arena_bytes : 0;
    double h = (double)b->nbytes * sy;
    uint32_t hash = 2166136261u;
    for (const char *c = b->name; *c; c++) hash = (hash ^ (unsigned char)*c) * 16777619u;
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"hsl(%u,65%%,62%%)\" "
               "stroke=\"#333\" stroke-width=\"0.3\"><title>",
            LEFT + b->first_step * sx, TOP + (double)b->offset * sy, (b->last_step - b->first_step + 1) * sx,
            h < 0.5 ? 0.5 : h, hash % 360);
    xml_str(f, b->name);
    fprintf(f, ": %lld bytes at offset %lld, steps %d-%d</title></rect>\n", (long long)b->nbytes,
            (long long)b->offset, b->first_step, b->last_step);
    /* the name inside the rectangle where it fits (about 6 px a character) */
    double w = (b->last_step - b->first_step + 1) * sx;
    if (h >= 12 && w >= 6.0 * (double)strlen(b->name) + 4) {
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\">", LEFT + b->first_step * sx + 2,
                TOP + (double)b->offset * sy + 11);
        xml_str(f, b->name);
        fputs("</text>\n", f);
    }
}

static void fill_svg(FILE *f, const kn_prof *p)
{
    double pw = SVG_W - LEFT - RIGHT, ph = SVG_H - TOP - BOTTOM;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n",
            SVG_W, SVG_H, SVG_W, SVG_H);
    svg_axes(f, p, pw, ph);
    for (int b = 0; b < p->m->n_buffers; b++) svg_buffer(f, &p->m->buffers[b], p->m, pw, ph);
    fputs("</svg>\n", f);
}

int kn_prof_write_svg(const kn_prof *p, const char *path) { return write_with(path, p, fill_svg); }
