// tsfuse::reduce_chain's autograd, for a chain of a sum or mean then a sum, mean, amax, amin,
// logsumexp, softmax or log_softmax (stage 1's adjoint, kernels/runtime/fused_grad.h, over its input
// value): the forward runs fused, and
// each operand's gradient is one more reduce_chain that recomputes what it reads, so neither pass
// stores a value larger than the operands and the output (and slabs). The Gaussian kernel sum:
//
//   forward   expr v1: sub($0, $1); pow(%0, 2)                               [N, M, D]
//             stage 0 sum(dim=[2]) |> v1: neg($0); div(%0, $1); exp(%1)     r0 -> v0 [N, M]
//             stage 1 sum(dim=[1])                                          -> [N]
//   d/dx      the same expr; stage 0 sum(dim=[2], keepdim=True)            r0 [N, M, 1]
//             stage 1 fused(<d expr/dx> * <d epilogue/d r0>(r0) * g; $2 = value)
//                     |> sum(dim=[1], keepdim=True)                         -> [N, 1, D] -> x's shape
//
// Stage 1's gradient reaches stage 0's value elementwise only where stage 1 does not broadcast that
// value (nor stage 0's epilogue the reduced value); elsewhere, and for other chains, the operand's
// gradient is ATen's autograd through the chain's reference (kernels/runtime/fused_grad.h).
#include "kernels/reference/analysis.h"
#include "kernels/reference/backward.h"
#include "kernels/reference/eval_fused.h"
#include "kernels/runtime/chain_grad.h"
#include "kernels/runtime/chain_text.h"
#include "kernels/runtime/fused_grad.h"
#include "kernels/runtime/reduce_spec.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <torch/csrc/autograd/custom_function.h>

#include <c10/core/WrapDimMinimal.h>

namespace tsfuse {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

}  // namespace

std::string grad::whyNotFused(const Chain& c) {
  if (c.stages.size() != 2) return "a chain of " + std::to_string(c.stages.size()) + " stages";
  const ReduceSpec &s0 = c.stages[0], &s1 = c.stages[1];
  if ((s0.kind != Reduction::Sum && s0.kind != Reduction::Mean) || s0.dtype)
    return "a first stage other than a sum or mean";
  if (c.normalize[1] && c.normalize[1]->kind == NormalizeStage::Kind::DivSum) return "a div_sum stage";
  if (!c.normalize[1] && !grad::hasAdjoint(s1)) return "a second stage other than a sum, mean, amax, amin or logsumexp";
  if (c.squeezeFirst[1]) return "a squeeze between the stages";
  if (c.input[1] && !c.input[1]->unsqueeze.empty()) return "a stage reading the value unsqueezed";
  if (c.input[1] && c.input[1]->inEpilogue()) return "a stage reading the value in its epilogue";
  return {};
}

