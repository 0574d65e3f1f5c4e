/* nccl_module.c: NCCL between GPU stages on ranks (engine.h) in pprt, which
 * links no NCCL: comm/p2p_nccl.c is in the CUDA module (cuda_backend.h),
 * loaded here if no stage has loaded it yet. */
#include "../cuda/cuda_backend.h"
#include "engine.h"

static pp_status module(const pprt_cuda_module **out, pp_err *err) {
    pp_err e = {0};
    *out = pprt_cuda_module_get(&e);
    if (!*out) return PP_FAIL(err, e.code, "NCCL: %s", e.msg);
    if (!(*out)->nccl_id || !(*out)->nccl_open)
        return PP_FAIL(err, PP_EUNSUP, "NCCL: the CUDA module was built without MPI, so without its NCCL transport");
    return PP_OK;
}

pp_status pprt_nccl_id(unsigned char id[PPRT_P2P_ID], pp_err *err) {
    const pprt_cuda_module *m;
    PP_TRY(module(&m, err));
    return m->nccl_id(id, err);
}

pp_status pprt_nccl_open(pprt_mpi *m, int peer, bool first, const unsigned char id[PPRT_P2P_ID], int device,
                         pprt_p2p **out, pp_err *err) {
    const pprt_cuda_module *c;
    PP_TRY(module(&c, err));
    return c->nccl_open(m, peer, first, id, device, out, err);
}
