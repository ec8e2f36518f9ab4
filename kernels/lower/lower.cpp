// The one typed lowering of an expression (kernels/lower/program.h).
//
//   v1: sub($0, $1); abs(%0); lt(%1, 1)      $0: int32 [N, 1], $1: float32 [1, M]
//     =>  s2 = cast<float32>(s0)             (ATen's implicit promotion, made explicit)
//         s3 = sub<float32>(s2, s1);  s4 = abs<float32>(s3)
//         s5 = 1.0f (literal);        s6 = lt<float32>(s4, s5) -> bool
//
// Dtypes come from the call's Analysis (eager's own promotion on stand-ins), so the lowering
// never re-derives PyTorch's rules; each op's rule comes from the registry (kernels/ir/ops.def).
#include "kernels/lower/program.h"

#include "common/dtype_dispatch.h"
#include "common/scalar_ops.h"
#include "kernels/ir/op_registry.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace tsfuse::lower {
namespace {

bool isFloating(c10::ScalarType t) { return c10::isFloatingType(t); }

// A 0-dim CPU operand: ATen's CUDA kernels read it on the host, as a number.
bool isHostScalar(const at::Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }

struct Lowering {
  const Expr& e;
  const Analysis& an;
  at::TensorList operands;
  const Target& target;
  Program p;
  std::vector<int> valueSlot;
  std::map<std::pair<int, c10::ScalarType>, int> castCache;
  std::string why;

  int newSlot(c10::ScalarType t) {
    p.slotType.push_back(t);
    return static_cast<int>(p.slotType.size()) - 1;
  }

  int emit(Prim op, c10::ScalarType ct, c10::ScalarType rt, int a, int b = -1, int c = -1) {
    const int out = newSlot(rt);
    Instr ins{op, ct, out, a, b, c};
    p.code.push_back(std::move(ins));
    return out;
  }

  int castTo(int s, c10::ScalarType t) {
    if (p.slotType[s] == t) return s;
    auto key = std::make_pair(s, t);
    if (auto it = castCache.find(key); it != castCache.end()) return it->second;
    const int out = emit(Prim::Cast, t, t, s);
    castCache.emplace(key, out);
    return out;
  }

  int literal(const c10::Scalar& v, c10::ScalarType t) {
    const int s = newSlot(t);
    p.literals.push_back({s, v});
    return s;
  }

  // Read on the host as a number: a literal, or (device rules) a 0-dim CPU operand.
  bool hostScalar(const Arg& arg) const {
    if (arg.isLiteral()) return true;
    return target.cudaRules && arg.kind == Arg::Kind::Input && p.hostLeaf[arg.i];
  }
  c10::Scalar hostValue(const Arg& arg) const {
    if (arg.isLiteral()) return literalScalar(arg);
    return operands[arg.i].item();  // a 0-dim CPU tensor: no device synchronisation
  }

  // The slot holding `arg` in dtype ct. `opmath`: under CUDA rules a host scalar keeps the op's
  // math type (float for float16/bfloat16), as ATen's CUDA kernels read it.
  int slotFor(const Arg& arg, c10::ScalarType ct, bool opmath = false) {
    const bool keepMath = opmath && target.cudaRules && hostScalar(arg);
    if (arg.isLiteral() || keepMath) {
      const c10::ScalarType t = keepMath && c10::isReducedFloatingType(ct) ? c10::ScalarType::Float : ct;
      return literal(hostValue(arg), t);
    }
    if (arg.kind == Arg::Kind::Input) return castTo(static_cast<int>(arg.i), ct);
    return castTo(valueSlot[arg.i], ct);
  }

  // The dtype a comparison runs in: eager's (ct), or the program's floating dtype where eager's is
  // an integer one only because a number promoted bools or small integers (`mask == 0` of a bool
  // mask computes in int64): every value on both sides is exact there (at most 16 bits; a number
  // that ct holds, so eager does not wrap it, and the floating dtype holds exactly), so the results
  // are eager's, and the compiled kernels, which hold floating and bool lanes only, run it.
  c10::ScalarType compareType(const std::vector<Arg>& A, c10::ScalarType ct) const {
    using T = c10::ScalarType;
    if (ct != T::Long && ct != T::Byte && ct != T::Char && ct != T::Short) return ct;
    const bool f64 = std::find(an.computeType.begin(), an.computeType.end(), T::Double) != an.computeType.end();
    const T to = f64 ? T::Double : T::Float;
    for (const Arg& a : A) {
      if (a.kind == Arg::Kind::Int || a.kind == Arg::Kind::Bool) {
        const int64_t v = literalScalar(a).toLong();
        if (!comparesExactlyIn(ct, to, v)) return ct;
        continue;
      }
      if (!a.isTensor()) return ct;
      const T t = p.slotType[a.kind == Arg::Kind::Input ? a.i : valueSlot[a.i]];
      if (t != T::Bool && t != T::Byte && t != T::Char && t != T::Short) return ct;
    }
    return to;
  }

