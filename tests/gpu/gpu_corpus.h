// The corpus of the generated-kernel tests (tests/gpu): seed workloads (IoU intersection,
// similarity, nearest neighbour), the registry's natively lowered ops one by one, and random
// programs drawn from the registry (kernels/ir/ops.def) like the fuzzer's. Each case is a call:
// expression, CPU operands, optional reduction. The NVRTC test compiles its kernels for sm_80 and
// sm_90; the PoCL test runs them against eager CPU.
#pragma once

#include "test_util.h"

#include "kernels/reference/analysis.h"
#include "kernels/reference/aten_eval.h"
#include "kernels/backends/cuda/codegen/call.h"
#include "kernels/ir/op_registry.h"

#include <initializer_list>
#include <memory>

namespace tsfuse_gpu {

using T = std::vector<at::Tensor>;
using tsfuse_test::Gen;

struct GpuCase {
  std::string label, expr;
  T ops;
  std::optional<tsfuse::ReduceSpec> reduce;
};

inline tsfuse::ReduceSpec red(tsfuse::Reduction k, std::optional<std::vector<int64_t>> dims, bool keepdim = false) {
  tsfuse::ReduceSpec r;
  r.kind = k;
  r.dims = std::move(dims);
  r.keepdim = keepdim;
  return r;
}

// Whether a kernel text, past the prelude that defines them all, uses one of the prelude's macros.
inline bool bodyCalls(const std::string& kernelText, std::initializer_list<const char*> macros) {
  const size_t body = std::string(tsfuse::cuda::prelude()).size();
  for (const char* m : macros)
    if (kernelText.find(m, body) != std::string::npos) return true;
  return false;
}

// Whether a kernel text calls the prelude's libm / libdevice functions (exp, log, pow, sin, cos,
// atan, tanh: a program's, or logsumexp's and a norm's). Their results are a few ulp apart between
// math libraries (PoCL's against eager CPU: a tolerance), and libdevice's contain FMAs by design.
inline bool callsLibm(const std::string& kernelText) {
  return bodyCalls(kernelText, {"TSF_EXP_", "TSF_LOG_", "TSF_POW_", "TSF_SIN_", "TSF_COS_", "TSF_ATAN_", "TSF_TANH_"});
}

// A call analysed and planned, ready for kernelForCall.
struct Prepared {
  std::shared_ptr<tsfuse::Expr> e;
  std::optional<tsfuse::Analysis> an;
  std::optional<tsfuse::IterationPlan> plan;
};

inline Prepared prepare(const GpuCase& c) {
  Prepared p;
  p.e = std::make_shared<tsfuse::Expr>(tsfuse::Expr::parse(c.expr));
  p.an = tsfuse::analyze(*p.e, c.ops, c.reduce ? &*c.reduce : nullptr);
  if (p.an) p.plan = tsfuse::IterationPlan::make(*p.e, c.ops, c.reduce ? &*c.reduce : nullptr, *p.an, true);
  return p;
}

// Eager's results (values, and max/min's indices; nullopt when eager raises). The operands of a
// reduction's epilogue follow the expression's own.
inline std::optional<std::vector<at::Tensor>> eagerOf(const GpuCase& c) {
  try {
    tsfuse::Expr e = tsfuse::Expr::parse(c.expr);
    at::Tensor v = tsfuse::evalAten(e, tsfuse::mainOperands(e, c.ops));
    if (!c.reduce) return std::vector<at::Tensor>{v};
    std::vector<at::Tensor> outs = tsfuse::applyReductionAll(*c.reduce, v);
    if (c.reduce->epilogue) outs[0] = tsfuse::applyEpilogue(*c.reduce, outs[0], tsfuse::epilogueOperands(e, c.ops));
    return outs;
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

inline const char* kIoU =
    "v1: minimum($0, $1); maximum($2, $3); sub(%0, %1); clamp(%2, 0, None); minimum($4, $5); "
    "maximum($6, $7); sub(%4, %5); clamp(%6, 0, None); mul(%3, %7)";

inline T iouOperands(Gen& g, int64_t N, int64_t M, at::ScalarType dt) {
  at::Tensor b1 = g.tensor({N, 4}, dt, tsfuse_test::kSignedZero), b2 = g.tensor({M, 4}, dt, tsfuse_test::kSignedZero);
  auto col = [&](const at::Tensor& b, int k) { return b.narrow(1, k, 1); };      // [N, 1], stride 4
  auto row = [&](const at::Tensor& b, int k) { return b.narrow(1, k, 1).t(); };  // [1, M]
  return {col(b1, 3), row(b2, 3), col(b1, 1), row(b2, 1), col(b1, 2), row(b2, 2), col(b1, 0), row(b2, 0)};
}

// Seed workloads and hand-written forms: maps over edge shapes, tails and layouts, and the
// reductions of each kind along leading, trailing and several dims.
inline std::vector<GpuCase> seedCases(uint64_t seed) {
  using tsfuse::Reduction;
  Gen g(seed);
  std::vector<GpuCase> cs;
  for (at::ScalarType dt : {at::kFloat, at::kDouble})
    for (auto [N, M] : {std::pair<int64_t, int64_t>{1, 1}, {37, 29}, {300, 257}, {17, 1}, {0, 5}})
      cs.push_back({"iou", kIoU, iouOperands(g, N, M, dt), {}});
  const std::string sim = "v1: sub($0, $1); abs(%0); lt(%1, 1)";
  for (auto [S, D] : {std::pair<int64_t, int64_t>{64, 40}, {3, 65}, {1, 130}, {300, 7}}) {
    at::Tensor x = g.tensor({S, D}, at::kFloat), y = g.tensor({S, D}, at::kFloat);
    T ops = {x.unsqueeze(2), y.unsqueeze(1)};
    cs.push_back({"similarity sum", sim, ops, red(Reduction::Sum, std::vector<int64_t>{0})});
    cs.push_back({"similarity any", sim, ops, red(Reduction::Any, std::vector<int64_t>{0}, true)});
  }
  const std::string dist = "v1: sub($0, $1); abs(%0)";
  at::Tensor a = g.tensor({70, 1}, at::kFloat, tsfuse_test::kNaN), b = g.tensor({1, 600}, at::kFloat);
  at::Tensor ia = g.tensor({70, 1}, at::kInt), ib = g.tensor({1, 600}, at::kInt);
  for (Reduction r : {Reduction::Argmin, Reduction::Argmax, Reduction::Amax, Reduction::Amin, Reduction::Sum,
                      Reduction::Mean, Reduction::Any, Reduction::All})
    for (int64_t d : {0, 1}) {
      cs.push_back({"nearest", dist, {a, b}, red(r, std::vector<int64_t>{d})});
      if (r != Reduction::Mean) cs.push_back({"nearest int", dist, {ia, ib}, red(r, std::vector<int64_t>{d})});
    }
  // The reductions with a state of several fields, and max/min's two outputs.
  for (Reduction r : {Reduction::Max, Reduction::Min, Reduction::Logsumexp, Reduction::Var, Reduction::Std})
    for (int64_t d : {0, 1}) cs.push_back({"state", dist, {a, b}, red(r, std::vector<int64_t>{d})});
  for (Reduction r : {Reduction::Max, Reduction::Min})
    for (int64_t d : {0, 1}) cs.push_back({"state int", dist, {ia, ib}, red(r, std::vector<int64_t>{d})});
  at::Tensor la = g.tensor({30, 1}, at::kFloat, tsfuse_test::kNaNInf), lb = g.tensor({1, 400}, at::kFloat);
  cs.push_back({"logsumexp inf", "v1: add($0, $1)", {la, lb}, red(Reduction::Logsumexp, std::vector<int64_t>{1})});
  for (double p : {2.0, 1.0, 0.0, 3.0, double(INFINITY), -double(INFINITY)}) {
    tsfuse::ReduceSpec n = red(Reduction::Norm, std::vector<int64_t>{1});
    n.p = p;
    cs.push_back({"norm", dist, {a, b}, n});
  }
  tsfuse::ReduceSpec unbiased = red(Reduction::Var, std::vector<int64_t>{0});
  unbiased.correction = 0;
  cs.push_back({"var correction 0", dist, {a, b}, unbiased});
  // Epilogues over the reduced value: a literal, an operand of the output's shape, a host scalar.
  for (Reduction r : {Reduction::Sum, Reduction::Amax, Reduction::Mean}) {
    tsfuse::ReduceSpec s = red(r, std::vector<int64_t>{1});
    s.epilogue = std::make_shared<tsfuse::Expr>(tsfuse::Expr::parse("v1: mul($0, $1); add(%0, 1); sqrt(%1)"));
    cs.push_back({"epilogue", dist, {a, b, g.tensor({70}, at::kFloat)}, s});
    s.epilogue = std::make_shared<tsfuse::Expr>(tsfuse::Expr::parse("v1: neg($0); clamp(%0, -2, None)"));
    cs.push_back({"epilogue literal", dist, {a, b}, s});
  }
  tsfuse::ReduceSpec keep = red(Reduction::Sum, std::vector<int64_t>{0}, true);
  keep.epilogue = std::make_shared<tsfuse::Expr>(tsfuse::Expr::parse("v1: div($0, $1)"));
  cs.push_back({"epilogue keepdim host", dist, {a, b, at::scalar_tensor(4.0, at::kDouble)}, keep});
  keep.epilogue = std::make_shared<tsfuse::Expr>(tsfuse::Expr::parse("v1: sub($1, $0)"));
  cs.push_back({"epilogue keepdim strided", dist, {a, b, g.layout(g.tensor({1, 600}, at::kFloat), 2)}, keep});
  // Ties for argmin/argmax: few distinct values.
  at::Tensor ta = at::randint(0, 3, {40, 1}, g.gen, at::kLong).to(at::kFloat),
             tb = at::randint(0, 3, {1, 900}, g.gen, at::kLong).to(at::kFloat);
  for (Reduction r : {Reduction::Argmin, Reduction::Argmax})
    for (int64_t d : {0, 1}) cs.push_back({"ties", dist, {ta, tb}, red(r, std::vector<int64_t>{d})});
  at::Tensor p = g.tensor({4, 1, 6, 3}, at::kInt), q = g.tensor({5, 6, 1}, at::kInt);
  for (auto dims : {std::vector<int64_t>{0, 2}, std::vector<int64_t>{1}, std::vector<int64_t>{}})
    cs.push_back({"generic sum", "v1: mul($0, $1)", {p, q}, red(Reduction::Sum, dims)});
  cs.push_back({"prod",
                "v1: mul($0, $1)",
                {g.tensor({3, 1, 4}, at::kLong), g.tensor({5, 4}, at::kLong)},
                red(Reduction::Prod, std::vector<int64_t>{0, 2})});
  cs.push_back({"full amax",
                "v1: sub($0, $1)",
                {g.tensor({33, 1}, at::kDouble, 3), g.tensor({1, 41}, at::kDouble)},
                red(Reduction::Amax, std::nullopt)});
  const std::string where = "v1: sub($0, $1); abs(%0); lt(%1, 1); where(%2, $0, $1)";
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kByte, at::kShort, at::kChar})
    for (int l = 0; l < 4; ++l)
      cs.push_back(
          {"where layouts", where, {g.layout(g.tensor({33, 1, 5}, dt), l), g.layout(g.tensor({7, 5}, dt), l + 1)}, {}});
  cs.push_back(
      {"rank 4",
       "v1: add($0, $1); mul(%0, $2)",
       {g.layout(g.tensor({3, 1, 5, 2}, at::kFloat), 1), g.tensor({4, 1, 2}, at::kFloat), g.tensor({}, at::kFloat)},
       {}});
  cs.push_back({"scalar operand",
                "v1: add($0, $2); mul(%0, $1); div(%1, 3.0)",
                {g.tensor({64, 1}, at::kFloat), g.tensor({1, 48}, at::kFloat), at::scalar_tensor(0.1, at::kDouble)},
                {}});
  return cs;
}

// The benchmark workloads' fused calls (bench/workloads.py) that one generated kernel covers:
// anchor matching (the full IoU, then max with its index over the ground truths or the anchors)
// L2 distances with D = 3 and 64 (a sum of squares over D, then sqrt on each output), and the
// Gaussian kernel product's fused last stage (kernels/runtime/chain.h: the weighted sum over M of one
// slab's [S, M] kernel values, unsqueezed, times b [1, M, 16]), in float32 and float16. (The
// chains' stage 0 on a slab is the distances' kernel above.)
inline std::vector<GpuCase> benchCases(uint64_t seed) {
  using tsfuse::Reduction;
  Gen g(seed);
  std::vector<GpuCase> cs;
  const std::string iou = std::string(kIoU) + "; add($8, $9); sub(%9, %8); div(%8, %10)";
  for (at::ScalarType dt : {at::kFloat, at::kHalf}) {
    T ops = iouOperands(g, 97, 61, dt);
    ops.push_back(g.tensor({97, 1}, dt).abs());
    ops.push_back(g.tensor({1, 61}, dt).abs());
    for (Reduction r : {Reduction::Max, Reduction::Argmax})
      for (int64_t d : {0, 1}) cs.push_back({"anchor matching", iou, ops, red(r, std::vector<int64_t>{d})});
    for (int64_t D : {3, 64}) {
      tsfuse::ReduceSpec l2 = red(Reduction::Sum, std::vector<int64_t>{2});
      l2.epilogue = std::make_shared<tsfuse::Expr>(tsfuse::Expr::parse("v1: sqrt($0)"));
      at::Tensor x = g.tensor({45, 1, D}, dt), y = g.tensor({1, 38, D}, dt);
      cs.push_back({"l2 distances", "v1: sub($0, $1); mul(%0, %0)", {x, y}, l2});
    }
    // Positive terms (kernel values times weights of one sign): the check's relative tolerance
    // then bounds a sum in another order.
    at::Tensor slab = g.tensor({6, 53}, dt).abs().unsqueeze(2), b = g.tensor({1, 53, 16}, dt).abs();
    cs.push_back({"kernel product stage", "v1: mul($0, $1)", {slab, b}, red(Reduction::Sum, std::vector<int64_t>{1})});
  }
  return cs;
}

// One call per natively lowered registry op (all dtypes it accepts), on two broadcast operands
// with specials: every primitive's text runs.
inline std::vector<GpuCase> registryCases(uint64_t seed) {
  Gen g(seed);
  std::vector<GpuCase> cs;
  for (const tsfuse::OpDef& d : tsfuse::allOps()) {
    if (d.rule == tsfuse::LowerRule::Aten) continue;
    const std::string sig = d.signature;
    for (at::ScalarType dt :
         {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kByte, at::kBool, at::kHalf, at::kBFloat16}) {
      std::string args;
      T ops;
      for (size_t k = 0; k < sig.size(); ++k) {
        std::string a;
        if (sig[k] == 'd')
          a = "float64";
        else if (sig[k] == 'c')
          a = "cpu";  // the operands' device (these cases run on the CPU: NVRTC, PoCL)
        else if (sig[k] == 's')
          a = "2";
        else if (sig[k] == 'o')
          a = k == 1 ? "-1" : "None";
        else {
          a = "$" + std::to_string(ops.size());
          const bool cond = d.rule == tsfuse::LowerRule::Where && k == 0;
          const bool mask = d.rule == tsfuse::LowerRule::MaskedFill && k == 1;
          ops.push_back(g.tensor(ops.size() % 2 ? std::vector<int64_t>{1, 19} : std::vector<int64_t>{23, 1},
                                 cond || mask ? at::kBool : dt, tsfuse_test::kAllSpecials));
        }
        args += (k ? ", " : "") + a;
      }
      cs.push_back({std::string("op ") + d.name, std::string("v1: ") + d.name + "(" + args + ")", ops, {}});
    }
  }
  return cs;
}

// Random programs from the registry: 2-6 instructions of natively lowered ops over 2-3 operands
// of random dtypes and broadcast shapes; a third of them reduced. Only programs eager accepts.
inline std::vector<GpuCase> randomCases(uint64_t seed, int n) {
  Gen g(seed);
  std::vector<const tsfuse::OpDef*> defs;
  // (Not cat_piece: its calls are the pass's, whose entry 0 checks nothing as `first` is the piece.)
  for (const tsfuse::OpDef& d : tsfuse::allOps())
    if (d.rule != tsfuse::LowerRule::Aten && !d.has(tsfuse::kChecksSizes)) defs.push_back(&d);
  const at::ScalarType dts[] = {at::kFloat, at::kFloat, at::kDouble, at::kInt,
                                at::kLong,  at::kByte,  at::kBool,   at::kHalf};
  const tsfuse::Reduction reds[] = {tsfuse::Reduction::Sum, tsfuse::Reduction::Amax, tsfuse::Reduction::Argmin,
                                    tsfuse::Reduction::Any, tsfuse::Reduction::Prod, tsfuse::Reduction::Mean};
  std::vector<GpuCase> cs;
  while (static_cast<int>(cs.size()) < n) {
    const int numIn = static_cast<int>(g.randint(2, 3)), numInstr = static_cast<int>(g.randint(2, 6));
    T ops;
    const int64_t N = g.randint(1, 40), M = g.randint(1, 40);
    for (int i = 0; i < numIn; ++i) {
      std::vector<int64_t> shape = i == 0   ? std::vector<int64_t>{N, 1}
                                   : i == 1 ? std::vector<int64_t>{1, M}
                                            : std::vector<int64_t>{N, M};
      const int specials = g.coin() ? tsfuse_test::kAllSpecials : tsfuse_test::kSignedZero;
      ops.push_back(g.layout(g.tensor(shape, dts[g.randint(0, 7)], specials), static_cast<int>(g.randint(0, 3))));
    }
    std::string text = "v1: ";
    for (int k = 0; k < numInstr; ++k) {
      const tsfuse::OpDef& d = *defs[g.randint(0, static_cast<int64_t>(defs.size()) - 1)];
      const std::string sig = d.signature;
      std::string args;
      for (size_t j = 0; j < sig.size(); ++j) {
        std::string a;
        const bool first = j == 0 && k > 0;
        if (sig[j] == 'd')
          a = g.coin() ? "float32" : "int32";
        else if (sig[j] == 'c')
          a = "cpu";
        else if (sig[j] == 's')
          a = g.coin() ? "2" : "0.5";
        else if (sig[j] == 'o')
          a = g.coin() ? "None" : (g.coin() ? "-1" : "1.5");
        else if (first)
          a = "%" + std::to_string(k - 1);
        else {
          const int64_t pick = g.randint(0, 9);
          if (pick < 5)
            a = "$" + std::to_string(g.randint(0, numIn - 1));
          else if (pick < 8 && k > 0)
            a = "%" + std::to_string(g.randint(0, k - 1));
          else
            a = g.coin() ? "3" : "-0.25";
        }
        args += (j ? ", " : "") + a;
      }
      text += (k ? "; " : "") + std::string(d.name) + "(" + args + ")";
    }
    GpuCase c{"random", text, ops, {}};
    if (g.randint(0, 2) == 0) c.reduce = red(reds[g.randint(0, 5)], std::vector<int64_t>{g.randint(0, 1)}, g.coin());
    try {
      tsfuse::Expr::parse(text).validate();
    } catch (const c10::Error&) {
      continue;
    }
    if (!eagerOf(c)) continue;  // eager raises (a dtype the op rejects): the fused op would too
    cs.push_back(std::move(c));
  }
  return cs;
}

}  // namespace tsfuse_gpu
