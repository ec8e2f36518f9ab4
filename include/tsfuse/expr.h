// The fused-region expression: a small SSA DAG over the fused op's tensor operands.
//
// It travels in the graph as the `expr` string argument of tsfuse::pairwise / tsfuse::reduce, so a
// saved model carries it and a person can read it. Text form (version 1):
//
//   v1: sub($0, $1); abs(%0); lt(%1, 1)
//
//   $i      the i-th tensor operand            %j      the result of instruction j
//   1  -2   int literal (Python int)           1.0  1e-07  inf  nan   float literal (Python float)
//   True    bool literal                       None  absent optional argument
//   float32, int64, bool, ...                  a dtype (for `to`)
//
// The value of the expression is the last instruction. Every instruction names one ATen op and
// passes its arguments in ATen's order, so evaluating it with ATen is the reference semantics
// (kernels/aten_eval.h) and the fast kernels are checked against that.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tsfuse {

constexpr int kExprVersion = 1;

enum class Op : uint8_t {
  // binary arithmetic / min-max (Tensor|Scalar operands, PyTorch type promotion)
  Add,       // add(a, b)            alpha = 1
  AddAlpha,  // add(a, b, alpha)     a + alpha * b (ATen kernel, may use FMA like eager does)
  Sub,       // sub(a, b)
  SubAlpha,  // sub(a, b, alpha)
  Mul,
  Div,       // true division
  DivFloor,  // div(a, b, rounding_mode='floor')
  DivTrunc,  // div(a, b, rounding_mode='trunc')
  Minimum,
  Maximum,
  Pow,  // pow(a, b): b a Tensor or Scalar
  // comparisons -> bool
  Eq, Ne, Lt, Le, Gt, Ge,
  // logical -> bool
  LogicalAnd, LogicalOr, LogicalXor, LogicalNot,
  // unary
  Neg, Abs, Relu, Sqrt, Exp, Log, Sigmoid,
  // clamp(x, min?, max?): Scalar bounds (literals or None) or Tensor bounds
  Clamp,
  // where(cond, a, b)
  Where,
  // to(x, dtype)
  To,
};

struct Arg {
  enum class Kind : uint8_t { Input, Value, Int, Float, Bool, None, DType };
  Kind kind = Kind::None;
  int64_t i = 0;    // Input/Value index, Int value, Bool value
  double f = 0.0;   // Float value
  c10::ScalarType dtype = c10::ScalarType::Undefined;

  static Arg input(int64_t idx) { return {Kind::Input, idx, 0.0, c10::ScalarType::Undefined}; }
  static Arg value(int64_t idx) { return {Kind::Value, idx, 0.0, c10::ScalarType::Undefined}; }
  static Arg integer(int64_t v) { return {Kind::Int, v, 0.0, c10::ScalarType::Undefined}; }
  static Arg floating(double v) { return {Kind::Float, 0, v, c10::ScalarType::Undefined}; }
  static Arg boolean(bool v) { return {Kind::Bool, v ? 1 : 0, 0.0, c10::ScalarType::Undefined}; }
  static Arg none() { return {}; }
  static Arg scalarType(c10::ScalarType t) { return {Kind::DType, 0, 0.0, t}; }

  bool isTensor() const { return kind == Kind::Input || kind == Kind::Value; }
  bool isLiteral() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool operator==(const Arg& o) const;
};

struct Instr {
  Op op;
  std::vector<Arg> args;
};

struct OpInfo {
  Op op;
  const char* name;
  int minArgs;
  int maxArgs;
};
const OpInfo& opInfo(Op op);
// Looks an op up by its text name; returns false when unknown.
bool opFromName(const std::string& name, Op& out);

struct Expr {
  int numInputs = 0;
  std::vector<Instr> instrs;

  // Parses the text form; throws c10::Error with the position and reason on malformed input.
  static Expr parse(const std::string& text);
  std::string str() const;
  // Checks references (operands < numInputs, values defined before use), arities and argument
  // kinds; throws c10::Error naming the instruction.
  void validate() const;
};

// Reductions that tsfuse::reduce applies to the expression's value. Norm carries its order p in
// the reduction text ("norm:2.0", "norm:inf"); Max and Min are max/min over one dim returning
// (values, indices), the reductions of tsfuse::reduce_with_indices.
enum class Reduction : uint8_t { Sum, Mean, Prod, Amax, Amin, Any, All, Argmax, Argmin, Logsumexp, Norm, Max, Min };
const char* reductionName(Reduction r);
// The text form of a float literal (shortest round-trip text; inf, -inf, nan).
std::string floatText(double v);
bool reductionFromName(const std::string& name, Reduction& out);

}  // namespace tsfuse
