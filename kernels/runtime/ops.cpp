// Schemas of the fused ops and the kernel of every dispatch key: autograd (unfused when a gradient
// is needed), Meta, CPU (the native tile path), CUDA (the opt-in CUDA kernels) and every other
// device (the chunked ATen path). Each native path falls back to the chunked one where it declines.
#include "kernels/runtime/chain.h"
#include "kernels/runtime/sweep.h"
#include "kernels/backends/cpu/native.h"
#include "kernels/runtime/fused_call.h"
#if defined(TSFUSE_WITH_CUDA)
#include "kernels/backends/cuda/cuda_ops.h"
#endif
#include "tsfuse/ops.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace tsfuse {
namespace {

using PairwiseFn = at::Tensor(at::TensorList, c10::string_view, at::IntArrayRef);
using ReduceFn = at::Tensor(at::TensorList, c10::string_view, c10::string_view, at::OptionalIntArrayRef,
                            bool, std::optional<c10::ScalarType>, std::optional<c10::string_view>,
                            at::IntArrayRef);
using IndicesFn = std::tuple<at::Tensor, at::Tensor>(at::TensorList, c10::string_view, c10::string_view,
                                                     int64_t, bool, std::optional<c10::string_view>);
using SoftmaxFn = at::Tensor(at::TensorList, c10::string_view, int64_t, bool);
using ChainFn = at::Tensor(at::TensorList, c10::string_view, std::vector<std::string>);
using SweepFn = std::vector<at::Tensor>(at::TensorList, c10::string_view, std::vector<std::string>);
using ChainIndicesFn = std::tuple<at::Tensor, at::Tensor>(at::TensorList, c10::string_view, std::vector<std::string>);

c10::TypedOperatorHandle<PairwiseFn> pairwiseOp() {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::pairwise", "").typed<PairwiseFn>();
  return op;
}
c10::TypedOperatorHandle<ReduceFn> reduceOp() {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::reduce", "").typed<ReduceFn>();
  return op;
}

c10::TypedOperatorHandle<IndicesFn> indicesOp() {
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::reduce_with_indices", "").typed<IndicesFn>();
  return op;
}

c10::TypedOperatorHandle<SoftmaxFn> softmaxOp() {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::softmax", "").typed<SoftmaxFn>();
  return op;
}

c10::TypedOperatorHandle<ChainFn> chainOp() {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::reduce_chain", "").typed<ChainFn>();
  return op;
}
c10::TypedOperatorHandle<SweepFn> sweepOp() {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::reduce_sweep", "").typed<SweepFn>();
  return op;
}
c10::TypedOperatorHandle<ChainIndicesFn> chainIndicesOp() {
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::reduce_chain_with_indices", "").typed<ChainIndicesFn>();
  return op;
}

// softmax / log_softmax of the expression's value, with ATen (autograd, Meta).
at::Tensor softmaxEager(at::TensorList ops, c10::string_view expr, int64_t dim, bool log) {
  return softmaxAten(*cachedExpr(std::string(expr)), ops, dim, log);
}

std::tuple<at::Tensor, at::Tensor> pair(const Outputs& o) { return {o[0], o[1]}; }

bool needsGrad(at::TensorList ops) {
  if (!at::GradMode::is_enabled()) return false;
  for (const auto& t : ops)
    if (t.requires_grad()) return true;
  return false;
}

// Autograd: when a gradient is needed the region runs unfused through ATen, so autograd records
// exactly the ops of the original subgraph; otherwise dispatch continues to the backend kernel.
at::Tensor pairwiseAutograd(at::TensorList ops, c10::string_view expr, at::IntArrayRef donated) {
  if (needsGrad(ops)) return runEager(*cachedExpr(std::string(expr)), ops, nullptr);
  at::AutoDispatchBelowADInplaceOrView guard;
  return pairwiseOp().call(ops, expr, donated);
}
at::Tensor reduceAutograd(at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                          at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                          std::optional<c10::string_view> epilogue, at::IntArrayRef donated) {
  if (needsGrad(ops)) {
    ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, dtype, epilogue);
    return runEager(*cachedExpr(std::string(expr)), ops, &spec);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return reduceOp().call(ops, expr, reduction, dim, keepdim, dtype, epilogue, donated);
}
at::Tensor softmaxAutograd(at::TensorList ops, c10::string_view expr, int64_t dim, bool log) {
  if (needsGrad(ops)) return softmaxEager(ops, expr, dim, log);
  at::AutoDispatchBelowADInplaceOrView guard;
  return softmaxOp().call(ops, expr, dim, log);
}
std::tuple<at::Tensor, at::Tensor> indicesAutograd(at::TensorList ops, c10::string_view expr,
                                                   c10::string_view reduction, int64_t dim, bool keepdim,
                                                   std::optional<c10::string_view> epilogue) {
  if (needsGrad(ops)) {
    ReduceSpec spec = makeIndicesSpec(reduction, dim, keepdim, epilogue);
    return pair(runEagerAll(*cachedExpr(std::string(expr)), ops, &spec));
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return indicesOp().call(ops, expr, reduction, dim, keepdim, epilogue);
}

// A chain's ATen reference (autograd and Meta): one output, or (values, indices).
Outputs chainOutputs(at::TensorList ops, c10::string_view expr, const std::vector<std::string>& stages) {
  Outputs out = evalChain(*cachedChain(expr, stages), ops);
  setLastPath("eager");
  return out;
}
at::Tensor chainEager(at::TensorList ops, c10::string_view expr, std::vector<std::string> stages) {
  return chainOutputs(ops, expr, stages)[0];
}
std::tuple<at::Tensor, at::Tensor> chainIndicesEager(at::TensorList ops, c10::string_view expr,
                                                     std::vector<std::string> stages) {
  return pair(chainOutputs(ops, expr, stages));
}
at::Tensor chainAutograd(at::TensorList ops, c10::string_view expr, std::vector<std::string> stages) {
  if (needsGrad(ops)) return chainEager(ops, expr, std::move(stages));
  at::AutoDispatchBelowADInplaceOrView guard;
  return chainOp().call(ops, expr, std::move(stages));
}
std::tuple<at::Tensor, at::Tensor> chainIndicesAutograd(at::TensorList ops, c10::string_view expr,
                                                        std::vector<std::string> stages) {
  if (needsGrad(ops)) return chainIndicesEager(ops, expr, std::move(stages));
  at::AutoDispatchBelowADInplaceOrView guard;
  return chainIndicesOp().call(ops, expr, std::move(stages));
}

std::vector<at::Tensor> sweepEager(at::TensorList ops, c10::string_view expr, std::vector<std::string> stages) {
  Outputs out = evalSweep(*cachedSweep(expr, stages), ops);
  setLastPath("eager");
  return out;
}
std::vector<at::Tensor> sweepAutograd(at::TensorList ops, c10::string_view expr, std::vector<std::string> stages) {
  if (needsGrad(ops)) return sweepEager(ops, expr, std::move(stages));
  at::AutoDispatchBelowADInplaceOrView guard;
  return sweepOp().call(ops, expr, std::move(stages));
}

// The backend kernels of a dispatch key, over its native path (none: the chunked path alone).
template <const NativePath* Native>
struct Backend {
  static at::Tensor pairwise(at::TensorList ops, c10::string_view expr, at::IntArrayRef donated) {
    return runFused(ops, expr, nullptr, *Native, donated);
  }
  static at::Tensor reduce(at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                           at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                           std::optional<c10::string_view> epilogue, at::IntArrayRef donated) {
    ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, dtype, epilogue);
    return runFused(ops, expr, &spec, *Native, donated);
  }
  static at::Tensor softmax(at::TensorList ops, c10::string_view expr, int64_t dim, bool log) {
    return runSoftmax(ops, expr, dim, log, *Native);
  }
  static std::tuple<at::Tensor, at::Tensor> indices(at::TensorList ops, c10::string_view expr,
                                                    c10::string_view reduction, int64_t dim, bool keepdim,
                                                    std::optional<c10::string_view> epilogue) {
    ReduceSpec spec = makeIndicesSpec(reduction, dim, keepdim, epilogue);
    return pair(runFusedAll(ops, expr, &spec, *Native));
  }
  static at::Tensor chain(at::TensorList ops, c10::string_view expr, std::vector<std::string> stages) {
    const auto c = cachedChain(expr, stages);
    TORCH_CHECK(!c->stages.back().withIndices(), "tsfuse::reduce_chain: the last stage is max/min with indices; "
                "use tsfuse::reduce_chain_with_indices");
    return runChain(*c, ops, *Native)[0];
  }
  static std::tuple<at::Tensor, at::Tensor> chainIndices(at::TensorList ops, c10::string_view expr,
                                                         std::vector<std::string> stages) {
    const auto c = cachedChain(expr, stages);
    TORCH_CHECK(c->stages.back().withIndices(), "tsfuse::reduce_chain_with_indices: the last stage must be max "
                "or min with indices");
    return pair(runChain(*c, ops, *Native));
  }
  static std::vector<at::Tensor> sweep(at::TensorList ops, c10::string_view expr, std::vector<std::string> stages) {
    return runSweep(*cachedSweep(expr, stages), ops, *Native);
  }
};

const NativePath kNoNative = nullptr;
const NativePath kCpuNative = cpu::runNative;
#if defined(TSFUSE_WITH_CUDA)
const NativePath kCudaNative = cuda::runCuda;
#endif

at::Tensor pairwiseMeta(at::TensorList ops, c10::string_view expr, at::IntArrayRef) {
  return evalAten(*cachedExpr(std::string(expr)), ops);
}
at::Tensor reduceMeta(at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                      at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                      std::optional<c10::string_view> epilogue, at::IntArrayRef) {
  ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, dtype, epilogue);
  return evalFused(*cachedExpr(std::string(expr)), ops, &spec)[0];
}
std::tuple<at::Tensor, at::Tensor> indicesMeta(at::TensorList ops, c10::string_view expr,
                                               c10::string_view reduction, int64_t dim, bool keepdim,
                                               std::optional<c10::string_view> epilogue) {
  ReduceSpec spec = makeIndicesSpec(reduction, dim, keepdim, epilogue);
  return pair(evalFused(*cachedExpr(std::string(expr)), ops, &spec));
}

}  // namespace

