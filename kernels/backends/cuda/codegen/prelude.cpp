// The prelude every generated kernel text starts with: macros that make one plain-C kernel compile
// as CUDA C++ under NVRTC and as OpenCL C (PoCL and oclgrind run it in CI). No headers or
// templates, so compiles stay short and the text is all a reader needs. Exactness: no contraction
// (-fmad=false; FP_CONTRACT OFF and -cl-fp32-correctly-rounded-divide-sqrt, without which PoCL
// makes FMAs and 2.5 ulp divides); bit reinterpretation through macros, so constants are exact bit
// patterns and NaN/sign tests need no math library.
#include "kernels/backends/cuda/codegen/emit.h"

namespace tsfuse::cuda {

const char* prelude() {
  return R"TSF(/* tsfuse generated kernel: plain C, CUDA (NVRTC) or OpenCL C */
#ifdef __OPENCL_VERSION__
#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef uchar tsf_bool; typedef uchar tsf_u8; typedef char tsf_i8; typedef short tsf_i16;
typedef ushort tsf_u16; typedef int tsf_i32; typedef uint tsf_u32; typedef long tsf_i64;
typedef ulong tsf_u64; typedef float tsf_f32; typedef double tsf_f64;
#define TSF_KERNEL __kernel void
#define TSF_BOUNDS(threads, blocks)
#define TSF_GLOBAL __global
#define TSF_LOCAL __local
#define TSF_RESTRICT restrict
#define TSF_FN static inline
#define TSF_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define TSF_TID ((tsf_i32)get_local_id(0))
#define TSF_BID ((tsf_i64)get_group_id(0))
#define TSF_BDIM ((tsf_i32)get_local_size(0))
#define TSF_GDIM ((tsf_i64)get_num_groups(0))
#define TSF_U64(x) x##UL
#define TSF_F32_BITS(u) as_float((uint)(u))
#define TSF_F64_BITS(u) as_double((ulong)(u))
#define TSF_BITS_F32(x) as_uint(x)
#define TSF_BITS_F64(x) as_ulong(x)
#define TSF_FABS_F32(x) fabs(x)
#define TSF_FABS_F64(x) fabs(x)
#define TSF_EXP_F32(x) exp(x)
#define TSF_EXP_F64(x) exp(x)
#define TSF_LOG_F32(x) log(x)
#define TSF_LOG_F64(x) log(x)
#define TSF_SQRT_F32(x) sqrt(x)
#define TSF_SQRT_F64(x) sqrt(x)
#define TSF_SIN_F32(x) sin(x)
#define TSF_SIN_F64(x) sin(x)
#define TSF_COS_F32(x) cos(x)
#define TSF_COS_F64(x) cos(x)
#define TSF_ATAN_F32(x) atan(x)
#define TSF_ATAN_F64(x) atan(x)
#define TSF_TANH_F32(x) tanh(x)
#define TSF_TANH_F64(x) tanh(x)
#define TSF_FLOOR_F32(x) floor(x)
#define TSF_FLOOR_F64(x) floor(x)
#define TSF_CEIL_F32(x) ceil(x)
#define TSF_CEIL_F64(x) ceil(x)
#define TSF_TRUNC_F32(x) trunc(x)
#define TSF_TRUNC_F64(x) trunc(x)
#define TSF_RINT_F32(x) rint(x)
#define TSF_RINT_F64(x) rint(x)
#define TSF_POW_F64(x, y) pow(x, y)
/* What CUDA's fminf/fmaxf (PTX min/max) return for two non-NaN operands: -0.0 below +0.0. */
#define TSF_MIN_F32(a, b) ((a) == (b) ? (TSF_SIGN_F32(a) ? (a) : (b)) : (a) < (b) ? (a) : (b))
#define TSF_MAX_F32(a, b) ((a) == (b) ? (TSF_SIGN_F32(a) ? (b) : (a)) : (a) > (b) ? (a) : (b))
#define TSF_MIN_F64(a, b) ((a) == (b) ? (TSF_SIGN_F64(a) ? (a) : (b)) : (a) < (b) ? (a) : (b))
#define TSF_MAX_F64(a, b) ((a) == (b) ? (TSF_SIGN_F64(a) ? (b) : (a)) : (a) > (b) ? (a) : (b))
#else
typedef unsigned char tsf_bool; typedef unsigned char tsf_u8; typedef signed char tsf_i8;
typedef short tsf_i16; typedef unsigned short tsf_u16; typedef int tsf_i32; typedef unsigned int tsf_u32;
typedef long long tsf_i64; typedef unsigned long long tsf_u64; typedef float tsf_f32; typedef double tsf_f64;
#define TSF_KERNEL extern "C" __global__ void
#define TSF_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#define TSF_GLOBAL
#define TSF_LOCAL __shared__
#define TSF_RESTRICT __restrict__
#define TSF_FN static __device__ __forceinline__
#define TSF_BARRIER() __syncthreads()
#define TSF_TID ((tsf_i32)threadIdx.x)
#define TSF_BID ((tsf_i64)blockIdx.x)
#define TSF_BDIM ((tsf_i32)blockDim.x)
#define TSF_GDIM ((tsf_i64)gridDim.x)
#define TSF_U64(x) x##ULL
#define TSF_F32_BITS(u) __uint_as_float((unsigned int)(u))
#define TSF_F64_BITS(u) __longlong_as_double((long long)(u))
#define TSF_BITS_F32(x) __float_as_uint(x)
#define TSF_BITS_F64(x) ((tsf_u64)__double_as_longlong(x))
#define TSF_FABS_F32(x) fabsf(x)
#define TSF_FABS_F64(x) fabs(x)
#define TSF_EXP_F32(x) expf(x)
#define TSF_EXP_F64(x) exp(x)
#define TSF_LOG_F32(x) logf(x)
#define TSF_LOG_F64(x) log(x)
#define TSF_SQRT_F32(x) sqrtf(x)
#define TSF_SQRT_F64(x) sqrt(x)
#define TSF_SIN_F32(x) sinf(x)
#define TSF_SIN_F64(x) sin(x)
#define TSF_COS_F32(x) cosf(x)
#define TSF_COS_F64(x) cos(x)
#define TSF_ATAN_F32(x) atanf(x)
#define TSF_ATAN_F64(x) atan(x)
#define TSF_TANH_F32(x) tanhf(x)
#define TSF_TANH_F64(x) tanh(x)
#define TSF_FLOOR_F32(x) floorf(x)
#define TSF_FLOOR_F64(x) floor(x)
#define TSF_CEIL_F32(x) ceilf(x)
#define TSF_CEIL_F64(x) ceil(x)
#define TSF_TRUNC_F32(x) truncf(x)
#define TSF_TRUNC_F64(x) trunc(x)
#define TSF_RINT_F32(x) rintf(x)
#define TSF_RINT_F64(x) rint(x)
#define TSF_POW_F64(x, y) pow(x, y)
#define TSF_MIN_F32(a, b) fminf(a, b)
#define TSF_MAX_F32(a, b) fmaxf(a, b)
#define TSF_MIN_F64(a, b) fmin(a, b)
#define TSF_MAX_F64(a, b) fmax(a, b)
#endif
#define TSF_NAN_F32 TSF_F32_BITS(0x7fc00000u)
#define TSF_NAN_F64 TSF_F64_BITS(TSF_U64(0x7ff8000000000000))
#define TSF_SIGN_F32(x) (TSF_BITS_F32(x) >> 31)
#define TSF_SIGN_F64(x) (TSF_BITS_F64(x) >> 63)
/* float16 / bfloat16: stored as 16-bit patterns, computed in float (ATen's opmath), every op's
   result rounded to nearest-even (the bits __float2half_rn / c10::Half give; NaN stays NaN). */
typedef tsf_u16 tsf_f16; typedef tsf_u16 tsf_bf16;
TSF_FN tsf_f32 tsf_f16_to_f32(tsf_f16 h) {
  const tsf_u32 sign = ((tsf_u32)h & 0x8000u) << 16, e = ((tsf_u32)h >> 10) & 0x1fu, m = (tsf_u32)h & 0x3ffu;
  if (e == 31u) return TSF_F32_BITS(sign | 0x7f800000u | (m << 13));
  if (e == 0u) { /* zero or subnormal: m * 2^-24, exact in float */
    const tsf_f32 v = (tsf_f32)m * TSF_F32_BITS(0x33800000u);
    return sign ? -v : v;
  }
  return TSF_F32_BITS(sign | ((e + 112u) << 23) | (m << 13));
}
TSF_FN tsf_f16 tsf_f32_to_f16(tsf_f32 f) {
  const tsf_u32 x = TSF_BITS_F32(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (tsf_f16)(sign | 0x7e00u);                 /* NaN */
  if (ax >= 0x47800000u) return (tsf_f16)(sign | 0x7c00u);                /* >= 2^16 and inf */
  tsf_u32 r, rem, tie;
  if (ax < 0x38800000u) {                                                  /* below 2^-14: subnormal */
    if (ax < 0x33000000u) return (tsf_f16)sign;                            /* < 2^-25 rounds to 0 */
    const tsf_u32 shift = 126u - (ax >> 23), m = (ax & 0x7fffffu) | 0x800000u;
    r = m >> shift; rem = m & ((1u << shift) - 1u); tie = 1u << (shift - 1u);
  } else {
    r = (ax - 0x38000000u) >> 13; rem = ax & 0x1fffu; tie = 0x1000u;       /* rebias 127 -> 15 */
  }
  r += (rem > tie || (rem == tie && (r & 1u))) ? 1u : 0u;               /* may carry into inf */
  return (tsf_f16)(sign | r);
}
TSF_FN tsf_f32 tsf_bf16_to_f32(tsf_bf16 h) { return TSF_F32_BITS((tsf_u32)h << 16); }
TSF_FN tsf_bf16 tsf_f32_to_bf16(tsf_f32 f) {
  const tsf_u32 x = TSF_BITS_F32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (tsf_bf16)0x7fc0u;
  return (tsf_bf16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
TSF_FN tsf_f32 tsf_round_f16(tsf_f32 f) { return tsf_f16_to_f32(tsf_f32_to_f16(f)); }
TSF_FN tsf_f32 tsf_round_bf16(tsf_f32 f) { return tsf_bf16_to_f32(tsf_f32_to_bf16(f)); }
)TSF";
}

}  // namespace tsfuse::cuda
