// Native CPU evaluation of tsfuse::pairwise / tsfuse::reduce: the call's expression lowered to a
// TileProgram, then walked over the call's IterationPlan by the map driver (map.cpp) or the
// reduce driver (reduce.cpp).
#include "kernels/cpu/native.h"

#include "kernels/cpu/drivers.h"

namespace tsfuse::cpu {

Outputs runNative(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                  const IterationPlan& plan, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return Outputs();
  };
  if (plan.unsupported) return no(plan.unsupported);
  for (int i = 0; i < e.numInputs; ++i)
    if (!operands[i].device().is_cpu()) return no("operand not on the CPU");
  auto prog = TileProgram::lower(e, an, operands, why);
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
  if (plan.unsupported) {
    if (why) *why = plan.unsupported;
    return false;
  }
  for (int i = 0; i < e.numInputs; ++i)
    if (!operands[i].device().is_cpu()) {
      if (why) *why = "operand not on the CPU";
      return false;
    }
  auto prog = TileProgram::lower(e, an, operands, why);
  return prog && runReduceRowSums(*prog, e, operands, reduce, an, plan, sums, why);
}

}  // namespace tsfuse::cpu
