// Helpers of the tests generated from the op registry (tests/registry/*.cpp).
#pragma once

#include "kernels/reference/analysis.h"
#include "kernels/ir/op_registry.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace tsfuse_test {

// Every combination of `choices(signatureChar, position)` over the op's arguments, tensor
// arguments ($i) numbered in order: the argument forms a generated test runs.
template <typename Choices>
std::vector<std::vector<tsfuse::Arg>> argumentForms(const tsfuse::OpDef& def, Choices choices) {
  std::vector<std::vector<tsfuse::Arg>> forms = {{}};
  for (size_t k = 0; k < static_cast<size_t>(def.arity()); ++k) {
    std::vector<std::vector<tsfuse::Arg>> next;
    for (const auto& f : forms)
      for (const tsfuse::Arg& a : choices(def.signature[k], k)) {
        next.push_back(f);
        next.back().push_back(a);
      }
    forms = std::move(next);
  }
  for (auto& f : forms) {
    int64_t n = 0;
    for (tsfuse::Arg& a : f)
      if (a.kind == tsfuse::Arg::Kind::Input) a.i = n++;
  }
  return forms;
}

// Whether operand `i` of the op over `args` is a prototype (signature 'p'): 0-dim in every test.
inline bool isPrototype(const tsfuse::OpDef& def, const std::vector<tsfuse::Arg>& args, int64_t i) {
  for (size_t k = 0; k < args.size(); ++k)
    if (args[k].kind == tsfuse::Arg::Kind::Input && args[k].i == i) return def.signature[k] == 'p';
  return false;
}

// The sample's operands: [2] ones of `dtype` (0-dim for a prototype), bool where the op wants a
// condition or mask.
inline std::vector<at::Tensor> sampleOperands(const tsfuse::OpDef& def, int count, at::ScalarType dtype) {
  std::vector<at::Tensor> ops;
  for (int i = 0; i < count; ++i) ops.push_back(at::ones({2}, dtype));
  if (def.op == tsfuse::Op::ToOther) ops[1] = at::ones({}, dtype);
  if (def.op == tsfuse::Op::Where) ops[0] = ops[0].to(at::kBool);
  if (def.op == tsfuse::Op::MaskedFill) ops[1] = ops[1].to(at::kBool);
  return ops;
}

// The op once, over tensor operands where its signature takes values, float64 where it wants a
// dtype, the CPU where it wants a device, and the number 2 where it wants a number, or 0 where the op rejects 2 on float32 [2]
// operands (a memory format, a cat's entry and dim).
inline tsfuse::Expr sampleOf(const tsfuse::OpDef& def) {
  auto with = [&](int64_t number) {
    tsfuse::Expr e;
    std::vector<tsfuse::Arg> args;
    for (size_t k = 0; k < static_cast<size_t>(def.arity()); ++k) {
      const char c = def.signature[k];
      if (c == 'd')
        args.push_back(tsfuse::Arg::scalarType(at::kDouble));
      else if (c == 'c')
        args.push_back(tsfuse::Arg::onDevice(c10::kCPU));
      else if (c == 's')
        args.push_back(tsfuse::Arg::integer(number));
      else
        args.push_back(tsfuse::Arg::input(e.numInputs++));
    }
    e.instrs.push_back({def.op, args});
    return e;
  };
  tsfuse::Expr e = with(2);
  if (std::string(def.signature).find('s') == std::string::npos) return e;
  return tsfuse::analyze(e, sampleOperands(def, e.numInputs, at::kFloat), nullptr) ? e : with(0);
}

// The dtype the op's sample is shown and tested with: float32, or bool for an op ATen defines on
// bools and integers only (bitwise ops). Conditions and masks are bool either way.
inline at::ScalarType sampleDtype(const tsfuse::OpDef& def) {
  tsfuse::Expr e = sampleOf(def);
  return tsfuse::analyze(e, sampleOperands(def, e.numInputs, at::kFloat), nullptr) ? at::kFloat : at::kBool;
}

// The registered schema of a registry row ("aten::add.Tensor"; the overload after the last dot,
// empty for "aten::abs."), or nullptr when no such operator is registered.
inline const c10::FunctionSchema* schemaOf(const tsfuse::AtenOverload& o) {
  const std::string key = o.schema;
  const auto dot = key.rfind('.');
  auto handle = c10::Dispatcher::singleton().findSchema({key.substr(0, dot), key.substr(dot + 1)});
  return handle ? &handle->schema() : nullptr;
}

}  // namespace tsfuse_test
