/* links_mpi.c: what carries this rank's boundaries, and its stage's set-up
 * (engine.h: pprt_mpi_transports before the start-up messages,
 * pprt_mpi_stage_setup after them).
 *
 * A boundary between two host stages is the MPI link of chan_mpi.c, as it
 * always was. A boundary with a device stage at an end is, by --transport:
 *   NCCL  both ends device stages of one space: link_p2p.c over NCCL
 *         (cuda; the sending rank makes the id, the start-up messages
 *         bring it to the receiving one) or over the emulated NCCL
 *         (cuda-emu, p2p_emu.c);
 *   MPI   the MPI link with its buffers pinned by the device's space, and
 *         the device end staged through them (link_stage.c).
 * The pipeline's source and sink are staged the same way when their stage
 * is on a device. Every rank decides each boundary from the plan and the
 * options alone, so both ends of a boundary agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../backend.h"
#include "../driver.h"
#include "../run.h"
#include "engine.h"

static const char *const kind_names[] = {"MPI", "MPI, staged through pinned host memory", "NCCL", "emulated NCCL"};

/* The space of stage s (its backend resolved, not asked whether it runs here). */
static pp_status space_of(const pprt_plan *p, int s, const pprt_backend *override, const pprt_mem_ops **out,
                          pp_err *err) {
    const pprt_backend *b;
    PP_TRY(pprt_stage_backend_resolve(p, s, override, &b, err));
    *out = pprt_backend_space(b);
    return PP_OK;
}

/* Boundary b (stage b -> b + 1). */
pp_status pprt_mpi_boundary_kind(const pprt_mpi *m, const pprt_plan *p, const pprt_backend *override, int b, int *kind,
                         pp_err *err) {
    const pprt_mem_ops *a, *c;
    PP_TRY(space_of(p, b, override, &a, err));
    PP_TRY(space_of(p, b + 1, override, &c, err));
    if (a->kind == PPRT_MEM_HOST && c->kind == PPRT_MEM_HOST) {
        *kind = PPRT_BK_HOST;
        return PP_OK;
    }
    bool nccl = m->transport == PPRT_TRANSPORT_NCCL;
    if (m->transport == PPRT_TRANSPORT_AUTO) { /* NCCL when every stage is on a GPU */
        nccl = true;
        for (int s = 0; s < p->n_stages && nccl; s++) {
            const pprt_mem_ops *x;
            PP_TRY(space_of(p, s, override, &x, err));
            nccl = x->nccl;
        }
    }
    *kind = nccl && a == c && a->nccl ? PPRT_BK_NCCL : nccl && a == c && a->host_addressable && a->kind == PPRT_MEM_DEVICE
                                                           ? PPRT_BK_NCCL_EMU
                                                           : PPRT_BK_STAGED;
#ifndef PPRT_WITH_NCCL
    if (*kind == PPRT_BK_NCCL)
        return PP_FAIL(err, PP_EUNSUP, "the boundary after stage %d would go over NCCL, which this build lacks", b);
#endif
    return PP_OK;
}

static bool has_id(const unsigned char *id) {
    for (int i = 0; i < PPRT_P2P_ID; i++)
        if (id[i]) return true;
    return false;
}

static uint32_t fingerprint(const unsigned char *id) { return (uint32_t)XXH3_64bits(id, PPRT_P2P_ID); }

