/* profile.c: measured op times. `pprt --profile FILE` writes each node's
 * mean time per micro-batch in milliseconds, and on its first line the
 * micro-batch, the unit ("unit": "ms"; files without one are in ms too) and
 * the device kind they were measured on; `ppcc --profile FILE` reads them back
 * and the cost model uses them instead of the roofline estimate for the
 * nodes it finds (by node name: the same model and passes give the same
 * names). Of several profiles (one per micro-batch size, all of one device
 * kind), the one measured nearest the graph's micro-batch is used; times
 * measured at another micro-batch size are scaled linearly. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* Parse a JSON string starting at *p (at the opening quote) into out. */
static bool read_json_string(const char **p, char *out, size_t n) {
    const char *s = *p;
    if (*s != '"') return false;
    s++;
    size_t k = 0;
    while (*s && *s != '"') {
        char c = *s++;
        if (c == '\\') {
            c = *s++;
            if (c == 'u') { /* \u00XX: the writer only escapes control characters */
                unsigned v;
                if (sscanf(s, "%4x", &v) != 1) return false;
                c = (char)v;
                s += 4;
            } else if (c != '"' && c != '\\' && c != '/') {
                return false;
            }
        }
        if (k + 1 >= n) return false;
        out[k++] = c;
    }
    if (*s != '"') return false;
    out[k] = 0;
    *p = s + 1;
    return true;
}

/* The first line's "unit", where it has one (profiles written before it
 * had none, and were in ms too), must be "ms". */
static pp_status check_unit(const char *path, const char *line, pp_err *err) {
    const char *u = strstr(line, "\"unit\":");
    if (!u) return PP_OK;
    u += 7;
    while (*u == ' ') u++;
    char unit[32];
    if (!read_json_string(&u, unit, sizeof unit))
        return PP_FAIL(err, PP_EINVAL, "%s:1: the unit is not a short JSON string", path);
    if (strcmp(unit, "ms") != 0)
        return PP_FAIL(err, PP_EINVAL, "%s:1: times in \"%s\", expected \"ms\" (as pprt --profile writes them)",
                       path, unit);
    return PP_OK;
}

pp_status pp_apply_profile(pp_graph *g, const char *path, int *matched, pp_err *err) {
    FILE *f;
    pp_err e = {0};
    if (pp_fopen_read(path, NULL, &f, &e) != PP_OK) return PP_FAIL(err, e.code, "--profile: %s", e.msg);
    char line[2048], name[1024];
    long long batch = -1;
    int lineno = 0, entries = 0;
    *matched = 0;
    pp_status s = PP_OK;
    while (s == PP_OK && fgets(line, sizeof line, f)) {
        lineno++;
        const char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '{' || *p == ',') p++;
        if (lineno == 1) {
            if (sscanf(p, "\"micro_batch\": %lld", &batch) != 1 || batch < 0)
                s = PP_FAIL(err, PP_EINVAL, "%s:1: not a pprt --profile file (no micro_batch)", path);
            else
                s = check_unit(path, p, err);
            continue;
        }
        if (*p != '"') continue; /* closing braces */
        double ms;
        if (!read_json_string(&p, name, sizeof name) || sscanf(p, " : %lf", &ms) != 1 || !(ms >= 0)) {
            s = PP_FAIL(err, PP_EINVAL, "%s:%d: expected \"node name\": milliseconds", path, lineno);
            break;
        }
        entries++;
        double scale = batch > 0 && g->batch > 0 ? (double)g->batch / (double)batch : 1.0;
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].prof_s < 0 && strcmp(g->nodes[i].name, name) == 0) {
                g->nodes[i].prof_s = ms * 1e-3 * scale;
                (*matched)++;
                break;
            }
    }
    fclose(f);
    if (s == PP_OK && entries == 0) s = PP_FAIL(err, PP_EINVAL, "%s: holds no node times", path);
    return s;
}

pp_status pp_profile_header(const char *path, int64_t *batch, char *device, size_t device_len,
                            pp_err *err) {
    FILE *f;
    pp_err e = {0};
    if (pp_fopen_read(path, NULL, &f, &e) != PP_OK) return PP_FAIL(err, e.code, "--profile: %s", e.msg);
    char line[2048];
    long long b = -1;
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    const char *p = line;
    while (ok && (*p == ' ' || *p == '{')) p++;
    if (!ok || sscanf(p, "\"micro_batch\": %lld", &b) != 1 || b < 0)
        return PP_FAIL(err, PP_EINVAL, "%s:1: not a pprt --profile file (no micro_batch)", path);
    PP_TRY(check_unit(path, p, err));
    *batch = b;
    if (device && device_len) {
        device[0] = 0;
        const char *d = strstr(p, "\"device\":");
        if (d) {
            d += 9;
            while (*d == ' ') d++;
            if (!read_json_string(&d, device, device_len))
                return PP_FAIL(err, PP_EINVAL, "%s:1: the device is not a JSON string", path);
        }
    }
    return PP_OK;
}

pp_status pp_apply_profiles(pp_graph *g, const pp_compile_opts *o, int *matched, int64_t *used,
                            char *device, size_t device_len, pp_err *err) {
    *matched = 0;
    *used = 0;
    if (device && device_len) device[0] = 0;
    if (o->n_profiles == 0) return PP_OK;
    int best = -1;
    int64_t best_b = 0;
    double best_d = 0;
    char first[256], kind[256];
    for (int k = 0; k < o->n_profiles; k++) {
        int64_t b = 0;
        PP_TRY(pp_profile_header(o->profiles[k], &b, kind, sizeof kind, err));
        if (k == 0) snprintf(first, sizeof first, "%s", kind);
        else if (strcmp(first, kind) != 0)
            return PP_FAIL(err, PP_EINVAL,
                           "--profile: '%s' was measured on \"%s\" and '%s' on \"%s\": give the "
                           "profiles of one device kind", o->profiles[0], first, o->profiles[k], kind);
        /* nearest by ratio; an unbatched graph or profile compares as 1 */
        double gb = g->batch > 0 ? (double)g->batch : 1, pb = b > 0 ? (double)b : 1;
        double d = fabs(log(gb / pb));
        if (best < 0 || d < best_d - 1e-12 || (fabs(d - best_d) <= 1e-12 && b > best_b))
            best = k, best_d = d, best_b = b;
    }
    if (device && device_len) snprintf(device, device_len, "%s", first);
    *used = best_b;
    return pp_apply_profile(g, o->profiles[best], matched, err);
}
