// CUDA kernels of the fused ops: the host side. Compiles the call's bytecode (Flavour::Cuda),
// describes the iteration space with the same coalesced sub-spaces the CPU path uses
// (kernels/cpu/gather.h), picks a kernel (kernels/cuda/kernels.cu) and enqueues it on the current
// stream. Anything it does not cover declines to the exact chunked ATen path.
//
// NB: opt-in. The kernels have not been run on a GPU yet, so CUDA calls take them only when
// TSFUSE_CUDA_KERNELS=1; by default the chunked path runs (docs/cuda.md says how to flip this
// after a validated GPU run).
#include "kernels/bytecode_compile.h"
#include "kernels/cpu/gather.h"
#include "kernels/cuda/params.h"
#include "kernels/fused_call.h"
#include "tsfuse/log.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <numeric>

namespace tsfuse::cuda {
namespace {

using cpu::BroadcastView;
using cpu::SubSpace;

bool enabled() {
  const char* v = std::getenv("TSFUSE_CUDA_KERNELS");
  return v && std::strcmp(v, "1") == 0;
}

// Dims of `t` (rank = shape's) with size > 1, outermost-first by stride (dense outputs only).
std::vector<int64_t> memoryOrder(const at::Tensor& t, const std::vector<int64_t>& dims) {
  std::vector<int64_t> order;
  for (int64_t d : dims)
    if (t.size(d) != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return t.stride(x) > t.stride(y); });
  return order;
}

bool toSpace(const SubSpace& s, const std::vector<BroadcastView>& views, Space& out) {
  if (s.size.size() > static_cast<size_t>(kMaxDims)) return false;
  out.nd = static_cast<int>(s.size.size());
  for (int d = 0; d < out.nd; ++d) {
    out.size[d] = s.size[d];
    for (size_t v = 0; v < views.size(); ++v) {
      const int slot = v + 1 == views.size() ? bc::kMaxLeaves : static_cast<int>(v);
      out.stride[slot][d] = views[v].elemSize ? s.stride[v][d] / views[v].elemSize : 0;
    }
  }
  return true;
}

RedSpec redSpecOf(const ReduceSpec& r, const bc::Program& p, c10::ScalarType outDtype, int64_t count) {
  RedSpec s;
  constexpr RKind kinds[] = {RKind::Sum, RKind::Mean, RKind::Prod, RKind::Max, RKind::Min,
                             RKind::Any, RKind::All, RKind::ArgMax, RKind::ArgMin};
  s.kind = kinds[static_cast<int>(r.kind)];
  const bc::DT vt = p.type[p.result];
  s.floating = vt == bc::DT::F16 || vt == bc::DT::BF16 || vt == bc::DT::F32 || vt == bc::DT::F64;
  bc::toDT(outDtype, s.outType);
  s.count = count;
  return s;
}

void check(cudaError_t err) { TORCH_CHECK(err == cudaSuccess, "tsfuse CUDA launch: ", cudaGetErrorString(err)); }

at::Tensor runCudaOne(const Expr& e, at::TensorList operands, const ReduceSpec* reduce,
                      const Analysis& an, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return at::Tensor();
  };
  if (!enabled()) return no("TSFUSE_CUDA_KERNELS is not 1 (CUDA kernels are opt-in until validated on a GPU)");
  at::IntArrayRef shape(an.shape);
  const int64_t R = static_cast<int64_t>(shape.size());
  if (R == 0 || R > cpu::kMaxDims) return no("0-dim value or rank above 25");
  if (an.valueShape != an.shape) return no("expression value is not the operands' broadcast");
  const c10::Device device = mainDevice(operands);
  if (!device.is_cuda()) return no("main device is not CUDA");
  for (int i = 0; i < e.numInputs; ++i)
    if (operands[i].device() != device && !bc::isCpuScalar(operands[i])) return no("operand on another device");

  std::optional<c10::ScalarType> resultAs;
  if (reduce && (reduce->kind == Reduction::Sum || reduce->kind == Reduction::Mean || reduce->kind == Reduction::Prod))
    resultAs = an.outDtype;
  auto prog = bc::compile(e, an, operands, bc::Flavour::Cuda, why, resultAs);
  if (!prog) return at::Tensor();

  c10::cuda::CUDAGuard guard(device);
  at::Tensor out = an.allocOut(device);
  std::vector<BroadcastView> views;  // operands, then the output (with reduced dims kept as 1)
  for (int i = 0; i < e.numInputs; ++i) {
    if (bc::isCpuScalar(operands[i])) views.emplace_back();  // preloaded: no data, no strides
    else views.emplace_back(operands[i], shape);
    if (views.back().stride.empty()) views.back().stride.assign(R, 0);
  }
  at::Tensor keep = out;
  std::vector<int64_t> rdims, kdims;
  if (reduce) {
    rdims = reducedDims(*reduce, R);
    if (!reduce->keepdim)
      for (int64_t d : rdims) keep = keep.unsqueeze(d);
  }
  for (int64_t d = 0; d < R; ++d)
    if (!std::binary_search(rdims.begin(), rdims.end(), d)) kdims.push_back(d);
  views.emplace_back(keep, shape);
  const auto stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  auto dataOf = [&](int i) { return bc::isCpuScalar(operands[i]) ? nullptr : static_cast<const char*>(operands[i].const_data_ptr()); };

