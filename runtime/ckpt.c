/* ckpt.c: training checkpoints (ckpt.h). */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../ir/json.h"
#include "../ir/optim.h"
#include "io.h"

static pp_status ckpt_arrays(const pprt_ckpt *c, const char *dir, bool write, pp_err *err) {
    static const char *const ext[3] = {"", ".m", ".v"};
    for (int i = 0; i < c->n; i++) {
        const pprt_ckpt_weight *q = &c->w[i];
        const pp_shape *sh = q->shape;
        char safe[PP_FILE_NAME_MAX], path[4400];
        pprt_safe_name(q->name, safe, sizeof safe);
        for (int k = 0; k < 3; k++) {
            float *a = q->a[k];
            if (!a) continue; /* a buffer this optimizer does not keep */
            snprintf(path, sizeof path, "%s/%s%s.npy", dir, safe, ext[k]);
            if (write) {
                PP_TRY(pprt_npy_write(path, PP_F32, sh, a, err));
                continue;
            }
            pprt_npy x;
            pp_err e = {0};
            const pp_status rs = pprt_npy_read(path, &x, &e);
            if (rs != PP_OK) return PP_WRAP(err, &e, rs, "--resume %s: %s", dir, e.msg);
            const bool fits = x.dtype == PP_F32 && pp_shape_eq(&x.shape, sh) && x.nbytes == (size_t)q->numel * 4;
            if (fits) memcpy(a, x.data, x.nbytes);
            char got[128], want[128];
            pp_shape_str(&x.shape, got, sizeof got), pp_shape_str(sh, want, sizeof want);
            const char *dt = pp_dtype_name(x.dtype);
            pprt_npy_free(&x);
            if (!fits)
                return PP_FAIL(err, PP_EINVAL, "--resume %s: %s holds %s %s, weight '%s' is f32 %s", dir, path, dt, got,
                               q->name, want);
        }
    }
    return PP_OK;
}

typedef struct ckpt_file {
    char file[PP_FILE_NAME_MAX + 4]; /* the weight's file name and ".m" or ".v" */
    int w, k;                        /* weight w's array k (the value, momentum or first moment, second moment) */
} ckpt_file;

static int ckpt_file_cmp(const void *a, const void *b) {
    const ckpt_file *x = a, *y = b;
    const int c = strcmp(x->file, y->file);
    return c ? c : x->w != y->w ? (x->w > y->w) - (x->w < y->w) : x->k - y->k;
}

pp_status pprt_ckpt_names_check(const pprt_ckpt *c, pp_err *err) {
    static const char *const ext[3] = {"", ".m", ".v"}, *const what[3] = {"value", "first buffer", "second buffer"};
    const int per = c->buffers + 1, n = c->n * per;
    ckpt_file *f = calloc(pp_count(n), sizeof *f);
    if (!f) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        char safe[PP_FILE_NAME_MAX];
        pprt_safe_name(c->w[i / per].name, safe, sizeof safe);
        snprintf(f[i].file, sizeof f[i].file, "%s%s", safe, ext[i % per]);
        f[i].w = i / per, f[i].k = i % per;
    }
    qsort(f, (size_t)n, sizeof *f, ckpt_file_cmp);
    pp_status s = PP_OK;
    for (int i = 1; i < n && s == PP_OK; i++)
        if (!strcmp(f[i - 1].file, f[i].file))
            s = PP_FAIL(err, PP_EINVAL, "weight '%s''s %s and weight '%s''s %s would both be the checkpoint's file "
                        "'%s.npy' (file names take '_' for every character outside [A-Za-z0-9._-]): rename one of "
                        "them in the model", c->w[f[i - 1].w].name, what[f[i - 1].k], c->w[f[i].w].name,
                        what[f[i].k], f[i].file);
    free(f);
    return s;
}

/* A save's first file in DIR.tmp, before any array: a folder holding it is pprt's (an interrupted save's), where
 * a folder of .npy files without it or state.json may be a user's. */
#define CKPT_MARK ".pprt-checkpoint"

