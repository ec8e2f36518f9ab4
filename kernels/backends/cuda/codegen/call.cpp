// Picks a call's skeleton and binds its index parameters (kernels/backends/cuda/codegen/call.h).
#include "kernels/backends/cuda/codegen/call.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tsfuse::cuda {
namespace {

// A coalesced space's sizes and element strides per operand; a space without dims (every dim of
// size 1) is one dim of size 1.
struct Dims {
  std::vector<int64_t> size;
  std::vector<std::vector<int64_t>> stride;  // [operand][dim], elements
};

Dims dimsOf(const SubSpace& s, const std::vector<BroadcastView>& views) {
  Dims d;
  d.size.assign(s.size.begin(), s.size.end());
  d.stride.resize(views.size());
  for (size_t v = 0; v < views.size(); ++v)
    for (int64_t b : s.stride[v]) d.stride[v].push_back(b / views[v].elemSize);
  if (d.size.empty()) {
    d.size.push_back(1);
    for (auto& st : d.stride) st.push_back(0);
  }
  return d;
}

// The largest element offset any operand reaches (strides are never negative in ATen).
int64_t span(const Dims& d, size_t v) {
  int64_t s = 0;
  for (size_t j = 0; j < d.size.size(); ++j) s += (d.size[j] - 1) * d.stride[v][j];
  return s;
}

}  // namespace

std::optional<CallKernel> kernelForCall(const Expr& e, at::TensorList operands, const ReduceSpec* reduce,
                                        const Analysis& an, const IterationPlan& plan, const CallOptions& opt,
                                        std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<CallKernel> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (plan.unsupported) return no(plan.unsupported);
  const auto target = opt.cudaRules ? lower::Target::device() : lower::Target::deviceWithCpuRules();
  auto prog = lower::lowerExpr(e, an, mainOperands(e, operands), target, why);
  if (!prog) return std::nullopt;
  const Reduction kind = reduce ? reduce->kind : Reduction::Sum;
  if (reduce && (kind == Reduction::Sum || kind == Reduction::Mean || kind == Reduction::Prod ||
                 kind == Reduction::Logsumexp || kind == Reduction::Norm)) {
    // These reduce the value converted to their result dtype (ATen accumulates in it).
    if (!tyOf(an.reducedDtype)) return no(std::string("reduced dtype ") + c10::toString(an.reducedDtype));
    prog->castResultTo(an.reducedDtype);
  }
  // An epilogue that keeps the reduced shape runs on each output: its leaf 0 is the reduced value.
  std::optional<lower::Program> epi;
  if (reduce && reduce->epilogue) {
    if (!an.epilogue || !an.epilogueKeepsShape) return no("an epilogue that changes the reduced shape");
    std::vector<at::Tensor> leaves{at::empty({0}, at::TensorOptions().dtype(an.reducedDtype))};
    const at::TensorList epiOps = epilogueOperands(e, operands);
    leaves.insert(leaves.end(), epiOps.begin(), epiOps.end());
    epi = lower::lowerExpr(*reduce->epilogue, *an.epilogue, leaves, target, why);
    if (!epi) return std::nullopt;
  }

  CallKernel k;
  k.program = std::move(*prog);
  const Dims kept = dimsOf(plan.merged, plan.views);
  Dims red;
  k.numOut = plan.merged.numel();
  k.spec.keptRank = static_cast<int>(kept.size.size());
  k.spec.cudaRules = opt.cudaRules;
  if (reduce) {
    red = dimsOf(plan.reduced, plan.views);
    k.count = plan.reduced.numel();
    k.spec.reducedRank = static_cast<int>(red.size.size());
    k.spec.reduction = reduce->kind;
    k.spec.reducedDtype = an.reducedDtype;
    k.spec.normOrder = reduce->p;
    k.spec.correction = reduce->correction;
  }
  // Two kept dims [N, M]: how each operand varies over them, for the tiled skeletons.
  bool rowsOrCols = false, full = false;
  if (k.spec.keptRank == 2)
    for (int l = 0; l < k.program.numLeaves; ++l) {
      const bool n = !k.program.hostLeaf[l] && kept.stride[l][0] != 0,
                 m = !k.program.hostLeaf[l] && kept.stride[l][1] != 0;
      k.spec.access.push_back(n && m ? Access2::Full : n ? Access2::Row : m ? Access2::Col : Access2::Scalar);
      rowsOrCols |= n != m;
      full |= n && m;
    }
  // Which skeletons can run the call at all; the sizes below only pick among them.
  const bool fewFields = !reduce || !(reduce->kind == Reduction::Logsumexp || reduce->variance());
  auto applies = [&](Kind s) {
    switch (s) {
      case Kind::Map:
        return !reduce;
      case Kind::Pair2:
        return !reduce && k.spec.keptRank == 2;
      case Kind::ReduceThread:
      case Kind::ReduceBlock:
        return reduce != nullptr;
      case Kind::Gemm:
        return reduce && k.spec.keptRank == 2 && !full && k.spec.reducedRank == 1 && fewFields;
    }
    return false;
  };
  const int64_t N = k.spec.keptRank == 2 ? kept.size[0] : 0, M = k.spec.keptRank == 2 ? kept.size[1] : 0;
  if (!reduce) {
    // A pairwise map (row and column operands over a wide enough M): tiles with staged operands.
    k.spec.kind = applies(Kind::Pair2) && rowsOrCols && M >= 32 ? Kind::Pair2 : Kind::Map;
  } else if (applies(Kind::Gemm) && rowsOrCols && k.count >= kGemmK && M >= 16 && N >= 16) {
    k.spec.kind = Kind::Gemm;  // broadcast-then-reduce over one dim K into [N, M]
  } else {
    // Few long rows: a block per output; otherwise a thread per output walking its row in order.
    k.spec.kind = k.numOut <= 4096 && k.count >= 256 ? Kind::ReduceBlock : Kind::ReduceThread;
  }
  if (opt.kind) {
    if (!applies(*opt.kind)) return no(std::string("skeleton ") + kindName(*opt.kind) + " does not apply to this call");
    k.spec.kind = *opt.kind;
  }
  k.spec.blockSize = k.spec.kind == Kind::Pair2 ? 128 : 256;
  Dims epiDims;
  if (epi) {
    SubSpace space = plan.epilogueSpace;
    space.coalesce();
    epiDims = dimsOf(space, plan.epilogueViews);
    k.spec.epilogueRank = static_cast<int>(epiDims.size.size());
  }
  bool fits = k.numOut + kMaxGridThreads < (int64_t(1) << 31) && k.count + kMaxGridThreads < (int64_t(1) << 31);
  for (size_t v = 0; v < plan.views.size(); ++v)
    fits = fits && span(kept, v) + (reduce ? span(red, v) : 0) < (int64_t(1) << 31);
  for (size_t v = 0; v < plan.epilogueViews.size() && epi; ++v) fits = fits && span(epiDims, v) < (int64_t(1) << 31);
  k.spec.index64 = opt.index64.value_or(!fits);
  if (!k.spec.index64 && !fits) return no("32-bit indexing forced on a call that needs 64-bit offsets");

  auto src = emitKernel(k.program, k.spec, why, epi ? &*epi : nullptr);
  if (!src) return std::nullopt;
  k.source = std::move(*src);

  // The index parameters, in emit.h's order.
  const int L = k.program.numLeaves;
  k.index.push_back(k.numOut);
  for (int64_t s : kept.size) k.index.push_back(s);
  for (int l = 0; l < L; ++l)
    if (!k.program.hostLeaf[l]) k.index.insert(k.index.end(), kept.stride[l].begin(), kept.stride[l].end());
  if (reduce) {
    k.index.push_back(k.count);
    for (int64_t s : red.size) k.index.push_back(s);
    for (int l = 0; l < L; ++l)
      if (!k.program.hostLeaf[l]) k.index.insert(k.index.end(), red.stride[l].begin(), red.stride[l].end());
  }
  if (epi) {
    k.epilogue = std::move(*epi);
    for (int64_t s : epiDims.size) k.index.push_back(s);
    for (int l = 1; l < k.epilogue->numLeaves; ++l)
      if (!k.epilogue->hostLeaf[l])
        k.index.insert(k.index.end(), epiDims.stride[l - 1].begin(), epiDims.stride[l - 1].end());
  }
  return k;
}