  SubSpace kept = SubSpace::select(views, shape, memoryOrder(keep, kdims));
  kept.coalesce();
  Space ks;
  if (!toSpace(kept, views, ks)) return no("more than 6 dims after coalescing");
  const bool rowMajor2 = ks.nd == 2 && ks.stride[bc::kMaxLeaves][1] == 1 && ks.stride[bc::kMaxLeaves][0] == ks.size[1];

  if (!reduce) {
    if (rowMajor2) {  // (a) pairwise [N, M]
      Pair2Params P;
      P.prog = *prog;
      P.out = static_cast<char*>(out.data_ptr());
      P.outType = prog->type[prog->result];
      P.N = ks.size[0];
      P.M = ks.size[1];
      for (int l = 0; l < e.numInputs; ++l) {
        P.data[l] = dataOf(l);
        P.sn[l] = ks.stride[l][0];
        P.sm[l] = ks.stride[l][1];
        P.kind[l] = P.sn[l] == 0 ? (P.sm[l] == 0 ? Kind2::Scalar : Kind2::Col) : (P.sm[l] == 0 ? Kind2::Row : Kind2::Full);
      }
      check(launchPair2(P, stream));
      return out;
    }
    MapParams P;
    P.prog = *prog;
    P.out = static_cast<char*>(out.data_ptr());
    P.outType = prog->type[prog->result];
    P.numel = out.numel();
    P.space = ks;
    for (int l = 0; l < e.numInputs; ++l) P.data[l] = dataOf(l);
    check(launchMap(P, stream, sms));
    return out;
  }

  std::vector<int64_t> rorder;
  for (int64_t d : rdims)
    if (shape[d] != 1) rorder.push_back(d);
  SubSpace red = SubSpace::select(views, shape, rorder);
  red.coalesce();
  Space rs;
  if (!toSpace(red, views, rs)) return no("more than 6 reduced dims after coalescing");
  const int64_t count = red.numel(), numOut = kept.numel();
  const RedSpec spec = redSpecOf(*reduce, *prog, an.outDtype, count);

  // (b) [K] x [N, M] with operands of (k, n) / (k, m) / (k): GEMM-style tiles.
  if (rowMajor2 && rs.nd == 1 && ks.size[0] < (int64_t(65535) * 64)) {
    Gemm3Params P;
    int rows = 0, cols = 0;
    bool ok = true;
    for (int l = 0; l < e.numInputs && ok; ++l) {
      P.data[l] = dataOf(l);
      P.sk[l] = rs.stride[l][0];
      P.sn[l] = ks.stride[l][0];
      P.sm[l] = ks.stride[l][1];
      if (bc::isCpuScalar(operands[l]) || (P.sn[l] == 0 && P.sm[l] == 0)) P.kind[l] = Kind2::Scalar;
      else if (P.sm[l] == 0) P.kind[l] = Kind2::Row, ok = ++rows <= 2;
      else if (P.sn[l] == 0) P.kind[l] = Kind2::Col, ok = ++cols <= 2;
      else ok = false;  // depends on (k, n, m): nothing to reuse
    }
    if (ok) {
      P.prog = *prog;
      P.red = spec;
      P.out = static_cast<char*>(out.data_ptr());
      P.K = count;
      P.N = ks.size[0];
      P.M = ks.size[1];
      check(launchGemm3(P, stream));
      return out;
    }
  }
  // (c) one kept dim x one reduced dim.
  if (ks.nd == 1 && rs.nd == 1) {
    Reduce2Params P;
    P.prog = *prog;
    P.red = spec;
    P.out = static_cast<char*>(out.data_ptr());
    P.outStride = ks.stride[bc::kMaxLeaves][0];
    P.numOut = numOut;
    P.warpPerOutput = numOut < int64_t(sms) * 64;
    for (int l = 0; l < e.numInputs; ++l) {
      P.data[l] = dataOf(l);
      P.so[l] = ks.stride[l][0];
      P.sr[l] = rs.stride[l][0];
    }
    check(launchReduce2(P, stream));
    return out;
  }
  ReduceParams P;
  P.prog = *prog;
  P.red = spec;
  P.out = static_cast<char*>(out.data_ptr());
  P.numOut = numOut;
  P.kept = ks;
  P.reduced = rs;
  for (int l = 0; l < e.numInputs; ++l) P.data[l] = dataOf(l);
  check(launchReduce(P, stream, sms));
  return out;
}

// The CUDA NativePath: the kernels cover one-output reductions without an epilogue; logsumexp,
// norm, max/min with indices and epilogues take the exact chunked path on CUDA.
Outputs runCuda(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                std::string* why) {
  if (reduce && (reduce->epilogue || reduce->withIndices() || reduce->kind == Reduction::Logsumexp ||
                 reduce->kind == Reduction::Norm)) {
    if (why) *why = std::string("no CUDA kernel for ") + reductionName(reduce->kind) +
                    (reduce->epilogue ? " with an epilogue" : "");
    return {};
  }
  at::Tensor out = runCudaOne(e, operands, reduce, an, why);
  if (!out.defined()) return {};
  return {out};
}

at::Tensor pairwiseCuda(at::TensorList ops, c10::string_view expr) { return runFused(ops, expr, nullptr, runCuda); }

at::Tensor reduceCuda(at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                      at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                      std::optional<c10::string_view> epilogue) {
  ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, dtype, epilogue);
  return runFused(ops, expr, &spec, runCuda);
}

}  // namespace
}  // namespace tsfuse::cuda

TORCH_LIBRARY_IMPL(tsfuse, CUDA, m) {
  m.impl("pairwise", tsfuse::cuda::pairwiseCuda);
  m.impl("reduce", tsfuse::cuda::reduceCuda);
}