at::Tensor pairwise(at::TensorList operands, const std::string& expr) {
  return pairwiseOp().call(operands, expr, {});
}

at::Tensor reduce(at::TensorList operands, const std::string& expr, const std::string& reduction,
                  std::optional<std::vector<int64_t>> dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                  const std::optional<std::string>& epilogue) {
  at::OptionalIntArrayRef d;
  if (dim) d = at::IntArrayRef(*dim);
  std::optional<c10::string_view> epi;
  if (epilogue) epi = c10::string_view(*epilogue);
  return reduceOp().call(operands, expr, reduction, d, keepdim, dtype, epi, {});
}

std::tuple<at::Tensor, at::Tensor> reduceWithIndices(at::TensorList operands, const std::string& expr,
                                                     const std::string& reduction, int64_t dim, bool keepdim,
                                                     const std::optional<std::string>& epilogue) {
  std::optional<c10::string_view> epi;
  if (epilogue) epi = c10::string_view(*epilogue);
  return indicesOp().call(operands, expr, reduction, dim, keepdim, epi);
}

at::Tensor softmax(at::TensorList operands, const std::string& expr, int64_t dim, bool log) {
  return softmaxOp().call(operands, expr, dim, log);
}

at::Tensor reduceChain(at::TensorList operands, const std::string& expr, const std::vector<std::string>& stages) {
  return chainOp().call(operands, expr, stages);
}

