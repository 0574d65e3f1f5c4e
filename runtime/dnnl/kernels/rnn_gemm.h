/* rnn_gemm.h: LSTM, GRU and RNN by matrix products over the whole batch:
 * the oneDNN executor's kernel for them (runtime/dnnl/exec.c), with oneDNN's
 * sgemm passed in, so this file links no oneDNN. The reference kernels
 * (ref_rnn.c) run each sample's sequence by itself with one dot product in
 * double per gate value; here x W^T for every step and sample is one
 * product, then each step one product h R^T for all samples, in float, and
 * the same gate arithmetic (rnn_common.h) per sample, so the results agree
 * with the reference within float rounding of the sums (tests/ops: within
 * rtol 1e-4 of onnxruntime on both). sequencer2d_s at -b 8: its LSTMs took
 * 7.2 s per micro-batch on the reference kernels. */
#ifndef PPRT_RNN_GEMM_H
#define PPRT_RNN_GEMM_H

#include "../../kernels.h"

/* C[M, N] = alpha A B + beta C, row-major; ta/tb 'T': A (B) stored
 * transposed. oneDNN's dnnl_sgemm, or any function that does the same;
 * returns 0 on success. */
typedef int (*pprt_sgemm_fn)(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                             int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* Node `op` (LSTM, GRU or RNN) over in[n_in] into out[n_out], as the
 * reference kernel's signature; scratch holds the products; the samples'
 * gate arithmetic on `threads` OpenMP threads (the same bits at any count:
 * each sample's by itself). */
pp_status pprt_rnn_gemm(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                        pprt_scratch *scratch, pprt_sgemm_fn gemm, int threads, pp_err *err);

#endif
