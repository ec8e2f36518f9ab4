#include "kernels/cpu/tile_program.h"

#include "kernels/cpu/gather.h"

#include "kernels/elementwise.h"

#include <cstdlib>
#include <cstring>
#include <map>

namespace tsfuse::cpu {
namespace {

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) for the C++ type of a native dtype.
template <typename F>
void dispatchNative(c10::ScalarType t, F&& f) {
  switch (t) {
    case c10::ScalarType::Bool: return f(Tag<bool>{});
    case c10::ScalarType::Byte: return f(Tag<uint8_t>{});
    case c10::ScalarType::Char: return f(Tag<int8_t>{});
    case c10::ScalarType::Short: return f(Tag<int16_t>{});
    case c10::ScalarType::Int: return f(Tag<int32_t>{});
    case c10::ScalarType::Long: return f(Tag<int64_t>{});
    case c10::ScalarType::Float: return f(Tag<float>{});
    case c10::ScalarType::Double: return f(Tag<double>{});
    default: TORCH_CHECK(false, "tsfuse: dtype ", t, " has no native CPU evaluation");
  }
}

bool isFloating(c10::ScalarType t) { return t == c10::ScalarType::Float || t == c10::ScalarType::Double; }

struct Lowering {
  const Expr& e;
  const Analysis& an;
  TileProgram p;
  std::vector<int> valueSlot;
  std::map<std::pair<int, c10::ScalarType>, int> castCache;
  std::string why;

  int newSlot(c10::ScalarType t) {
    p.slotType.push_back(t);
    return static_cast<int>(p.slotType.size()) - 1;
  }

  int castTo(int s, c10::ScalarType t) {
    if (p.slotType[s] == t) return s;
    auto key = std::make_pair(s, t);
    auto it = castCache.find(key);
    if (it != castCache.end()) return it->second;
    int out = newSlot(t);
    LInstr c{LOp::Cast, t, out, s};
    p.code.push_back(std::move(c));
    castCache.emplace(key, out);
    return out;
  }

  // The slot holding `arg` converted to dtype `ct` (literals are materialised once per thread).
  int slotFor(const Arg& arg, c10::ScalarType ct) {
    if (arg.kind == Arg::Kind::Input) return castTo(static_cast<int>(arg.i), ct);
    if (arg.kind == Arg::Kind::Value) return castTo(valueSlot[arg.i], ct);
    int s = newSlot(ct);
    p.literals.push_back({s, literalScalar(arg)});
    return s;
  }

  void emit(LOp op, c10::ScalarType ct, int out, int a, int b = -1, int c = -1) {
    LInstr ins{op, ct, out, a, b, c};
    p.code.push_back(std::move(ins));
  }

