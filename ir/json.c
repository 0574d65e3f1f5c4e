/* json.c: JSON output through cJSON (json.h): the adders that remember a
 * failed allocation, the whole-tree writer, the element-by-element writer
 * for the trace, the whole-file reader, and the head of pprt's profile format. */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

cJSON *pp_json_begin(pp_json *j) {
    j->root = cJSON_CreateObject();
    j->oom = !j->root;
    return j->root;
}

cJSON *pp_json_begin_array(pp_json *j) {
    j->root = cJSON_CreateArray();
    j->oom = !j->root;
    return j->root;
}

cJSON *pp_json_begin_format(pp_json *j, const char *format, int version) {
    cJSON *root = pp_json_begin(j);
    pp_json_add_string(j, root, "format", format);
    pp_json_add_number(j, root, "version", version);
    return root;
}

void pp_json_free(pp_json *j) {
    cJSON_Delete(j->root);
    j->root = NULL;
}

/* item added to parent (as `key`, or appended where key is NULL), or freed
 * and the failure remembered */
static cJSON *add(pp_json *j, cJSON *parent, const char *key, cJSON *item) {
    bool ok = parent && item &&
              (key ? cJSON_AddItemToObjectCS(parent, key, item) : cJSON_AddItemToArray(parent, item));
    if (ok) return item;
    cJSON_Delete(item);
    j->oom = true;
    return NULL;
}

cJSON *pp_json_add_object(pp_json *j, cJSON *parent, const char *key) {
    return parent ? add(j, parent, key, cJSON_CreateObject()) : NULL;
}

cJSON *pp_json_add_array(pp_json *j, cJSON *parent, const char *key) {
    return parent ? add(j, parent, key, cJSON_CreateArray()) : NULL;
}

void pp_json_add_number(pp_json *j, cJSON *parent, const char *key, double v) {
    if (parent) add(j, parent, key, cJSON_CreateNumber(v));
}

