/* onnx_weights.c: a model with new values for its initializers (ppcc
 * --save-onnx OUT --weights DIR): the trained weights pprt wrote back into
 * the model they came from, for onnxruntime or PyTorch to load. */
#include "frontend.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../runtime/io.h"
#include "onnx/onnx.pb-c.h"

static pp_status read_whole(const char *path, uint8_t **buf, size_t *len, pp_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return PP_FAIL(err, PP_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return PP_FAIL(err, PP_EIO, "%s: not a regular file", path);
    }
    *len = (size_t)sb.st_size;
    *buf = malloc(*len ? *len : 1);
    if (!*buf) {
        fclose(f);
        return PP_FAIL(err, PP_ENOMEM, "out of memory reading %s (%zu bytes)", path, *len);
    }
    const size_t got = fread(*buf, 1, *len, f);
    fclose(f);
    if (got != *len) return PP_FAIL(err, PP_EIO, "%s: read %zu of %zu bytes", path, got, *len);
    return PP_OK;
}

/* Every DIR/NAME.npy names an initializer (its file name as pprt writes it). */
static pp_status check_dir(const Onnx__GraphProto *gp, const char *dir, pp_err *err) {
    DIR *d = opendir(dir);
    if (!d) return PP_FAIL(err, PP_EIO, "--weights %s: cannot open the folder: %s", dir, strerror(errno));
    pp_status s = PP_OK;
    for (struct dirent *e; s == PP_OK && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".npy")) continue;
        bool found = false;
        for (size_t i = 0; i < gp->n_initializer && !found; i++) {
            char safe[PP_FILE_NAME_MAX + 1];
            pp_file_name(gp->initializer[i]->name ? gp->initializer[i]->name : "", safe, sizeof safe);
            found = strlen(safe) == n - 4 && !strncmp(safe, e->d_name, n - 4);
        }
        if (!found)
            s = PP_FAIL(err, PP_EINVAL, "--weights %s: %s names no initializer of the model", dir, e->d_name);
    }
    closedir(d);
    return s;
}

/* Whether value `name` is read by a node other than `self`, or is a graph output. */
static bool used_elsewhere(const Onnx__GraphProto *gp, const Onnx__NodeProto *self, const char *name) {
    if (!name || !*name) return false;
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t k = 0; gp->node[i] != self && k < gp->node[i]->n_input; k++)
            if (gp->node[i]->input[k] && !strcmp(gp->node[i]->input[k], name)) return true;
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i]->name && !strcmp(gp->output[i]->name, name)) return true;
    return false;
}

/* A node whose input and output counts to_inference cut: the message frees
 * by its counts, so they go back before it is freed. */
typedef struct cut_counts {
    Onnx__NodeProto *n;
    size_t n_input, n_output;
} cut_counts;

/* A training export made an inference model: BatchNormalization with
 * training_mode 0 (the running statistics, one output), Dropout without its
 * ratio and training_mode inputs. Refused where an output this drops is read.
 * cuts[0..gp->n_node) records each node's counts before (restore_counts). */
static pp_status to_inference(Onnx__GraphProto *gp, cut_counts *cuts, int *changed, pp_err *err) {
    for (size_t i = 0; i < gp->n_node; i++) {
        Onnx__NodeProto *n = gp->node[i];
        const bool bn = n->op_type && !strcmp(n->op_type, "BatchNormalization");
        const bool drop = n->op_type && !strcmp(n->op_type, "Dropout");
        if ((!bn && !drop) || (n->domain && *n->domain)) continue;
        cuts[i] = (cut_counts){n, n->n_input, n->n_output};
        for (size_t k = 1; k < n->n_output; k++)
            if (used_elsewhere(gp, n, n->output[k]))
                return PP_FAIL(err, PP_EUNSUP, "--eval-mode: node '%s' (%s): its output '%s' is read, and inference "
                               "has no such output", n->name ? n->name : "", n->op_type, n->output[k]);
        if (n->n_output > 1) n->n_output = 1, ++*changed;
        if (drop && n->n_input > 1) n->n_input = 1, ++*changed;
        for (size_t a = 0; bn && a < n->n_attribute; a++)
            if (n->attribute[a]->name && !strcmp(n->attribute[a]->name, "training_mode") && n->attribute[a]->i)
                n->attribute[a]->i = 0, ++*changed;
    }
    return PP_OK;
}