  bool lowerInstr(size_t k) {
    const Instr& ins = e.instrs[k];
    const auto& A = ins.args;
    c10::ScalarType ct = an.computeType[k];
    c10::ScalarType rt = an.resultType[k];
    if (!isNativeDtype(ct) || !isNativeDtype(rt)) {
      why = std::string("dtype ") + c10::toString(isNativeDtype(ct) ? rt : ct) + " in " +
            opInfo(ins.op).name;
      return false;
    }
    auto binary = [&](LOp op) {
      int a = slotFor(A[0], ct), b = slotFor(A[1], ct);
      int out = newSlot(rt);
      emit(op, ct, out, a, b);
      return out;
    };
    auto unary = [&](LOp op, int a) {
      int out = newSlot(rt);
      emit(op, ct, out, a);
      return out;
    };
    int out = -1;
    switch (ins.op) {
      case Op::Add: out = binary(LOp::Add); break;
      case Op::Sub: out = binary(LOp::Sub); break;
      case Op::Mul: out = binary(LOp::Mul); break;
      case Op::Div:
        if (!isFloating(ct)) return fail("integer true division");
        out = binary(LOp::Div);
        break;
      case Op::Minimum: out = binary(LOp::Minimum); break;
      case Op::Maximum: out = binary(LOp::Maximum); break;
      case Op::Eq: out = binary(LOp::Eq); break;
      case Op::Ne: out = binary(LOp::Ne); break;
      case Op::Lt: out = binary(LOp::Lt); break;
      case Op::Le: out = binary(LOp::Le); break;
      case Op::Gt: out = binary(LOp::Gt); break;
      case Op::Ge: out = binary(LOp::Ge); break;
      case Op::LogicalAnd: out = binary(LOp::And); break;
      case Op::LogicalOr: out = binary(LOp::Or); break;
      case Op::LogicalXor: out = binary(LOp::Xor); break;
      case Op::LogicalNot: out = unary(LOp::Not, slotFor(A[0], ct)); break;
      case Op::Neg: out = unary(LOp::Neg, slotFor(A[0], ct)); break;
      case Op::Abs: out = unary(LOp::Abs, slotFor(A[0], ct)); break;
      case Op::Relu: {
        int a = slotFor(A[0], ct);
        int zero = slotFor(Arg::integer(0), ct);
        out = newSlot(rt);
        emit(LOp::ClampMin, ct, out, a, zero);
        break;
      }
      case Op::Clamp: {
        int x = slotFor(A[0], ct);
        bool tensorBounds = A[1].isTensor() || A[2].isTensor();
        // With both scalar bounds present, a NaN bound makes ATen's clamp return NaN everywhere
        // (the propagating form); a lone NaN bound leaves the values unchanged (ClampMin/Max do).
        const bool both = A[1].kind != Arg::Kind::None && A[2].kind != Arg::Kind::None;
        auto isNaN = [&](const Arg& b) { return both && b.kind == Arg::Kind::Float && b.f != b.f; };
        if (A[1].kind != Arg::Kind::None) {
          int lo = slotFor(A[1], ct);
          int t = newSlot(rt);
          emit(tensorBounds || isNaN(A[1]) ? LOp::Maximum : LOp::ClampMin, ct, t, x, lo);
          x = t;
        }
        if (A[2].kind != Arg::Kind::None) {
          int hi = slotFor(A[2], ct);
          int t = newSlot(rt);
          emit(tensorBounds || isNaN(A[2]) ? LOp::Minimum : LOp::ClampMax, ct, t, x, hi);
          x = t;
        }
        out = x;
        break;
      }
      case Op::Where: {
        int c = slotFor(A[0], c10::ScalarType::Bool);
        int a = slotFor(A[1], ct), b = slotFor(A[2], ct);
        out = newSlot(rt);
        emit(LOp::Where, ct, out, c, a, b);
        break;
      }
      case Op::To: out = slotFor(A[0], rt); break;
      case Op::Pow:
        // ATen squares a floating tensor for a scalar exponent of 2 (PowKernel.cpp: base * base in
        // its vectorized and scalar loops alike), so a native multiply gives the same bits.
        if (isFloating(ct) && A[0].isTensor() &&
            ((A[1].kind == Arg::Kind::Int && A[1].i == 2) || (A[1].kind == Arg::Kind::Float && A[1].f == 2.0))) {
          const int x = slotFor(A[0], ct);
          out = newSlot(rt);
          emit(LOp::Mul, ct, out, x, x);
          break;
        }
        [[fallthrough]];
      case Op::Sqrt: case Op::Exp: case Op::Log: case Op::Sigmoid: case Op::DivFloor:
      case Op::DivTrunc: case Op::AddAlpha: case Op::SubAlpha: {
        LInstr li{LOp::Aten, ct};
        li.aten.op = ins.op;
        for (const Arg& arg : A) {
          if (arg.isTensor()) {
            li.atenSlots.push_back(slotFor(arg, ct));
            li.aten.args.push_back(Arg::input(static_cast<int64_t>(li.atenSlots.size()) - 1));
          } else {
            li.aten.args.push_back(arg);
          }
        }
        li.out = out = newSlot(rt);
        p.code.push_back(std::move(li));
        break;
      }
    }
    valueSlot[k] = out;
    return true;
  }

  bool fail(const std::string& reason) {
    why = reason;
    return false;
  }
};

// The native op loops, compiled twice: for the baseline ISA (SSE2 on x86-64) and, on x86-64, for
// AVX2 (chosen at run time). Only the vector width differs: no FMA (-ffp-contract=off and no
// "fma" target), and IEEE add/sub/mul/div/compare are exact in every width, so both give the
// same bits. (An AVX-512 copy measured no faster on this project's Zen 4 machine: the loops are
// bound by L1 stores, not by instruction count.)
using ExecFn = void (*)(const LInstr&, c10::ScalarType, char*, const char*, const char*, const char*, int64_t,
                       unsigned);
using AccLongFn = void (*)(c10::ScalarType, const char*, int64_t*, int64_t);
using AccDoubleFn = void (*)(c10::ScalarType, const char*, double*, int64_t);
using CountFn = void (*)(const char*, uint8_t*, int64_t);
namespace base {
#include "kernels/cpu/tile_ops.inc"
}  // namespace base
#if defined(__x86_64__) && defined(__GNUC__)
#define TSFUSE_HAVE_AVX2_OPS 1
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
#include "kernels/cpu/tile_ops.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

struct IsaOps {
  bool avx2;
  ExecFn exec;
  AccLongFn accLong;
  AccDoubleFn accDouble;
  CountFn count;
};

#define TSFUSE_ISA_OPS(ns, isAvx2) IsaOps{isAvx2, ns::exec, ns::accumulateLong, ns::accumulateDouble, ns::countFlags}

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

bool isNativeDtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool: case c10::ScalarType::Byte: case c10::ScalarType::Char:
    case c10::ScalarType::Short: case c10::ScalarType::Int: case c10::ScalarType::Long:
    case c10::ScalarType::Float: case c10::ScalarType::Double:
      return true;
    default:
      return false;
  }
}