/* The files a checkpoint folder holds: state.json, NAME.npy and the mark, regular files. */
static bool ckpt_own(const char *dir, const char *name) {
    const size_t n = strlen(name);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    return (!strcmp(name, "state.json") || !strcmp(name, CKPT_MARK) || (n > 4 && !strcmp(name + n - 4, ".npy"))) &&
           lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* What lies at `path` (`opt` the option that named it): nothing (*n = -1), or a folder of a checkpoint's files
 * alone (*n of them, *state: state.json or the mark among them); anything else refused, naming it: a file where
 * the folder goes, a folder holding something else (pprt moves and removes what a checkpoint folder holds). */
static pp_status ckpt_scan(const char *opt, const char *path, int *n, bool *state, pp_err *err) {
    *n = -1, *state = false;
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return PP_OK;
        return PP_FAIL(err, PP_EIO, "%s: cannot look at '%s': %s", opt, path, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return PP_FAIL(err, PP_EINVAL, "%s: '%s' is %s, not a checkpoint's folder", opt, path, pp_file_kind(sb.st_mode));
    DIR *d = opendir(path);
    if (!d) return PP_FAIL(err, PP_EIO, "%s: cannot read the folder '%s': %s", opt, path, strerror(errno));
    pp_status s = PP_OK;
    *n = 0;
    for (struct dirent *e; s == PP_OK && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!ckpt_own(path, e->d_name))
            s = PP_FAIL(err, PP_EINVAL, "%s: the folder '%s' holds '%s', which no pprt checkpoint does (state.json, "
                        "NAME.npy, %s): give a new folder, or one pprt's checkpoints wrote", opt, path, e->d_name,
                        CKPT_MARK);
        *n += 1, *state |= !strcmp(e->d_name, "state.json") || !strcmp(e->d_name, CKPT_MARK);
    }
    closedir(d);
    return s;
}

/* DIR.tmp or DIR.old: nothing (*n = -1), or a folder that a save wrote (its files state.json, NAME.npy and the mark
 * alone, one of the first and the last among them), which a save may remove; anything else refused, naming it. */
static pp_status ckpt_side(const char *path, int *n, pp_err *err) {
    bool state;
    PP_TRY(ckpt_scan("--checkpoint", path, n, &state, err));
    if (*n > 0 && !state)
        return PP_FAIL(err, PP_EINVAL, "--checkpoint: the folder '%s' holds .npy files that no pprt save wrote (no "
                       "state.json, no %s), and a save would remove them: move it away", path, CKPT_MARK);
    return PP_OK;
}

/* A folder a save wrote (ckpt_side), removed: DIR.tmp left by an interrupted save, or DIR.old. */
static pp_status ckpt_clear(const char *path, pp_err *err) {
    int n;
    PP_TRY(ckpt_side(path, &n, err));
    if (n < 0) return PP_OK;
    DIR *d = opendir(path);
    if (!d) return PP_FAIL(err, PP_EIO, "--checkpoint: cannot read the folder '%s': %s", path, strerror(errno));
    char f[4400];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        remove(f);
    }
    closedir(d);
    if (rmdir(path) != 0) return PP_FAIL(err, PP_EIO, "--checkpoint: cannot remove '%s': %s", path, strerror(errno));
    return PP_OK;
}

/* Before the first step: --checkpoint DIR is new, empty or an earlier checkpoint, and DIR.tmp and DIR.old (an
 * interrupted save's) hold a save's files alone, so that no save can fail midway or move or remove a user's files. */
pp_status pprt_ckpt_dest_check(const char *dir, pp_err *err) {
    char side[4200];
    int n;
    bool state;
    PP_TRY(ckpt_scan("--checkpoint", dir, &n, &state, err));
    if (n > 0 && !state)
        return PP_FAIL(err, PP_EINVAL, "--checkpoint: the folder '%s' holds .npy files but no state.json: not a pprt "
                       "checkpoint (give a new folder)", dir);
    for (int k = 0; k < 2; k++) {
        snprintf(side, sizeof side, "%s%s", dir, k ? ".old" : ".tmp");
        PP_TRY(ckpt_side(side, &n, err));
    }
    return PP_OK;
}

/* Written whole or not at all: into DIR.tmp (an interrupted save's removed first), then DIR moved to DIR.old, DIR.tmp
 * renamed to DIR, DIR.old removed. An interruption leaves DIR whole, or DIR.old whole and no DIR (--resume says so). */