namespace {

// A value of `sizes` and `dtype` for analyses and gradient programs, which read no elements.
at::Tensor standIn(at::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device) {
  return at::zeros({}, at::TensorOptions().dtype(dtype).device(device)).expand(sizes);
}

ReduceSpec plain(ReduceSpec s, bool keepdim) {
  s.epilogue.reset();
  s.keepdim = keepdim;
  return s;
}

ReduceSpec sumOver(std::vector<int64_t> dims) {
  ReduceSpec s;
  s.dims = std::move(dims);
  s.keepdim = true;
  return s;
}

// One call's spaces: stage 0's expression space S0 and stage 1's S1 (stage 0's value space).
struct Spaces {
  std::vector<int64_t> s0, s1;
  std::vector<int64_t> reduced0, reduced1;  // each stage's reduced dims (sorted)
  at::Tensor r0, v0;                        // stand-ins: stage 0's reduced value and its epilogue's value
  int64_t count0 = 1;                       // the values stage 0 folds into each
  std::string whyNot;                       // empty: gradients reach stage 0's value elementwise
};

std::optional<Spaces> spacesOf(const Chain& c, at::TensorList ops) {
  const c10::Device device = ops[0].device();
  const ReduceSpec& r0 = c.stages[0];
  std::optional<Analysis> a0 = analyze(*c.expr, ops.slice(0, c.firstOperand[1]), &r0);
  if (!a0) return std::nullopt;
  Spaces s;
  s.s0 = a0->valueShape;
  s.reduced0 = reducedDims(r0, static_cast<int64_t>(s.s0.size()));
  for (int64_t d : s.reduced0) s.count0 *= s.s0[d];
  s.r0 = standIn(a0->reducedSizes, a0->reducedDtype, device);
  s.v0 = standIn(a0->outSizes, a0->outDtype, device);
  s.s1 = a0->outSizes;
  if (const auto& in = c.input[1]) {
    std::optional<Analysis> a1 = analyze(*in->expr, in->operands(s.v0, c.inputOperands(ops, 1), {}), nullptr);
    if (!a1) return std::nullopt;
    s.s1 = a1->valueShape;
  }
  s.reduced1 = reducedDims(c.stages[1], static_cast<int64_t>(s.s1.size()));
  if (a0->reducedSizes != a0->outSizes) s.whyNot = "stage 0's epilogue broadcasts its reduced value";
  if (a0->outSizes != s.s1) s.whyNot = "stage 1 broadcasts stage 0's value";
  return s;
}

// `t`, a value of S1 (stage 0's value space), as a value of S0: its missing leading dims and stage
// 0's reduced dims as size-1 dims. A 0-dim value stays one (type promotion reads its rank).
at::Tensor lift(const Chain& c, const Spaces& s, at::Tensor t) {
  if (t.dim() == 0) return t;
  while (t.dim() < static_cast<int64_t>(s.s1.size())) t = t.unsqueeze(0);
  if (!c.stages[0].keepdim)
    for (int64_t d : s.reduced0) t = t.unsqueeze(d);
  return t;
}

// A gradient program's status as the composite's: a value of `into`, or why not (None: no
// gradient reaches; empty optional: no program).
struct Piece {
  std::optional<Arg> value;
  bool none = false;
};

Piece append(Expr& into, const Gradient& g, std::vector<Arg> inputs, const Arg& grad) {
  if (g.status == Gradient::Status::None) return {std::nullopt, true};
  if (g.status == Gradient::Status::Unsupported) return {};
  inputs.push_back(grad);
  return {appendProgram(into, g.expr, inputs)};
}

// `p` without its operand `i` and the instructions its value does not need, the other operands
// renumbered; nullopt where its value reads operand i.
std::optional<Expr> withoutOperand(const Expr& p, int64_t i) {
  const Expr needed = coneOf(p, p.instrs.size() - 1);
  for (const Instr& ins : needed.instrs)
    for (const Arg& a : ins.args)
      if (a.kind == Arg::Kind::Input && a.i == i) return std::nullopt;
  Expr out;
  out.numInputs = p.numInputs - 1;
  std::vector<Arg> inputs;
  for (int64_t k = 0; k < p.numInputs; ++k)
    inputs.push_back(k < i ? Arg::input(k) : k == i ? Arg::integer(0) : Arg::input(k - 1));
  appendProgram(out, needed, inputs);
  return out;
}

// The gradient of one operand as a reduce_chain: stage 0 as given (its value of `valueSizes`),
// then `program` over stage 0's value (operand `value` of the program) and `operands` (the
// program's others, in order), summed over `dims` of `shape` (grad::SumOver) and shaped as
// `target`. Without dims to sum, stage 0's value is stored and the program is a tsfuse::pairwise
// over it.
at::Tensor runGradient(const Chain& c, at::TensorList ops, const ReduceSpec& stage0, at::IntArrayRef valueSizes,
                       const Expr& program, int64_t value, std::vector<at::Tensor> operands, at::IntArrayRef shape,
                       const std::vector<int64_t>& dims, const at::Tensor& target) {
  // A program that does not read stage 0's value (an L1 distance's gradient, sign(x - y)) is summed
  // alone: stage 0 is not recomputed.
  if (const std::optional<Expr> alone = withoutOperand(program, value))
    return grad::summedGradient(*alone, operands, shape, dims, target);
  const std::vector<at::Tensor> head = ops.slice(0, stage0.epilogue ? c.firstOperand[1] : c.firstOperand[0]).vec();
  std::vector<at::Tensor> standIns = operands;
  standIns.insert(standIns.begin() + value, standIn(valueSizes, target.scalar_type(), target.device()));
  const grad::SumOver sum(grad::spanOf(program, standIns), shape, dims);
  if (sum.spanned.empty()) {
    std::optional<std::string> epilogue;
    if (stage0.epilogue) epilogue = stage0.epilogue->str();
    at::Tensor v =
        tsfuse::reduce(head, c.expr->str(), reductionText(stage0), stage0.dims, stage0.keepdim, std::nullopt, epilogue);
    operands.insert(operands.begin() + value, v);
    return sum.shapedAs(pairwise(operands, program.str()), target);
  }
  StageInput in;
  in.expr = std::make_shared<Expr>(program);
  in.text = program.str();
  in.value = value;
  std::vector<at::Tensor> all = head;
  all.insert(all.end(), operands.begin(), operands.end());
  const std::vector<std::string> stages{stageText(false, nullptr, stage0), stageText(false, &in, sumOver(sum.spanned))};
  return sum.shapedAs(reduceChain(all, c.expr->str(), stages), target);
}

std::vector<at::Tensor> concat(std::initializer_list<std::vector<at::Tensor>> parts) {
  std::vector<at::Tensor> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Builds and runs the fused gradients of one backward call, given stage 1's adjoint (over S1); an
// operand left nullopt takes ATen's.
class ChainGradients {
 public:
  ChainGradients(const Chain& c, at::TensorList ops, const Spaces& s, const grad::Adjoint& adjoint)
      : c_(c),
        ops_(ops),
        s_(s),
        adjoint_(adjoint),
        n0_(c.expr->numInputs),
        extras0_(ops.slice(c.firstOperand[0], c.firstOperand[1] - c.firstOperand[0]).vec()),
        inputs1_(c.inputOperands(ops, 1).vec()) {}

  // Stage 1's input operand j: over S1, stage 0's value as the program's operand.
  std::optional<at::Tensor> input1(size_t j) const {
    const auto& in = c_.input[1];
    const int64_t n = in->expr->numInputs;
    Expr program;
    program.numInputs = static_cast<int>(n + adjointSize());
    const Arg u1 = appendProgram(program, *in->expr, inputArgs(0, n));
    const Piece p = append(program, gradientOf(*in->expr, static_cast<int>(positionOf(j)), standIns1()),
                           inputArgs(0, n), stage1Gradient(program, u1, n));
    if (p.none) return at::Tensor();
    if (!p.value) return std::nullopt;
    return runGradient(c_, ops_, c_.stages[0], s_.s1, program, in->value, concat({inputs1_, adjoint_.operands}), s_.s1,
                       grad::broadcastDims(inputs1_[j].sizes(), s_.s1), inputs1_[j]);
  }

  // Stage 0's epilogue operand j: over S1, stage 0's reduced value as the program's operand 0.
  std::optional<at::Tensor> extra0(size_t j) const {
    const int64_t ne = static_cast<int64_t>(extras0_.size()), ni = static_cast<int64_t>(inputs1_.size());
    Expr program;
    program.numInputs = static_cast<int>(1 + ne + ni + adjointSize());
    const Piece p = throughEpilogue0(program, Arg::input(0), inputArgs(1, ne), inputArgs(1 + ne, ni), 1 + ne + ni,
                                     static_cast<int>(j));
    if (p.none) return at::Tensor();
    if (!p.value) return std::nullopt;
    return runGradient(c_, ops_, plain(c_.stages[0], c_.stages[0].keepdim), s_.r0.sizes(), program, 0,
                       concat({extras0_, inputs1_, adjoint_.operands}), s_.s1,
                       grad::broadcastDims(extras0_[j].sizes(), s_.s1), extras0_[j]);
  }

  // Stage 0's expression operand p: over S0, with stage 1's values lifted into it.
  std::optional<at::Tensor> operand0(int64_t p) const {
    const int64_t ne = static_cast<int64_t>(extras0_.size()), ni = static_cast<int64_t>(inputs1_.size());
    Expr program;
    program.numInputs = static_cast<int>(n0_ + 1 + ne + ni + adjointSize());
    const int64_t r0 = n0_;
    Piece g = throughEpilogue0(program, Arg::input(r0), inputArgs(r0 + 1, ne), inputArgs(r0 + 1 + ne, ni),
                               r0 + 1 + ne + ni, -1);
    if (!g.value) return g.none ? std::optional<at::Tensor>(at::Tensor()) : std::nullopt;
    if (c_.stages[0].kind == Reduction::Mean) {
      program.instrs.push_back({Op::Div, {*g.value, Arg::integer(s_.count0)}});
      g.value = Arg::value(static_cast<int64_t>(program.instrs.size()) - 1);
    }
    const at::TensorList ops0 = ops_.slice(0, n0_);
    const Piece d = append(program, gradientOf(*c_.expr, static_cast<int>(p), ops0), inputArgs(0, n0_), *g.value);
    if (d.none) return at::Tensor();
    if (!d.value) return std::nullopt;
    std::vector<at::Tensor> lifted = ops0.vec();
    for (const auto& t : concat({extras0_, inputs1_, adjoint_.operands})) lifted.push_back(lift(c_, s_, t));
    return runGradient(c_, ops_, plain(c_.stages[0], true), keptSizes(), program, r0, lifted, s_.s0,
                       grad::broadcastDims(ops0[p].sizes(), s_.s0), ops0[p]);
  }

 private:
  int64_t adjointSize() const { return static_cast<int64_t>(adjoint_.operands.size()); }

  // Stage 0's reduced value with its dims kept: S0 with the reduced dims of size 1.
  std::vector<int64_t> keptSizes() const {
    std::vector<int64_t> kept = s_.s0;
    for (int64_t d : s_.reduced0) kept[d] = 1;
    return kept;
  }

  // Stage 1's input value's gradient in `into`: its adjoint over u1, whose operands start at `first`.
  Arg stage1Gradient(Expr& into, const Arg& u1, int64_t first) const {
    if (!adjoint_.program) return Arg::input(first);
    std::vector<Arg> args{u1};
    for (const Arg& a : inputArgs(first, adjointSize())) args.push_back(a);
    return appendProgram(into, *adjoint_.program, args);
  }

  std::vector<at::Tensor> standIns1() const { return c_.input[1]->operands(s_.v0, inputs1_, {}); }

  // The position in stage 1's input expression of its j-th operand other than the value.
  int64_t positionOf(size_t j) const {
    const auto& in = c_.input[1];
    for (int64_t i = 0, k = 0; i < in->expr->numInputs; ++i)
      if (i != in->value && k++ == static_cast<int64_t>(j)) return i;
    TORCH_CHECK(false, "tsfuse: stage 1 has no operand ", j);
  }

  // The gradient reaching stage 0's value v0 (a value of `into`) through stage 1: its adjoint, then
  // its fused input (nothing where stage 1 reduces the value itself); the adjoint's operands start
  // at `first`.
  Piece throughStage1(Expr& into, const Arg& v0, const std::vector<Arg>& inputs1, int64_t first) const {
    const auto& in = c_.input[1];
    if (!in) return {stage1Gradient(into, v0, first)};
    std::vector<Arg> args;
    for (int64_t i = 0, j = 0; i < in->expr->numInputs; ++i) args.push_back(i == in->value ? v0 : inputs1[j++]);
    const Arg u1 = appendProgram(into, *in->expr, args);
    return append(into, gradientOf(*in->expr, static_cast<int>(in->value), standIns1()), args,
                  stage1Gradient(into, u1, first));
  }

  // The gradient reaching stage 0's reduced value r0 (extra = -1) or its epilogue operand `extra`.
  Piece throughEpilogue0(Expr& into, const Arg& r0, const std::vector<Arg>& extras0, const std::vector<Arg>& inputs1,
                         int64_t first, int extra) const {
    const auto& e = c_.stages[0].epilogue;
    std::vector<Arg> args{r0};
    args.insert(args.end(), extras0.begin(), extras0.end());
    const Arg v0 = e ? appendProgram(into, *e, args) : r0;
    const Piece gv0 = throughStage1(into, v0, inputs1, first);
    if (!gv0.value || !e) return gv0;
    std::vector<at::Tensor> standIns{s_.r0};
    standIns.insert(standIns.end(), extras0_.begin(), extras0_.end());
    return append(into, gradientOf(*e, extra + 1, standIns), args, *gv0.value);
  }

  const Chain& c_;
  at::TensorList ops_;
  const Spaces& s_;
  const grad::Adjoint& adjoint_;
  int64_t n0_;
  std::vector<at::Tensor> extras0_, inputs1_;
};

}  // namespace

bool grad::recordsGradient(const Chain& c, at::TensorList ops) {
  const size_t n = static_cast<size_t>(c.expr->numInputs);
  if (ops.size() < n || tsfuse::recordsGradient(c.expr, ops.slice(0, n))) return true;
  for (size_t i = n; i < ops.size(); ++i)
    if (ops[i].defined() && ops[i].requires_grad()) return true;
  return false;
}

// A normalizing stage's output, an extremum's or a logsumexp's value, or the value stage 1's
// epilogue reads.
bool grad::savesR1(const Chain& c) { return c.normalize[1] || c.stages[1].epilogue || grad::readsResult(c.stages[1]); }

namespace {

// Stage 1's adjoint over S1 for its reduced value's gradient gr1; folds recompute stage 1's input.
std::optional<grad::Adjoint> stage1Adjoint(const Chain& c, at::TensorList ops, const Spaces& s, const at::Tensor& r1,
                                           const at::Tensor& gr1) {
  if (const auto& n = c.normalize[1])
    return grad::normalizeAdjoint(n->kind == NormalizeStage::Kind::LogSoftmax,
                                  c10::maybe_wrap_dim(n->dim, static_cast<int64_t>(s.s1.size())), gr1, r1);
  const ReduceSpec last = plain(c.stages[1], c.stages[1].keepdim);
  auto fold = [&](const Expr* tail, const std::vector<at::Tensor>& extra, const std::string& reduction) {
    const auto& in = c.input[1];
    const ReduceSpec r = makeReduceSpec(reduction, s.reduced1, /*keepdim=*/true, std::nullopt);
    std::vector<at::Tensor> all = ops.slice(0, c.firstOperand[1]).vec();
    std::string stage = stageText(false, nullptr, r);
    if (in || tail) {
      StageInput input;
      const auto k = static_cast<int64_t>(extra.size());
      input.expr = in ? std::make_shared<Expr>(grad::compose(*in->expr, tail, k)) : std::make_shared<Expr>(*tail);
      input.value = in ? in->value : 0;
      input.text = input.expr->str();
      stage = stageText(false, &input, r);
      all = concat({all, c.inputOperands(ops, 1).vec(), extra});
    }
    return reduceChain(all, c.expr->str(), {c.stageTexts()[0], stage});
  };
  return grad::adjointOf(last, s.s1, gr1, r1, fold);
}

}  // namespace

std::vector<std::optional<at::Tensor>> grad::chainGradients(const Chain& c, at::TensorList ops, const at::Tensor& r1,
                                                            const at::Tensor& g, const std::vector<bool>& needed) {
  std::vector<std::optional<at::Tensor>> out(ops.size());
  const std::optional<Spaces> s = spacesOf(c, ops);
  if (!s) return out;
  const ReduceSpec& last = c.stages[1];
  at::Tensor gr1 = g;
  if (last.epilogue) {
    const at::TensorList extras1 = c.epilogueOperands(ops, 1);
    const size_t first = ops.size() - extras1.size();
    const std::vector<at::Tensor> eops = concat({{r1}, extras1.vec()});
    for (size_t j = 0; j < extras1.size(); ++j)
      if (needed[first + j])
        out[first + j] =
            grad::fusedGradient(*last.epilogue, static_cast<int>(j + 1), eops, g.sizes(), grad::Adjoint{nullptr, {g}});
    const std::optional<at::Tensor> gr =
        grad::fusedGradient(*last.epilogue, 0, eops, g.sizes(), grad::Adjoint{nullptr, {g}});
    if (!gr) return out;
    if (!gr->defined()) {
      for (size_t i = 0; i < first; ++i) out[i] = at::Tensor();
      return out;
    }
    gr1 = *gr;
  }
  if (!s->whyNot.empty()) {
    TSFUSE_LOG(kernel, info, "gradients of reduce_chain's first stages through ATen: ", s->whyNot);
    return out;
  }
  if (auto routed = grad::routedChainGradients(c, ops, gr1, needed)) return *routed;
  const std::optional<grad::Adjoint> adjoint = stage1Adjoint(c, ops, *s, r1, gr1);
  if (!adjoint) return out;
  const ChainGradients grads(c, ops, *s, *adjoint);
  const size_t n0 = c.expr->numInputs;
  for (size_t i = 0; i < c.firstOperand[1]; ++i)
    if (needed[i]) out[i] = i < n0 ? grads.operand0(static_cast<int64_t>(i)) : grads.extra0(i - n0);
  const size_t ni = c.inputOperands(ops, 1).size();
  for (size_t j = 0; j < ni; ++j)
    if (needed[c.firstOperand[1] + j]) out[c.firstOperand[1] + j] = grads.input1(j);
  return out;
}

std::string grad::joinStages(c10::ArrayRef<std::string> stages) {
  std::string out;
  for (size_t k = 0; k < stages.size(); ++k) out += (k ? "\n" : "") + stages[k];
  return out;
}

std::vector<std::string> grad::splitStages(const std::string& joined) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end; (end = joined.find('\n', start)) != std::string::npos; start = end + 1)
    out.push_back(joined.substr(start, end - start));
  out.push_back(joined.substr(start));
  return out;
}

