// The dispatcher registrations of the fused op kinds, generated from kernels/runtime/fused_ops.def,
// and the C++ entry points of include/tsfuse/ops.h. Each kind gets: autograd (pairwise, reduce, a
// chain of two stages and a sweep, where their reductions have a fused adjoint: fused, with a generated fused backward,
// kernels/runtime/fused_grad.h; the other kinds unfused through ATen when a gradient is needed, so
// autograd records the original ops), Meta, CPU (the native tile path), CUDA (the generated kernels) and every other device (the chunked
// ATen path). Each native path falls back to the chunked one where it declines.
#include "kernels/runtime/extrema.h"
#include "kernels/runtime/fused_op_kinds.h"
#include "kernels/runtime/fused_grad.h"
#include "kernels/runtime/reduce_spec.h"
#include "kernels/runtime/shape_of.h"
#include "kernels/backends/cpu/native.h"
#if defined(TSFUSE_WITH_CUDA)
#include "kernels/backends/cuda/cuda_ops.h"
#endif
#include "tsfuse/ops.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <tuple>
#include <type_traits>

namespace tsfuse {
namespace {

// The qualified name of each kind's op.
template <class Kind>
constexpr const char* kOpName = nullptr;
#define TSFUSE_FUSED_OP(Kind, name, schema) \
  template <>                               \
  constexpr const char* kOpName<Kind> = "tsfuse::" name;
#include "kernels/runtime/fused_ops.def"

bool needsGrad(at::TensorList ops) {
  if (!at::GradMode::is_enabled()) return false;
  for (const auto& t : ops)
    if (t.requires_grad()) return true;
  return false;
}

const NativePath kNoNative = nullptr;
const NativePath kCpuNative = cpu::runNative;
#if defined(TSFUSE_WITH_CUDA)
const NativePath kCudaNative = cuda::runCuda;
#endif

// The kernels every kind gets, from its description (fused_op_kinds.h).
template <class Kind, class Fn = typename Kind::Fn>
struct Kernels;
template <class Kind, class R, class... Args>
struct Kernels<Kind, R(at::TensorList, Args...)> {
  static c10::TypedOperatorHandle<R(at::TensorList, Args...)> op() {
    static auto handle =
        c10::Dispatcher::singleton().findSchemaOrThrow(kOpName<Kind>, "").template typed<R(at::TensorList, Args...)>();
    return handle;
  }
  static R autograd(at::TensorList ops, Args... args) {
    if (needsGrad(ops)) {
      if constexpr (std::is_same_v<Kind, PairwiseKind>)
        return pairwiseWithGradient(ops, std::get<0>(std::tie(args...)));
      if constexpr (std::is_same_v<Kind, ReduceKind>) {
        auto a = std::tie(args...);
        if (auto r = reduceWithGradient(ops, std::get<0>(a), std::get<1>(a), std::get<2>(a), std::get<3>(a),
                                        std::get<4>(a), std::get<5>(a)))
          return *r;
      }
      if constexpr (std::is_same_v<Kind, ReduceChainKind>) {
        auto a = std::tie(args...);
        if (auto r = reduceChainWithGradient(ops, std::get<0>(a), std::get<1>(a))) return *r;
      }
      if constexpr (std::is_same_v<Kind, ReduceSweepKind>) {
        auto a = std::tie(args...);
        if (auto r = reduceSweepWithGradient(ops, std::get<0>(a), std::get<1>(a))) return *r;
      }
      return Kind::eager(ops, std::move(args)...);
    }
    at::AutoDispatchBelowADInplaceOrView guard;
    return op().call(ops, std::move(args)...);
  }
  static R meta(at::TensorList ops, Args... args) { return Kind::meta(ops, std::move(args)...); }
  template <const NativePath* Native>
  static R backend(at::TensorList ops, Args... args) {
    return Kind::run(*Native, ops, std::move(args)...);
  }
};

template <class Kind, class... Args>
auto call(at::TensorList operands, Args&&... args) {
  return Kernels<Kind>::op().call(operands, std::forward<Args>(args)...);
}

std::optional<c10::string_view> viewOf(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  return c10::string_view(*s);
}

}  // namespace

at::Tensor pairwise(at::TensorList operands, const std::string& expr) {
  return call<PairwiseKind>(operands, expr, at::IntArrayRef{});
}

at::Tensor reduce(at::TensorList operands, const std::string& expr, const std::string& reduction,
                  std::optional<std::vector<int64_t>> dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                  const std::optional<std::string>& epilogue) {
  at::OptionalIntArrayRef d;
  if (dim) d = at::IntArrayRef(*dim);
  return call<ReduceKind>(operands, expr, reduction, d, keepdim, dtype, viewOf(epilogue), at::IntArrayRef{});
}

std::tuple<at::Tensor, at::Tensor> reduceWithIndices(at::TensorList operands, const std::string& expr,
                                                     const std::string& reduction, int64_t dim, bool keepdim,
                                                     const std::optional<std::string>& epilogue) {
  return call<ReduceWithIndicesKind>(operands, expr, reduction, dim, keepdim, viewOf(epilogue));
}

at::Tensor softmax(at::TensorList operands, const std::string& expr, int64_t dim, bool log) {
  return call<SoftmaxKind>(operands, expr, dim, log);
}

at::Tensor reduceChain(at::TensorList operands, const std::string& expr, const std::vector<std::string>& stages) {
  return call<ReduceChainKind>(operands, expr, stages);
}

std::tuple<at::Tensor, at::Tensor> reduceChainWithIndices(at::TensorList operands, const std::string& expr,
                                                          const std::vector<std::string>& stages) {
  return call<ReduceChainWithIndicesKind>(operands, expr, stages);
}

std::vector<at::Tensor> reduceSweep(at::TensorList operands, const std::string& expr,
                                    const std::vector<std::string>& stages) {
  return call<ReduceSweepKind>(operands, expr, stages);
}

}  // namespace tsfuse

