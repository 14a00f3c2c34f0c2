/* Private to libscaleout_comm, bottom layer: what a reduction means for each
 * element type (the kernels every algorithm combines received data with),
 * the even block partition, streaming copies, and the MPI names of the types
 * and reductions. BF16 / F16 are combined in FP32 and rounded once per call:
 * an algorithm calls one of these per hop, which is where the documented
 * "rounded once per hop" happens (docs/COLLECTIVES.md, "Element types"). */
#ifndef SCALEOUT_COMM_REDUCE_H
#define SCALEOUT_COMM_REDUCE_H

#include "comm_internal.h"

#include <stdint.h>

/* count elements in p blocks as even as possible: the first count % p blocks
 * are one longer. Block i is [off, off + len). Same rule everywhere (and in
 * so_comm_block), so reduce-scatter output feeds allgather input. */
static inline void so_blk(size_t count, int p, int i, size_t *off, size_t *len)
{
    size_t q = count / (size_t)p, r = count % (size_t)p, ui = (size_t)i;
    *len = q + (ui < r);
    *off = ui * q + (ui < r ? ui : r);
}

/* 0, or SO_EINVAL with a message when op cannot reduce dt (I64 has no AVG). */
int so_red_check(so_dtype dt, so_reduce_op op);

/* dst = a op b, n elements of dt; op is SUM, MAX or MIN. dst may equal a (not
 * b). BF16 / F16: both operands widened to FP32, combined, rounded once. */
void so_red(so_dtype dt, so_reduce_op op, void *dst, const void *a, const void *b, size_t n);

/* dst = in[0] op in[1] op ... op in[k-1], in that order (k >= 1). BF16 / F16
 * accumulate all k in FP32 and round once; F32 rounds after every input, as
 * so_red would. dst may equal in[0] and no other input. */
void so_red_multi(so_dtype dt, so_reduce_op op, void *dst, const void *const *in, int k, size_t n);

/* so_red_multi's SUM followed by so_red_avg(dst, n, p), the same bits; F32
 * multiplies by 1/p inside the last input's pass instead of a pass of its
 * own (the other types make the two calls). */
void so_red_multi_avg(so_dtype dt, void *dst, const void *const *in, int k, size_t n, int p);

/* AVG's last step on a sum over p ranks: F32 x *= 1/p (one multiply, one
 * rounding, the same bits on every rank); BF16 / F16 the same in FP32,
 * rounded again to the type; F64 x /= p. */
void so_red_avg(so_dtype dt, void *x, size_t n, int p);

/* The F32 forms, as the TCP ring and the tuning's gamma use them. */
void so_reduce_acc(float *dst, const float *src, size_t n, so_reduce_op op); /* dst = dst op src */
void so_reduce_out(float *dst, const float *a, const float *b, size_t n, so_reduce_op op);

/* memcpy with non-temporal stores (ends with a store fence): for data another
 * core reads next (reduce.c explains why). */
void so_copy_nt(void *dst, const void *src, size_t bytes);

/* The MPI datatype of dt (BF16 / F16: MPI_UINT16_T, reduced by so_mpi_op's
 * user-defined operations), and the MPI_Op of (dt, op) for SUM/MAX/MIN (AVG
 * reduces as SUM). SO_ECOMM if MPI cannot create the operation. */
MPI_Datatype so_mpi_dtype(so_dtype dt);
int so_mpi_op(so_dtype dt, so_reduce_op op, MPI_Op *out);

#endif