  bool native(Prim prim, c10::ScalarType ct) const {
    return primHas(prim, target.emitter) && (!primHas(prim, kFloatOnly) || isFloating(ct));
  }

  bool fail(std::string reason) {
    why = std::move(reason);
    return false;
  }

  // The instruction evaluated by ATen on the tile: the target's fallback for ops without a
  // native form.
  bool fallback(const tsfuse::Instr& ins, c10::ScalarType ct, c10::ScalarType rt, int& out) {
    if (!target.atenFallback) return fail(std::string("op ") + opName(ins.op) + " has no native form on this target");
    Instr li{Prim::Aten, ct};
    li.aten.op = ins.op;
    for (const Arg& arg : ins.args) {
      if (arg.isTensor()) {
        li.atenSlots.push_back(slotFor(arg, ct));
        li.aten.args.push_back(Arg::input(static_cast<int64_t>(li.atenSlots.size()) - 1));
      } else {
        li.aten.args.push_back(arg);
      }
    }
    li.out = out = newSlot(rt);
    p.code.push_back(std::move(li));
    return true;
  }

  bool lowerInstr(size_t k) {
    const tsfuse::Instr& ins = e.instrs[k];
    const auto& A = ins.args;
    const OpDef& def = opDef(ins.op);
    const c10::ScalarType ct = def.has(kCompare) ? compareType(A, an.computeType[k]) : an.computeType[k];
    const c10::ScalarType rt = an.resultType[k];
    if (!holdsDtype(target, ct) || !holdsDtype(target, rt))
      return fail(std::string("dtype ") + c10::toString(holdsDtype(target, ct) ? rt : ct) + " in " + def.name);
    int out = -1;
    switch (def.rule) {
      case LowerRule::Map:
      case LowerRule::Bitwise: {
        // A bitwise op is its logical primitive on bools only (0/1 bytes); on integers ATen's.
        const Prim prim = *def.prim();
        if (!native(prim, ct) || (def.rule == LowerRule::Bitwise && ct != c10::ScalarType::Bool)) {
          if (!fallback(ins, ct, rt, out)) return false;
          break;
        }
        const bool opmath = def.has(kOpmathScalar);
        const int a = slotFor(A[0], ct, opmath);
        out = A.size() == 1 ? emit(prim, ct, rt, a) : emit(prim, ct, rt, a, slotFor(A[1], ct, opmath));
        break;
      }
      case LowerRule::Div:
        if (!isFloating(ct)) return fail("integer true division");
        if (target.cudaRules && hostScalar(A[1])) {
          // a * (1 / b) in the op's math type, as ATen's CUDA kernel computes it.
          const c10::ScalarType m = ct == c10::ScalarType::Double ? ct : c10::ScalarType::Float;
          const c10::Scalar b = hostValue(A[1]);
          const c10::Scalar inv = m == c10::ScalarType::Double ? c10::Scalar(1.0 / b.toDouble())
                                                               : c10::Scalar(double(1.0f / b.to<float>()));
          const int x = slotFor(A[0], ct, true);
          out = emit(Prim::Mul, ct, rt, x, literal(inv, m));
        } else {
          const int x = slotFor(A[0], ct);
          out = emit(Prim::Div, ct, rt, x, slotFor(A[1], ct));
        }
        break;
      case LowerRule::Sign: {  // ATen's sign: (0 < x) - (x < 0) in x's dtype; a bool as it is
        const int x = slotFor(A[0], ct);
        if (ct == c10::ScalarType::Bool) {
          out = x;
          break;
        }
        const int zero = literal(c10::Scalar(0), ct);
        const int above = castTo(emit(Prim::Lt, ct, c10::ScalarType::Bool, zero, x), ct);
        const int below = castTo(emit(Prim::Lt, ct, c10::ScalarType::Bool, x, zero), ct);
        out = emit(Prim::Sub, ct, rt, above, below);
        break;
      }
      case LowerRule::Reciprocal: {  // 1 / x (ops.def)
        if (!isFloating(ct)) return fail("reciprocal in an integer compute dtype");
        const int one = literal(c10::Scalar(1.0), ct);
        out = emit(Prim::Div, ct, rt, one, slotFor(A[0], ct));
        break;
      }
      case LowerRule::Relu: {  // clamp_min(x, 0)
        const int x = slotFor(A[0], ct);
        out = emit(Prim::ClampMin, ct, rt, x, slotFor(Arg::integer(0), ct, true));
        break;
      }
      case LowerRule::Clamp:
        out = lowerClamp(ins.op, A, ct, rt);
        break;
      case LowerRule::Where:
        out = where(A[0], A[1], A[2], ct, rt);
        break;
      case LowerRule::MaskedFill:
        out = where(A[1], A[2], A[0], ct, rt);
        break;  // x's dtype: no promotion
      case LowerRule::To:
        out = slotFor(A[0], rt);
        break;
      case LowerRule::Square: {
        // ATen's pow(Tensor, Scalar) (Pow.cpp) fills 1 for an exponent of 0 and copies the base
        // for 1, before any kernel and in every dtype. Its floating kernels (PowKernel.cpp,
        // PowKernel.cu) square for 2 (base * base: a multiply gives the same bits), and on the CPU
        // compute 3 as (base * base) * base, -2 as 1 / (base * base) (the scalar loop divides in
        // double: the same rounded quotient) and -1 as 1 / base. Other exponents run through ATen
        // (CPU) or decline (device).
        const PowForm form = A[0].isTensor() ? powForm(A, target.cudaRules, ct) : PowForm::Aten;
        if (form == PowForm::Aten) {
          if (!fallback(ins, ct, rt, out)) return false;
          break;
        }
        if (form == PowForm::One) {
          out = literal(c10::Scalar(1), rt);
          break;
        }
        const int x = slotFor(A[0], form == PowForm::Base ? rt : ct);
        switch (form) {
          case PowForm::Base:
            out = x;
            break;
          case PowForm::Reciprocal:
            out = emit(Prim::Div, ct, rt, literal(c10::Scalar(1.0), ct), x);
            break;
          default: {
            const bool square = form == PowForm::Square;
            out = emit(Prim::Mul, ct, square ? rt : ct, x, x);
            if (form == PowForm::Cube) out = emit(Prim::Mul, ct, rt, out, x);
            if (form == PowForm::ReciprocalSquare) out = emit(Prim::Div, ct, rt, literal(c10::Scalar(1.0), ct), out);
          }
        }
        break;
      }
      case LowerRule::Fill: {
        // The number as fill_ converts it (Scalar::to: an overflow raises, and the call then takes
        // the ATen path, which raises eager's error).
        const c10::Scalar v = literalScalar(A[1]);
        c10::Scalar converted;
        dispatchHeld(rt, [&](auto tag) { converted = c10::Scalar(v.to<typename decltype(tag)::type>()); });
        out = literal(converted, rt);
        break;
      }
      case LowerRule::Aten:
        if (!fallback(ins, ct, rt, out)) return false;
        break;
    }
    valueSlot[k] = out;
    return true;
  }