std::tuple<at::Tensor, at::Tensor> reduceChainWithIndices(at::TensorList operands, const std::string& expr,
                                                          const std::vector<std::string>& stages) {
  return chainIndicesOp().call(operands, expr, stages);
}

std::vector<at::Tensor> reduceSweep(at::TensorList operands, const std::string& expr,
                                    const std::vector<std::string>& stages) {
  return sweepOp().call(operands, expr, stages);
}


}  // namespace tsfuse

TORCH_LIBRARY(tsfuse, m) {
  // `donated`: operands the caller will not read again (kernels/runtime/fused_call.h, runFusedAll).
  m.def("pairwise(Tensor[] operands, str expr, int[] donated=[]) -> Tensor");
  m.def(
      "reduce(Tensor[] operands, str expr, str reduction, int[]? dim=None, bool keepdim=False, "
      "ScalarType? dtype=None, str? epilogue=None, int[] donated=[]) -> Tensor");
  m.def(
      "reduce_with_indices(Tensor[] operands, str expr, str reduction, int dim, bool keepdim=False, "
      "str? epilogue=None) -> (Tensor values, Tensor indices)");
  m.def("softmax(Tensor[] operands, str expr, int dim, bool log=False) -> Tensor");
  // Reductions of a reduction's value (kernels/runtime/chain.h): `stages` are describe()'s texts.
  m.def("reduce_chain(Tensor[] operands, str expr, str[] stages) -> Tensor");
  m.def("reduce_chain_with_indices(Tensor[] operands, str expr, str[] stages) -> (Tensor values, Tensor indices)");
  // Several reductions of one reduction's value in one sweep (kernels/runtime/sweep.h): stage 0, then one
  // output per branch.
  m.def("reduce_sweep(Tensor[] operands, str expr, str[] stages) -> Tensor[]");
  // A stand-in for the expression's value to readers of its metadata (kernels/runtime/fused_call.h).
  m.def("shape_of(Tensor[] operands, str expr) -> Tensor",
        [](at::TensorList operands, c10::string_view expr) { return tsfuse::shapeOf(operands, expr); });
  // A Python number known only at run time as an operand: a 0-dim CPU tensor flagged as a wrapped
  // number, as ATen's Scalar overloads see it (passes/analysis/op_table.cpp, kRuntimeNumber).
  m.def("wrapped_number(Scalar s) -> Tensor", [](const c10::Scalar& s) { return tsfuse::reusedWrappedNumber(s); });
  // torchvision's _upcast (passes/fold_upcast.cpp): self itself, or a cast of it.
  m.def("upcast(Tensor(a) self) -> Tensor(a)",
        [](const at::Tensor& self) { return self.to(tsfuse::upcastDtype(self.scalar_type())); });
}

