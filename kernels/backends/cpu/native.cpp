// Native CPU evaluation of tsfuse::pairwise / tsfuse::reduce: the call's expression lowered to a
// TileProgram, then walked over the call's IterationPlan by the map driver (map.cpp) or the
// reduce driver (reduce.cpp).
#include "kernels/backends/cpu/native.h"

#include "kernels/backends/cpu/drivers.h"

namespace tsfuse::cpu {

namespace {

// The call's program for the native drivers: nullopt, with the reason in *why, where the plan has
// no native form, an operand is not on the CPU, or a dtype has no tile form.
std::optional<TileProgram> nativeProgram(const Expr& e, at::TensorList operands, const Analysis& an,
                                         const IterationPlan& plan, std::string* why) {
  const char* reason = plan.unsupported;
  for (int i = 0; !reason && i < e.numInputs; ++i)
    if (!operands[i].device().is_cpu()) reason = "operand not on the CPU";
  if (reason) {
    if (why) *why = reason;
    return std::nullopt;
  }
  return TileProgram::lower(e, an, operands, why);
}

}  // namespace

Outputs runNative(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                  const IterationPlan& plan, std::string* why) {
  auto prog = nativeProgram(e, operands, an, plan, why);
  if (!prog) return Outputs();
  at::Tensor out = allocOutput(an);
  if (!reduce) {
    runMap(*prog, plan, out);
    return {out};
  }
  return runReduce(*prog, e, operands, *reduce, an, plan, out, why);
}

bool runNativeRowSums(const Expr& e, at::TensorList operands, const ReduceSpec& reduce, const Analysis& an,
                      const IterationPlan& plan, at::Tensor& sums, std::string* why) {
  auto prog = nativeProgram(e, operands, an, plan, why);
  return prog && runReduceRowSums(*prog, e, operands, reduce, an, plan, sums, why);
}

}  // namespace tsfuse::cpu
