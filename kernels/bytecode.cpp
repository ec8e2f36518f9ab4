// Lowering of a parsed expression to bytecode (kernels/bytecode.h), per target flavour.
//
// The casts ATen performs implicitly (type promotion) become Cast instructions, so every op runs on
// operands of its compute dtype; literals and host scalars are preloaded registers. Flavour::Cuda
// follows ATen's CUDA kernels where they differ from the CPU ones:
//   * float16/bfloat16 ops compute in float; a host-scalar operand of add/sub/mul/div/clamp stays
//     in float (ATen reads it with scalar_value<opmath_t>) instead of being rounded to the dtype;
//   * true division by a host scalar multiplies by its reciprocal, computed once here in the
//     op's math type (ATen's div_true_kernel_cuda does exactly that);
//   * clamp with both bounds is one Clamp3 op (ATen's clamp kernels), minimum/maximum order -0.0
//     below +0.0 (the device's fmin/fmax).
// Ops whose CUDA kernel is not reproduced here (pow, floor/trunc division, alpha-scaled add/sub)
// make compile() decline; the caller then takes the exact chunked path.
#include "kernels/bytecode_compile.h"

#include <algorithm>
#include <map>

namespace tsfuse::bc {
namespace {

struct Lowering {
  const Expr& e;
  const Analysis& an;
  at::TensorList operands;
  Flavour flavour;
  Program p;
  int nRegs = 0;
  std::vector<DT> type;            // by temporary register id
  std::vector<bool> preloaded;     // literal / host-scalar registers
  std::vector<Reg> init;
  std::vector<Ins> code;
  std::vector<int> valueReg;
  std::map<std::pair<int, DT>, int> castCache;
  std::string why;

  bool cuda() const { return flavour == Flavour::Cuda; }

  int newReg(DT t, bool pre = false, Reg v = Reg{}) {
    TORCH_CHECK(nRegs < kMaxRegs, "tsfuse bytecode: more than ", kMaxRegs, " registers");
    type.push_back(t);
    preloaded.push_back(pre);
    init.push_back(v);
    return nRegs++;
  }
  void emit(BOp op, DT ct, int out, int a, int b = 0, int c = 0) {
    TORCH_CHECK(code.size() < static_cast<size_t>(kMaxIns), "tsfuse bytecode: more than ", kMaxIns, " instructions");
    code.push_back(Ins{op, ct, uint8_t(out), uint8_t(a), uint8_t(b), uint8_t(c)});
  }

  int castTo(int r, DT t) {
    if (type[r] == t) return r;
    auto key = std::make_pair(r, t);
    auto it = castCache.find(key);
    if (it != castCache.end()) return it->second;
    int out = newReg(t);
    emit(BOp::Cast, t, out, r);
    castCache.emplace(key, out);
    return out;
  }

  // A preloaded register of dtype t holding v (a literal or a host scalar), converted like ATen
  // converts a Python number to the op's dtype.
  int constant(const c10::Scalar& v, DT t) {
    Reg r;
    r.i64 = 0;
    withType(t, [&](auto tag) {
      using T = decltype(tag);
      T x;
      if (v.isFloatingPoint()) x = ew::cast<T>(v.toDouble());
      else if (v.isBoolean()) x = ew::cast<T>(v.toBool());
      else x = ew::cast<T>(v.toLong());
      set<T>(r, x);
    });
    return newReg(t, true, r);
  }

  bool hostScalar(const Arg& arg) const {
    if (arg.isLiteral()) return true;
    return cuda() && arg.kind == Arg::Kind::Input && isCpuScalar(operands[arg.i]);
  }
  c10::Scalar hostValue(const Arg& arg) const {
    if (arg.isLiteral()) return literalScalar(arg);
    return operands[arg.i].item();  // a 0-dim CPU tensor: no device synchronisation
  }

  // The register holding `arg` in dtype ct. `opmath`: a host scalar keeps ATen's math type of ct
  // (float for float16/bfloat16) on the CUDA flavour.
  int regFor(const Arg& arg, DT ct, bool opmath = false) {
    if (arg.isLiteral() || (hostScalar(arg) && opmath)) {
      DT t = ct;
      if (opmath && cuda() && (ct == DT::F16 || ct == DT::BF16)) t = DT::F32;
      return constant(hostValue(arg), t);
    }
    if (arg.kind == Arg::Kind::Input) return castTo(static_cast<int>(arg.i), ct);
    return castTo(valueReg[arg.i], ct);
  }

  bool fail(const std::string& reason) {
    why = reason;
    return false;
  }