pp_status pprt_ckpt_write(const pprt_ckpt *c, const char *dir, int64_t step, int64_t updates, pp_err *err) {
    char tmp[4200], old[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    snprintf(old, sizeof old, "%s.old", dir);
    PP_TRY(ckpt_clear(tmp, err));
    if (mkdir(tmp, 0755) != 0) return PP_FAIL(err, PP_EIO, "cannot make %s: %s", tmp, strerror(errno));
    char mark[4300];
    snprintf(mark, sizeof mark, "%s/%s", tmp, CKPT_MARK);
    FILE *mf = fopen(mark, "wb");
    if (!mf || fclose(mf) != 0) return PP_FAIL(err, PP_EIO, "cannot write %s: %s", mark, strerror(errno));
    PP_TRY(ckpt_arrays(c, tmp, true, err));
    pp_json js = {0};
    cJSON *root = pp_json_begin_format(&js, "pprt-checkpoint", 1);
    pp_json_add_number(&js, root, "step", (double)step);
    pp_json_add_number(&js, root, "updates", (double)updates);
    pp_json_add_number(&js, root, "optimizer", c->optimizer);
    pp_json_add_number(&js, root, "buffers", c->buffers);
    if (c->scaled) { /* the scale exactly (JSON's numbers keep 15 digits): as C's hexadecimal float */
        char hex[64];
        snprintf(hex, sizeof hex, "%a", c->scale);
        pp_json_add_string(&js, root, "loss_scale", hex);
        pp_json_add_number(&js, root, "scale_growth", (double)c->growth);
    }
    pp_json_add_number(&js, root, "seed", (double)c->seed);
    cJSON *names = pp_json_add_array(&js, root, "weights");
    for (int i = 0; i < c->n; i++) pp_json_add_string(&js, names, NULL, c->w[i].name);
    char path[4700];
    snprintf(path, sizeof path, "%s/state.json", tmp);
    PP_TRY(pp_json_write(&js, path, true, err));
    struct stat sb;
    const bool had = stat(dir, &sb) == 0;
    if (had) PP_TRY(ckpt_clear(old, err));
    if (had && rename(dir, old) != 0) return PP_FAIL(err, PP_EIO, "cannot move %s aside: %s", dir, strerror(errno));
    if (rename(tmp, dir) != 0) return PP_FAIL(err, PP_EIO, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    return ckpt_clear(old, err); /* also a stale one, where an interrupted save left no DIR */
}

/* A count in a checkpoint's state: a whole number in 0..max (JSON's numbers are doubles). */
static bool ckpt_count(const cJSON *v, double max) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= max && v->valuedouble == floor(v->valuedouble);
}

/* state.json's fields against this run: each one's kind and range (a negative or fractional step, more updates
 * than steps, an optimizer pprt does not have, a loss scale that is not a positive number refused by name), then
 * the optimizer, its buffers and the weights' names. */
static pp_status ckpt_state(const pprt_ckpt *c, const char *dir, const char *path, const cJSON *root, pp_err *err) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "step");
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer"), *ws = cJSON_GetObjectItemCaseSensitive(root, "weights");
    const cJSON *buf = cJSON_GetObjectItemCaseSensitive(root, "buffers");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(root, "loss_scale");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "pprt-checkpoint") || !cJSON_IsArray(ws))
        return PP_FAIL(err, PP_EINVAL, "--resume %s: %s is not a pprt checkpoint's state", dir, path);
    /* the counts: a whole number each, in 0..max (2^53: every whole double below it is exact) */
    const double most = 9007199254740992.0, step = cJSON_IsNumber(st) ? st->valuedouble : 0;
    const struct { const char *key, *range; double max; bool optional; } counts[] = {
        {"step", "a whole number in 0..2^53", most, false},
        {"updates", "a whole number in 0..the step", step, false},
        {"optimizer", "0 (sgd) or 1 (adamw)", PP_OPTIM_ADAMW, false},
        {"buffers", "a whole number in 0..2", 2, true},
        {"scale_growth", "a whole number in 0..2^53", most, true}};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, counts[k].key);
        if ((!v && counts[k].optional) || ckpt_count(v, counts[k].max)) continue;
        char got[40] = "missing or not a number";
        if (cJSON_IsNumber(v)) snprintf(got, sizeof got, "%.17g", v->valuedouble);
        return PP_FAIL(err, PP_EINVAL, "--resume %s: %s's \"%s\" is %s: expected %s", dir, path, counts[k].key, got,
                       counts[k].range);
    }
    if (sc) {
        char *end = NULL;
        const double x = cJSON_IsString(sc) ? strtod(sc->valuestring, &end) : 0;
        if (!(x > 0) || !isfinite(x) || !end || *end)
            return PP_FAIL(err, PP_EINVAL, "--resume %s: %s's \"loss_scale\" is not a positive number", dir, path);
    }
    static const char *const kind[2] = {"sgd", "adamw"};
    if (opt->valueint != c->optimizer)
        return PP_FAIL(err, PP_EINVAL, "--resume %s: the checkpoint was made with --optimizer %s, this run's is %s", dir,
                       kind[opt->valueint], kind[c->optimizer == PP_OPTIM_ADAMW]);
    if (buf && buf->valueint != c->buffers)
        return PP_FAIL(err, PP_EINVAL, "--resume %s: the checkpoint keeps %d optimizer buffer(s) per weight, this run's "
                       "optimizer %d (another --momentum?)", dir, buf->valueint, c->buffers);
    if (cJSON_GetArraySize(ws) != c->n)
        return PP_FAIL(err, PP_EINVAL, "--resume %s: the checkpoint holds %d weights, the plan trains %d", dir,
                       cJSON_GetArraySize(ws), c->n);
    for (int i = 0; i < c->n; i++) {
        const cJSON *w = cJSON_GetArrayItem(ws, i);
        if (!cJSON_IsString(w) || strcmp(w->valuestring, c->w[i].name))
            return PP_FAIL(err, PP_EINVAL, "--resume %s: weight %d is '%s' in the checkpoint, '%s' in the plan", dir, i,
                           cJSON_IsString(w) ? w->valuestring : "?", c->w[i].name);
    }
    return PP_OK;
}

