#include "kernels/runtime/eager.h"

#include "kernels/backends/last_path.h"

namespace tsfuse {

Outputs runEagerAll(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  setLastPath("eager");
  return evalFused(e, operands, reduce);
}

at::Tensor runEager(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  return runEagerAll(e, operands, reduce)[0];
}

}  // namespace tsfuse
