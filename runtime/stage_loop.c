/* stage_loop.c: see stage_loop.h. */
#include <time.h>

#include "stage_loop.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

pp_status pprt_stage_loop(pprt_stage_run *r, int64_t k0, int64_t k1, bool *own, pp_err *err) {
    *own = false;
    for (int64_t k = k0; k < k1; k++) {
        void *in, *out;
        int64_t tag;
        const long long mb = (long long)(r->mb_offset + (k < r->warmup ? 0 : k - r->warmup));
        PP_TRY(r->in->ops->receive(r->in, &in, &tag, err));
        if (tag != k) {
            *own = true;
            return PP_FAIL(err, PP_ERUNTIME, "stage %d: received micro-batch %lld out of order, expected %lld",
                           r->stage, (long long)(r->mb_offset + tag - (tag < r->warmup ? tag : r->warmup)), mb);
        }
        PP_TRY(r->out->ops->acquire(r->out, &out, err));
        const double t0 = now();
        pp_err e = {0};
        const pp_status s = r->ex->run(r->x, in, out, &e);
        if (k >= r->warmup) r->busy += now() - t0;
        if (s != PP_OK) {
            *own = true;
            return PP_FAIL(err, s, "stage %d, micro-batch %lld: %s", r->stage, mb, e.msg);
        }
        PP_TRY(r->in->ops->release(r->in, in, err));
        PP_TRY(r->out->ops->submit(r->out, out, k, err));
    }
    return PP_OK;
}
