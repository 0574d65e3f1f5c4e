/* check.c: pprt --check: compare a run's outputs with expected values (ONNX
 * test data's output_K.pb or NAME.npy files), one report line per output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cpu/bf16.h"
#include "io.h"

/* ---- element access ---------------------------------------------------------------- */

static bool is_float(pp_dtype dt) {
    return dt == PP_F16 || dt == PP_BF16 || dt == PP_F32 || dt == PP_F64 || dt == PP_C64 ||
           dt == PP_C128;
}

static bool is_unsigned(pp_dtype dt) {
    return dt == PP_U8 || dt == PP_U16 || dt == PP_U32 || dt == PP_U64 || dt == PP_BOOL;
}

static double half_to_double(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0    ? ldexp(m, -24)
               : e == 31 ? (m ? NAN : INFINITY)
                         : ldexp(m + 1024, e - 25);
    return h >> 15 ? -v : v;
}

/* Value i of a float type (complex: part i of the interleaved parts). */
static double float_at(pp_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case PP_F16: return half_to_double(((const uint16_t *)p)[i]);
    case PP_BF16: return pprt_bf16_float(((const uint16_t *)p)[i]);
    case PP_F32: case PP_C64: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

static int64_t signed_at(pp_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case PP_I8: return ((const int8_t *)p)[i];
    case PP_I16: return ((const int16_t *)p)[i];
    case PP_I32: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

static uint64_t unsigned_at(pp_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case PP_BOOL: return ((const uint8_t *)p)[i] != 0;
    case PP_U8: return ((const uint8_t *)p)[i];
    case PP_U16: return ((const uint16_t *)p)[i];
    case PP_U32: return ((const uint32_t *)p)[i];
    default: return ((const uint64_t *)p)[i];
    }
}

/* The low-precision types: small floats compare by code (bit-exact: what
 * their rounding must give, NaN and -0 encodings included), the 2- and 4-bit
 * integers by value (padding bits of the last byte are not compared). */
static bool is_small_float(pp_dtype dt) {
    return pp_minifloat_of(dt) != NULL || dt == PP_F8E8M0;
}

static bool is_packed_int(pp_dtype dt) {
    return dt == PP_U4 || dt == PP_I4 || dt == PP_U2 || dt == PP_I2;
}

/* Code of element i of a small float type. */
static unsigned small_code(pp_dtype dt, const void *p, int64_t i) {
    return pp_dtype_packed(dt) ? pp_packed_get(p, pp_dtype_bits(dt), i) : ((const uint8_t *)p)[i];
}

static int64_t packed_int_at(pp_dtype dt, const void *p, int64_t i) {
    const unsigned bits = pp_dtype_bits(dt), v = pp_packed_get(p, bits, i);
    if (dt == PP_U4 || dt == PP_U2) return v;
    const int half = 1 << (bits - 1);
    return ((int)v ^ half) - half;
}

/* ---- comparison ----------------------------------------------------------------------- */

static void note(pprt_diff *d, int64_t i, bool ok, double abs_err, double rel_err, double got,
                 double want) {
    if (abs_err > d->max_abs) d->max_abs = abs_err;
    if (rel_err > d->max_rel) d->max_rel = rel_err;
    if (ok) return;
    if (d->bad++ == 0) {
        d->first_bad = i;
        d->got = got;
        d->want = want;
    }
}

void pprt_compare(pp_dtype dt, const void *got, const void *want, int64_t n, double rtol,
                  double atol, pprt_diff *d) {
    memset(d, 0, sizeof *d);
    d->first_bad = -1;
    if (dt == PP_C64 || dt == PP_C128) n *= 2;
    d->n = n;
    for (int64_t i = 0; i < n; i++) {
        if (is_small_float(dt)) {
            const unsigned gc = small_code(dt, got, i), wc = small_code(dt, want, i);
            const double g = pp_minifloat_value(dt, gc), w = pp_minifloat_value(dt, wc);
            const bool same = gc == wc;
            double e = same ? 0 : fabs(g - w);
            if (!same && (isnan(e) || e == 0)) e = INFINITY; /* NaN, or a zero's sign */
            note(d, i, same, e, isinf(e) ? e : w != 0 ? e / fabs(w) : 0, g, w);
        } else if (is_packed_int(dt)) {
            const int64_t g = packed_int_at(dt, got, i), w = packed_int_at(dt, want, i);
            const double e = fabs((double)g - (double)w);
            note(d, i, g == w, e, w ? e / fabs((double)w) : 0, (double)g, (double)w);
        } else if (is_float(dt)) {
            double g = float_at(dt, got, i), w = float_at(dt, want, i);
            if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) {
                bool same = (isnan(g) && isnan(w)) || g == w;
                note(d, i, same, same ? 0 : INFINITY, same ? 0 : INFINITY, g, w);
                continue;
            }
            double e = fabs(g - w);
            note(d, i, e <= atol + rtol * fabs(w), e, w != 0 ? e / fabs(w) : 0, g, w);
        } else if (is_unsigned(dt)) {
            uint64_t g = unsigned_at(dt, got, i), w = unsigned_at(dt, want, i);
            double e = g >= w ? (double)(g - w) : (double)(w - g);
            note(d, i, g == w, e, w ? e / (double)w : 0, (double)g, (double)w);
        } else {
            int64_t g = signed_at(dt, got, i), w = signed_at(dt, want, i);
            double e = fabs((double)g - (double)w);
            note(d, i, g == w, e, w ? e / fabs((double)w) : 0, (double)g, (double)w);
        }
    }
}

/* ---- expected values -------------------------------------------------------------------- */

/* Something other than a directory is there (a FIFO too: found, then
 * refused by the reader with its reason, rather than called missing). */
