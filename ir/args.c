/* args.c: argv as both tools read it (args.h). */
#include "args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool pp_argv_init(pp_argv *a, int argc, char **argv) {
    *a = (pp_argv){0};
    const int cap = 2 * argc + 1;
    a->argv = calloc((size_t)cap, sizeof *a->argv);
    a->glued = calloc((size_t)cap, sizeof *a->glued);
    a->owned = calloc((size_t)cap, sizeof *a->owned);
    if (!a->argv || !a->glued || !a->owned) {
        pp_argv_free(a);
        return false;
    }
    for (int k = 0; k < argc; k++) a->argv[k] = argv[k];
    a->argc = argc;
    return true;
}

void pp_argv_free(pp_argv *a) {
    for (int k = 0; a->owned && k < a->n_owned; k++) free(a->owned[k]);
    free(a->owned);
    free(a->argv);
    free(a->glued);
    *a = (pp_argv){0};
}

bool pp_argv_at(pp_argv *a, int i, const char *const *keep) {
    if (i <= 0 || i >= a->argc) return true;
    if (a->glued[i]) return false;
    char *s = a->argv[i];
    char *eq = strchr(s, '=');
    if (strncmp(s, "--", 2) || !eq || eq == s + 2) return true;
    for (int k = 0; keep && keep[k]; k++)
        if (strlen(keep[k]) == (size_t)(eq - s) && !strncmp(s, keep[k], (size_t)(eq - s))) return true;
    char *name = malloc((size_t)(eq - s) + 1);
    if (!name) return true; /* left whole: reported as an unknown option */
    memcpy(name, s, (size_t)(eq - s));
    name[eq - s] = 0;
    a->owned[a->n_owned++] = name;
    memmove(a->argv + i + 2, a->argv + i + 1, (size_t)(a->argc - i) * sizeof *a->argv); /* with the NULL */
    memmove(a->glued + i + 2, a->glued + i + 1, (size_t)(a->argc - i - 1) * sizeof *a->glued);
    a->argv[i] = name;
    a->argv[i + 1] = eq + 1;
    a->glued[i + 1] = true;
    a->argc++;
    return true;
}

const char *pp_argv_suggest(const char *bad, const char *const *names, int n) {
    const char *eq = strchr(bad, '=');
    const size_t len = eq ? (size_t)(eq - bad) : strlen(bad);
    const char *pre = NULL;
    int n_pre = 0;
    for (int k = 0; len > 2 && k < n; k++)
        if (strlen(names[k]) > len && !strncmp(names[k], bad, len) && (!pre || strcmp(pre, names[k])))
            pre = names[k], n_pre++;
    if (n_pre == 1) return pre;
    int limit = (int)len / 3;
    if (limit < 1) limit = 1;
    if (limit > 3) limit = 3;
    const char *best = NULL;
    int bd = limit + 1;
    bool tie = false;
    for (int k = 0; k < n; k++) {
        const int d = pp_edit_distance(bad, len, names[k]);
        if (d < bd) best = names[k], bd = d, tie = false;
        else if (d == bd && best && strcmp(best, names[k])) tie = true;
    }
    return tie ? NULL : best;
}

/* ---- option tables ------------------------------------------------------------------ */

void pp_opt_add(pp_opt_out *o, const char *fmt, ...) {
    if (o->len >= o->cap) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
    if (o->len >= o->cap) o->len = o->cap; /* truncated: stays full */
}

const char *pp_opt_num(double x, char *buf, size_t n) {
    snprintf(buf, n, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, n, "%.17g", x);
    return buf;
}

/* The length of the first name of a "a|b|c" list starting at s. */
static size_t name_len(const char *s) { return strcspn(s, "|"); }

/* Whether `arg` is one of row's names (glued: "NAME=..." of an optional-value row). */
static bool row_matches(const pp_opt *r, const char *arg, const char **glued) {
    *glued = NULL;
    for (const char *n = r->names; *n;) {
        const size_t len = name_len(n);
        if (!strncmp(arg, n, len) && (!arg[len] || ((r->flags & PP_OPT_OPTVAL) && arg[len] == '='))) {
            if (arg[len] == '=') *glued = arg + len + 1;
            return true;
        }
        n += len + (n[len] == '|');
    }
    return false;
}

pp_status pp_opt_bad(const pp_opt *row, const char *name, const char *v, pp_err *err) {
    char what[96];
    if (row->what) snprintf(what, sizeof what, "%s", row->what);
    else if (row->kind == PP_OPT_WORD) { /* "a, b or c" */
        size_t k = 0;
        for (const char *w = row->words; *w && k < sizeof what;) {
            const size_t len = name_len(w);
            const bool last = !w[len];
            k += (size_t)snprintf(what + k, sizeof what - k, "%s%.*s", w == row->words ? "" : last ? " or " : ", ",
                                  (int)len, w);
            w += len + !last;
        }
    } else { /* the range, whole numbers in full */
        char lo[40], hi[40];
        snprintf(what, sizeof what, "%s..%s", pp_opt_num(row->lo, lo, sizeof lo), pp_opt_num(row->hi, hi, sizeof hi));
    }
    if (!v) return PP_FAIL(err, PP_EINVAL, "%s needs %s", name, what);
    return PP_FAIL(err, PP_EINVAL, "%s needs %s, got '%s'", name, what, v);
}

