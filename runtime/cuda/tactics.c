/* tactics.c: the convolution tactic cache's signatures and tables (tactics.h). */
#include "tactics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every field of pcu_conv is in the signature: a field added to it must be
 * added here too (and the committed tables re-tuned). The size check below
 * catches a field that grows the struct, not one that fills its padding
 * (as dt, the element type, did): test_tactics perturbs each field. */
_Static_assert(sizeof(pcu_conv) == 8 * 4 + 15 * 8 + 12 * 8 + 2 * 4 + 8, "pcu_conv changed: update pcu_conv_signature");

typedef struct sbuf {
    char *p;
    size_t n, at;
    bool ok;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int k = b->ok ? vsnprintf(b->p + b->at, b->n - b->at, fmt, ap) : -1;
    va_end(ap);
    if (k < 0 || (size_t)k >= b->n - b->at) b->ok = false;
    else b->at += (size_t)k;
}

static void dims(sbuf *b, const char *tag, const int64_t *d, int n) {
    put(b, " %s", tag);
    for (int i = 0; i < n; i++) put(b, i ? "x%" PRId64 : "%" PRId64, d[i]);
}

bool pcu_conv_signature(const pcu_conv *c, bool fused, bool strict, char *buf, size_t n) {
    sbuf b = {buf, n, 0, n > 0};
    const int nd = 2 + c->nsp, ns = c->nsp;
    put(&b, "%s g%d t%d", c->wgrad ? "wgrad" : c->transpose ? "dgrad" : "fwd", (int)c->groups, (int)c->dt);
    dims(&b, "x", c->x, nd);
    dims(&b, "w", c->w, nd);
    dims(&b, "y", c->y, nd);
    dims(&b, "pa", c->pre, ns);
    dims(&b, "pb", c->post, ns);
    dims(&b, "s", c->stride, ns);
    dims(&b, "d", c->dil, ns);
    if (fused) {
        put(&b, " fused b%d r%d a%d", (int)c->has_bias, (int)c->has_res, (int)c->act);
        if (c->act == 2) put(&b, " clip%.9g,%.9g", (double)c->lo, (double)c->hi);
    }
    put(&b, strict ? " f32" : " fast");
    if (c->nhwc) put(&b, " nhwc"); /* (NCHW says nothing: the tables tuned before layouts keep their signatures) */
    return b.ok;
}

bool pcu_tactic_line(const pcu_tactic *t, char *buf, size_t n) {
    sbuf b = {buf, n, 0, n > 0};
    put(&b, "%s\t%" PRId64 "\t", t->sig, t->gidx);
    if (!t->n_knobs) put(&b, "-");
    for (int k = 0; k < t->n_knobs; k++) put(&b, k ? ",%" PRId64 ":%" PRId64 : "%" PRId64 ":%" PRId64, t->knob_type[k], t->knob_value[k]);
    put(&b, "\t%" PRId64 "\t%.3f\n", t->workspace, t->us);
    return b.ok;
}

static int by_sig(const void *a, const void *b) {
    return strcmp(((const pcu_tactic *)a)->sig, ((const pcu_tactic *)b)->sig);
}

/* A whole decimal int64 from s to end (no sign unless negative allowed) */
static bool int_field(const char *s, const char *end, bool neg, int64_t *v) {
    if (s == end || (*s == '-' && !neg)) return false;
    char tmp[32];
    if ((size_t)(end - s) >= sizeof tmp) return false;
    memcpy(tmp, s, (size_t)(end - s));
    tmp[end - s] = 0;
    char *e;
    errno = 0;
    const long long x = strtoll(tmp, &e, 10);
    if (*e || errno) return false;
    *v = x;
    return true;
}

static bool knobs_field(const char *s, const char *end, pcu_tactic *t) {
    t->n_knobs = 0;
    if (end - s == 1 && *s == '-') return true;
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s)), *stop = comma ? comma : end;
        const char *colon = memchr(s, ':', (size_t)(stop - s));
        if (!colon || t->n_knobs == PCU_TACTIC_KNOBS || !int_field(s, colon, false, &t->knob_type[t->n_knobs]) ||
            !int_field(colon + 1, stop, true, &t->knob_value[t->n_knobs]))
            return false;
        t->n_knobs++;
        s = comma ? comma + 1 : end;
        if (comma && s == end) return false;
    }
    return true;
}