static bool is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode);
}

/* Find and read output k's expected value; `src` receives the file's path. */
static pp_status load_expected(const pprt_plan *p, int k, const char *data_dir,
                               const pprt_check_opts *o, pprt_npy *want, char *src, size_t n,
                               pp_err *err) {
    const char *name = p->outputs[k].name;
    char safe[PP_FILE_NAME_MAX], pb[4096], npy[2][4096];
    pprt_safe_name(name, safe, sizeof safe);
    const char *dir = o->expected_dir ? o->expected_dir : data_dir;
    snprintf(pb, sizeof pb, "%s/output_%d.pb", dir, k);
    int n_npy = 0;
    if (o->expected_dir) {
        snprintf(npy[n_npy++], sizeof npy[0], "%s/%s.npy", dir, safe);
    } else {
        snprintf(npy[n_npy++], sizeof npy[0], "%s/../expected/%s.npy", data_dir, safe);
        snprintf(npy[n_npy++], sizeof npy[0], "%s/expected/%s.npy", data_dir, safe);
    }
    /* the order: an explicit --expected DIR prefers NAME.npy, a data dir its output_K.pb */
    const char *order[3];
    int m = 0;
    if (!o->expected_dir) order[m++] = pb;
    for (int i = 0; i < n_npy; i++) order[m++] = npy[i];
    if (o->expected_dir) order[m++] = pb;
    for (int i = 0; i < m; i++) {
        if (!is_file(order[i])) continue;
        snprintf(src, n, "%s", order[i]);
        if (order[i] != pb) return pprt_npy_read(order[i], want, err);
        char *tname = NULL;
        PP_TRY(pprt_pb_read(pb, want, &tname, err));
        pp_status s = PP_OK;
        if (*tname && strcmp(tname, name) != 0)
            s = PP_FAIL(err, PP_EINVAL, "%s holds tensor '%s', but plan output %d is '%s'", pb,
                        tname, k, name);
        free(tname);
        if (s != PP_OK) pprt_npy_free(want);
        return s;
    }
    return PP_FAIL(err, PP_EIO, "no expected value for output '%s': none of %s, %s%s%s exists",
                   name, order[0], order[1], m > 2 ? ", " : "", m > 2 ? order[2] : "");
}

/* "[i,j,k]" of flat index `flat` in shape sh. */
static void index_str(const pp_shape *sh, int64_t flat, char *buf, size_t n) {
    int64_t idx[PP_MAX_DIMS];
    for (int d = sh->rank - 1; d >= 0; d--) {
        int64_t dim = sh->dim[d] > 0 ? sh->dim[d] : 1;
        idx[d] = flat % dim;
        flat /= dim;
    }
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < sh->rank && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "", (long long)idx[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

pp_status pprt_check(const pprt_plan *p, const pprt_array *outputs, const char *data_dir,
                     const pprt_check_opts *o, FILE *report, pp_err *err) {
    int n_bad = 0;
    char bad_src[4096] = "", bad_why[512] = "";
    const char *bad_name = NULL;
    for (int k = 0; k < p->n_outputs; k++) {
        const pprt_io *out = &p->outputs[k];
        pp_shape sh = out->shape;
        if (p->batch > 0) sh.dim[0] = outputs[k].n;
        pprt_npy want;
        char src[4096], gs[128], ws[128];
        PP_TRY(load_expected(p, k, data_dir, o, &want, src, sizeof src, err));
        pp_shape_str(&sh, gs, sizeof gs);
        fprintf(report, "check: '%s' %s %s: ", out->name, pp_dtype_name(out->dtype), gs);
        char why[512] = "";
        if (want.dtype != out->dtype || !pp_shape_eq(&want.shape, &sh)) {
            snprintf(why, sizeof why, "got %s %s, expected %s %s", pp_dtype_name(out->dtype), gs,
                     pp_dtype_name(want.dtype), pp_shape_str(&want.shape, ws, sizeof ws));
            fprintf(report, "MISMATCH: %s (%s)\n", why, src);
        } else {
            int64_t numel = 0;
            (void)pp_shape_numel(&want.shape, &numel, NULL); /* read and checked already */
            pprt_diff d;
            pprt_compare(out->dtype, outputs[k].data, want.data, numel, o->rtol, o->atol, &d);
            fprintf(report, "max abs err %.3g, max rel err %.3g: ", d.max_abs, d.max_rel);
            if (d.bad == 0) {
                fprintf(report, "OK\n");
            } else {
                char at[256];
                bool cplx = out->dtype == PP_C64 || out->dtype == PP_C128;
                index_str(&sh, cplx ? d.first_bad / 2 : d.first_bad, at, sizeof at);
                snprintf(why, sizeof why,
                         "%lld of %lld values outside atol %g + rtol %g * |want|, first at %s%s: "
                         "got %.9g, want %.9g",
                         (long long)d.bad, (long long)d.n, o->atol, o->rtol, at,
                         cplx ? (d.first_bad % 2 ? " (imag)" : " (real)") : "", d.got, d.want);
                fprintf(report, "MISMATCH (%s)\n", why);
            }
        }
        pprt_npy_free(&want);
        if (*why && n_bad++ == 0) {
            bad_name = out->name;
            memcpy(bad_src, src, sizeof bad_src);
            memcpy(bad_why, why, sizeof bad_why);
        }
    }
    fflush(report);
    if (n_bad == 0) return PP_OK;
    char more[64] = "";
    if (n_bad > 1)
        snprintf(more, sizeof more, " (and %d more output%s)", n_bad - 1, n_bad == 2 ? "" : "s");
    return PP_FAIL(err, PP_EMISMATCH, "output '%s' does not match %s: %s%s", bad_name, bad_src,
                   bad_why, more);
}