/* Check v against the row's kind and store it at the row's field. */
static pp_status store(const pp_opt *r, void *base, const char *name, const char *v, pp_err *err) {
    char *field = r->off == PP_OPT_NOFIELD ? NULL : (char *)base + r->off;
    if (r->kind == PP_OPT_FLAG) {
        if (field) *(bool *)field = true;
        return PP_OK;
    }
    if (!v || (!*v && !(r->flags & PP_OPT_OPTVAL))) return pp_opt_bad(r, name, v, err);
    char *end;
    errno = 0;
    switch (r->kind) {
    case PP_OPT_INT:
    case PP_OPT_I64: {
        const long long x = strtoll(v, &end, 10);
        if (errno || *end || (double)x < r->lo || (double)x > r->hi) return pp_opt_bad(r, name, v, err);
        if (field && r->kind == PP_OPT_INT) *(int *)field = (int)x;
        else if (field) *(int64_t *)field = x;
        return PP_OK;
    }
    case PP_OPT_NUM: {
        const double x = strtod(v, &end);
        if (errno || *end || !(x >= r->lo && x <= r->hi)) return pp_opt_bad(r, name, v, err);
        if (field) *(double *)field = x;
        return PP_OK;
    }
    case PP_OPT_STR:
        if (field) *(const char **)field = v;
        return PP_OK;
    case PP_OPT_WORD: {
        int k = 0;
        for (const char *w = r->words; *w; k++) {
            const size_t len = name_len(w);
            if (strlen(v) == len && !strncmp(v, w, len)) {
                if (field) *(int *)field = k;
                return PP_OK;
            }
            w += len + (w[len] == '|');
        }
        return pp_opt_bad(r, name, v, err);
    }
    case PP_OPT_PAIR: {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1]) return pp_opt_bad(r, name, v, err);
        return PP_OK;
    }
    default:
        return PP_OK;
    }
}

int pp_opts_take(pp_argv *a, int *i, const pp_opt_table *t, int nt, pp_err *err) {
    const char *arg = a->argv[*i];
    for (int k = 0; k < nt; k++)
        for (int j = 0; j < t[k].n; j++) {
            const pp_opt *r = &t[k].rows[j];
            const char *glued;
            if (!row_matches(r, arg, &glued)) continue;
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
            const char *v = NULL;
            if (r->kind == PP_OPT_FLAG && *i + 1 < a->argc && a->glued[*i + 1]) {
                PP_FAIL(err, PP_EINVAL, "%s takes no value", name);
                return -1;
            }
            if (r->flags & PP_OPT_OPTVAL) v = glued ? glued : "";
            else if (r->kind != PP_OPT_FLAG && *i + 1 < a->argc) v = a->argv[++*i];
            if (store(r, t[k].base, name, v, err) != PP_OK) return -1;
            if (r->set && r->set(t[k].base, name, v, err) != PP_OK) return -1;
            return 1;
        }
    return 0;
}

bool pp_opts_split(pp_argv *a, int i, const pp_opt_table *t, int nt) {
    /* the optional-value rows' names, each a string of its own */
    static char names[16][48];
    const char *keep[17];
    int n = 0;
    for (int k = 0; k < nt; k++)
        for (int j = 0; j < t[k].n; j++)
            for (const char *s = t[k].rows[j].names; *s && (t[k].rows[j].flags & PP_OPT_OPTVAL) && n < 16;) {
                const size_t len = name_len(s);
                snprintf(names[n], sizeof names[n], "%.*s", (int)len, s);
                keep[n] = names[n];
                n++;
                s += len + (s[len] == '|');
            }
    keep[n] = NULL;
    return pp_argv_at(a, i, keep);
}

int pp_opts_names(const pp_opt_table *t, int nt, const char **names, int cap) {
    /* the names as separate strings: copies in one static pool */
    static char pool[8192];
    size_t used = 0;
    int n = 0;
    for (int k = 0; k < nt; k++)
        for (int j = 0; j < t[k].n; j++)
            for (const char *s = t[k].rows[j].names; *s && n < cap;) {
                const size_t len = name_len(s);
                if (used + len + 1 > sizeof pool) return n;
                memcpy(pool + used, s, len);
                pool[used + len] = 0;
                names[n++] = pool + used;
                used += len + 1;
                s += len + (s[len] == '|');
            }
    return n;
}

/* One row of --help: its names and value, then its help (and default)
 * wrapped at 100 columns, indented 20. */