namespace {

struct ChainFunction : torch::autograd::Function<ChainFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList operands, const std::string& expr,
                            const std::vector<std::string>& stages) {
    ctx->saved_data["expr"] = expr;
    ctx->saved_data["stages"] = grad::joinStages(stages);
    grad::passUndefinedGradients(ctx, operands.size());
    std::vector<at::Tensor> saved = operands.vec();
    const auto c = cachedChain(expr, stages);
    const ReduceSpec& last = c->stages[1];
    at::Tensor out;
    if (last.epilogue) {
      // Stage 1's epilogue applied apart, as eager applies it: its derivatives read r1.
      std::vector<std::string> bare = stages;
      bare[1] = stageText(c->squeezeFirst[1], c->input[1].get(), plain(last, last.keepdim));
      const at::TensorList extras1 = c->epilogueOperands(operands, 1);
      const at::Tensor r1 = reduceChain(operands.slice(0, operands.size() - extras1.size()).vec(), expr, bare);
      out = applyEpilogue(last, r1, extras1);
      saved.push_back(r1);
    } else {
      out = reduceChain(operands.vec(), expr, stages);
      if (grad::savesR1(*c)) saved.push_back(out);
    }
    ctx->save_for_backward(saved);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (auto none = grad::noGradients(ctx, grads, 2)) return *none;
    const std::string expr = ctx->saved_data["expr"].toStringRef();
    const auto c = cachedChain(expr, grad::splitStages(ctx->saved_data["stages"].toStringRef()));
    variable_list saved = ctx->get_saved_variables();
    at::Tensor r1;
    if (grad::savesR1(*c)) {
      r1 = saved.back();
      saved.pop_back();
    }
    variable_list out(2 + saved.size());
    std::vector<bool> needed(saved.size());
    for (size_t i = 0; i < saved.size(); ++i) needed[i] = ctx->needs_input_grad(i);
    std::vector<std::optional<at::Tensor>> fused(saved.size());
    if (!at::GradMode::is_enabled()) fused = grad::chainGradients(*c, saved, r1, grads[0], needed);
    auto reference = [&](at::TensorList ops) { return evalChain(*c, ops)[0]; };
    for (size_t i = 0; i < saved.size(); ++i)
      if (needed[i]) out[i] = fused[i] ? *fused[i] : grad::atenGradient(reference, saved, i, grads[0]);
    return out;
  }
};