static double round_to(double v, int decimals) {
    static const double p10[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    if (decimals < 0 || decimals > 9 || !isfinite(v)) return v;
    double r = round(v * p10[decimals]) / p10[decimals];
    return isfinite(r) ? r : v;
}

void pp_json_add_round(pp_json *j, cJSON *parent, const char *key, double v, int decimals) {
    if (parent) add(j, parent, key, cJSON_CreateNumber(round_to(v, decimals)));
}

void pp_json_add_string(pp_json *j, cJSON *parent, const char *key, const char *s) {
    if (parent) add(j, parent, key, cJSON_CreateString(s ? s : ""));
}

void pp_json_add_bool(pp_json *j, cJSON *parent, const char *key, bool v) {
    if (parent) add(j, parent, key, cJSON_CreateBool(v));
}

cJSON *pp_json_add_tensor(pp_json *j, cJSON *parent, const char *name, pp_dtype dtype, const pp_shape *shape,
                          size_t bytes) {
    cJSON *t = pp_json_add_object(j, parent, NULL);
    pp_json_add_string(j, t, "name", name);
    pp_json_add_string(j, t, "dtype", pp_dtype_name(dtype));
    cJSON *dims = pp_json_add_array(j, t, "shape");
    for (int d = 0; d < shape->rank; d++) pp_json_add_number(j, dims, NULL, (double)shape->dim[d]);
    pp_json_add_number(j, t, "bytes", (double)bytes);
    return t;
}

char *pp_json_print(pp_json *j, bool pretty, const char *what, pp_err *err) {
    char *text = j->oom || !j->root ? NULL : pretty ? cJSON_Print(j->root) : cJSON_PrintUnformatted(j->root);
    pp_json_free(j);
    if (!text) PP_FAIL(err, PP_ENOMEM, "out of memory making %s", what);
    return text;
}

pp_status pp_json_write(pp_json *j, const char *path, bool pretty, pp_err *err) {
    char what[4200];
    snprintf(what, sizeof what, "'%s'", path);
    char *text = pp_json_print(j, pretty, what, err);
    if (!text) return PP_ENOMEM;
    pp_outfile out;
    pp_status s = pp_outfile_open(&out, path, err);
    if (s == PP_OK) s = pp_outfile_commit(&out, fputs(text, out.f) >= 0 && fputc('\n', out.f) != EOF, err);
    cJSON_free(text);
    return s;
}

/* ---- element by element ------------------------------------------------------------------------ */

pp_status pp_json_stream_open(pp_json_stream *s, const char *path, pp_json *head, pp_err *err) {
    s->n = 0;
    s->ok = true;
    s->oom = false;
    char *text = head->oom || !head->root ? NULL : cJSON_PrintUnformatted(head->root);
    pp_json_free(head);
    if (!text) return PP_FAIL(err, PP_ENOMEM, "out of memory making '%s'", path);
    /* {...,"name":[]}: written up to the array's '[' */
    size_t n = strlen(text);
    pp_status st = n >= 3 && !strcmp(text + n - 3, "[]}")
                       ? PP_OK
                       : PP_FAIL(err, PP_EINVAL, "'%s': the head of the file does not end in an empty array", path);
    if (st == PP_OK) st = pp_outfile_open(&s->out, path, err);
    if (st == PP_OK) s->ok = fwrite(text, 1, n - 2, s->out.f) == n - 2;
    cJSON_free(text);
    return st;
}

void pp_json_stream_add(pp_json_stream *s, pp_json *j) {
    char *text = s->ok && !j->oom && j->root ? cJSON_PrintBuffered(j->root, 256, false) : NULL;
    pp_json_free(j);
    if (!s->ok) return;
    if (!text) {
        s->ok = false;
        s->oom = true;
        return;
    }
    s->ok = fputs(s->n++ ? ",\n" : "\n", s->out.f) >= 0 && fputs(text, s->out.f) >= 0;
    cJSON_free(text);
}

pp_status pp_json_stream_close(pp_json_stream *s, bool ok, pp_err *err) {
    ok = ok && s->ok && fputs("\n]}\n", s->out.f) >= 0;
    /* the first error recorded wins: out of memory, before the commit's own */
    pp_status st = s->oom ? PP_FAIL(err, PP_ENOMEM, "out of memory writing '%s'", s->out.path) : PP_OK;
    pp_status c = pp_outfile_commit(&s->out, ok, err);
    return st != PP_OK ? st : c;
}

/* ---- reading ------------------------------------------------------------------------------------- */

pp_status pp_json_read(const char *path, const char *what, const char *kind, cJSON **root, pp_err *err) {
    *root = NULL;
    FILE *f;
    PP_TRY(pp_fopen_read(path, what, &f, err));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    pp_status s = buf ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory");
    while (s == PP_OK) {
        if (n == cap) {
            char *nb = cap < ((size_t)1 << 30) ? realloc(buf, 2 * cap + 1) : NULL;
            if (!nb) {
                s = PP_FAIL(err, cap < ((size_t)1 << 30) ? PP_ENOMEM : PP_EINVAL, "%s: too large for %s (%zu bytes "
                            "read, at most 1 GiB)", path, kind, n);
                break;
            }
            buf = nb, cap *= 2;
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (s == PP_OK && ferror(f)) s = PP_FAIL(err, PP_EIO, "%s: read error", path);
    fclose(f);
    if (s == PP_OK) {
        buf[n] = 0;
        *root = cJSON_ParseWithLength(buf, n);
        if (!*root) {
            const char *at = cJSON_GetErrorPtr();
            const long off = at && at >= buf && at <= buf + n ? (long)(at - buf) : -1;
            s = PP_FAIL(err, PP_EINVAL, "%s: not JSON (%s): the parser stopped at byte %ld", path, kind, off);
        }
    }
    free(buf);
    return s;
}

/* ---- pprt's profile ------------------------------------------------------------------------------ */

cJSON *pp_json_profile_begin(pp_json *j, int64_t batch, const char *device) {
    cJSON *root = pp_json_begin(j);
    pp_json_add_number(j, root, "micro_batch", (double)batch);
    pp_json_add_string(j, root, "unit", "ms");
    pp_json_add_string(j, root, "device", device);
    return pp_json_add_object(j, root, "nodes");
}