  bool lowerInstr(size_t k) {
    const Instr& ins = e.instrs[k];
    const auto& A = ins.args;
    DT ct, rt;
    if (!toDT(an.computeType[k], ct) || !toDT(an.resultType[k], rt))
      return fail(std::string("dtype ") + c10::toString(an.resultType[k]) + " in " + opInfo(ins.op).name);
    if (!cuda() && (ct == DT::F16 || ct == DT::BF16 || rt == DT::F16 || rt == DT::BF16))
      return fail("float16/bfloat16 on the CPU flavour");
    const bool floating = ct == DT::F16 || ct == DT::BF16 || ct == DT::F32 || ct == DT::F64;
    auto binary = [&](BOp op, bool opmath) {
      int a = regFor(A[0], ct, opmath), b = regFor(A[1], ct, opmath);
      int out = newReg(rt);
      emit(op, ct, out, a, b);
      return out;
    };
    auto unary = [&](BOp op) {
      int a = regFor(A[0], ct);
      int out = newReg(rt);
      emit(op, ct, out, a);
      return out;
    };
    int out = -1;
    switch (ins.op) {
      case Op::Add: out = binary(BOp::Add, true); break;
      case Op::Sub: out = binary(BOp::Sub, true); break;
      case Op::Mul: out = binary(BOp::Mul, true); break;
      case Op::Div: {
        if (!floating) return fail("integer true division");
        if (cuda() && hostScalar(A[1])) {
          // a * (1 / b) in the op's math type, as ATen's CUDA kernel computes it.
          DT m = (ct == DT::F64) ? DT::F64 : DT::F32;
          c10::Scalar b = hostValue(A[1]);
          Reg inv;
          if (m == DT::F64) inv.f64 = 1.0 / b.toDouble();
          else inv.f32 = 1.0f / b.to<float>();
          int a = regFor(A[0], ct, true);
          int r = newReg(m, true, inv);
          out = newReg(rt);
          emit(BOp::Mul, ct, out, a, r);
        } else {
          out = binary(BOp::Div, false);
        }
        break;
      }
      case Op::Minimum: out = binary(BOp::Minimum, false); break;
      case Op::Maximum: out = binary(BOp::Maximum, false); break;
      case Op::Eq: out = binary(BOp::Eq, false); break;
      case Op::Ne: out = binary(BOp::Ne, false); break;
      case Op::Lt: out = binary(BOp::Lt, false); break;
      case Op::Le: out = binary(BOp::Le, false); break;
      case Op::Gt: out = binary(BOp::Gt, false); break;
      case Op::Ge: out = binary(BOp::Ge, false); break;
      case Op::LogicalAnd: out = binary(BOp::And, false); break;
      case Op::LogicalOr: out = binary(BOp::Or, false); break;
      case Op::LogicalXor: out = binary(BOp::Xor, false); break;
      case Op::LogicalNot: out = unary(BOp::Not); break;
      case Op::Neg: out = unary(BOp::Neg); break;
      case Op::Abs: out = unary(BOp::Abs); break;
      case Op::Sqrt: case Op::Exp: case Op::Log: case Op::Sigmoid: {
        if (!floating) return fail("transcendental op on a non-floating compute dtype");
        BOp op = ins.op == Op::Sqrt ? BOp::Sqrt : ins.op == Op::Exp ? BOp::Exp : ins.op == Op::Log ? BOp::Log : BOp::Sigmoid;
        out = unary(op);
        break;
      }
      case Op::Relu: {  // clamp_min(x, 0)
        int a = regFor(A[0], ct);
        int zero = regFor(Arg::integer(0), ct, true);
        out = newReg(rt);
        emit(BOp::ClampMin, ct, out, a, zero);
        break;
      }
      case Op::Clamp: out = lowerClamp(A, ct, rt); break;
      case Op::Where: {
        int c = regFor(A[0], DT::Bool);
        int a = regFor(A[1], ct), b = regFor(A[2], ct);
        out = newReg(rt);
        emit(BOp::Where, ct, out, c, a, b);
        break;
      }
      case Op::To: out = regFor(A[0], rt); break;
      case Op::Pow: case Op::DivFloor: case Op::DivTrunc: case Op::AddAlpha: case Op::SubAlpha:
        return fail(std::string("op ") + opInfo(ins.op).name + " has no bytecode form");
    }
    valueReg[k] = out;
    return true;
  }

  int lowerClamp(const std::vector<Arg>& A, DT ct, DT rt) {
    const bool hasLo = A[1].kind != Arg::Kind::None, hasHi = A[2].kind != Arg::Kind::None;
    const bool tensorBounds = A[1].isTensor() || A[2].isTensor();
    auto isNaN = [&](const Arg& b) { return b.kind == Arg::Kind::Float && b.f != b.f; };
    const bool nanBound = hasLo && hasHi && (isNaN(A[1]) || isNaN(A[2]));
    int x = regFor(A[0], ct);
    if (cuda() && hasLo && hasHi && !nanBound) {
      int lo = regFor(A[1], ct, !tensorBounds), hi = regFor(A[2], ct, !tensorBounds);
      int out = newReg(rt);
      emit(BOp::Clamp3, ct, out, x, lo, hi);
      return out;
    }
    // With both scalar bounds, a NaN bound makes ATen's clamp return NaN everywhere (the
    // propagating minimum/maximum); a lone bound is clamp_min/clamp_max, or for a tensor bound
    // maximum/minimum.
    if (hasLo) {
      int lo = regFor(A[1], ct, !tensorBounds);
      int t = newReg(rt);
      emit(tensorBounds || nanBound ? BOp::Maximum : BOp::ClampMin, ct, t, x, lo);
      x = t;
    }
    if (hasHi) {
      int hi = regFor(A[2], ct, !tensorBounds);
      int t = newReg(rt);
      emit(tensorBounds || nanBound ? BOp::Minimum : BOp::ClampMax, ct, t, x, hi);
      x = t;
    }
    return x;
  }