TORCH_LIBRARY_IMPL(tsfuse, Autograd, m) {
  m.impl("pairwise", tsfuse::pairwiseAutograd);
  m.impl("reduce", tsfuse::reduceAutograd);
  m.impl("reduce_with_indices", tsfuse::indicesAutograd);
  m.impl("softmax", tsfuse::softmaxAutograd);
  m.impl("reduce_chain", tsfuse::chainAutograd);
  m.impl("reduce_chain_with_indices", tsfuse::chainIndicesAutograd);
  m.impl("reduce_sweep", tsfuse::sweepAutograd);
}

TORCH_LIBRARY_IMPL(tsfuse, Meta, m) {
  m.impl("pairwise", tsfuse::pairwiseMeta);
  m.impl("reduce", tsfuse::reduceMeta);
  m.impl("reduce_with_indices", tsfuse::indicesMeta);
  m.impl("softmax", tsfuse::softmaxEager);
  m.impl("reduce_chain", tsfuse::chainEager);
  m.impl("reduce_chain_with_indices", tsfuse::chainIndicesEager);
  m.impl("reduce_sweep", tsfuse::sweepEager);
}

TORCH_LIBRARY_IMPL(tsfuse, CPU, m) {
  using B = tsfuse::Backend<&tsfuse::kCpuNative>;
  m.impl("pairwise", B::pairwise);
  m.impl("reduce", B::reduce);
  m.impl("reduce_with_indices", B::indices);
  m.impl("softmax", B::softmax);
  m.impl("reduce_chain", B::chain);
  m.impl("reduce_chain_with_indices", B::chainIndices);
  m.impl("reduce_sweep", B::sweep);
}

#if defined(TSFUSE_WITH_CUDA)
// max/min with indices have no CUDA kernel: reduce_with_indices takes the generic kernel below.
TORCH_LIBRARY_IMPL(tsfuse, CUDA, m) {
  using B = tsfuse::Backend<&tsfuse::kCudaNative>;
  m.impl("pairwise", B::pairwise);
  m.impl("reduce", B::reduce);
  m.impl("softmax", B::softmax);
  m.impl("reduce_chain", B::chain);
  m.impl("reduce_chain_with_indices", B::chainIndices);
  m.impl("reduce_sweep", B::sweep);
}
#endif

// Devices without a native kernel get the exact chunked ATen path: bounded intermediates, same
// results as eager.
TORCH_LIBRARY_IMPL(tsfuse, CompositeExplicitAutograd, m) {
  using B = tsfuse::Backend<&tsfuse::kNoNative>;
  m.impl("pairwise", B::pairwise);
  m.impl("reduce", B::reduce);
  m.impl("reduce_with_indices", B::indices);
  m.impl("softmax", B::softmax);
  m.impl("reduce_chain", B::chain);
  m.impl("reduce_chain_with_indices", B::chainIndices);
  m.impl("reduce_sweep", B::sweep);
}