  // cond ? a : b, the condition tested as bool, the values in the compute dtype.
  int where(const Arg& cond, const Arg& a, const Arg& b, c10::ScalarType ct, c10::ScalarType rt) {
    const int c = slotFor(cond, c10::ScalarType::Bool);
    const int x = slotFor(a, ct);
    return emit(Prim::Where, ct, rt, c, x, slotFor(b, ct));
  }

  // clamp(x, lo?, hi?), clamp_min(x, lo), clamp_max(x, hi). A NaN number bound makes ATen return
  // NaN everywhere (the propagating minimum/maximum) in clamp with both bounds and in
  // clamp_min/clamp_max; clamp's lone bound is the non-propagating ClampMin/ClampMax, which ignores
  // it. A tensor bound is maximum/minimum. CUDA's clamp kernel with both bounds is Clamp3.
  int lowerClamp(Op op, const std::vector<Arg>& A, c10::ScalarType ct, c10::ScalarType rt) {
    const Arg none = Arg::none();
    const Arg& lo = op == Op::ClampMax ? none : A[1];
    const Arg& hi = op == Op::ClampMax ? A[1] : op == Op::ClampMin ? none : A[2];
    const bool hasLo = lo.kind != Arg::Kind::None, hasHi = hi.kind != Arg::Kind::None;
    const bool tensorBounds = lo.isTensor() || hi.isTensor();
    auto isNaN = [](const Arg& b) { return b.kind == Arg::Kind::Float && b.f != b.f; };
    const bool nanBound = (op != Op::Clamp || (hasLo && hasHi)) && (isNaN(lo) || isNaN(hi));
    int x = slotFor(A[0], ct);
    if (target.cudaRules && hasLo && hasHi && !nanBound) {
      const int l = slotFor(lo, ct, !tensorBounds);
      return emit(Prim::Clamp3, ct, rt, x, l, slotFor(hi, ct, !tensorBounds));
    }
    if (hasLo)
      x = emit(tensorBounds || nanBound ? Prim::Maximum : Prim::ClampMin, ct, rt, x, slotFor(lo, ct, !tensorBounds));
    if (hasHi)
      x = emit(tensorBounds || nanBound ? Prim::Minimum : Prim::ClampMax, ct, rt, x, slotFor(hi, ct, !tensorBounds));
    return x;
  }
};

}  // namespace