  // Renumbers registers as [leaves][preloaded][the rest] and fills the Program.
  void finish(int result) {
    const int L = e.numInputs;
    std::vector<int> order(nRegs), map(nRegs);
    int n = 0;
    for (int r = 0; r < L; ++r) order[n++] = r;
    for (int r = L; r < nRegs; ++r)
      if (preloaded[r]) order[n++] = r;
    const int nInit = n;
    for (int r = L; r < nRegs; ++r)
      if (!preloaded[r]) order[n++] = r;
    for (int i = 0; i < nRegs; ++i) map[order[i]] = i;
    p.flavour = flavour;
    p.nLeaves = uint8_t(L);
    p.nRegs = uint8_t(nRegs);
    p.nInit = uint8_t(nInit);
    for (int i = 0; i < nRegs; ++i) {
      p.type[i] = type[order[i]];
      p.init[i] = init[order[i]];
    }
    p.nIns = uint8_t(code.size());
    for (size_t k = 0; k < code.size(); ++k) {
      Ins in = code[k];
      in.out = uint8_t(map[in.out]);
      in.a = uint8_t(map[in.a]);
      in.b = uint8_t(map[in.b]);
      in.c = uint8_t(map[in.c]);
      p.code[k] = in;
    }
    p.result = uint8_t(map[result]);
  }
};

}  // namespace

bool toDT(c10::ScalarType t, DT& out) {
  switch (t) {
    case c10::ScalarType::Bool: out = DT::Bool; return true;
    case c10::ScalarType::Byte: out = DT::U8; return true;
    case c10::ScalarType::Char: out = DT::I8; return true;
    case c10::ScalarType::Short: out = DT::I16; return true;
    case c10::ScalarType::Int: out = DT::I32; return true;
    case c10::ScalarType::Long: out = DT::I64; return true;
    case c10::ScalarType::Half: out = DT::F16; return true;
    case c10::ScalarType::BFloat16: out = DT::BF16; return true;
    case c10::ScalarType::Float: out = DT::F32; return true;
    case c10::ScalarType::Double: out = DT::F64; return true;
    default: return false;
  }
}

c10::ScalarType fromDT(DT t) {
  constexpr c10::ScalarType k[] = {c10::ScalarType::Bool, c10::ScalarType::Byte,  c10::ScalarType::Char,
                                   c10::ScalarType::Short, c10::ScalarType::Int,  c10::ScalarType::Long,
                                   c10::ScalarType::Half, c10::ScalarType::BFloat16, c10::ScalarType::Float,
                                   c10::ScalarType::Double};
  return k[static_cast<int>(t)];
}

bool isCpuScalar(const at::Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }

std::optional<Program> compile(const Expr& e, const Analysis& an, at::TensorList operands, Flavour flavour,
                               std::string* why, std::optional<c10::ScalarType> resultAs) {
  auto no = [&](const std::string& reason) -> std::optional<Program> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (e.numInputs > kMaxLeaves) return no("more than 12 operands");
  Lowering L{e, an, operands, flavour};
  L.valueReg.assign(e.instrs.size(), -1);
  for (int i = 0; i < e.numInputs; ++i) {
    DT t;
    if (!toDT(operands[i].scalar_type(), t)) return no(std::string("operand dtype ") + c10::toString(operands[i].scalar_type()));
    if (flavour == Flavour::Cpu && (t == DT::F16 || t == DT::BF16)) return no("float16/bfloat16 on the CPU flavour");
    const bool host = flavour == Flavour::Cuda && isCpuScalar(operands[i]);
    Reg v;
    v.i64 = 0;
    if (host) {
      at::Tensor c = operands[i].contiguous();
      v = loadElem(c.const_data_ptr(), t);
      L.p.constLeaves |= uint16_t(1u << i);
    }
    L.newReg(t, false, v);
  }
  try {
    for (size_t k = 0; k < e.instrs.size(); ++k)
      if (!L.lowerInstr(k)) return no(L.why);
    int result = L.valueReg.back();
    if (resultAs) {
      DT t;
      if (!toDT(*resultAs, t)) return no(std::string("result dtype ") + c10::toString(*resultAs));
      result = L.castTo(result, t);
    }
    L.finish(result);
  } catch (const c10::Error& err) {
    return no(err.what_without_backtrace());
  }
  return L.p;
}

}  // namespace tsfuse::bc
