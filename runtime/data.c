/* data.c: how pprt finds its inputs in a directory (NumPy files or the ONNX
 * test-data layout), writes its outputs, and scores a classifier against
 * labels. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io.h"

void pprt_safe_name(const char *name, char *buf, size_t n) { pp_file_name(name, buf, n); }

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* K of "input_K.pb" (K in canonical decimal), else -1. */
static int pb_input_index(const char *fname) {
    if (strncmp(fname, "input_", 6) != 0) return -1;
    const char *p = fname + 6;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    long k = 0;
    while (*p >= '0' && *p <= '9' && k < 1000000) k = k * 10 + (*p++ - '0');
    return strcmp(p, ".pb") == 0 && k < 1000000 ? (int)k : -1;
}

static bool is_pb_input(const char *name) { return pb_input_index(name) >= 0; }

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Sorted list of the names in dir that keep() takes. */
static pp_status list_dir(const char *dir, bool (*keep)(const char *), char ***names, int *n, pp_err *err) {
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return PP_FAIL(err, PP_EIO, "cannot open data directory '%s': %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    pp_status s = PP_OK;
    while ((e = readdir(d))) {
        if (!keep(e->d_name)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            char **nn = realloc(*names, sizeof *nn * (size_t)cap);
            if (!nn) {
                s = PP_FAIL(err, PP_ENOMEM, "out of memory");
                break;
            }
            *names = nn;
        }
        if (!((*names)[*n] = strdup(e->d_name))) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory");
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return s;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sorted K of the input_K.pb files in dir (none: *n = 0). */
static pp_status list_pb_inputs(const char *dir, int **ks, int *n, pp_err *err) {
    char **names;
    *ks = NULL;
    pp_status s = list_dir(dir, is_pb_input, &names, n, err);
    if (s == PP_OK && *n && !(*ks = malloc(sizeof **ks * (size_t)*n))) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; s == PP_OK && i < *n; i++) (*ks)[i] = pb_input_index(names[i]);
    if (s == PP_OK && *n) qsort(*ks, (size_t)*n, sizeof **ks, cmp_int);
    free_names(names, *n);
    if (s != PP_OK) *n = 0;
    return s;
}

/* Input i's data (read from `path`) against the plan: type, rank and all dims
 * but the sample count (all of them for an unbatched plan); the inputs must
 * agree on the sample count *n (-1 before the first). */
static pp_status check_input(const pprt_plan *p, int i, const char *path, const pprt_npy *a,
                             pprt_array *arr, int64_t *n, pp_err *err) {
    const pprt_io *in = &p->inputs[i];
    bool whole = p->batch == 0; /* unbatched plan: the file is the whole tensor */
    bool ok = a->dtype == in->dtype && a->shape.rank == in->shape.rank && (whole || a->shape.rank >= 1);
    for (int d = whole ? 0 : 1; ok && d < a->shape.rank; d++) ok = a->shape.dim[d] == in->shape.dim[d];
    if (!ok) {
        char want[128], got[128];
        pp_shape w = in->shape;
        if (!whole) w.dim[0] = -1; /* any number of samples */
        return PP_FAIL(err, PP_EINVAL, "%s: input '%s' expects %s %s%s, the file holds %s %s",
                       path, in->name, pp_dtype_name(in->dtype), pp_shape_str(&w, want, sizeof want),
                       whole ? "" : " (N samples on dim 0)", pp_dtype_name(a->dtype),
                       pp_shape_str(&a->shape, got, sizeof got));
    }
    if (whole) {
        *n = 1;
        *arr = (pprt_array){a->data, 1};
        return PP_OK;
    }
    if (*n >= 0 && a->shape.dim[0] != *n)
        return PP_FAIL(err, PP_EINVAL, "%s: %lld samples, but the first input has %lld", path,
                       (long long)a->shape.dim[0], (long long)*n);
    *n = a->shape.dim[0];
    *arr = (pprt_array){a->data, a->shape.dim[0]};
    return PP_OK;
}

/* Natural order: runs of digits compare as numbers ("img2" before "img10"),
 * a tie broken by the plain order. */
static int cmp_natural(const void *pa, const void *pb) {
    const char *a = *(char *const *)pa, *b = *(char *const *)pb;
    const char *x = a, *y = b;
    while (*x && *y) {
        if (isdigit((unsigned char)*x) && isdigit((unsigned char)*y)) {
            while (*x == '0') x++;
            while (*y == '0') y++;
            size_t lx = 0, ly = 0;
            while (isdigit((unsigned char)x[lx])) lx++;
            while (isdigit((unsigned char)y[ly])) ly++;
            if (lx != ly) return lx < ly ? -1 : 1;
            int c = strncmp(x, y, lx);
            if (c) return c;
            x += lx, y += ly;
        } else {
            if (*x != *y) return (unsigned char)*x < (unsigned char)*y ? -1 : 1;
            x++, y++;
        }
    }
    if (*x || *y) return *x ? 1 : -1;
    return strcmp(a, b);
}

/* One file per sample (a single-input plan, several .npy files each holding
 * one sample: the input's shape without dim 0, or with dim 0 = 1): stacked in
 * natural order of the file names into one array. */
static pp_status load_per_sample(const pprt_plan *p, const char *dir, char **names, int n_files,
                                 pprt_npy *npy, pprt_array *array, int64_t *n, pp_err *err) {
    const pprt_io *in = &p->inputs[0];
    size_t sb = in->sample_bytes;
    size_t total;
    if (pp_mul_ovf(sb, (size_t)n_files, &total))
        return PP_FAIL(err, PP_EINVAL, "'%s': %d samples overflow", dir, n_files);
    memset(npy, 0, sizeof *npy);
    if (posix_memalign(&npy->data, 64, total ? total : 64) != 0) {
        npy->data = NULL;
        return PP_FAIL(err, PP_ENOMEM, "'%s': cannot allocate %zu bytes for %d samples", dir, total, n_files);
    }
    npy->dtype = in->dtype;
    npy->shape = in->shape;
    npy->shape.dim[0] = n_files;
    npy->nbytes = total;
    char path[4096];
    for (int k = 0; k < n_files; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        pprt_npy one;
        PP_TRY(pprt_npy_read(path, &one, err));
        bool ok = one.dtype == in->dtype;
        int off = one.shape.rank == in->shape.rank ? 1 : 0; /* [1, ...] or [...] */
        ok = ok && (one.shape.rank == in->shape.rank - 1 || (off && one.shape.dim[0] == 1));
        for (int d = 1; ok && d < in->shape.rank; d++) ok = one.shape.dim[d - 1 + off] == in->shape.dim[d];
        if (!ok) {
            char want[128], got[128];
            pp_shape w = in->shape;
            w.dim[0] = 1;
            pp_status s = PP_FAIL(err, PP_EINVAL, "%s: one sample of input '%s' is %s %s (or without the "
                                  "leading 1), the file holds %s %s", path, in->name,
                                  pp_dtype_name(in->dtype), pp_shape_str(&w, want, sizeof want),
                                  pp_dtype_name(one.dtype), pp_shape_str(&one.shape, got, sizeof got));
            pprt_npy_free(&one);
            return s;
        }
        memcpy((unsigned char *)npy->data + (size_t)k * sb, one.data, sb);
        pprt_npy_free(&one);
    }
    *array = (pprt_array){npy->data, n_files};
    *n = n_files;
    return PP_OK;
}

/* Data given for an input that ppcc froze to its initializer (the model
 * lists it as an input with a default value): refused, never ignored. */
static pp_status frozen_data(const pprt_plan *p, int f, const char *path, pp_err *err) {
    return PP_FAIL(err, PP_EINVAL, "%s holds data for '%s', which the model also gives an initializer: ppcc "
                   "froze it to that value, so pprt cannot take data for it (remove the file, or compile "
                   "another value in with ppcc --const %s=FILE.pb)", path, p->frozen[f], p->frozen[f]);
}

/* The plan input (or, frozen, the frozen input) a data name stands for:
 * its name or its file-safe name; -1 none. */
static int input_named(const pprt_plan *p, const char *name, bool frozen) {
    char safe[PP_FILE_NAME_MAX];
    const int n = frozen ? p->n_frozen : p->n_inputs;
    for (int i = 0; i < n; i++) {
        const char *in = frozen ? p->frozen[i] : p->inputs[i].name;
        pprt_safe_name(in, safe, sizeof safe);
        if (!strcmp(in, name) || !strcmp(safe, name)) return i;
    }
    return -1;
}

static bool is_data_file(const char *name) {
    size_t len = strlen(name);
    return name[0] != '.' && len >= 5 && (!strcmp(name + len - 4, ".npy") || !strcmp(name + len - 4, ".npz"));
}

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* --input's file for input i: a .npy, a .pb (an ONNX TensorProto), or
 * FILE.npz:KEY. */
static pp_status read_bound(const pprt_plan *p, int i, const char *path, pprt_npy *npy, pp_err *err) {
    const char *colon = strstr(path, ".npz:");
    if (colon) {
        char file[4096];
        snprintf(file, sizeof file, "%.*s", (int)(colon + 4 - path), path);
        pprt_npz z;
        PP_TRY(pprt_npz_open(file, &z, err));
        pp_status s = pprt_npz_read(&z, colon + 5, npy, err);
        pprt_npz_close(&z);
        if (s == PP_EIO) s = PP_FAIL(err, PP_EIO, "--input %s=%s: %s", p->inputs[i].name, path, err->msg);
        return s;
    }
    if (ends_with(path, ".npz"))
        return PP_FAIL(err, PP_EINVAL, "--input %s=%s: an .npz archive needs the array's key: %s:KEY",
                       p->inputs[i].name, path, path);
    if (ends_with(path, ".pb")) return pprt_pb_read(path, npy, NULL, err);
    return pprt_npy_read(path, npy, err);
}

/* A list of names for a message: "a.npy, b.npy" (at most `max` then ", ..."). */
static void name_list(char *buf, size_t n, char *const *names, const bool *skip, int count, int max) {
    size_t k = 0;
    int shown = 0;
    buf[0] = 0;
    for (int i = 0; i < count && k < n; i++) {
        if (skip && skip[i]) continue;
        if (shown++ == max) {
            snprintf(buf + k, n - k, ", ...");
            break;
        }
        k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", names[i]);
    }
    if (!buf[0]) snprintf(buf, n, "nothing");
}

/* The plan's input names for a message: "a, b". */
static void input_list(const pprt_plan *p, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int j = 0; j < p->n_inputs && k < n; j++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", j ? ", " : "", p->inputs[j].name);
    if (!buf[0]) snprintf(buf, n, "none");
}

/* Where the data files and inputs found so far stand. */
typedef struct {
    const pprt_plan *p;
    pprt_npy *npys;
    pprt_array *arrays;
    pprt_data_src *src;
    bool *bound; /* per input: its data is read */
    int64_t *n;  /* the samples, as check_input keeps them */
} feed;

/* Refused when input i has its data already: two sources for one input. */
static pp_status not_fed(const feed *F, int i, const char *what, pp_err *err) {
    if (!F->bound[i]) return PP_OK;
    return PP_FAIL(err, PP_EINVAL, "%s and %s both give data for input '%s'", F->src[i].from, what,
                   F->p->inputs[i].name);
}

/* npys[i], just read from `what`, feeds input i: recorded and checked
 * against the plan. `note` (or NULL) follows `what` in the mapping. */
static pp_status fed(feed *F, int i, const char *what, const char *note, pp_err *err) {
    F->bound[i] = true;
    snprintf(F->src[i].from, sizeof F->src[i].from, "%s%s", what, note ? note : "");
    return check_input(F->p, i, what, &F->npys[i], &F->arrays[i], F->n, err);
}

/* The path of data file `name`: in the folder `dir`, or `dir` itself a file
 * (then name is that path). */
static void data_path(char *buf, size_t n, const char *dir, bool is_dir, const char *name) {
    if (is_dir) snprintf(buf, n, "%s/%s", dir, name);
    else snprintf(buf, n, "%s", name);
}

/* Step 1 of load_npy_layout: --input NAME=PATH. */
static pp_status feed_bindings(feed *F, const pprt_data_opts *o, pp_err *err) {
    const pprt_plan *p = F->p;
    char list[1024];
    for (int b = 0; o && b < o->n_bind; b++) {
        int i = input_named(p, o->bind_name[b], false);
        int f = input_named(p, o->bind_name[b], true);
        if (i < 0 && f >= 0) {
            PP_TRY(frozen_data(p, f, o->bind_path[b], err));
        } else if (i < 0) {
            input_list(p, list, sizeof list);
            return PP_FAIL(err, PP_EINVAL, "--input %s=%s: the plan has no input '%s'; its input%s: %s",
                           o->bind_name[b], o->bind_path[b], o->bind_name[b], p->n_inputs == 1 ? "" : "s", list);
        } else if (F->bound[i]) {
            return PP_FAIL(err, PP_EINVAL, "--input names input '%s' twice", p->inputs[i].name);
        } else {
            PP_TRY(read_bound(p, i, o->bind_path[b], &F->npys[i], err));
            PP_TRY(fed(F, i, o->bind_path[b], NULL, err));
        }
    }
    return PP_OK;
}

/* Step 2 of load_npy_layout for an .npz: each key that names an input feeds
 * it; keys that name none are refused unless o->ignore_extra. */
static pp_status feed_npz(feed *F, const char *path, const pprt_data_opts *o, pp_err *err) {
    const pprt_plan *p = F->p;
    pprt_npz z;
    PP_TRY(pprt_npz_open(path, &z, err));
    char extra[512] = "";
    size_t xk = 0;
    pp_status s = PP_OK;
    for (int m = 0; m < z.n && s == PP_OK; m++) {
        int f = input_named(p, z.m[m].key, true), i = input_named(p, z.m[m].key, false);
        char what[4200];
        snprintf(what, sizeof what, "%s:%s", path, z.m[m].key);
        if (i < 0 && f >= 0) {
            s = frozen_data(p, f, what, err);
        } else if (i < 0) {
            if (xk < sizeof extra)
                xk += (size_t)snprintf(extra + xk, sizeof extra - xk, "%s'%s'", xk ? ", " : "", z.m[m].key);
        } else if ((s = not_fed(F, i, what, err)) == PP_OK &&
                   (s = pprt_npz_read(&z, z.m[m].key, &F->npys[i], err)) == PP_OK) {
            s = fed(F, i, what, NULL, err);
        }
    }
    if (s == PP_OK && xk && !(o && o->ignore_extra)) {
        char list[1024];
        input_list(p, list, sizeof list);
        s = PP_FAIL(err, PP_EINVAL, "%s: the arrays %s match no input of the plan (its input%s: %s); name each "
                    "array after its input, or pass --ignore-extra", path, extra, p->n_inputs == 1 ? "" : "s", list);
    }
    pprt_npz_close(&z);
    return s;
}

/* Step 3 of load_npy_layout, for a one-input plan whose input has no data
 * yet: the folder's one .npy file left, or one file per sample. */
static pp_status feed_one_input(feed *F, const char *dir, bool is_dir, char **names, bool *used, int n_files,
                                int64_t *n, pp_err *err) {
    const pprt_plan *p = F->p;
    char path[4096];
    int left = 0, at = -1;
    for (int k = 0; k < n_files; k++)
        if (!used[k] && ends_with(names[k], ".npy")) left++, at = at < 0 ? k : at;
    if (left == 1) {
        data_path(path, sizeof path, dir, is_dir, names[at]);
        PP_TRY(pprt_npy_read(path, &F->npys[0], err));
        used[at] = true;
        return fed(F, 0, path, " (the folder's only .npy file)", err);
    }
    if (left <= 1 || p->batch <= 0) return PP_OK;
    char **ps = malloc(sizeof *ps * (size_t)left);
    if (!ps) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    int m = 0;
    for (int k = 0; k < n_files; k++)
        if (!used[k] && ends_with(names[k], ".npy")) ps[m++] = names[k], used[k] = true;
    pp_status s = load_per_sample(p, dir, ps, m, &F->npys[0], &F->arrays[0], n, err);
    if (s == PP_OK) {
        F->bound[0] = true;
        snprintf(F->src[0].from, sizeof F->src[0].from, "%s/ (%d files, one sample each, in natural order: %s .. %s)",
                 dir, m, ps[0], ps[m - 1]);
    }
    free(ps);
    return s;
}

/* Step 4 of load_npy_layout: every input has its data, and every file
 * feeds one (unless o->ignore_extra). */
static pp_status check_fed(const feed *F, const char *dir, const pprt_data_opts *o, char **names, const bool *used,
                           int n_files, pp_err *err) {
    const pprt_plan *p = F->p;
    const int ni = p->n_inputs;
    char list[1024];
    for (int i = 0; i < ni; i++) {
        if (F->bound[i]) continue;
        char safe[PP_FILE_NAME_MAX];
        pprt_safe_name(p->inputs[i].name, safe, sizeof safe);
        name_list(list, sizeof list, names, used, n_files, 8);
        return PP_FAIL(err, PP_EIO, "no data for input '%s': expected %s/%s.npy (the file named after the input), "
                       "an array '%s' in an .npz, or --input %s=PATH; %s holds %s%s", p->inputs[i].name,
                       dir ? dir : ".", safe, p->inputs[i].name, p->inputs[i].name,
                       dir ? dir : "no data folder: it", list,
                       ni > 1 ? " (with several inputs, each file must be named after its input)" : "");
    }
    if (o && o->ignore_extra) return PP_OK;
    int extra = 0;
    for (int k = 0; k < n_files; k++) extra += !used[k];
    if (!extra) return PP_OK;
    name_list(list, sizeof list, names, used, n_files, 8);
    char ins[512];
    input_list(p, ins, sizeof ins);
    return PP_FAIL(err, PP_EINVAL, "%s holds %d data file%s that feed%s no input of the plan: %s (its input%s: "
                   "%s); name each file after its input, give --input NAME=PATH, or pass --ignore-extra",
                   dir, extra, extra == 1 ? "" : "s", extra == 1 ? "s" : "", list, ni == 1 ? "" : "s", ins);
}

/* The inputs' files: --input bindings, then NAME.npy and the keys of .npz
 * files in dir (a directory, or itself one .npz or .npy file), then, for a
 * one-input plan only, the folder's one .npy file or one file per sample.
 * Files that feed no input are refused unless o->ignore_extra. */
static pp_status load_npy_layout(const pprt_plan *p, const char *dir, bool is_dir, const pprt_data_opts *o,
                                 pprt_npy *npys, pprt_array *arrays, pprt_data_src *src, int64_t *n, pp_err *err) {
    char path[4096];
    const int ni = p->n_inputs;
    bool *bound = calloc(pp_count(ni), sizeof *bound);
    if (!bound) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    feed F = {p, npys, arrays, src, bound, n};
    char **names = NULL;
    int n_files = 0;
    bool *used = NULL;
    /* 1. --input NAME=PATH */
    pp_status s = feed_bindings(&F, o, err);
    if (s == PP_OK && dir && !is_dir) { /* DATA is one file: an .npz of inputs, or a one-input plan's .npy */
        if (ends_with(dir, ".npz")) {
            if (!(names = malloc(sizeof *names)) || !(names[0] = strdup(dir))) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
            else n_files = 1;
        } else if (ends_with(dir, ".npy") && ni == 1) {
            if ((s = not_fed(&F, 0, dir, err)) == PP_OK && (s = pprt_npy_read(dir, &npys[0], err)) == PP_OK)
                s = fed(&F, 0, dir, NULL, err);
        } else {
            s = PP_FAIL(err, PP_EIO, "data '%s' is not a directory%s", dir,
                        ends_with(dir, ".npy") ? ", and a plan of several inputs needs more than one .npy (a folder, "
                                                 "an .npz, or --input NAME=PATH for each)"
                                               : " (give a folder of NAME.npy files, an .npz, or a .npy for a "
                                                 "one-input plan)");
        }
    } else if (s == PP_OK && is_dir) {
        s = list_dir(dir, is_data_file, &names, &n_files, err);
        if (s == PP_OK && n_files) qsort(names, (size_t)n_files, sizeof *names, cmp_natural);
    }
    if (s == PP_OK && !(used = calloc(pp_count(n_files), sizeof *used))) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    /* the file --labels reads is not an input's, wherever it lies */
    struct stat lab;
    const bool have_lab = o && o->skip && stat(o->skip, &lab) == 0;
    for (int k = 0; s == PP_OK && have_lab && k < n_files; k++) {
        data_path(path, sizeof path, dir, is_dir, names[k]);
        struct stat fs;
        if (have_lab && stat(path, &fs) == 0 && fs.st_dev == lab.st_dev && fs.st_ino == lab.st_ino) used[k] = true;
    }
    /* 2. NAME.npy, and the keys of each .npz (whose arrays are matched or refused there) */
    for (int k = 0; s == PP_OK && k < n_files; k++) {
        if (used[k]) continue;
        data_path(path, sizeof path, dir, is_dir, names[k]);
        if (!ends_with(names[k], ".npy")) {
            s = feed_npz(&F, path, o, err);
            used[k] = true;
            continue;
        }
        char stem[PP_FILE_NAME_MAX];
        snprintf(stem, sizeof stem, "%.*s", (int)strlen(names[k]) - 4, names[k]);
        int f = input_named(p, stem, true), i = input_named(p, stem, false);
        if (i < 0 && f >= 0) s = frozen_data(p, f, path, err);
        if (i < 0 || s != PP_OK) continue;
        if ((s = not_fed(&F, i, path, err)) == PP_OK && (s = pprt_npy_read(path, &npys[i], err)) == PP_OK) {
            used[k] = true;
            s = fed(&F, i, path, NULL, err);
        }
    }
    /* 3. a one-input plan: the one .npy file left, or one file per sample */
    if (s == PP_OK && ni == 1 && !bound[0] && is_dir) s = feed_one_input(&F, dir, is_dir, names, used, n_files, n, err);
    /* 4. every input has its data, and every file feeds one */
    if (s == PP_OK) s = check_fed(&F, dir, o, names, used, n_files, err);
    free_names(names, n_files);
    free(used);
    free(bound);
    return s;
}

/* ONNX test-data layout: input_K.pb files, matched by tensor name, else by
 * position K; files naming no plan input are skipped (bound at compile time). */
static pp_status load_pb_layout(const pprt_plan *p, const char *dir, const int *ks, int n_ks,
                                pprt_npy *npys, pprt_array *arrays, pprt_data_src *src, int64_t *n, pp_err *err) {
    char path[4096];
    char skipped[512] = "";
    size_t sk = 0;
    int *from = calloc(pp_count(p->n_inputs), sizeof *from); /* K + 1 of the file feeding input i */
    if (!from) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status s = PP_OK;
    for (int f = 0; f < n_ks && s == PP_OK; f++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", dir, ks[f]);
        pprt_npy a;
        char *name = NULL;
        if ((s = pprt_pb_read(path, &a, &name, err)) != PP_OK) break;
        int i = -1;
        for (int j = 0; *name && j < p->n_inputs && i < 0; j++)
            if (!strcmp(p->inputs[j].name, name)) i = j;
        for (int j = 0; *name && j < p->n_frozen && s == PP_OK; j++)
            if (!strcmp(p->frozen[j], name)) s = frozen_data(p, j, path, err);
        if (!*name) {
            if (ks[f] >= p->n_inputs)
                s = PP_FAIL(err, PP_EINVAL, "%s: the tensor has no name, and its position %d is "
                            "past the plan's %d input%s", path, ks[f], p->n_inputs,
                            p->n_inputs == 1 ? "" : "s");
            i = ks[f];
        }
        if (s == PP_OK && i < 0) { /* names no plan input: skip it */
            if (sk < sizeof skipped)
                sk += (size_t)snprintf(skipped + sk, sizeof skipped - sk, "%sinput_%d.pb ('%s')",
                                       sk ? ", " : "", ks[f], name);
        } else if (s == PP_OK && from[i]) {
            s = PP_FAIL(err, PP_EINVAL, "%s/input_%d.pb and %s both feed input '%s'", dir,
                        from[i] - 1, path, p->inputs[i].name);
        } else if (s == PP_OK) {
            from[i] = ks[f] + 1;
            snprintf(src[i].from, sizeof src[i].from, "%s", path);
            npys[i] = a;
            a.data = NULL;
            s = check_input(p, i, path, &npys[i], &arrays[i], n, err);
        }
        pprt_npy_free(&a);
        free(name);
    }
    for (int i = 0; i < p->n_inputs && s == PP_OK; i++)
        if (!from[i])
            s = PP_FAIL(err, PP_EIO, "no data for input '%s' in '%s': no input_K.pb names it%s%s",
                        p->inputs[i].name, dir, sk ? "; skipped as naming no plan input: " : "",
                        skipped);
    free(from);
    return s;
}

pp_status pprt_data_load(const pprt_plan *p, const char *dir, const pprt_data_opts *o, pprt_npy *npys,
                         pprt_array *arrays, pprt_data_src *src, int64_t *n, pp_err *err) {
    *n = -1;
    pprt_data_src *own = NULL;
    if (!src && !(src = own = calloc(pp_count(p->n_inputs), sizeof *src))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < p->n_inputs; i++) memset(&npys[i], 0, sizeof npys[i]), src[i].from[0] = 0;
    int *ks = NULL, n_ks = 0;
    struct stat sb;
    const bool there = dir && stat(dir, &sb) == 0, is_dir = there && S_ISDIR(sb.st_mode);
    pp_status s = is_dir ? list_pb_inputs(dir, &ks, &n_ks, err) : PP_OK;
    if (s == PP_OK && dir && !there)
        s = PP_FAIL(err, PP_EIO, "cannot open data directory '%s': %s", dir, strerror(errno));
    if (s == PP_OK && p->n_inputs == 0) { /* nothing to read: one evaluation */
        free(ks);
        free(own);
        *n = 1;
        return PP_OK;
    }
    if (s == PP_OK && n_ks && o && o->n_bind)
        s = PP_FAIL(err, PP_EINVAL, "--input cannot be combined with ONNX test data (input_K.pb files in '%s')", dir);
    if (s == PP_OK && n_ks) {
        s = load_pb_layout(p, dir, ks, n_ks, npys, arrays, src, n, err);
    } else if (s == PP_OK) {
        s = load_npy_layout(p, dir, is_dir, o, npys, arrays, src, n, err);
    }
    free(ks);
    free(own);
    if (s == PP_OK && *n == 0) s = PP_FAIL(err, PP_EINVAL, "the input files in '%s' hold no samples", dir ? dir : "--input");
    if (s != PP_OK)
        for (int i = 0; i < p->n_inputs; i++) pprt_npy_free(&npys[i]);
    return s;
}

/* The path output i is written to, and whether NumPy has its type. */
static bool output_path(const pprt_plan *p, const char *dir, int i, char *path, size_t n) {
    char safe[PP_FILE_NAME_MAX];
    pprt_safe_name(p->outputs[i].name, safe, sizeof safe);
    bool npy = pp_dtype_npy(p->outputs[i].dtype) != NULL;
    snprintf(path, n, "%s/%s.%s", dir, safe, npy ? "npy" : "pb");
    return npy;
}

pp_status pprt_data_write(const pprt_plan *p, const char *dir, const pprt_array *outputs,
                          pp_err *err) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return PP_FAIL(err, PP_EIO, "cannot create output directory '%s': %s", dir, strerror(errno));
    char path[4096];
    for (int i = 0; i < p->n_outputs; i++) {
        const pprt_io *o = &p->outputs[i];
        pp_shape sh = o->shape;
        if (p->batch > 0) sh.dim[0] = outputs[i].n;
        if (output_path(p, dir, i, path, sizeof path))
            PP_TRY(pprt_npy_write(path, o->dtype, &sh, outputs[i].data, err));
        else /* NumPy has no such type (bf16): an ONNX TensorProto */
            PP_TRY(pprt_pb_write(path, o->name, o->dtype, &sh, outputs[i].data, err));
    }
    return PP_OK;
}

pp_status pprt_data_write_check(const pprt_plan *p, const char *dir, pp_err *err) {
    struct stat st;
    if (stat(dir, &st) != 0) return pp_outpath_folder_check(dir, err); /* made by pprt_data_write */
    if (!S_ISDIR(st.st_mode))
        return PP_FAIL(err, PP_EIO, "output directory '%s' is %s", dir, pp_file_kind((unsigned)st.st_mode));
    char path[4096];
    for (int i = 0; i < p->n_outputs; i++) {
        output_path(p, dir, i, path, sizeof path);
        PP_TRY(pp_outfile_check(path, true, err));
    }
    return PP_OK;
}

pp_status pprt_labels_read(const pprt_plan *p, const char *path, int64_t n, pprt_npy *lab, pp_err *err) {
    memset(lab, 0, sizeof *lab);
    const pprt_io *o = &p->outputs[0];
    if (o->dtype != PP_F32 || o->shape.rank != 2)
        return PP_FAIL(err, PP_EINVAL, "--labels: output '%s' must be f32 [N, classes] for top-1 accuracy",
                       o->name);
    PP_TRY(pprt_npy_read(path, lab, err));
    pp_status s = PP_OK;
    int64_t classes = o->shape.dim[1];
    if (lab->shape.rank != 1 || lab->shape.dim[0] != n || (lab->dtype != PP_I64 && lab->dtype != PP_I32)) {
        char got[128];
        s = PP_FAIL(err, PP_EINVAL, "%s: expected %lld int64 or int32 class indices, shape [N], got %s %s",
                    path, (long long)n, pp_dtype_name(lab->dtype), pp_shape_str(&lab->shape, got, sizeof got));
    } else {
        for (int64_t i = 0; i < n; i++) {
            int64_t c = lab->dtype == PP_I64 ? ((const int64_t *)lab->data)[i] : ((const int32_t *)lab->data)[i];
            if (c < 0 || c >= classes) {
                s = PP_FAIL(err, PP_EINVAL, "%s: label %lld is class %lld, expected 0..%lld (output '%s' has %lld "
                            "classes)", path, (long long)i, (long long)c, (long long)classes - 1, o->name,
                            (long long)classes);
                break;
            }
        }
    }
    if (s != PP_OK) pprt_npy_free(lab);
    return s;
}

int64_t pprt_top1(const pprt_plan *p, const pprt_array *out0, const pprt_npy *lab) {
    int64_t classes = p->outputs[0].shape.dim[1], good = 0;
    const float *y = out0->data;
    for (int64_t i = 0; i < out0->n && i < lab->shape.dim[0]; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (y[i * classes + c] > y[i * classes + best]) best = c;
        int64_t want = lab->dtype == PP_I64 ? ((const int64_t *)lab->data)[i] : ((const int32_t *)lab->data)[i];
        good += best == want;
    }
    return good;
}