pp_status pprt_mpi_transports(pprt_mpi *m, const pprt_plan *p, const pprt_backend *override, pprt_mpi_transports_t *t,
                              pp_err *err) {
    const int s = m->stage, K = p->n_stages;
    *t = (pprt_mpi_transports_t){.in = -1, .out = -1};
    PP_TRY(pprt_stage_backend_resolve(p, s, override, &t->be, err));
    if (s > 0) PP_TRY(pprt_mpi_boundary_kind(m, p, override, s - 1, &t->in, err));
    if (s < K - 1) PP_TRY(pprt_mpi_boundary_kind(m, p, override, s, &t->out, err));
    memset(m->id_out, 0, sizeof m->id_out);
    memset(m->id_in, 0, sizeof m->id_in);
    pp_err e = {0};
    pp_status st = PP_OK;
#ifdef PPRT_WITH_NCCL
    if (t->out == PPRT_BK_NCCL) st = pprt_nccl_id(m->id_out, &e);
#endif
    if (t->out == PPRT_BK_NCCL_EMU) st = pprt_p2p_emu_id(m->id_out, &e);
    if (st != PP_OK) return PP_FAIL(err, e.code, "stage %d, the NCCL boundary to the next stage: %s", s, e.msg);
    return PP_OK;
}

/* "stage 1 on cuda; from rank 0 (stage 0) over NCCL, id 1a2b3c4d; ..." */
static void describe(const pprt_mpi *m, const pprt_mpi_transports_t *t, char *buf, size_t n) {
    int len = snprintf(buf, n, "stage %d on %s", m->stage, t->be->name);
    for (int side = 0; side < 2; side++) {
        const int kind = side ? t->out : t->in;
        if (kind < 0 || len < 0 || (size_t)len >= n) continue;
        char who[64];
        pprt_mpi_describe(m, m->rank + (side ? 1 : -1), who, sizeof who);
        len += snprintf(buf + len, n - (size_t)len, "; %s %s over %s", side ? "to" : "from", who, kind_names[kind]);
        const unsigned char *id = side ? m->id_out : m->id_in;
        if ((kind == PPRT_BK_NCCL || kind == PPRT_BK_NCCL_EMU) && len > 0 && (size_t)len < n)
            len += has_id(id) ? snprintf(buf + len, n - (size_t)len, ", id %08x", fingerprint(id))
                              : snprintf(buf + len, n - (size_t)len, ", no id");
    }
}

/* This rank's end of boundary b before (in) or after its stage. */
static pp_status boundary(pprt_mpi *m, const pprt_plan *p, const pprt_run_opts *o, const pprt_place *at, int kind,
                          bool in, int64_t n_msgs, pprt_link **out, pp_err *err) {
    const int peer = m->rank + (in ? -1 : 1);
    const size_t bytes = in ? p->stages[m->stage - 1].out.bytes : p->stages[m->stage].out.bytes;
    char who[64], name[128];
    pprt_mpi_describe(m, peer, who, sizeof who);
    snprintf(name, sizeof name, "the %s boundary %s %s", kind_names[kind], in ? "from" : "to", who);
    if (kind == PPRT_BK_NCCL || kind == PPRT_BK_NCCL_EMU) {
        const unsigned char *id = in ? m->id_in : m->id_out;
        pprt_p2p *c = NULL;
        pp_status s = PP_OK;
#ifdef PPRT_WITH_NCCL
        if (kind == PPRT_BK_NCCL) s = pprt_nccl_open(m, peer, !in, id, at->device, &c, err);
#endif
        if (kind == PPRT_BK_NCCL_EMU) s = pprt_p2p_emu_open(m, peer, id, &c, err);
        PP_TRY(s);
        return pprt_link_p2p(c, at, !in, bytes, o->depth, n_msgs, name, out, err);
    }
    const bool staged = kind == PPRT_BK_STAGED && !pprt_place_is_host(at);
    pprt_chan *full, *free_;
    pprt_link *host;
    PP_TRY(pprt_mpi_chan_create(m, peer, !in, bytes, o->depth, n_msgs, staged ? at->mem : NULL, &full, &free_, err));
    PP_TRY(pprt_link_chans(full, free_, NULL, 0, NULL, bytes, o->depth, !in, &host, err));
    if (!staged) {
        *out = host;
        return PP_OK;
    }
    return pprt_link_staged(host, at, in, name, out, err);
}