static void usage_row(FILE *f, const pp_opt *r) {
    char head[160];
    size_t k = (size_t)snprintf(head, sizeof head, "  ");
    for (const char *s = r->names; *s && k < sizeof head;) {
        const size_t len = name_len(s);
        const char *sep = s == r->names ? "" : ", ";
        if (!r->arg) k += (size_t)snprintf(head + k, sizeof head - k, "%s%.*s", sep, (int)len, s);
        else if (r->flags & PP_OPT_OPTVAL)
            k += (size_t)snprintf(head + k, sizeof head - k, "%s%.*s[=%s]", sep, (int)len, s, r->arg);
        else k += (size_t)snprintf(head + k, sizeof head - k, "%s%.*s %s", sep, (int)len, s, r->arg);
        s += len + (s[len] == '|');
    }
    char text[1024];
    snprintf(text, sizeof text, "%s%s%s%s", r->help, r->dflt ? " (default: " : "", r->dflt ? r->dflt : "",
             r->dflt ? ")" : "");
    enum { COL = 20, WIDTH = 100 };
    int col = fprintf(f, "%s", head);
    if (col > COL - 2) {
        fputc('\n', f);
        col = 0;
    }
    for (const char *w = text; *w;) {
        while (*w == ' ') w++;
        const size_t len = strcspn(w, " ");
        if (!len) break;
        if (col > COL && col + 1 + (int)len > WIDTH) {
            fputc('\n', f);
            col = 0;
        }
        if (col < COL) col += fprintf(f, "%*s", COL - col, "");
        else col += fprintf(f, " ");
        col += fprintf(f, "%.*s", (int)len, w);
        w += len;
    }
    fputc('\n', f);
}

void pp_opts_usage(FILE *f, const pp_opt_table *t, int nt) {
    for (int m = 1; m < 16; m++)
        for (int k = 0; k < nt; k++)
            for (int j = 0; j < t[k].n; j++)
                if (t[k].rows[j].main == m) usage_row(f, &t[k].rows[j]);
    for (int k = 0; k < nt; k++)
        for (int j = 0; j < t[k].n; j++) {
            const pp_opt *r = &t[k].rows[j];
            if (r->section) fprintf(f, "%s:\n", r->section);
            if (r->main <= 0) usage_row(f, r);
        }
}

/* The kinds' own text of a row: recorded " NAME VALUE" where set (or
 * always), agreed " NAME VALUE" always. */
static void row_text(const pp_opt *r, const void *base, bool agree, pp_opt_out *o) {
    const int nl = (int)name_len(r->names);
    const char *field = r->off == PP_OPT_NOFIELD ? NULL : (const char *)base + r->off;
    if (!field) return;
    const bool always = agree || (r->flags & PP_OPT_ALWAYS);
    const double dflt = r->dflt ? strtod(r->dflt, NULL) : 0;
    char t[40];
    switch (r->kind) {
    case PP_OPT_FLAG:
        if (agree) pp_opt_add(o, " %.*s %s", nl, r->names, *(const bool *)field ? "yes" : "no");
        else if (*(const bool *)field) pp_opt_add(o, " %.*s", nl, r->names);
        return;
    case PP_OPT_INT:
        if (always || *(const int *)field != dflt) pp_opt_add(o, " %.*s %d", nl, r->names, *(const int *)field);
        return;
    case PP_OPT_I64:
        if (always || *(const int64_t *)field != dflt)
            pp_opt_add(o, " %.*s %lld", nl, r->names, (long long)*(const int64_t *)field);
        return;
    case PP_OPT_NUM:
        if (always || *(const double *)field != dflt)
            pp_opt_add(o, " %.*s %s", nl, r->names, pp_opt_num(*(const double *)field, t, sizeof t));
        return;
    case PP_OPT_STR: {
        const char *s = *(const char *const *)field;
        if (agree) pp_opt_add(o, " %.*s %s", nl, r->names, (r->flags & PP_OPT_PATH) ? (s ? "given" : "none") : s ? s : "(none)");
        else if (s) pp_opt_add(o, " %.*s %s", nl, r->names, (r->flags & PP_OPT_PATH) ? "(file)" : s);
        return;
    }
    case PP_OPT_WORD: {
        const int x = *(const int *)field;
        if (!always && x == 0) return;
        const char *w = r->words;
        for (int k = 0; k < x && *w; k++) w += name_len(w) + (w[name_len(w)] == '|');
        pp_opt_add(o, " %.*s %.*s", nl, r->names, (int)name_len(w), w);
        return;
    }
    default:
        return;
    }
}

void pp_opts_text(const pp_opt_table *t, int nt, unsigned flags, char *buf, size_t cap) {
    if (!cap) return;
    pp_opt_out o = {buf, cap, 0};
    buf[0] = 0;
    const bool agree = flags & PP_OPT_AGREE;
    for (int k = 0; k < nt; k++)
        for (int j = 0; j < t[k].n; j++) {
            const pp_opt *r = &t[k].rows[j];
            if (!(r->flags & flags)) continue;
            if (r->text) r->text(t[k].base, agree, &o);
            else row_text(r, t[k].base, agree, &o);
        }
    if (o.len >= cap) buf[cap - 1] = 0;
    if (buf[0] == ' ') memmove(buf, buf + 1, strlen(buf)); /* no leading space */
}
