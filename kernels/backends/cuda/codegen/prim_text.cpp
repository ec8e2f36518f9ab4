// One text generator per primitive of kernels/ir/prims.def, each reproducing ATen's scalar
// semantics in plain C: ATen's CUDA rules (NaN-propagating minimum/maximum ordering -0.0 below
// +0.0, clamp with a NaN of any operand winning) or, for the runs against eager CPU, the CPU
// kernels' rules (common/scalar_ops.h). Integers wrap: signed arithmetic runs in the unsigned type of its width
// (no signed-overflow UB in either language). Operands are always plain variable names, so a
// generator may repeat them.
#include "kernels/backends/cuda/codegen/prim_text.h"

namespace tsfuse::cuda {
namespace {

std::string fsuffix(Ty t) { return t == Ty::F32 ? "F32" : "F64"; }
std::string ty(Ty t) { return tyName(t); }
std::string p(const std::string& x) { return "(" + x + ")"; }

// a op b with wrapping for integers (in the unsigned type of at least 32 bits: narrower unsigned
// types would promote to int, whose overflow is undefined).
std::string arith(const PrimArgs& g, const char* op) {
  if (isFloatTy(g.ct)) return p(g.a + " " + op + " " + g.b);
  const std::string u = g.ct == Ty::I64 ? "tsf_u64" : "tsf_u32";
  return "(" + ty(g.ct) + ")((" + u + ")" + g.a + " " + op + " (" + u + ")" + g.b + ")";
}

std::string cmp(const PrimArgs& g, const char* op) { return "(tsf_bool)(" + g.a + " " + op + " " + g.b + ")"; }

std::string minMax(const PrimArgs& g, bool isMax) {
  const std::string pick =
      isMax ? p(g.a + " > " + g.b + " ? " + g.a + " : " + g.b) : p(g.a + " < " + g.b + " ? " + g.a + " : " + g.b);
  if (!isFloatTy(g.ct)) return pick;
  const std::string nanA = p(g.a + " != " + g.a), nanB = p(g.b + " != " + g.b);
  if (!g.cudaRules) return "((" + nanA + " || " + nanB + ") ? TSF_NAN_" + fsuffix(g.ct) + " : " + pick + ")";
  // CUDA: the NaN operand itself, else ::min / ::max, as ATen's minimum/maximum kernels
  // (MaxMinElementwiseKernel.cu): the same PTX min/max, so the same zero for a +-0.0 pair.
  const std::string minmax =
      std::string(isMax ? "TSF_MAX_" : "TSF_MIN_") + fsuffix(g.ct) + "(" + g.a + ", " + g.b + ")";
  return "(" + nanA + " ? " + g.a + " : " + nanB + " ? " + g.b + " : " + minmax + ")";
}

using Gen = std::string (*)(const PrimArgs&);

std::string genAdd(const PrimArgs& g) {
  return g.ct == Ty::Bool ? "(tsf_bool)(" + g.a + " | " + g.b + ")" : arith(g, "+");
}
std::string genSub(const PrimArgs& g) { return g.ct == Ty::Bool ? "" : arith(g, "-"); }
std::string genMul(const PrimArgs& g) {
  return g.ct == Ty::Bool ? "(tsf_bool)(" + g.a + " & " + g.b + ")" : arith(g, "*");
}
std::string genDiv(const PrimArgs& g) { return isFloatTy(g.ct) ? p(g.a + " / " + g.b) : ""; }
std::string genMinimum(const PrimArgs& g) { return minMax(g, false); }
std::string genMaximum(const PrimArgs& g) { return minMax(g, true); }
// clamp_min (isMin) / clamp_max by one scalar bound. A NaN input passes and a NaN bound is ignored
// under both rules. The CPU kernels compare (lo > x ? lo : x keeps x's zero); torch 2.11's CUDA
// kernel (TensorCompare.cu, launch_clamp_scalar) takes the device's max/min, which orders -0.0
// below +0.0: relu(-0.0) is +0.0 on CUDA and -0.0 on the CPU.
std::string clampOne(const PrimArgs& g, bool isMin) {
  const std::string pick =
      isMin ? p(g.b + " > " + g.a + " ? " + g.b + " : " + g.a) : p(g.b + " < " + g.a + " ? " + g.b + " : " + g.a);
  if (!g.cudaRules || !isFloatTy(g.ct)) return pick;
  const std::string nanA = p(g.a + " != " + g.a), nanB = p(g.b + " != " + g.b);
  const std::string mm = std::string(isMin ? "TSF_MAX_" : "TSF_MIN_") + fsuffix(g.ct) + "(" + g.a + ", " + g.b + ")";
  return "((" + nanA + " || " + nanB + ") ? " + g.a + " : " + mm + ")";
}
std::string genClampMin(const PrimArgs& g) { return clampOne(g, true); }
std::string genClampMax(const PrimArgs& g) { return clampOne(g, false); }
// CUDA's clamp with both bounds (torch 2.11, clamp_kernel_impl and launch_clamp_scalar): a NaN of
// the input, else of the lower, else of the upper bound wins; otherwise min(max(a, lo), hi) with
// the device's max/min (-0.0 below +0.0).
std::string genClamp3(const PrimArgs& g) {
  if (!isFloatTy(g.ct)) {
    const std::string lo = p(g.a + " < " + g.b + " ? " + g.b + " : " + g.a);
    return p(g.c + " < " + lo + " ? " + g.c + " : " + lo);
  }
  const std::string f = fsuffix(g.ct);
  const std::string v = "TSF_MIN_" + f + "(TSF_MAX_" + f + "(" + g.a + ", " + g.b + "), " + g.c + ")";
  return "(" + p(g.a + " != " + g.a) + " ? " + g.a + " : " + p(g.b + " != " + g.b) + " ? " + g.b + " : " +
         p(g.c + " != " + g.c) + " ? " + g.c + " : " + v + ")";
}
std::string genEq(const PrimArgs& g) { return cmp(g, "=="); }
std::string genNe(const PrimArgs& g) { return cmp(g, "!="); }
std::string genLt(const PrimArgs& g) { return cmp(g, "<"); }
std::string genLe(const PrimArgs& g) { return cmp(g, "<="); }
std::string genGt(const PrimArgs& g) { return cmp(g, ">"); }
std::string genGe(const PrimArgs& g) { return cmp(g, ">="); }
std::string genAnd(const PrimArgs& g) { return "(tsf_bool)(" + g.a + " != 0 && " + g.b + " != 0)"; }
std::string genOr(const PrimArgs& g) { return "(tsf_bool)(" + g.a + " != 0 || " + g.b + " != 0)"; }
std::string genXor(const PrimArgs& g) { return "(tsf_bool)((" + g.a + " != 0) != (" + g.b + " != 0))"; }
std::string genNot(const PrimArgs& g) { return "(tsf_bool)(" + g.a + " == 0)"; }
std::string genNeg(const PrimArgs& g) {
  if (g.ct == Ty::Bool) return "";
  if (isFloatTy(g.ct)) return "(-" + g.a + ")";  // -(+0.0) is -0.0, unlike 0 - x
  const std::string u = g.ct == Ty::I64 ? "tsf_u64" : "tsf_u32";
  return "(" + ty(g.ct) + ")((" + u + ")0 - (" + u + ")" + g.a + ")";
}
std::string genAbs(const PrimArgs& g) {
  if (isFloatTy(g.ct)) return "TSF_FABS_" + fsuffix(g.ct) + "(" + g.a + ")";
  if (g.ct == Ty::Bool || g.ct == Ty::U8) return g.a;
  const std::string u = g.ct == Ty::I64 ? "tsf_u64" : "tsf_u32";
  return "(" + ty(g.ct) + ")(" + g.a + " < 0 ? (" + u + ")0 - (" + u + ")" + g.a + " : (" + u + ")" + g.a + ")";
}
std::string genWhere(const PrimArgs& g) { return p(g.a + " ? " + g.b + " : " + g.c); }
std::string genCast(const PrimArgs& g) { return convText(g.from, g.ct, g.a); }
std::string unaryMath(const PrimArgs& g, const char* fn) {
  return isFloatTy(g.ct) ? std::string("TSF_") + fn + "_" + fsuffix(g.ct) + "(" + g.a + ")" : "";
}
std::string genExp(const PrimArgs& g) { return unaryMath(g, "EXP"); }
std::string genLog(const PrimArgs& g) { return unaryMath(g, "LOG"); }
std::string genSqrt(const PrimArgs& g) { return unaryMath(g, "SQRT"); }
std::string genSin(const PrimArgs& g) { return unaryMath(g, "SIN"); }
std::string genCos(const PrimArgs& g) { return unaryMath(g, "COS"); }
std::string genAtan(const PrimArgs& g) { return unaryMath(g, "ATAN"); }
std::string genTanh(const PrimArgs& g) { return unaryMath(g, "TANH"); }
std::string genFloor(const PrimArgs& g) { return unaryMath(g, "FLOOR"); }
std::string genCeil(const PrimArgs& g) { return unaryMath(g, "CEIL"); }
std::string genTrunc(const PrimArgs& g) { return unaryMath(g, "TRUNC"); }
std::string genRound(const PrimArgs& g) { return unaryMath(g, "RINT"); }
std::string genSigmoid(const PrimArgs& g) {
  if (!isFloatTy(g.ct)) return "";
  const std::string one = g.ct == Ty::F32 ? "1.0f" : "1.0";  // exact in either language
  return "(" + one + " / (" + one + " + TSF_EXP_" + fsuffix(g.ct) + "(-" + g.a + ")))";
}
std::string genAten(const PrimArgs&) { return ""; }  // runs through ATen on CPU tiles only

constexpr Gen kGen[] = {
#define TSFUSE_PRIM(Id, arity, flags) &gen##Id,
#include "kernels/ir/prims.def"
};

}  // namespace

std::string primText(Prim prim, const PrimArgs& args) {
  if (!primHas(prim, kDevice)) return "";
  if (primHas(prim, kFloatOnly) && !isFloatTy(args.ct)) return "";
  return kGen[static_cast<int>(prim)](args);
}

std::string convText(Ty from, Ty to, const std::string& x) {
  if (from == to) return x;
  if (to == Ty::Bool) return "(tsf_bool)(" + x + " != 0)";
  if (to == Ty::U8 && isFloatTy(from)) return "(tsf_u8)(tsf_i64)" + x;  // c10: uint8 via int64
  // To a half dtype through float, as c10::Half(float) converts a double or an integer.
  if (isHalfTy(to)) return std::string(to == Ty::F16 ? "tsf_round_f16" : "tsf_round_bf16") + "((tsf_f32)" + x + ")";
  return "(" + std::string(localName(to)) + ")" + x;
}

std::string loadText(Ty t, const std::string& x) {
  if (!isHalfTy(t)) return x;
  return std::string(t == Ty::F16 ? "tsf_f16_to_f32(" : "tsf_bf16_to_f32(") + x + ")";
}

std::string storeText(Ty t, const std::string& x) {
  if (!isHalfTy(t)) return x;
  return std::string(t == Ty::F16 ? "tsf_f32_to_f16(" : "tsf_f32_to_bf16(") + x + ")";
}

}  // namespace tsfuse::cuda
