/* profile.c: measured op times. `pprt --profile FILE` writes each node's
 * mean time per micro-batch in milliseconds, and before them the
 * micro-batch, the unit ("unit": "ms"; files without one are in ms too) and
 * the device kind they were measured on; `ppcc --profile FILE` reads them back
 * and the cost model uses them instead of the roofline estimate for the
 * nodes it finds (by node name: the same model and passes give the same
 * names). Of several profiles (one per micro-batch size, all of one device
 * kind), the one measured nearest the graph's micro-batch is used; times
 * measured at another micro-batch size are scaled linearly. The file is read
 * as JSON by cJSON, so a profile re-saved by another tool (Python's
 * json.dump, one line) reads the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "passes.h"
#include "../ir/json.h"

/* The whole file parsed (any valid JSON layout, not only pprt's own); the caller frees *root. */
static pp_status read_profile(const char *path, cJSON **root, pp_err *err) {
    pp_err e = {0};
    const pp_status s = pp_json_read(path, NULL, "a pprt --profile file", root, &e);
    return s == PP_OK ? PP_OK : PP_WRAP(err, &e, s, "--profile: %s", e.msg);
}

/* A device kind as pprt names it now: a profile written before the oneDNN
 * and reference backends had one name each says "cpu-dnnl" or "cpu-ref"
 * where pprt now writes "dnnl" or "ref". */
static const char *device_kind(const char *d) {
    const size_t len = strcspn(d, " ");
    const bool former = (len == 8 && !strncmp(d, "cpu-dnnl", 8)) || (len == 7 && !strncmp(d, "cpu-ref", 7));
    return former ? d + 4 : d;
}

/* The header's fields: micro_batch (a count), the unit ("ms"; files without
 * one, written before it, are in ms too) and the device kind. */
static pp_status profile_fields(const char *path, const cJSON *root, int64_t *batch, const char **device,
                                pp_err *err) {
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "micro_batch");
    if (!cJSON_IsObject(root) || !cJSON_IsNumber(b) || !(b->valuedouble >= 0) || b->valuedouble > 1e15 ||
        b->valuedouble != (double)(int64_t)b->valuedouble)
        return PP_FAIL(err, PP_EINVAL, "%s: not a pprt --profile file (no micro_batch)", path);
    *batch = (int64_t)b->valuedouble;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(root, "unit");
    if (u && !cJSON_IsString(u)) return PP_FAIL(err, PP_EINVAL, "%s: the unit is not a JSON string", path);
    if (u && strcmp(u->valuestring, "ms") != 0)
        return PP_FAIL(err, PP_EINVAL, "%s: times in \"%s\", expected \"ms\" (as pprt --profile writes them)", path,
                       u->valuestring);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "device");
    if (d && !cJSON_IsString(d)) return PP_FAIL(err, PP_EINVAL, "%s: the device is not a JSON string", path);
    *device = d ? device_kind(d->valuestring) : "";
    return PP_OK;
}

pp_status pp_apply_profile(pp_graph *g, const char *path, int *matched, pp_err *err) {
    cJSON *root = NULL;
    *matched = 0;
    PP_TRY(read_profile(path, &root, err));
    int64_t batch;
    const char *device;
    pp_status s = profile_fields(path, root, &batch, &device, err);
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes"), *it;
    if (s == PP_OK && !cJSON_IsObject(nodes))
        s = PP_FAIL(err, PP_EINVAL, "%s: holds no node times (no \"nodes\" object)", path);
    int entries = 0;
    if (s == PP_OK)
        cJSON_ArrayForEach(it, nodes) {
            /* at most 1e9 ms (11 days) a node: a larger or infinite time (JSON's 1e999) made the cost model's
             * sums infinite and the split arbitrary */
            if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0 && it->valuedouble <= 1e9) || !it->string) {
                s = PP_FAIL(err, PP_EINVAL, "%s: node '%s': expected \"node name\": milliseconds in 0..1e9", path,
                            it->string ? it->string : "?");
                break;
            }
            entries++;
            double scale = batch > 0 && g->batch > 0 ? (double)g->batch / (double)batch : 1.0;
            for (int i = 0; i < g->n_nodes; i++)
                if (g->nodes[i].prof_s < 0 && strcmp(g->nodes[i].name, it->string) == 0) {
                    g->nodes[i].prof_s = it->valuedouble * 1e-3 * scale;
                    (*matched)++;
                    break;
                }
        }
    if (s == PP_OK && entries == 0) s = PP_FAIL(err, PP_EINVAL, "%s: holds no node times", path);
    cJSON_Delete(root);
    return s;
}

pp_status pp_profile_header(const char *path, int64_t *batch, char *device, size_t device_len,
                            pp_err *err) {
    cJSON *root = NULL;
    PP_TRY(read_profile(path, &root, err));
    const char *d = "";
    pp_status s = profile_fields(path, root, batch, &d, err);
    if (s == PP_OK && device && device_len) snprintf(device, device_len, "%s", d);
    cJSON_Delete(root);
    return s;
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