TORCH_LIBRARY(tsfuse, m) {
#define TSFUSE_FUSED_OP(Kind, name, schema) m.def(name schema);
#include "kernels/runtime/fused_ops.def"
  // Helper ops the passes insert, not fused op kinds:
  // a stand-in for the expression's value to readers of its metadata (kernels/runtime/shape_of.h);
  m.def("shape_of(Tensor[] operands, str expr) -> Tensor",
        [](at::TensorList operands, c10::string_view expr) { return tsfuse::shapeOf(operands, expr); });
  // and for a fused reduction's value (tsfuse::reduce's arguments but the donated list);
  m.def(
      "shape_of.reduced(Tensor[] operands, str expr, str reduction, int[]? dim, bool keepdim, ScalarType? dtype, "
      "str? epilogue) -> Tensor",
      [](at::TensorList operands, c10::string_view expr, c10::string_view reduction,
         std::optional<std::vector<int64_t>> dim, bool keepdim, std::optional<c10::ScalarType> dtype,
         const std::optional<std::string>& epilogue) {
        at::OptionalIntArrayRef d;
        if (dim) d = at::IntArrayRef(*dim);
        std::optional<c10::string_view> epi;
        if (epilogue) epi = *epilogue;
        const tsfuse::ReduceSpec spec = tsfuse::makeReduceSpec(reduction, d, keepdim, dtype, epi);
        return tsfuse::shapeOf(operands, expr, &spec);
      });
  // a Python number known only at run time as an operand: a 0-dim CPU tensor flagged as a wrapped
  // number, as ATen's Scalar overloads see it (passes/analysis/op_table.cpp, kRuntimeNumber);
  m.def("wrapped_number(Scalar s) -> Tensor", [](const c10::Scalar& s) { return tsfuse::reusedWrappedNumber(s); });
  // torchvision's _upcast (passes/fold_upcast.cpp): self itself, or a cast of it.
  m.def("upcast(Tensor(a) self) -> Tensor(a)",
        [](const at::Tensor& self) { return self.to(tsfuse::upcastDtype(self.scalar_type())); });
  // what an in-place op leaves in a fresh tensor (passes/canonicalize.cpp): value itself, or a cast of it.
  m.def("inplace_result(Tensor(a) value, Tensor self) -> Tensor(a)", &tsfuse::inplaceResult);
  // max/min(self, dim, keepdim)'s values when the indices are unused (passes/canonicalize.cpp): a
  // reduction the passes fuse as amax/amin whose gradient, as max/min's, goes to the one index.
  m.def("extremum_values(Tensor self, int dim, bool keepdim, bool max) -> Tensor", &tsfuse::extremumValuesOp);
  // max/min(self, dim, keepdim) and argmax/argmin(self, dim, keepdim) no fused op took
  // (passes/native_extrema.cpp): the same results, by the fused kernels where ATen's are slow.
  m.def("extremum(Tensor self, int dim, bool keepdim, bool max) -> (Tensor values, Tensor indices)",
        &tsfuse::extremumOp);
  m.def("arg_extremum(Tensor self, int dim, bool keepdim, bool max) -> Tensor", &tsfuse::argExtremumOp);
  // a piece of a cat or stack whose reduction became elementwise (passes/split_cat_reductions.cpp):
  // piece itself, or that op's error.
  m.def("cat_piece(Tensor(a) piece, Tensor first, int entry, int dim, bool stack) -> Tensor(a)", &tsfuse::catPiece);
  // the mask of x[mask] = value where canonicalize made it a where (passes/canonicalize.cpp): mask
  // itself, or index_put_'s error.
  m.def("index_mask(Tensor(a) mask, Tensor self) -> Tensor(a)", &tsfuse::indexMask);
  // an operand a later in-place op writes (passes/snapshot_written_operands.cpp): self itself, or a
  // copy where the fused op reading `operands` will save them for its backward (grad mode, one of
  // them requires grad). A wrapped number (a number read at run time) is never written, and a copy
  // would not be one (the fused op would not read it by value): itself.
  m.def("saved_operand(Tensor(a) self, Tensor[] operands) -> Tensor(a)",
        [](const at::Tensor& self, at::TensorList operands) {
          if (at::GradMode::is_enabled() && !tsfuse::isWrappedNumber(self))
            for (const at::Tensor& t : operands)
              if (t.defined() && t.requires_grad()) return self.clone();
          return self;
        });
  // max/min(dim)'s values over a stack's pieces, joined (passes/split_cat_reductions.cpp): maximum's
  // or minimum's value, the gradient by max/min(dim)'s rule (kernels/ir/ops.def).
  m.def("max_join(Tensor piece, Tensor kept) -> Tensor",
        [](const at::Tensor& piece, const at::Tensor& kept) { return tsfuse::extremumJoin(piece, kept, true); });
  m.def("min_join(Tensor piece, Tensor kept) -> Tensor",
        [](const at::Tensor& piece, const at::Tensor& kept) { return tsfuse::extremumJoin(piece, kept, false); });
  // how fused work has run so far (tsfuse::pathCounts, include/tsfuse/ops.h).
  m.def("path_counts() -> Dict(str, int)", [] {
    const tsfuse::PathCounts c = tsfuse::pathCounts();
    c10::Dict<std::string, int64_t> d;
    d.insert("compiled_tiles", c.compiledTiles);
    d.insert("compiled_pieces", c.compiledPieces);
    d.insert("interpreted_tiles", c.interpretedTiles);
    d.insert("interpreted_steps", c.interpretedSteps);
    d.insert("aten_tile_ops", c.atenTileOps);
    d.insert("chunked_calls", c.chunkedCalls);
    d.insert("small_calls", c.smallCalls);
    return d;
  });
}