LaunchShape launchShape(const CallKernel& k, int64_t maxBlocks) {
  LaunchShape s;
  int64_t work = k.numOut;  // blocks that have something to do
  switch (k.spec.kind) {
    case Kind::Map:
    case Kind::ReduceThread:
      s.threads = 256;
      work = (k.numOut + s.threads - 1) / s.threads;
      break;
    case Kind::ReduceBlock:
      s.threads = k.spec.blockSize;
      break;
    case Kind::Pair2: {
      s.threads = k.spec.blockSize;
      const int64_t N = k.index.at(1), M = k.index.at(2);  // numOut, then the kept sizes
      work = ((N + kPairRows - 1) / kPairRows) * ((M + s.threads - 1) / s.threads);
      break;
    }
    case Kind::Gemm: {
      s.threads = 256;
      const int64_t N = k.index.at(1), M = k.index.at(2);
      work = ((N + kGemmTile - 1) / kGemmTile) * ((M + kGemmTile - 1) / kGemmTile);
      break;
    }
  }
  const int64_t cap = std::min<int64_t>(maxBlocks, kMaxGridThreads / s.threads);
  s.blocks = std::max<int64_t>(1, std::min<int64_t>(cap, work));
  return s;
}

std::vector<HostArg> valueArgs(const CallKernel& k, at::TensorList operands) {
  std::vector<HostArg> out(k.source.params.size());
  size_t indexAt = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const Param& p = k.source.params[i];
    if (p.kind == Param::HostValue) {
      out[i] = hostArg(p, operands[p.leaf]);
    } else if (p.kind == Param::Literal) {
      const auto mainLiterals = static_cast<int>(k.program.literals.size());
      const lower::Program& prog = p.leaf < mainLiterals ? k.program : *k.epilogue;
      const uint64_t v = literalArg(prog, prog.literals.at(p.leaf < mainLiterals ? p.leaf : p.leaf - mainLiterals));
      out[i].size = 8;
      std::memcpy(out[i].bytes, &v, 8);
    } else if (p.kind == Param::Index) {
      const int64_t v = k.index.at(indexAt++);
      const int32_t v32 = static_cast<int32_t>(v);
      out[i].size = p.type == Ty::I64 ? 8 : 4;
      std::memcpy(out[i].bytes, p.type == Ty::I64 ? static_cast<const void*>(&v) : &v32, out[i].size);
    }
  }
  return out;
}

HostArg hostArg(const Param& p, const at::Tensor& value) {
  const at::Tensor v = value.to(scalarTypeOf(mathTy(p.type)));
  HostArg a;
  a.size = static_cast<size_t>(v.element_size());
  std::memcpy(a.bytes, v.const_data_ptr(), a.size);
  return a;
}

}  // namespace tsfuse::cuda
