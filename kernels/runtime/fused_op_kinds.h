// The fused op kinds of fused_ops.def, each described once: its C++ signature (Fn, after the
// operand list), its unfused ATen reference (`eager`: autograd and errors), its Meta kernel and
// its backend kernel over a device's native path. kernels/runtime/register_ops.cpp generates
// every dispatcher registration from the table and these descriptions.
#pragma once

#include "kernels/backends/last_path.h"
#include "kernels/backends/native_path.h"
#include "kernels/reference/eval_fused.h"
#include "kernels/runtime/chain.h"
#include "kernels/runtime/eager.h"
#include "kernels/runtime/fused_call.h"
#include "kernels/runtime/reduce_spec.h"
#include "kernels/runtime/softmax.h"
#include "kernels/runtime/sweep.h"

#include <tuple>

namespace tsfuse {

using StageTexts = std::vector<std::string>;
using TensorPair = std::tuple<at::Tensor, at::Tensor>;

inline TensorPair outputPair(const Outputs& o) { return {o[0], o[1]}; }

struct PairwiseKind {
  using Fn = at::Tensor(at::TensorList, c10::string_view, at::IntArrayRef);
  static at::Tensor eager(at::TensorList ops, c10::string_view expr, at::IntArrayRef) {
    return runEager(*cachedExpr(std::string(expr)), ops, nullptr);
  }
  static at::Tensor meta(at::TensorList ops, c10::string_view expr, at::IntArrayRef) {
    return evalAten(*cachedExpr(std::string(expr)), ops);
  }
  static at::Tensor run(const NativePath& native, at::TensorList ops, c10::string_view expr, at::IntArrayRef donated) {
    return runFused(ops, expr, nullptr, native, donated);
  }
};

struct ReduceKind {
  using Fn = at::Tensor(at::TensorList, c10::string_view, c10::string_view, at::OptionalIntArrayRef, bool,
                        std::optional<c10::ScalarType>, std::optional<c10::string_view>, at::IntArrayRef);
  static at::Tensor eager(at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                          at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                          std::optional<c10::string_view> epilogue, at::IntArrayRef) {
    ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, dtype, epilogue);
    return runEager(*cachedExpr(std::string(expr)), ops, &spec);
  }
  static at::Tensor meta(at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                         at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::string_view> epilogue, at::IntArrayRef) {
    ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, dtype, epilogue);
    return evalFused(*cachedExpr(std::string(expr)), ops, &spec)[0];
  }
  static at::Tensor run(const NativePath& native, at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                        at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                        std::optional<c10::string_view> epilogue, at::IntArrayRef donated) {
    ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, dtype, epilogue);
    return runFused(ops, expr, &spec, native, donated);
  }
};

struct ReduceWithIndicesKind {
  using Fn = TensorPair(at::TensorList, c10::string_view, c10::string_view, int64_t, bool,
                        std::optional<c10::string_view>);
  static TensorPair eager(at::TensorList ops, c10::string_view expr, c10::string_view reduction, int64_t dim,
                          bool keepdim, std::optional<c10::string_view> epilogue) {
    ReduceSpec spec = makeIndicesSpec(reduction, dim, keepdim, epilogue);
    return outputPair(runEagerAll(*cachedExpr(std::string(expr)), ops, &spec));
  }
  static TensorPair meta(at::TensorList ops, c10::string_view expr, c10::string_view reduction, int64_t dim,
                         bool keepdim, std::optional<c10::string_view> epilogue) {
    ReduceSpec spec = makeIndicesSpec(reduction, dim, keepdim, epilogue);
    return outputPair(evalFused(*cachedExpr(std::string(expr)), ops, &spec));
  }
  static TensorPair run(const NativePath& native, at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                        int64_t dim, bool keepdim, std::optional<c10::string_view> epilogue) {
    ReduceSpec spec = makeIndicesSpec(reduction, dim, keepdim, epilogue);
    return outputPair(runFusedAll(ops, expr, &spec, native));
  }
};

struct SoftmaxKind {
  using Fn = at::Tensor(at::TensorList, c10::string_view, int64_t, bool);
  static at::Tensor eager(at::TensorList ops, c10::string_view expr, int64_t dim, bool log) {
    return softmaxAten(*cachedExpr(std::string(expr)), ops, dim, log);
  }
  static at::Tensor meta(at::TensorList ops, c10::string_view expr, int64_t dim, bool log) {
    return eager(ops, expr, dim, log);
  }
  static at::Tensor run(const NativePath& native, at::TensorList ops, c10::string_view expr, int64_t dim, bool log) {
    return runSoftmax(ops, expr, dim, log, native);
  }
};

// A chain's ATen reference: one output, or (values, indices).
inline Outputs chainReference(at::TensorList ops, c10::string_view expr, const StageTexts& stages) {
  Outputs out = evalChain(*cachedChain(expr, stages), ops);
  setLastPath("eager");
  return out;
}

struct ReduceChainKind {
  using Fn = at::Tensor(at::TensorList, c10::string_view, StageTexts);
  static at::Tensor eager(at::TensorList ops, c10::string_view expr, StageTexts stages) {
    return chainReference(ops, expr, stages)[0];
  }
  static at::Tensor meta(at::TensorList ops, c10::string_view expr, StageTexts stages) {
    return eager(ops, expr, std::move(stages));
  }
  static at::Tensor run(const NativePath& native, at::TensorList ops, c10::string_view expr, StageTexts stages) {
    const auto c = cachedChain(expr, stages);
    TORCH_CHECK(!c->stages.back().withIndices(),
                "tsfuse::reduce_chain: the last stage is max/min with indices; "
                "use tsfuse::reduce_chain_with_indices");
    return runChain(*c, ops, native)[0];
  }
};

struct ReduceChainWithIndicesKind {
  using Fn = TensorPair(at::TensorList, c10::string_view, StageTexts);
  static TensorPair eager(at::TensorList ops, c10::string_view expr, StageTexts stages) {
    return outputPair(chainReference(ops, expr, stages));
  }
  static TensorPair meta(at::TensorList ops, c10::string_view expr, StageTexts stages) {
    return eager(ops, expr, std::move(stages));
  }
  static TensorPair run(const NativePath& native, at::TensorList ops, c10::string_view expr, StageTexts stages) {
    const auto c = cachedChain(expr, stages);
    TORCH_CHECK(c->stages.back().withIndices(),
                "tsfuse::reduce_chain_with_indices: the last stage must be max "
                "or min with indices");
    return outputPair(runChain(*c, ops, native));
  }
};

struct ReduceSweepKind {
  using Fn = std::vector<at::Tensor>(at::TensorList, c10::string_view, StageTexts);
  static std::vector<at::Tensor> eager(at::TensorList ops, c10::string_view expr, StageTexts stages) {
    Outputs out = evalSweep(*cachedSweep(expr, stages), ops);
    setLastPath("eager");
    return out;
  }
  static std::vector<at::Tensor> meta(at::TensorList ops, c10::string_view expr, StageTexts stages) {
    return eager(ops, expr, std::move(stages));
  }
  static std::vector<at::Tensor> run(const NativePath& native, at::TensorList ops, c10::string_view expr,
                                     StageTexts stages) {
    return runSweep(*cachedSweep(expr, stages), ops, native);
  }
};

}  // namespace tsfuse
