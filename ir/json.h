/* json.h: the JSON files both tools write (ppcc --report-json, its --search
 * and --max-batch results, stages.json, the profile --measure averages;
 * pprt --stats-json, --profile, --trace; and the module list inside
 * --report-html's page, through pp_json_print), built as cJSON trees
 * (Debian's libcjson) and printed by the library, which quotes and escapes
 * every string: a node named `a"b\c` or holding a control byte comes out as
 * valid JSON (bytes >= 0x80 pass through as they are: UTF-8 in, UTF-8 out).
 * Files are written whole or not at all (pp_outfile).
 *
 * It is NOT a JSON reader (passes/profile.c parses with cJSON directly) and
 * holds no schema: each writer names its own keys.
 *
 * A pp_json remembers whether any allocation failed. The adders take a NULL
 * parent (an object or array that could not be made) and then do nothing,
 * so a writer adds everything and learns of a failure once, from
 * pp_json_write, as PP_ENOMEM. Keys are not copied: they must outlive the
 * tree (string literals, or names owned by the graph or plan being
 * written). Numbers are doubles: integers are exact up to 2^53; NaN and
 * infinity print as null. */
#ifndef PP_JSON_H
#define PP_JSON_H

#include <cjson/cJSON.h>

#include "base.h"

typedef struct pp_json {
    cJSON *root;
    bool oom;
} pp_json;

/* A tree whose root is an object (returned; NULL, and oom, when it could
 * not be allocated). */
cJSON *pp_json_begin(pp_json *j);
/* The same with an array as the root. */
cJSON *pp_json_begin_array(pp_json *j);
/* An object root that opens with "format" (what the file is: "ppcc-report")
 * and "version" (its schema's number), as every file ppcc writes does. */
cJSON *pp_json_begin_format(pp_json *j, const char *format, int version);
/* Each adds to `parent`: as member `key` of an object, or (key NULL) as the
 * next element of an array. The containers return the new one, NULL on
 * failure (or a NULL parent). */
cJSON *pp_json_add_object(pp_json *j, cJSON *parent, const char *key);
cJSON *pp_json_add_array(pp_json *j, cJSON *parent, const char *key);
void pp_json_add_number(pp_json *j, cJSON *parent, const char *key, double v);
/* v rounded to `decimals` places (what printf's "%.Nf" kept), printed in
 * the fewest digits: 1.5 rather than 1.500000, 2 rather than 2.000. */
void pp_json_add_round(pp_json *j, cJSON *parent, const char *key, double v, int decimals);
/* The string is copied. */
void pp_json_add_string(pp_json *j, cJSON *parent, const char *key, const char *s);
void pp_json_add_bool(pp_json *j, cJSON *parent, const char *key, bool v);

/* Print the tree (indented with `pretty`, else on one line) into `path`
 * through pp_outfile, then free it, whatever happened: PP_ENOMEM when an
 * addition or the printing failed (nothing written), PP_EIO when the file
 * could not be written (nothing left under its name). */
pp_status pp_json_write(pp_json *j, const char *path, bool pretty, pp_err *err);
/* The tree as text (indented with `pretty`, else on one line; release it
 * with cJSON_free), then freed; NULL, and PP_ENOMEM in err naming `what`,
 * when it could not be built whole or printed. */
char *pp_json_print(pp_json *j, bool pretty, const char *what, pp_err *err);
void pp_json_free(pp_json *j);

/* Read `path` (opened by pp_fopen_read, `what` prefixing it in messages)
 * whole and parse it (cJSON: any valid layout, not only pprt's own); the
 * caller frees *root. Not JSON: PP_EINVAL naming the file, `kind` (what the
 * file should be: "a pprt --profile file") and the byte the parser stopped
 * at. Files over 1 GiB are refused. */
pp_status pp_json_read(const char *path, const char *what, const char *kind, cJSON **root, pp_err *err);

/* A tensor as every file names one: {"name", "dtype" (pp_dtype_name's),
 * "shape": [dims], "bytes"}, appended to the array `parent`; returned for
 * more members. */
cJSON *pp_json_add_tensor(pp_json *j, cJSON *parent, const char *name, pp_dtype dtype, const pp_shape *shape,
                          size_t bytes);

/* ---- a file too large to hold as one tree (pprt --trace) ---------------- */

/* A JSON object whose last member is a long array, written element by
 * element: the head (the object, its last member an empty array) is printed
 * first, then each element as it is made, one line each, then the closing
 * brackets. The file is still written whole or not at all. */
typedef struct pp_json_stream {
    pp_outfile out;
    long n;   /* elements written */
    bool ok;  /* every element made, printed and written so far */
    bool oom; /* one could not be made or printed */
} pp_json_stream;

/* `head`'s tree (freed here; PP_ENOMEM when it could not be built whole)
 * must be an object whose last member is an empty array; the path is
 * opened and the head written. */
pp_status pp_json_stream_open(pp_json_stream *s, const char *path, pp_json *head, pp_err *err);
/* The next element: j's tree (freed here) on one line. A tree that could
 * not be built whole, or a failed print or write, fails the stream, which
 * pp_json_stream_close reports. */
void pp_json_stream_add(pp_json_stream *s, pp_json *j);
/* Close the array and the object and commit the file; `ok` false (the
 * caller failed) abandons it. */
pp_status pp_json_stream_close(pp_json_stream *s, bool ok, pp_err *err);

/* ---- pprt's profile (pprt --profile, ppcc --measure) -------------------- */

/* The head of a profile file, as passes/profile.c reads it: {"micro_batch",
 * "unit": "ms", "device", "nodes": {}}; returns "nodes", which the caller
 * fills with pp_json_add_round(j, nodes, node_name, ms, 6). */
cJSON *pp_json_profile_begin(pp_json *j, int64_t batch, const char *device);

#endif