/* One line (without its newline) into t: "" when it parses, else what is wrong */
static const char *parse_line(const char *s, const char *end, pcu_tactic *t) {
    const char *f[5], *fe[5];
    int n = 0;
    for (const char *p = s; n < 5; n++) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        f[n] = p, fe[n] = tab ? tab : end;
        if (!tab) {
            n++;
            break;
        }
        p = tab + 1;
    }
    if (n != 5 || memchr(f[4], '\t', (size_t)(end - f[4])))
        return "it needs five fields split by tabs: signature, engine, knobs, workspace, microseconds";
    memset(t, 0, sizeof *t);
    if (fe[0] == f[0] || (size_t)(fe[0] - f[0]) >= sizeof t->sig) return "the signature is empty or too long";
    memcpy(t->sig, f[0], (size_t)(fe[0] - f[0]));
    if (!int_field(f[1], fe[1], false, &t->gidx)) return "the engine is not a global index (a whole number >= 0)";
    if (!knobs_field(f[2], fe[2], t)) return "the knobs are not '-' or TYPE:VALUE,... (at most 16)";
    if (!int_field(f[3], fe[3], false, &t->workspace)) return "the workspace is not a byte count";
    char tmp[32], *e;
    if ((size_t)(fe[4] - f[4]) >= sizeof tmp || fe[4] == f[4]) return "the time is not a number of microseconds";
    memcpy(tmp, f[4], (size_t)(fe[4] - f[4]));
    tmp[fe[4] - f[4]] = 0;
    t->us = strtod(tmp, &e);
    if (*e || !(t->us >= 0)) return "the time is not a number of microseconds";
    return "";
}

pp_status pcu_tactics_parse(const char *text, size_t len, const char *what, pcu_tactics *out, pp_err *err) {
    memset(out, 0, sizeof *out);
    int cap = 0, line = 0;
    for (size_t at = 0; at < len;) {
        const char *s = text + at, *nl = memchr(s, '\n', len - at), *end = nl ? nl : text + len;
        at = (size_t)(end - text) + 1;
        line++;
        const char *e = end > s && end[-1] == '\r' ? end - 1 : end;
        if (e == s || *s == '#') continue;
        if (out->n == cap) {
            cap = cap ? 2 * cap : 64;
            pcu_tactic *t = realloc(out->t, (size_t)cap * sizeof *t);
            if (!t) {
                pcu_tactics_free(out);
                return PP_FAIL(err, PP_ENOMEM, "out of memory reading the tactic table %s", what);
            }
            out->t = t;
        }
        const char *why = parse_line(s, e, &out->t[out->n]);
        if (*why) {
            pcu_tactics_free(out);
            return PP_FAIL(err, PP_EINVAL, "tactic table %s, line %d: %s", what, line, why);
        }
        out->n++;
    }
    if (out->n) qsort(out->t, (size_t)out->n, sizeof *out->t, by_sig);
    for (int i = 1; i < out->n; i++)
        if (!strcmp(out->t[i].sig, out->t[i - 1].sig)) {
            const pp_status s = PP_FAIL(err, PP_EINVAL, "tactic table %s: the signature '%s' is there twice", what,
                                        out->t[i].sig);
            pcu_tactics_free(out);
            return s;
        }
    return PP_OK;
}

pp_status pcu_tactics_read(const char *path, pcu_tactics *out, pp_err *err) {
    FILE *f;
    memset(out, 0, sizeof *out);
    PP_TRY(pp_fopen_read(path, "the tactic table", &f, err));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *b = cap < ((size_t)64 << 20) ? realloc(buf, cap * 2) : NULL;
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b, cap *= 2;
        }
    }
    const bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        return PP_FAIL(err, bad ? PP_EIO : PP_ENOMEM, "tactic table %s: %s", path,
                       bad ? "cannot read it" : "too large (64 MiB at most) or out of memory");
    }
    const pp_status s = pcu_tactics_parse(buf, n, path, out, err);
    free(buf);
    return s;
}

const pcu_tactic *pcu_tactics_find(const pcu_tactics *t, const char *sig) {
    if (!t || !t->n) return NULL;
    pcu_tactic key;
    if (strlen(sig) >= sizeof key.sig) return NULL;
    strcpy(key.sig, sig);
    return bsearch(&key, t->t, (size_t)t->n, sizeof *t->t, by_sig);
}

void pcu_tactics_free(pcu_tactics *t) {
    free(t->t);
    t->t = NULL, t->n = 0;
}

/* ---- the tables built in (cmake/embed_tactics.cmake) ---- */

typedef struct {
    const char *name, *text;
    size_t len;
} pcu_tactic_file;
extern const pcu_tactic_file pcu_tactic_files[];
extern const int pcu_tactic_n_files;

const char *pcu_tactics_builtin(const char *name, size_t *len) {
    for (int i = 0; i < pcu_tactic_n_files; i++)
        if (!strcmp(pcu_tactic_files[i].name, name)) {
            *len = pcu_tactic_files[i].len;
            return pcu_tactic_files[i].text;
        }
    return NULL;
}

int pcu_tactics_builtin_count(void) { return pcu_tactic_n_files; }

const char *pcu_tactics_builtin_at(int i, const char **text, size_t *len) {
    *text = pcu_tactic_files[i].text, *len = pcu_tactic_files[i].len;
    return pcu_tactic_files[i].name;
}
