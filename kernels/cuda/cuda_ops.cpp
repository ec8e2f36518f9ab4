// CUDA kernels of the fused ops: the host side. Compiles the call's bytecode (Flavour::Cuda),
// describes the call's IterationPlan (kernels/plan/iteration.h: its coalesced kept and reduced
// spaces, each operand's access) as kernel parameters, picks a kernel (kernels/cuda/kernels.cu)
// and enqueues it on the current stream. Anything it does not cover declines to the exact chunked
// ATen path.
//
// NB: opt-in. The kernels have not been run on a GPU yet, so CUDA calls take them only when
// TSFUSE_CUDA_KERNELS=1; by default the chunked path runs (docs/cuda.md says how to flip this
// after a validated GPU run).
#include "kernels/bytecode_compile.h"
#include "kernels/cuda/params.h"
#include "kernels/cuda/cuda_ops.h"
#include "tsfuse/log.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdlib>
#include <cstring>

namespace tsfuse::cuda {
namespace {

bool enabled() {
  const char* v = std::getenv("TSFUSE_CUDA_KERNELS");
  return v && std::strcmp(v, "1") == 0;
}

// One of the plan's coalesced spaces as a kernel's Space: element strides per operand, and the
// output's in slot kMaxLeaves. The output is dense in the plan's kept order, so over the kept space
// its strides are row-major (`outputDims`) and over the reduced space 0.
bool toSpace(const SubSpace& s, const std::vector<BroadcastView>& views, bool outputDims, Space& out) {
  if (s.size.size() > static_cast<size_t>(kMaxKernelDims)) return false;
  out.nd = static_cast<int>(s.size.size());
  int64_t outStride = 1;
  for (int d = out.nd - 1; d >= 0; --d) {
    out.size[d] = s.size[d];
    for (size_t v = 0; v < views.size(); ++v) out.stride[v][d] = s.stride[v][d] / views[v].elemSize;
    out.stride[bc::kMaxLeaves][d] = outputDims ? outStride : 0;
    outStride *= s.size[d];
  }
  return true;
}

// How a 2-D kernel (lanes along the second of the plan's two coalesced kept dims) reads operand l.
Kind2 kind2(const IterationPlan& plan, int l) {
  const bool uniform = plan.mergedAccess[l] == Access::Uniform, sameRows = plan.merged.rowInvariant(l);
  return uniform ? (sameRows ? Kind2::Scalar : Kind2::Row) : (sameRows ? Kind2::Col : Kind2::Full);
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

at::Tensor runCudaOne(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                      const IterationPlan& plan, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return at::Tensor();
  };
  if (!enabled()) return no("TSFUSE_CUDA_KERNELS is not 1 (CUDA kernels are opt-in until validated on a GPU)");
  if (plan.unsupported) return no(plan.unsupported);
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
  const auto stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  auto dataOf = [&](int i) { return bc::isCpuScalar(operands[i]) ? nullptr : static_cast<const char*>(operands[i].const_data_ptr()); };

  Space ks;
  if (!toSpace(plan.merged, plan.views, true, ks)) return no("more than 6 dims after coalescing");
  at::Tensor out = an.allocOut(device);
  // Two kept dims: the output is row-major [N, M] (dense in the plan's order).
  const bool rowMajor2 = ks.nd == 2;

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
        P.kind[l] = kind2(plan, l);
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

  Space rs;
  if (!toSpace(plan.reduced, plan.views, false, rs)) return no("more than 6 reduced dims after coalescing");
  const int64_t count = plan.reduced.numel(), numOut = plan.merged.numel();
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
      P.kind[l] = kind2(plan, l);
      if (P.kind[l] == Kind2::Row) ok = ++rows <= 2;
      else if (P.kind[l] == Kind2::Col) ok = ++cols <= 2;
      else if (P.kind[l] == Kind2::Full) ok = false;  // depends on (k, n, m): nothing to reuse
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

}  // namespace

// The CUDA NativePath: the kernels cover one-output reductions without an epilogue; logsumexp,
// norm, var/std, max/min with indices and epilogues take the exact chunked path on CUDA.
Outputs runCuda(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                const IterationPlan& plan, std::string* why) {
  if (reduce && (reduce->epilogue || reduce->withIndices() || reduce->kind == Reduction::Logsumexp ||
                 reduce->kind == Reduction::Norm || reduce->variance())) {
    if (why) *why = std::string("no CUDA kernel for ") + reductionName(reduce->kind) +
                    (reduce->epilogue ? " with an epilogue" : "");
    return {};
  }
  at::Tensor out = runCudaOne(e, operands, reduce, an, plan, why);
  if (!out.defined()) return {};
  return {out};
}

}  // namespace tsfuse::cuda