pp_status pprt_ckpt_read(pprt_ckpt *c, const char *dir, int64_t *step, int64_t *updates, pp_err *err) {
    char path[4400];
    snprintf(path, sizeof path, "%s/state.json", dir);
    char old[4200];
    snprintf(old, sizeof old, "%s.old", dir);
    struct stat sb;
    if (stat(dir, &sb) != 0 && stat(old, &sb) == 0)
        return PP_FAIL(err, PP_EIO, "--resume %s: no such folder, but '%s' is there: a save was interrupted after "
                       "moving the last checkpoint aside; give --resume %s", dir, old, old);
    cJSON *root = NULL;
    pp_err e = {0};
    pp_status s = pp_json_read(path, NULL, "a pprt checkpoint's state", &root, &e);
    if (s != PP_OK) return PP_WRAP(err, &e, s, "--resume %s: %s", dir, e.msg);
    s = ckpt_state(c, dir, path, root, err);
    if (s == PP_OK) {
        *step = (int64_t)cJSON_GetObjectItemCaseSensitive(root, "step")->valuedouble;
        *updates = (int64_t)cJSON_GetObjectItemCaseSensitive(root, "updates")->valuedouble;
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(root, "loss_scale");
        const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "scale_growth");
        if (c->scaled && sc) c->scale = strtod(sc->valuestring, NULL);
        if (c->scaled && gr) c->growth = (int64_t)gr->valuedouble;
        const cJSON *sd = cJSON_GetObjectItemCaseSensitive(root, "seed");
        if (cJSON_IsNumber(sd) && sd->valuedouble != (double)c->seed)
            fprintf(stderr, "pprt: warning: --resume %s: the checkpoint's run had --seed %.17g, this one %llu: the "
                    "samples' order and dropout's masks from here on are not that run's\n", dir, sd->valuedouble,
                    (unsigned long long)c->seed);
    }
    cJSON_Delete(root);
    if (s == PP_OK) s = ckpt_arrays(c, dir, false, err);
    return s;
}