pp_status pp_onnx_save_weights(const char *model, const char *dir, const char *out, bool eval_mode, int *replaced,
                               pp_err *err) {
    *replaced = 0;
    uint8_t *buf = NULL, *packed = NULL;
    size_t len = 0;
    PP_TRY(read_whole(model, &buf, &len, err));
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    pp_status s = PP_OK;
    if (!m || !m->graph) s = PP_FAIL(err, PP_EINVAL, "%s: not an ONNX model (protobuf parsing failed)", model);
    if (s == PP_OK) s = check_dir(m->graph, dir, err);
    int changed = 0;
    cut_counts *cuts = s == PP_OK && eval_mode ? calloc(m->graph->n_node + 1, sizeof *cuts) : NULL;
    if (s == PP_OK && eval_mode && !cuts) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK && eval_mode) s = to_inference(m->graph, cuts, &changed, err);
    int n = 0;
    pprt_npy *arrays = s == PP_OK ? calloc(m->graph->n_initializer + 1, sizeof *arrays) : NULL;
    ProtobufCBinaryData *orig = s == PP_OK ? calloc(m->graph->n_initializer + 1, sizeof *orig) : NULL;
    protobuf_c_boolean *had = s == PP_OK ? calloc(m->graph->n_initializer + 1, sizeof *had) : NULL;
    if (s == PP_OK && (!arrays || !orig || !had)) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (size_t i = 0; s == PP_OK && i < m->graph->n_initializer; i++) {
        Onnx__TensorProto *t = m->graph->initializer[i];
        char safe[PP_FILE_NAME_MAX + 1], path[4400];
        pp_file_name(t->name ? t->name : "", safe, sizeof safe);
        snprintf(path, sizeof path, "%s/%s.npy", dir, safe);
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        pprt_npy *a = &arrays[i];
        if ((s = pprt_npy_read(path, a, err)) != PP_OK) break;
        bool fits = (int)a->dtype == t->data_type && (size_t)a->shape.rank == t->n_dims;
        for (size_t k = 0; fits && k < t->n_dims; k++) fits = a->shape.dim[k] == t->dims[k];
        if (!fits) {
            char got[128];
            pp_shape_str(&a->shape, got, sizeof got);
            s = PP_FAIL(err, PP_EINVAL, "%s: %s%s, but initializer '%s' has another type or shape", path,
                        pp_dtype_name(a->dtype), got, t->name);
            pprt_npy_free(a); /* not put in: nothing to give back below */
            break;
        }
        /* the new bytes, inline, in place of whatever held the old ones */
        orig[i] = t->raw_data, had[i] = t->has_raw_data;
        t->has_raw_data = 1;
        t->raw_data.data = a->data;
        t->raw_data.len = a->nbytes;
        t->n_float_data = t->n_int32_data = t->n_int64_data = t->n_double_data = t->n_uint64_data = 0;
        t->n_external_data = 0;
        t->has_data_location = 0;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
        n++;
    }
    size_t plen = 0;
    if (s == PP_OK) {
        plen = onnx__model_proto__get_packed_size(m);
        if (plen > ((size_t)2 << 30) - 1)
            s = PP_FAIL(err, PP_EUNSUP, "%s: the model with its weights inline would be %.2f GB, over protobuf's 2 GB",
                        out, (double)plen / 1e9);
    }
    if (s == PP_OK && !(packed = malloc(plen ? plen : 1))) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK) {
        onnx__model_proto__pack(m, packed);
        pp_outfile of;
        s = pp_outfile_open(&of, out, err);
        if (s == PP_OK) {
            const bool ok = fwrite(packed, 1, plen, of.f) == plen;
            s = pp_outfile_commit(&of, ok, err);
            if (s == PP_OK && !ok) s = PP_FAIL(err, PP_EIO, "cannot write %s", out);
        }
    }
    /* the arrays' bytes are ours: the message gets its own back before protobuf-c frees it */
    for (size_t i = 0; m && m->graph && arrays && i < m->graph->n_initializer; i++)
        if (arrays[i].data) {
            m->graph->initializer[i]->raw_data = orig[i];
            m->graph->initializer[i]->has_raw_data = had[i];
            pprt_npy_free(&arrays[i]);
        }
    free(arrays);
    free(orig);
    free(had);
    for (size_t i = 0; cuts && i < m->graph->n_node; i++)
        if (cuts[i].n) cuts[i].n->n_input = cuts[i].n_input, cuts[i].n->n_output = cuts[i].n_output;
    free(cuts);
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    free(buf);
    free(packed);
    if (s == PP_OK) *replaced = n;
    return s;
}