TORCH_LIBRARY_IMPL(tsfuse, Autograd, m) {
#define TSFUSE_FUSED_OP(Kind, name, schema) m.impl(name, &tsfuse::Kernels<tsfuse::Kind>::autograd);
#include "kernels/runtime/fused_ops.def"
}

TORCH_LIBRARY_IMPL(tsfuse, Meta, m) {
#define TSFUSE_FUSED_OP(Kind, name, schema) m.impl(name, &tsfuse::Kernels<tsfuse::Kind>::meta);
#include "kernels/runtime/fused_ops.def"
}

TORCH_LIBRARY_IMPL(tsfuse, CPU, m) {
#define TSFUSE_FUSED_OP(Kind, name, schema) m.impl(name, &tsfuse::Kernels<tsfuse::Kind>::backend<&tsfuse::kCpuNative>);
#include "kernels/runtime/fused_ops.def"
}

#if defined(TSFUSE_WITH_CUDA)
TORCH_LIBRARY_IMPL(tsfuse, CUDA, m) {
#define TSFUSE_FUSED_OP(Kind, name, schema) m.impl(name, &tsfuse::Kernels<tsfuse::Kind>::backend<&tsfuse::kCudaNative>);
#include "kernels/runtime/fused_ops.def"
}
#endif

// Devices without a native kernel get the exact chunked ATen path: bounded intermediates, the
// results of eager.
TORCH_LIBRARY_IMPL(tsfuse, CompositeExplicitAutograd, m) {
#define TSFUSE_FUSED_OP(Kind, name, schema) m.impl(name, &tsfuse::Kernels<tsfuse::Kind>::backend<&tsfuse::kNoNative>);
#include "kernels/runtime/fused_ops.def"
}