std::optional<TileProgram> TileProgram::lower(const Expr& e, const Analysis& a,
                                              at::TensorList operands, std::string* why) {
  Lowering L{e, a, {}, std::vector<int>(e.instrs.size(), -1), {}, {}};
  for (int i = 0; i < e.numInputs; ++i) {
    c10::ScalarType t = operands[i].scalar_type();
    if (!isNativeDtype(t)) {
      if (why) *why = std::string("operand dtype ") + c10::toString(t);
      return std::nullopt;
    }
    L.p.slotType.push_back(t);
  }
  L.p.numLeaves = e.numInputs;
  for (size_t k = 0; k < e.instrs.size(); ++k) {
    if (!L.lowerInstr(k)) {
      if (why) *why = L.why;
      return std::nullopt;
    }
  }
  L.p.result = L.valueSlot.back();
  return std::move(L.p);
}

void TileProgram::castResultTo(c10::ScalarType dtype) {
  if (slotType[result] == dtype) return;
  slotType.push_back(dtype);
  int out = static_cast<int>(slotType.size()) - 1;
  code.push_back(LInstr{LOp::Cast, dtype, out, result});
  result = out;
}

TileProgram::Scratch TileProgram::makeScratch() const {
  // NB: slots 4096 bytes apart would put a loop's loads and stores at the same address modulo
  // 4 KiB, which the CPU treats as a possible store-to-load dependency (4K aliasing, ~2x slower
  // tile loops): consecutive slots are staggered by three cache lines.
  constexpr int64_t kSlotStride = kTile + 3 * 64 / 8;  // in int64 elements
  Scratch s;
  s.storage.resize(slotType.size() * kSlotStride);
  s.slot.resize(slotType.size());
  for (size_t i = 0; i < slotType.size(); ++i)
    s.slot[i] = reinterpret_cast<char*>(s.storage.data() + i * kSlotStride);
  s.buffer = s.slot;
  s.fill.assign(slotType.size(), Fill::Vector);
  for (const Literal& lit : literals) {
    literalValue(lit, s.slot[lit.slot]);
    broadcastFill(s.slot[lit.slot], s.slot[lit.slot], c10::elementSize(slotType[lit.slot]), kTile);
    s.fill[lit.slot] = Fill::Both;
  }
  return s;
}

void TileProgram::literalValue(const Literal& lit, void* dst) const {
  dispatchNative(slotType[lit.slot], [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Converted like ATen converts a Python number to the op's dtype (wrapping, unchecked).
    T v;
    if (lit.value.isFloatingPoint()) v = ew::cast<T>(lit.value.toDouble());
    else if (lit.value.isBoolean()) v = ew::cast<T>(lit.value.toBool());
    else v = ew::cast<T>(lit.value.toLong());
    std::memcpy(dst, &v, sizeof v);
  });
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
  const ExecFn exec = isaOps().exec;
  for (size_t k = 0; k < count; ++k) {
    const LInstr& li = code[k];
    if (li.op == LOp::Aten) {
      // NB: ATen runs on n lanes even for uniform operands: its vectorized and scalar loops may
      // round transcendental results differently, and eager ran the vectorized one.
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
      continue;
    }
    // Native ops compute each lane alone, so a value computed once is the value of every lane.
    const bool allUniform = uniform(s, li.a) && uniform(s, li.b) && uniform(s, li.c);
    unsigned scalar = 0;
    if (!allUniform) {
      if (li.op == LOp::Where) {
        expand(*this, s, li.a, n), expand(*this, s, li.b, n), expand(*this, s, li.c, n);
      } else {
        scalar = (uniform(s, li.a) ? 1u : 0u) | (li.b >= 0 && uniform(s, li.b) ? 2u : 0u);
      }
    }
    auto ptr = [&](int i) -> const char* { return i >= 0 ? s.slot[i] : nullptr; };
    exec(li, li.op == LOp::Cast ? slotType[li.a] : li.ct, s.slot[li.out], ptr(li.a), ptr(li.b), ptr(li.c),
         allUniform ? 1 : n, scalar);
    s.fill[li.out] = allUniform ? Fill::Uniform : Fill::Vector;
  }
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
bool usingAvx2() { return isaOps().avx2; }

}  // namespace tsfuse::cpu
