// A fused expression as a compact, bounds-checked bytecode, evaluated per output element in
// registers. The evaluator is __host__ __device__: the CUDA kernels (kernels/cuda) run it on the
// device, and tests/ops/bytecode_test.cpp instantiates the very same code on the host and checks
// it against eager (CI has no GPU).
//
// A Program is the typed program of the one lowering (kernels/lower/program.h) encoded once per
// call (kernels/bytecode.cpp): literals and 0-dim CPU operands become preloaded registers. The
// lowering applied the target's ATen rules (CUDA's true division by a CPU scalar multiplies by
// its reciprocal, float16/bfloat16 ops keep a CPU-scalar operand in float); the evaluator follows
// the rest per Flavour (CUDA's minimum/maximum order signed zeros; half types compute in float).
//
// Registers hold one value in their own dtype (float16 results are rounded after every op, as
// eager rounds every intermediate tensor).
#pragma once

#include "kernels/elementwise.h"
#include "kernels/ir/prim.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <type_traits>

// The interpreter loop is compiled once per architecture and called from every kernel (inlining it
// into each kernel multiplies nvcc's compile time for no measurable gain on a memory-bound loop).
#if defined(__CUDACC__)
#define TSFUSE_BC_NOINLINE __noinline__
#else
#define TSFUSE_BC_NOINLINE
#endif

