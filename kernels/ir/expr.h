// The fused-region expression: a small SSA DAG over the fused op's tensor operands. It travels in
// the graph as the `expr` string argument of tsfuse::pairwise / tsfuse::reduce, so a saved model
// carries it and a person can read it. Every instruction names one ATen op and passes its
// arguments in ATen's order, so evaluating it with ATen is the reference semantics
// (kernels/reference/aten_eval.h) and the fast kernels are checked against that.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tsfuse {

// Text form (version 1); the value of the expression is the last instruction:
//
//   v1: sub($0, $1); abs(%0); lt(%1, 1)
//
//   $i      the i-th tensor operand            %j      the result of instruction j
//   1  -2   int literal (Python int)           1.0  1e-07  inf  nan   float literal (Python float)
//   True    bool literal                       None  absent optional argument
//   float32, int64, bool, ...                  a dtype (for `to`)
//   cpu  cuda:0                                a device (for `to_device`)
constexpr int kExprVersion = 1;

// The expression's ops: one per entry of the registry (kernels/ir/ops.def; names, arities,
// traits and lowering rules are read through kernels/ir/op_registry.h).
enum class Op : uint8_t {
#define TSFUSE_OP(Id, text, signature, traits, rule, prim, ...) Id,
#include "kernels/ir/ops.def"
};

struct Arg {
  enum class Kind : uint8_t { Input, Value, Int, Float, Bool, None, DType, Device };
  Kind kind = Kind::None;
  int64_t i = 0;   // Input/Value index, Int value, Bool value
  double f = 0.0;  // Float value
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Device device = c10::Device(c10::kCPU);

  static Arg input(int64_t idx) { return {Kind::Input, idx, 0.0, c10::ScalarType::Undefined}; }
  static Arg value(int64_t idx) { return {Kind::Value, idx, 0.0, c10::ScalarType::Undefined}; }
  static Arg integer(int64_t v) { return {Kind::Int, v, 0.0, c10::ScalarType::Undefined}; }
  static Arg floating(double v) { return {Kind::Float, 0, v, c10::ScalarType::Undefined}; }
  static Arg boolean(bool v) { return {Kind::Bool, v ? 1 : 0, 0.0, c10::ScalarType::Undefined}; }
  static Arg none() { return {}; }
  static Arg scalarType(c10::ScalarType t) { return {Kind::DType, 0, 0.0, t}; }
  static Arg onDevice(c10::Device d) { return {Kind::Device, 0, 0.0, c10::ScalarType::Undefined, d}; }

  bool isTensor() const { return kind == Kind::Input || kind == Kind::Value; }
  bool isLiteral() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool operator==(const Arg& o) const;
};

struct Instr {
  Op op;
  std::vector<Arg> args;
};

// The op's text name (its registry entry's), and the op of a text name (false when unknown).
const char* opName(Op op);
// A dtype's text name (float32, int64, ...), and the dtype of a text name (false when unknown).
const char* dtypeName(c10::ScalarType t);
bool dtypeFromName(const std::string& name, c10::ScalarType& out);
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

// Which instructions instruction j's value is computed from, j included (1 each), through its
// arguments' values: the instructions of coneOf(e, j).
std::vector<char> coneMask(const Expr& e, size_t j);

// Instruction j and every instruction it depends on, in program order, as a program of its own
// over the same operands (its value: j's).
Expr coneOf(const Expr& e, size_t j);

// Reductions that tsfuse::reduce applies to the expression's value. Norm carries its order p in
// the reduction text ("norm:2.0", "norm:inf"), Var and Std their correction ("var:1.0", "std:0.0");
// Max and Min are max/min over one dim returning (values, indices), the reductions of
// tsfuse::reduce_with_indices.
enum class Reduction : uint8_t {
  Sum,
  Mean,
  Prod,
  Amax,
  Amin,
  Any,
  All,
  Argmax,
  Argmin,
  Logsumexp,
  Norm,
  Max,
  Min,
  Var,
  Std
};
const char* reductionName(Reduction r);
// The text form of a float literal (shortest round-trip text; inf, -inf, nan).
std::string floatText(double v);
bool reductionFromName(const std::string& name, Reduction& out);

}  // namespace tsfuse