static pp_status setup(pprt_mpi *m, const pprt_plan *p, const pprt_run_opts *o, const pprt_mpi_transports_t *t,
                       const pprt_mpi_ends *ends, pprt_mpi_stage *out, pp_err *err) {
    const int s = m->stage, last = p->n_stages - 1;
    out->at = pprt_place_host(); /* the device: --devices, else the local rank (named by the caller) */
    if (t->be->mem == PPRT_MEM_DEVICE) {
        out->at.mem = pprt_backend_space(t->be);
        PP_TRY(out->at.mem->device(&p->stages[s], pprt_mpi_env_local_rank(), &out->at.device, err));
        if (!o->quiet && out->at.mem->describe) { /* the ranks do not compare theirs yet (docs/cuda.md) */
            pprt_dev_desc d;
            out->at.mem->describe(out->at.device, &d);
            char who[64], pl[48];
            pprt_mpi_describe(m, m->rank, who, sizeof who);
            pprt_place_name(&out->at, pl, sizeof pl);
            fprintf(stderr, "pprt: %s on %s: %s, compute capability %d.%d, %d SMs; %s\n", who, pl, d.name, d.cc_major,
                    d.cc_minor, d.sms, d.libs);
        }
    }
    const pprt_mem_ops *pin = pprt_place_is_host(&out->at) ? NULL : out->at.mem;
    pprt_link *l;
    /* both ends of the boundary before this stage must agree on NCCL: its
     * sender made an id for it exactly when it would go over NCCL there */
    const bool sent_nccl = has_id(m->id_in);
    if (s > 0 && sent_nccl != (t->in == PPRT_BK_NCCL || t->in == PPRT_BK_NCCL_EMU)) {
        char who[64];
        pprt_mpi_describe(m, m->rank - 1, who, sizeof who);
        return PP_FAIL(err, PP_EINVAL, "%s sends over %s and this rank expects %s: every rank must get the same "
                       "--transport and --backend", who, sent_nccl ? "NCCL" : "MPI", kind_names[t->in]);
    }
    if (s == 0) {
        PP_TRY(pprt_link_source(p, ends->in, ends->n, o->warmup, ends->t_start, pin, &l, err));
        if (pin) PP_TRY(pprt_link_staged(l, &out->at, true, "the inputs -> stage 0", &l, err));
        out->in = l;
    } else {
        PP_TRY(boundary(m, p, o, &out->at, t->in, true, ends->n_msgs, &out->in, err));
    }
    if (s == last) {
        PP_TRY(pprt_link_sink(p, ends->out, ends->n, o->warmup, ends->t_end, NULL, NULL, pin, &l, err));
        if (pin) PP_TRY(pprt_link_staged(l, &out->at, false, "the last stage -> the outputs", &l, err));
        out->out = l;
    } else {
        PP_TRY(boundary(m, p, o, &out->at, t->out, false, ends->n_msgs, &out->out, err));
    }
    /* the stage's own backend, on this host, then its executor */
    PP_TRY(pprt_stage_backend(p, s, o->backend, &out->be, err));
    /* intra-op threads: --threads, else this rank's cores (pprt_rank_cores) */
    pprt_exec_cfg cfg = pprt_stage_cfg(o, pprt_run_threads(o, pprt_rank_cores(pprt_mpi_env_local_size())), &out->at);
    return out->be->exec->create(p, &p->stages[s], &cfg, &out->x, err);
}

pp_status pprt_mpi_stage_setup(pprt_mpi *m, const pprt_plan *p, const pprt_run_opts *o,
                               const pprt_mpi_transports_t *t, const pprt_mpi_ends *ends, pprt_mpi_stage *out,
                               pp_err *err) {
    *out = (pprt_mpi_stage){0};
    pp_err e = {0};
    pp_status s = setup(m, p, o, t, ends, out, &e);
    if (s == PP_OK) return PP_OK;
    /* the links and the executor made so far stay: on a failure the process ends (pprt_mpi_finish) */
    char d[400];
    describe(m, t, d, sizeof d);
    return PP_FAIL(err, s, "%s: %s", d, e.msg);
}