namespace tsfuse::bc {

enum class DT : uint8_t { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64 };
enum class Flavour : uint8_t { Cpu, Cuda };


constexpr int kMaxIns = 48;
constexpr int kMaxRegs = 48;
constexpr int kMaxLeaves = 12;

struct Ins {
  Prim op;  // a primitive of kernels/ir/prims.def with the kDevice flag
  DT ct;  // compute dtype (Cast: the target dtype); the op computes in MathT<ct>
  uint8_t out, a, b, c;
};

union Reg {
  bool b;
  uint8_t u8;
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint16_t bits16;  // float16 / bfloat16
  float f32;
  double f64;
};

struct Program {
  Flavour flavour = Flavour::Cpu;
  uint8_t nLeaves = 0;  // registers [0, nLeaves) are the operands
  uint8_t nRegs = 0;    // registers [nLeaves, nInit) are preloaded (literals, CPU scalars)
  uint8_t nInit = 0;
  uint8_t nIns = 0;
  uint8_t result = 0;
  uint16_t constLeaves = 0;  // bit i: operand i is a 0-dim CPU scalar preloaded in init[i]
  DT type[kMaxRegs] = {};
  Reg init[kMaxRegs] = {};
  Ins code[kMaxIns] = {};
};

// --- dtype <-> C++ type

template <typename T> struct DTOf;
template <> struct DTOf<bool> { static constexpr DT v = DT::Bool; };
template <> struct DTOf<uint8_t> { static constexpr DT v = DT::U8; };
template <> struct DTOf<int8_t> { static constexpr DT v = DT::I8; };
template <> struct DTOf<int16_t> { static constexpr DT v = DT::I16; };
template <> struct DTOf<int32_t> { static constexpr DT v = DT::I32; };
template <> struct DTOf<int64_t> { static constexpr DT v = DT::I64; };
template <> struct DTOf<c10::Half> { static constexpr DT v = DT::F16; };
template <> struct DTOf<c10::BFloat16> { static constexpr DT v = DT::BF16; };
template <> struct DTOf<float> { static constexpr DT v = DT::F32; };
template <> struct DTOf<double> { static constexpr DT v = DT::F64; };

template <typename T>
constexpr bool kReduced = std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;
// The type an op on T computes in (ATen's opmath_type).
template <typename T>
using MathT = std::conditional_t<kReduced<T>, float, T>;
template <typename T>
constexpr bool kFloating = std::is_floating_point_v<MathT<T>>;

template <typename T>
C10_HOST_DEVICE inline T get(const Reg& r) {
  if constexpr (std::is_same_v<T, bool>) return r.b;
  else if constexpr (std::is_same_v<T, uint8_t>) return r.u8;
  else if constexpr (std::is_same_v<T, int8_t>) return r.i8;
  else if constexpr (std::is_same_v<T, int16_t>) return r.i16;
  else if constexpr (std::is_same_v<T, int32_t>) return r.i32;
  else if constexpr (std::is_same_v<T, int64_t>) return r.i64;
  else if constexpr (kReduced<T>) return T(r.bits16, T::from_bits());
  else if constexpr (std::is_same_v<T, float>) return r.f32;
  else return r.f64;
}

template <typename T>
C10_HOST_DEVICE inline void set(Reg& r, T v) {
  if constexpr (std::is_same_v<T, bool>) r.b = v;
  else if constexpr (std::is_same_v<T, uint8_t>) r.u8 = v;
  else if constexpr (std::is_same_v<T, int8_t>) r.i8 = v;
  else if constexpr (std::is_same_v<T, int16_t>) r.i16 = v;
  else if constexpr (std::is_same_v<T, int32_t>) r.i32 = v;
  else if constexpr (std::is_same_v<T, int64_t>) r.i64 = v;
  else if constexpr (kReduced<T>) r.bits16 = v.x;
  else if constexpr (std::is_same_v<T, float>) r.f32 = v;
  else r.f64 = v;
}

// Calls f(T{}) for the C++ type of dtype t (uniform across a warp: every thread runs one program).
template <typename F>
C10_HOST_DEVICE inline void withType(DT t, F&& f) {
  switch (t) {
    case DT::Bool: f(bool{}); return;
    case DT::U8: f(uint8_t{}); return;
    case DT::I8: f(int8_t{}); return;
    case DT::I16: f(int16_t{}); return;
    case DT::I32: f(int32_t{}); return;
    case DT::I64: f(int64_t{}); return;
    case DT::F16: f(c10::Half{}); return;
    case DT::BF16: f(c10::BFloat16{}); return;
    case DT::F32: f(float{}); return;
    case DT::F64: f(double{}); return;
  }
}

// The value of register r (of dtype t) converted to M, with c10's conversions (as ATen casts).
template <typename M>
C10_HOST_DEVICE inline M loadAs(const Reg& r, DT t) {
  M out{};
  withType(t, [&](auto tag) {
    using T = decltype(tag);
    out = ew::cast<M>(get<T>(r));
  });
  return out;
}

C10_HOST_DEVICE inline int elemSize(DT t) {
  switch (t) {
    case DT::Bool: case DT::U8: case DT::I8: return 1;
    case DT::I16: case DT::F16: case DT::BF16: return 2;
    case DT::I32: case DT::F32: return 4;
    default: return 8;
  }
}

// Loads / stores one element of dtype t at p (p aligned for t, as tensor elements are).
C10_HOST_DEVICE inline Reg loadElem(const void* p, DT t) {
  Reg r;
  r.i64 = 0;
  switch (elemSize(t)) {
    case 1: r.u8 = *static_cast<const uint8_t*>(p); break;
    case 2: r.bits16 = *static_cast<const uint16_t*>(p); break;
    case 4: r.i32 = *static_cast<const int32_t*>(p); break;
    default: r.i64 = *static_cast<const int64_t*>(p); break;
  }
  if (t == DT::Bool) r.b = r.u8 != 0;
  return r;
}
C10_HOST_DEVICE inline void storeElem(void* p, DT t, const Reg& r) {
  switch (elemSize(t)) {
    case 1: *static_cast<uint8_t*>(p) = t == DT::Bool ? uint8_t(r.b) : r.u8; break;
    case 2: *static_cast<uint16_t*>(p) = r.bits16; break;
    case 4: *static_cast<int32_t*>(p) = r.i32; break;
    default: *static_cast<int64_t*>(p) = r.i64; break;
  }
}

// --- scalar semantics per flavour (M is the math type)

// Wrapping integer arithmetic without signed-overflow UB (device code has no -fwrapv).
template <typename M, typename F>
C10_HOST_DEVICE inline M wrapping(M a, M b, F f) {
  if constexpr (std::is_integral_v<M> && std::is_signed_v<M> && !std::is_same_v<M, bool>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return static_cast<M>(f(a, b));
  }
}

template <typename M>
C10_HOST_DEVICE inline bool signbit_(M v) {
  if constexpr (std::is_floating_point_v<M>) return std::signbit(v);
  return false;
}

// ATen's CUDA minimum/maximum: a NaN operand is returned (first a, then b); otherwise the
// device's fmin/fmax, which order -0.0 below +0.0 (PTX min/max semantics).
template <typename M>
C10_HOST_DEVICE inline M cudaMinMax(M a, M b, bool isMax) {
  if constexpr (std::is_same_v<M, bool>) {
    return isMax ? (a || b) : (a && b);
  } else {
    if constexpr (std::is_floating_point_v<M>) {
      if (a != a) return a;
      if (b != b) return b;
      if (a == b) return (signbit_(a) != isMax) ? a : b;  // equal: only the sign of zero differs
    }
    return isMax ? (a > b ? a : b) : (a < b ? a : b);
  }
}

template <typename T>
C10_HOST_DEVICE inline void step(const Program& p, const Ins& in, Reg* r) {
  using M = MathT<T>;
  Reg& out = r[in.out];
  if (in.op == Prim::Cast) {
    withType(p.type[in.a], [&](auto from) {
      using F = decltype(from);
      set<T>(out, ew::cast<T>(get<F>(r[in.a])));
    });
    return;
  }
  const M a = loadAs<M>(r[in.a], p.type[in.a]);
  auto b = [&] { return loadAs<M>(r[in.b], p.type[in.b]); };
  auto put = [&](M v) { set<T>(out, ew::cast<T>(v)); };
  const bool cuda = p.flavour == Flavour::Cuda;
  switch (in.op) {
    case Prim::Add: put(wrapping(a, b(), [](auto x, auto y) { return x + y; })); return;
    case Prim::Sub: put(wrapping(a, b(), [](auto x, auto y) { return x - y; })); return;
    case Prim::Mul: put(wrapping(a, b(), [](auto x, auto y) { return x * y; })); return;
    case Prim::Div:
      if constexpr (kFloating<T>) put(a / b());
      return;
    case Prim::Minimum: put(cuda ? cudaMinMax(a, b(), false) : ew::minimum(a, b())); return;
    case Prim::Maximum: put(cuda ? cudaMinMax(a, b(), true) : ew::maximum(a, b())); return;
    case Prim::ClampMin: put(ew::clampMin(a, b())); return;
    case Prim::ClampMax: put(ew::clampMax(a, b())); return;
    case Prim::Clamp3: {
      const M lo = b(), hi = loadAs<M>(r[in.c], p.type[in.c]);
      M v = a < lo ? lo : a;
      v = hi < v ? hi : v;
      if (ew::isnan_(hi)) v = hi;
      if (ew::isnan_(lo)) v = lo;
      if (ew::isnan_(a)) v = a;
      put(v);
      return;
    }
    case Prim::Eq: set<bool>(out, a == b()); return;
    case Prim::Ne: set<bool>(out, a != b()); return;
    case Prim::Lt: set<bool>(out, a < b()); return;
    case Prim::Le: set<bool>(out, a <= b()); return;
    case Prim::Gt: set<bool>(out, a > b()); return;
    case Prim::Ge: set<bool>(out, a >= b()); return;
    case Prim::And: set<bool>(out, bool(a) && bool(b())); return;
    case Prim::Or: set<bool>(out, bool(a) || bool(b())); return;
    case Prim::Xor: set<bool>(out, bool(a) != bool(b())); return;
    case Prim::Not: set<bool>(out, !bool(a)); return;
    case Prim::Neg:
      if constexpr (std::is_floating_point_v<M>) put(-a);  // -(+0.0) is -0.0, unlike 0 - x
      else if constexpr (!std::is_same_v<M, bool>) put(wrapping(M(0), a, [](auto x, auto y) { return x - y; }));
      return;
    case Prim::Abs: put(ew::abs_(a)); return;
    case Prim::Where: {
      const bool c = r[in.a].b;  // the condition register is bool (lowering casts it)
      put(c ? b() : loadAs<M>(r[in.c], p.type[in.c]));
      return;
    }
    case Prim::Exp:
      if constexpr (kFloating<T>) put(std::exp(a));
      return;
    case Prim::Log:
      if constexpr (kFloating<T>) put(std::log(a));
      return;
    case Prim::Sqrt:
      if constexpr (kFloating<T>) put(std::sqrt(a));
      return;
    case Prim::Sigmoid:
      if constexpr (kFloating<T>) put(M(1) / (M(1) + std::exp(-a)));
      return;
    default: return;  // Cast above; the lowering emits only kDevice primitives
  }
}

// Runs the program on registers whose operands [0, nLeaves) are loaded and whose preloaded
// registers [nLeaves, nInit) are copied from p.init; the value is r[p.result].
C10_HOST_DEVICE TSFUSE_BC_NOINLINE inline void run(const Program& p, Reg* r) {
  for (int k = 0; k < p.nIns; ++k) {
    const Ins in = p.code[k];
    withType(in.ct, [&](auto tag) { step<decltype(tag)>(p, in, r); });
  }
}

// Registers [0, nInit) before loading the non-constant operands.
C10_HOST_DEVICE inline void preload(const Program& p, Reg* r) {
  for (int k = 0; k < p.nInit; ++k) r[k] = p.init[k];
}

}  // namespace tsfuse::bc