PowForm powForm(const std::vector<Arg>& args, bool cudaRules, c10::ScalarType ct) {
  if (args.size() == 1) return isFloating(ct) ? PowForm::Square : PowForm::Aten;
  if (args.size() != 2 || (args[1].kind != Arg::Kind::Int && args[1].kind != Arg::Kind::Float)) return PowForm::Aten;
  const double e = literalScalar(args[1]).toDouble();
  if (e == 0.0) return PowForm::One;
  if (e == 1.0) return PowForm::Base;
  if (!isFloating(ct)) return PowForm::Aten;
  if (e == 2.0) return PowForm::Square;
  if (cudaRules) return PowForm::Aten;
  if (e == 3.0) return PowForm::Cube;
  if (e == -1.0) return PowForm::Reciprocal;
  if (e == -2.0) return PowForm::ReciprocalSquare;
  return PowForm::Aten;
}

bool holdsDtype(const Target& target, c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool:
    case c10::ScalarType::Byte:
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long:
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
      return true;
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
      return target.halfTypes;
    default:
      return false;
  }
}

void Program::literalValue(const Literal& lit, void* dst) const {
  dispatchHeld(slotType[lit.slot], [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Converted like ATen converts a Python number to the op's dtype (wrapping, unchecked).
    T v;
    if (lit.value.isFloatingPoint())
      v = ew::cast<T>(lit.value.toDouble());
    else if (lit.value.isBoolean())
      v = ew::cast<T>(lit.value.toBool());
    else
      v = ew::cast<T>(lit.value.toLong());
    std::memcpy(dst, &v, sizeof v);
  });
}

void Program::castResultTo(c10::ScalarType dtype) {
  if (slotType[result] == dtype) return;
  slotType.push_back(dtype);
  const int out = static_cast<int>(slotType.size()) - 1;
  code.push_back(Instr{Prim::Cast, dtype, out, result});
  result = out;
}

void Program::squareResult() {
  const c10::ScalarType t = slotType[result];
  slotType.push_back(t);
  const int out = static_cast<int>(slotType.size()) - 1;
  code.push_back(Instr{Prim::Mul, t, out, result, result});
  result = out;
}

std::optional<Program> lowerExpr(const Expr& e, const Analysis& a, at::TensorList operands, const Target& target,
                                 std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<Program> {
    if (why) *why = reason;
    return std::nullopt;
  };
  Lowering L{e, a, operands, target, {}, std::vector<int>(e.instrs.size(), -1), {}, {}};
  for (int i = 0; i < e.numInputs; ++i) {
    const c10::ScalarType t = operands[i].scalar_type();
    if (!holdsDtype(target, t)) return no(std::string("operand dtype ") + c10::toString(t));
    L.p.slotType.push_back(t);
    L.p.hostLeaf.push_back(target.cudaRules && isHostScalar(operands[i]));
  }
  L.p.numLeaves = e.numInputs;
  try {
    for (size_t k = 0; k < e.instrs.size(); ++k)
      if (!L.lowerInstr(k)) return no(L.why);
  } catch (const c10::Error& err) {
    return no(err.what_without_backtrace());
  }
  L.p.result = L.valueSlot.back();
  return std::move(L.p);
}

}  // namespace tsfuse::lower