// A stage as the tsfuse::reduce it was before chaining, with that op's gradient (ATen's where the
// fused one does not cover it).
at::Tensor reduceStage(at::TensorList ops, const Expr& e, const ReduceSpec& s) {
  std::optional<std::string> epilogue;
  if (s.epilogue) epilogue = s.epilogue->str();
  const at::OptionalIntArrayRef dims = s.dims ? at::OptionalIntArrayRef(*s.dims) : std::nullopt;
  if (auto r = reduceWithGradient(ops, e.str(), reductionText(s), dims, s.keepdim, s.dtype, epilogue)) return *r;
  return evalFused(e, ops, &s)[0];
}

}  // namespace

std::optional<at::Tensor> reduceChainWithGradient(at::TensorList operands, c10::string_view expr,
                                                  c10::ArrayRef<std::string> stages) {
  const auto c = cachedChain(expr, stages);
  if (!grad::recordsGradient(*c, operands)) {
    at::NoGradGuard off;
    return reduceChain(operands, std::string(expr), stages.vec());
  }
  if (c->stages.size() == 2 && c->input[1] && c->input[1]->inEpilogue()) {
    // Sibling reductions: each runs with its own gradient, the first one's value stored between
    // them, as before they were chained.
    const StageInput& in = *c->input[1];
    const at::Tensor v = reduceStage(operands.slice(0, c->firstOperand[1]), *c->expr, c->stages[0]);
    return reduceStage(in.operands(v, c->inputOperands(operands, 1), c->epilogueOperands(operands, 1)), *in.expr,
                       c->stages[1]);
  }
  if (const std::string why = grad::whyNotFused(*c); !why.empty()) {
    TSFUSE_LOG(kernel, info, "reduce_chain with a gradient runs unfused: ", why);
    return std::nullopt;
  }
  return ChainFunction::apply(operands, std::string(expr), stages.vec());
}

}  // namespace tsfuse
