/* AITER's per-head Triton decode stage (_fwd_kernel_stage1 as ROCm launches it for 576-wide keys:
 * 4 tokens a block, one warp): its bf16 logit and its PV block, as the H200's PTX of it computes
 * them (qk.dot = aiter-lanes8, pv.dot = aiter-lanes8), for fp8 and for bf16 KV (Triton compiles
 * the stage for the KV's type). Internal to ref/emulate. */
#ifndef MLR_EMU_LANES8_H
#define MLR_EMU_LANES8_H

#include <stdint.h>

/* tl.sum(q * k) over the 512 nope columns plus the same over the 64 rope ones, bf16 operands, in
 * the kernel's order: eight lanes a token, lane j holding columns 64 i + 8 j + c (i, c = 0..7) and
 * rope column 512 + 8 j + c; each lane a bf16 chain: its second product rounded, fma.rn.bf16 of the
 * first, then of the rest but the last two, which are rounded apart and added; the lanes by bf16
 * butterflies at 4, 2, 1; the result bf16(nope + rope). q[i * qs] is column i of Q (bf16 values),
 * k the K row (bf16 values). */
float mlr__emu_lanes8_dot(const float *q, int64_t qs, const float *k);

/* The same sum as the stage's bf16-KV build computes it (Triton lays the K block out otherwise
 * there): the 512 nope columns over the warp's 32 lanes, lane L holding columns 8 L + i and 256 + 8
 * L + i (i = 0..7), a bf16 chain each (x1 rounded, x0 and x2 fused, then the odd columns rounded
 * and added, the even ones fused), the lanes by bf16 butterflies at 16 .. 1; the 64 rope columns
 * over eight lanes as above, each chain x1 rounded and then x0, x2, .., x7 fused, butterflies at 4,
 * 2, 1; the result bf16(nope + rope). */
float mlr__emu_lanes8_dot_bf16kv(const float *q, int64_t qs, const float *k);

/* tl.sum(p[:, None] * v, 0) over a block of 4 tokens, fp32 P and bf16 V (n <= 4 of them given; the
 * rest are the kernel's masked tokens, p = 0 and v = 0): for column d, the product of token 0
 * (even d) or 1 (odd d) rounded, then fma of the other of the two, then of tokens 2 and 3.
 * v[t * 512 + d]; out[d] the block's sum. */
void mlr__emu_lanes8_pv(const float *p, const float *v, int n, float *out);

#endif
