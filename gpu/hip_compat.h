/* hip_compat.h: the one place that knows the GPU vendor. GPU sources are written against the
 * HIP names below; on AMD this header includes the HIP runtime, on NVIDIA it maps the names
 * onto the CUDA runtime (Debian's HIP 5.2 headers for NVIDIA do not build against CUDA 13).
 * Only the names the project uses are mapped; an unknown toolchain stops here. */
#ifndef MLR_HIP_COMPAT_H
#define MLR_HIP_COMPAT_H

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
typedef cudaError_t hipError_t;
#define hipSuccess                                 cudaSuccess
#define hipGetErrorString                          cudaGetErrorString
#define hipGetLastError                            cudaGetLastError
#define hipMalloc                                  cudaMalloc
#define hipFree                                    cudaFree
#define hipMemcpy                                  cudaMemcpy
#define hipMemset                                  cudaMemset
#define hipMemcpyHostToDevice                      cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost                      cudaMemcpyDeviceToHost
#define hipDeviceSynchronize                       cudaDeviceSynchronize
#define hipGetDeviceProperties                     cudaGetDeviceProperties
#define hipGetDeviceCount                          cudaGetDeviceCount
typedef cudaDeviceProp hipDeviceProp_t;
typedef cudaEvent_t hipEvent_t;
#define hipEventCreate                             cudaEventCreate
#define hipEventRecord                             cudaEventRecord
#define hipEventSynchronize                        cudaEventSynchronize
#define hipEventElapsedTime                        cudaEventElapsedTime
#define hipEventDestroy                            cudaEventDestroy
#define hipErrorMemoryAllocation                   cudaErrorMemoryAllocation
#define hipFuncSetAttribute                        cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#else
#error "hip_compat.h: compile GPU sources with hipcc (AMD) or nvcc (NVIDIA)"
#endif

#include <stdio.h>
#include <stdlib.h>

/* Shuffles within groups of 32 lanes: a CUDA warp, half an AMD CDNA wavefront (64 lanes, width 32).
 * Callers keep all 32 lanes of a group converged (uniform loops). */
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define MLR_SHFL(v, src)   __shfl((v), (src), 32)
#define MLR_SHFL_XOR(v, m) __shfl_xor((v), (m), 32)
#else
#define MLR_SHFL(v, src)   __shfl_sync(0xFFFFFFFFu, (v), (src), 32)
#define MLR_SHFL_XOR(v, m) __shfl_xor_sync(0xFFFFFFFFu, (v), (m), 32)
#endif

/* Every runtime call and launch is checked; a failure names the call and stops the program. */
#define MLR_GPU_CHECK(call)                                                                        \
  do {                                                                                             \
    hipError_t mlr_e_ = (call);                                                                    \
    if (mlr_e_ != hipSuccess) {                                                                    \
      fprintf(stderr, "GPU error %s at %s:%d: %s\n", hipGetErrorString(mlr_e_), __FILE__,          \
              __LINE__, #call);                                                                    \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#endif
