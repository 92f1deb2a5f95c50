/* mlr_base.h: what every mlaref module shares: the host/device qualifier, bit casts and
 * the documented status codes. Usable from C11, C++ and HIP/CUDA device code. */
#ifndef MLR_BASE_H
#define MLR_BASE_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

/* MLR_HD marks scalar functions that the GPU kernels share with the CPU model: the same
 * source gives the same bits on both (docs/design.md, determinism rules). */
#if defined(__CUDACC__) || defined(__HIPCC__)
#define MLR_HD __host__ __device__
#else
#define MLR_HD
#endif

/* MLR_SIMD_CLONES: build a bulk kernel for AVX2 and for baseline x86-64, picked at load
 * time. The clones run the same IEEE operations in the same order per element (contraction
 * is off, so no FMA is formed), so they give the same bits; the tests compare every
 * bulk kernel with its scalar twin. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__) &&     \
    !defined(__HIPCC__)
#define MLR_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MLR_SIMD_CLONES
#endif

/* MLR_FMA_CLONES: for kernels built on fma()/fmaf(): an x86-64-v3 clone (AVX2 and FMA,
 * dispatched on the CPU's features; "avx2" alone leaves fma a library call, and "arch=haswell" is
 * dispatched on the CPU model, so AMD CPUs got the baseline clone) and the baseline one. fma is
 * exactly rounded, so both clones give the same bits. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__) &&     \
    !defined(__HIPCC__)
#define MLR_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MLR_FMA_CLONES
#endif

/* Leading zeros of a non-zero 64-bit value and trailing zeros of a non-zero 32-bit value: GCC's
 * builtins on the host, the GPU's intrinsics in device code (same results for non-zero input). */
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define MLR__CLZ64(x) __clzll((long long)(x))
#define MLR__CTZ32(x) (__ffs((int)(x)) - 1)
#else
#define MLR__CLZ64(x) __builtin_clzll(x)
#define MLR__CTZ32(x) __builtin_ctz(x)
#endif

#ifdef __cplusplus
extern "C" {
#endif

MLR_HD static inline uint32_t mlr_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
MLR_HD static inline float mlr_bits_f32(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
MLR_HD static inline uint64_t mlr_f64_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}
MLR_HD static inline double mlr_bits_f64(uint64_t u) {
  double x;
  memcpy(&x, &u, 8);
  return x;
}

/* A finite binary32 x's magnitude as *sig * 2^(the result): its fraction field, with the leading
 * bit of a normal x, and the exponent of the field's least bit (-149 for a subnormal or zero). */
MLR_HD static inline int mlr_f32_sig(float x, uint32_t *sig) {
  const uint32_t b = mlr_f32_bits(x), be = (b >> 23) & 0xFF;
  *sig = be ? (b & 0x7FFFFFu) | (1u << 23) : b & 0x7FFFFFu;
  return be ? (int)be - 150 : -149;
}

/* fn(ctx, i0, i1) on contiguous static parts of [0, n), one per OpenMP thread, or on all of
 * it when n < serial_below. For loops whose elements are independent: the result does not
 * depend on the thread count. */
void mlr_parallel_ranges(size_t n, size_t serial_below, void (*fn)(void *ctx, size_t i0, size_t i1),
                         void *ctx);

/** The OpenMP team size for a requested thread count: `requested` when > 0, else OpenMP's default
 *  (1 without OpenMP). */
int mlr_threads(int requested);

/* Status codes returned by every library function that can fail. The library never exits
 * and never prints; the command turns a status into one line and an exit code. */
typedef enum mlr_status {
  MLR_OK = 0,             /* success */
  MLR_EINVAL = 1,         /* an argument is out of its documented range */
  MLR_EFORMAT = 2,        /* unknown number format */
  MLR_EROUNDING = 3,      /* unknown rounding mode, or a mode the operation does not support */
  MLR_EOVERFLOW_MODE = 4, /* unknown overflow mode */
  MLR_ENOMEM = 5,         /* an allocation failed */
  MLR_ERANGE = 6,         /* a size or index computation would overflow */
  MLR_EIO = 7,            /* a file could not be read or written */
  MLR_EPARSE = 8,         /* malformed input: text, or a file's structure */
  MLR_ECONTRACT = 9, /* well-formed input that breaks the input contract (names, shapes, values) */
  MLR_EDEVICE = 10   /* no usable GPU, a build without GPU support, or a GPU call that failed */
} mlr_status;

/* A short English description of a status; never NULL. */
const char *mlr_status_str(mlr_status s);

/* SHA-256 of n bytes as 64 lowercase hex digits and a NUL (OpenSSL); MLR_EINVAL if it fails. */
mlr_status mlr_sha256_hex(const void *data, size_t n, char hex[65]);

/* One line describing the first problem a reader, writer, parser or checker found. */
typedef struct mlr_error {
  char msg[1024]; /* room for a message that lists every recipe key */
} mlr_error;

/* Fill err (may be NULL) with a printf-formatted line and return st: the one way the libraries
 * report a problem. */
mlr_status mlr_error_set(mlr_error *err, mlr_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
