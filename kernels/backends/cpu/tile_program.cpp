#include "kernels/backends/cpu/tile_program.h"

#include "kernels/backends/cpu/gather.h"
#include "kernels/backends/cpu/row_sum.h"
#include "kernels/backends/path_counts.h"

#include "common/dtype_dispatch.h"
#include "common/scalar_ops.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

namespace tsfuse::cpu {
namespace {

// The native op loops, compiled twice: for the baseline ISA (SSE2 on x86-64) and, on x86-64, for
// AVX2 (chosen at run time). Only the vector width differs: no FMA (-ffp-contract=off and no
// "fma" target), and IEEE add/sub/mul/div/compare are exact in every width, so both give the
// same bits. (No AVX-512 copy: the loops are bound by L1 stores, not by instruction count.)
using ExecFn = void (*)(const lower::Instr&, c10::ScalarType, char*, const char*, const char*, const char*, int64_t,
                        unsigned);
using AccLongFn = void (*)(c10::ScalarType, const char*, int64_t*, int64_t);
using AccDoubleFn = void (*)(c10::ScalarType, const char*, double*, int64_t);
using CountFn = void (*)(const char*, uint8_t*, int64_t);
template <typename T>
using WelfordFn = void (*)(const T*, double*, double*, double, int64_t);
namespace base {
#include "kernels/backends/cpu/tile_ops.inc"
#include "kernels/backends/cpu/row_sum.inc"
}  // namespace base
#if defined(__x86_64__) && defined(__GNUC__)
#define TSFUSE_HAVE_AVX2_OPS 1
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
#include "kernels/backends/cpu/tile_ops.inc"
#include "kernels/backends/cpu/row_sum.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

template <typename T>
using RowSumFn = T (*)(const T*, int64_t);

struct IsaOps {
  bool avx2;
  ExecFn exec;
  AccLongFn accLong;
  AccDoubleFn accDouble;
  CountFn count;
  // eagerRowSum's loops over 32-byte vectors, and over single values (rows shorter than one)
  RowSumFn<float> rowSumF, rowSumF1;
  RowSumFn<double> rowSumD, rowSumD1;
  WelfordFn<float> welfordF;
  WelfordFn<double> welfordD;
};

#define TSFUSE_ISA_OPS(ns, isAvx2)                                                                    \
  IsaOps {                                                                                            \
    isAvx2, ns::exec, ns::accumulateLong, ns::accumulateDouble, ns::countFlags, ns::rowSum<float, 8>, \
        ns::rowSum<float, 1>, ns::rowSum<double, 4>, ns::rowSum<double, 1>, ns::welfordAdd<float>,    \
        ns::welfordAdd<double>                                                                        \
  }

IsaOps chooseIsa() {
  const char* isa = std::getenv("TSFUSE_CPU_ISA");  // "baseline" forces the SSE2 loops (tests, benchmarks)
  const bool baseline = isa && std::string(isa) == "baseline";
#ifdef TSFUSE_HAVE_AVX2_OPS
  if (!baseline && __builtin_cpu_supports("avx2")) return TSFUSE_ISA_OPS(avx2, true);
#endif
  (void)baseline;
  return TSFUSE_ISA_OPS(base, false);
}
#undef TSFUSE_ISA_OPS

const IsaOps& isaOps() {
  static const IsaOps ops = chooseIsa();
  return ops;
}

// Copies the element at `from` into n lanes at `to` (which may start at `from`): a gather over a
// 0-dim sub-space.
void broadcastFill(const char* from, char* to, int64_t elemSize, int64_t n) {
  gather(from, elemSize, nullptr, nullptr, 0, 0, n, to);
}

}  // namespace

std::optional<TileProgram> TileProgram::lower(const Expr& e, const Analysis& a, at::TensorList operands,
                                              std::string* why) {
  auto p = tsfuse::lower::lowerExpr(e, a, operands, tsfuse::lower::Target::cpuTiles(), why);
  if (!p) return std::nullopt;
  TileProgram t;
  static_cast<tsfuse::lower::Program&>(t) = std::move(*p);
  t.vml.resize(t.code.size());
  for (size_t k = 0; k < t.code.size(); ++k) {
    const lower::Instr& li = t.code[k];
    auto ofComputeType = [&](int slot) { return t.slotType[slot] == li.ct; };
    if (li.op != Prim::Aten || li.atenSlots.empty() ||
        !std::all_of(li.atenSlots.begin(), li.atenSlots.end(), ofComputeType) || !ofComputeType(li.out))
      continue;
    const std::vector<Arg>& args = li.aten.args;
    // pow(x, e) with e a tensor: the routine, where e is one value on the tile (routineArgOf).
    if (li.atenSlots.size() == 2 && li.aten.op == Op::Pow && args.size() == 2 && args[0].isTensor() &&
        args[1].isTensor())
      t.vml[k] = powTensorRoutine(li.ct);
    if (li.atenSlots.size() != 1) continue;
    if (args.size() == 1) t.vml[k] = vmlRoutine(li.aten.op, li.ct);
    // pow(x, number): the number is a literal of the call (bound per call where it is a runtime one)
    const bool numberExponent =
        args.size() == 2 && args[0].isTensor() && (args[1].kind == Arg::Kind::Int || args[1].kind == Arg::Kind::Float);
    if (li.aten.op == Op::Pow && numberExponent) t.vml[k] = powRoutine(li.ct, literalScalar(args[1]).toDouble());
  }
  return t;
}

TileProgram::Scratch TileProgram::makeScratch() const {
  // NB: slots 4096 bytes apart would put a loop's loads and stores at the same address modulo
  // 4 KiB, which the CPU treats as a possible store-to-load dependency (4K aliasing, which slows
  // the tile loops): consecutive slots are staggered by three cache lines.
  constexpr int64_t kSlotStride = kTile + 3 * 64 / 8;  // in int64 elements
  Scratch s;
  s.storage.reset(new int64_t[slotType.size() * kSlotStride]);  // (default-initialized: not zeroed)
  s.slot.resize(slotType.size());
  for (size_t i = 0; i < slotType.size(); ++i) s.slot[i] = reinterpret_cast<char*>(s.storage.get() + i * kSlotStride);
  s.buffer = s.slot;
  s.fill.assign(slotType.size(), Fill::Vector);
  for (const Literal& lit : literals) {
    literalValue(lit, s.slot[lit.slot]);
    broadcastFill(s.slot[lit.slot], s.slot[lit.slot], c10::elementSize(slotType[lit.slot]), kTile);
    s.fill[lit.slot] = Fill::Both;
  }
  return s;
}

namespace {

// Gives slot i n elements: a uniform value is broadcast into the slot's own buffer (a uniform
// leaf points into the operand, which is never written).
void expand(const TileProgram& p, TileProgram::Scratch& s, int i, int64_t n) {
  if (i < 0 || s.fill[i] != TileProgram::Fill::Uniform) return;
  broadcastFill(s.slot[i], s.buffer[i], c10::elementSize(p.slotType[i]), n);
  s.slot[i] = s.buffer[i];
  s.fill[i] = TileProgram::Fill::Both;
}

bool uniform(const TileProgram::Scratch& s, int i) { return i < 0 || s.fill[i] != TileProgram::Fill::Vector; }

}  // namespace

void TileProgram::runPrefix(Scratch& s, int64_t n, size_t count) const {
  if (count > 0) countPath(PathCount::InterpretedTiles);
  for (size_t k = 0; k < count; ++k) runInstr(s, n, k);
}

const VmlRoutine* TileProgram::routineOf(size_t k) const {
  // vml covers the lowered code; what castResultTo / squareResult append after it is native.
  return k < vml.size() && vml[k] ? &vml[k] : nullptr;
}

int TileProgram::routineArgOf(size_t k) const {
  return routineOf(k) && code[k].atenSlots.size() == 2 ? code[k].atenSlots[1] : -1;
}

double TileProgram::uniformValue(const Scratch& s, int slot) const {
  return slotType[slot] == c10::ScalarType::Float ? *reinterpret_cast<const float*>(s.slot[slot])
                                                  : *reinterpret_cast<const double*>(s.slot[slot]);
}

void TileProgram::runInstr(Scratch& s, int64_t n, size_t k) const {
  const lower::Instr& li = code[k];
  const VmlRoutine* routine = li.op == Prim::Aten ? routineOf(k) : nullptr;
  const int arg = routine ? routineArgOf(k) : -1;
  if (routine && (arg < 0 || s.fill[arg] != Fill::Vector)) {
    expand(*this, s, li.atenSlots[0], n);
    if (arg < 0)
      (*routine)(n, s.slot[li.atenSlots[0]], s.slot[li.out]);
    else
      (*routine)(n, s.slot[li.atenSlots[0]], s.slot[li.out], uniformValue(s, arg));
    s.fill[li.out] = Fill::Vector;
    return;
  }
  if (li.op == Prim::Aten) {
    // NB: ATen runs on n lanes even for uniform operands: its vectorized and scalar loops may
    // round transcendental results differently, and eager ran the vectorized one.
    countPath(PathCount::AtenTileOps);
    std::vector<at::Tensor> tiles;
    tiles.reserve(li.atenSlots.size());
    for (int sl : li.atenSlots) {
      expand(*this, s, sl, n);
      tiles.push_back(at::from_blob(s.slot[sl], {n}, at::TensorOptions().dtype(slotType[sl])));
    }
    at::Tensor r = evalInstr(li.aten, {}, tiles);
    TORCH_INTERNAL_ASSERT(r.scalar_type() == slotType[li.out] && r.numel() == n && r.is_contiguous(),
                          "tsfuse: ATen tile op returned an unexpected layout");
    std::memcpy(s.slot[li.out], r.const_data_ptr(), n * r.element_size());
    s.fill[li.out] = Fill::Vector;
    return;
  }
  // Native ops compute each lane alone, so a value computed once is the value of every lane.
  const bool allUniform = uniform(s, li.a) && uniform(s, li.b) && uniform(s, li.c);
  unsigned scalar = 0;
  if (!allUniform) {
    if (li.op == Prim::Where) {
      expand(*this, s, li.a, n), expand(*this, s, li.b, n), expand(*this, s, li.c, n);
    } else {
      scalar = (uniform(s, li.a) ? 1u : 0u) | (li.b >= 0 && uniform(s, li.b) ? 2u : 0u);
    }
  }
  auto ptr = [&](int i) -> const char* { return i >= 0 ? s.slot[i] : nullptr; };
  isaOps().exec(li, li.op == Prim::Cast ? slotType[li.a] : li.ct, s.slot[li.out], ptr(li.a), ptr(li.b), ptr(li.c),
                allUniform ? 1 : n, scalar);
  s.fill[li.out] = allUniform ? Fill::Uniform : Fill::Vector;
}

const char* TileProgram::vectorOf(Scratch& s, int i, int64_t n) const {
  expand(*this, s, i, n);
  return s.slot[i];
}

const char* TileProgram::run(Scratch& s, int64_t n) const {
  runPrefix(s, n, code.size());
  if (s.fill[result] == Fill::Uniform && result >= numLeaves) {
    // An instruction's slot: its buffer, or the output the caller pointed it at (filled there).
    broadcastFill(s.slot[result], s.slot[result], c10::elementSize(slotType[result]), n);
    s.fill[result] = Fill::Vector;
  }
  return vectorOf(s, result, n);  // a uniform leaf points into its operand: expanded into the buffer
}

void accumulateSum(c10::ScalarType srcType, const char* src, int64_t* dst, int64_t n) {
  isaOps().accLong(srcType, src, dst, n);
}
void accumulateSum(c10::ScalarType srcType, const char* src, double* dst, int64_t n) {
  isaOps().accDouble(srcType, src, dst, n);
}
void countFlags(const char* flags, uint8_t* counts, int64_t n) { isaOps().count(flags, counts, n); }
void welfordAdd(const float* v, double* mean, double* m2, double nf, int64_t n) {
  isaOps().welfordF(v, mean, m2, nf, n);
}
void welfordAdd(const double* v, double* mean, double* m2, double nf, int64_t n) {
  isaOps().welfordD(v, mean, m2, nf, n);
}
bool usingAvx2() { return isaOps().avx2; }

// ATen's sum kernel works in 32-byte vectors (it has no AVX-512 build): 8 floats, 4 doubles.
float eagerRowSum(const float* v, int64_t n) { return n < 8 ? isaOps().rowSumF1(v, n) : isaOps().rowSumF(v, n); }
double eagerRowSum(const double* v, int64_t n) { return n < 4 ? isaOps().rowSumD1(v, n) : isaOps().rowSumD(v, n); }

}  // namespace tsfuse::cpu
