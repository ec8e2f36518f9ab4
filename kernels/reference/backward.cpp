#include "kernels/reference/backward.h"

#include "kernels/ir/derivatives.h"
#include "kernels/ir/op_registry.h"
#include "kernels/reference/analysis.h"

#include <cmath>

namespace tsfuse {
namespace {

// A literal the way the expression writes a 0-dim value of its dtype.
Arg literalOf(const at::Tensor& t) {
  if (t.scalar_type() == at::kBool) return Arg::boolean(t.item<bool>());
  if (at::isIntegralType(t.scalar_type(), false)) return Arg::integer(t.item<int64_t>());
  return Arg::floating(t.item<double>());
}

// `op` over numbers as ATen's Scalar arithmetic computes it (pow's derivative's `exponent - 1`):
// in double for a float, so the numbers are 0-dim tensors of their own types, not wrapped numbers,
// which would promote to the default float dtype.
at::Tensor foldNumbers(Op op, std::vector<Arg> args) {
  std::vector<at::Tensor> numbers;
  for (Arg& a : args) {
    if (a.kind != Arg::Kind::Int && a.kind != Arg::Kind::Float && a.kind != Arg::Kind::Bool) continue;
    const c10::Scalar s = literalScalar(a);
    numbers.push_back(at::scalar_tensor(s, at::TensorOptions().dtype(s.type())));
    a = Arg::input(static_cast<int64_t>(numbers.size()) - 1);
  }
  return evalInstr(Instr{op, std::move(args)}, {}, numbers);
}

// Equal arguments, a float's sign of zero included.
bool same(const std::vector<Arg>& a, const std::vector<Arg>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]) || (a[i].kind == Arg::Kind::Float && std::signbit(a[i].f) != std::signbit(b[i].f)))
      return false;
  return true;
}

// Appends instructions to `out`, folding one whose arguments are all numbers (a derivative of a
// number exponent: pow(x, 2)'s `2 - 1`) into the number ATen computes from them; with `reuse`, an
// instruction equal to one already there (registry ops are pure) is that one.
class Builder {
 public:
  explicit Builder(Expr& out, bool reuse = false) : out_(out), reuse_(reuse) {}

  Arg push(Op op, std::vector<Arg> args) {
    bool anyTensor = false;
    for (const Arg& a : args) anyTensor |= a.isTensor();
    if (!anyTensor) return literalOf(foldNumbers(op, std::move(args)));
    for (size_t j = 0; reuse_ && j < out_.instrs.size(); ++j)
      if (out_.instrs[j].op == op && same(out_.instrs[j].args, args)) return Arg::value(static_cast<int64_t>(j));
    out_.instrs.push_back({op, std::move(args)});
    return Arg::value(static_cast<int64_t>(out_.instrs.size()) - 1);
  }

 private:
  Expr& out_;
  bool reuse_;
};

// The arguments of instruction j through which autograd records an edge from its value: none
// where the value cannot require grad (not floating or complex); else every argument a derivative
// covers, and those of an op whose gradient is zero (a rounded quotient); none of a shape-only
// reader (full_like) or of detach.
std::vector<size_t> recordedArgs(const Expr& forward, const Analysis& a, size_t j) {
  const c10::ScalarType t = a.resultType[j];
  if (!c10::isFloatingType(t) && !c10::isComplexType(t)) return {};
  const Instr& ins = forward.instrs[j];
  const std::vector<Derivative>& ds = derivatives(ins.op);
  if (ds.empty() && (opDef(ins.op).rule == LowerRule::Fill || ins.op == Op::Detach)) return {};
  std::vector<size_t> out;
  for (size_t p = 0; p < ins.args.size(); ++p)
    if (ds.empty() || ds[p].kind != Derivative::Kind::None) out.push_back(p);
  return out;
}

}  // namespace

bool recordsGradient(const std::shared_ptr<const Expr>& e, at::TensorList operands) {
  const Expr& forward = *e;
  // (each grad-mode call of a fused op asks: the analysis its call then makes, cached)
  std::optional<Analysis> a = analyzeCached(e, operands, nullptr);
  if (!a) return true;  // (the call raises eager's error)
  const size_t m = forward.instrs.size();
  std::vector<bool> records(m, false);
  for (size_t j = 0; j < m; ++j)
    for (size_t p : recordedArgs(forward, *a, j)) {
      const Arg& x = forward.instrs[j].args[p];
      if ((x.kind == Arg::Kind::Input && operands[x.i].requires_grad()) || (x.kind == Arg::Kind::Value && records[x.i]))
        records[j] = true;
    }
  return records.back();
}

std::vector<bool> reachedByGradient(const std::shared_ptr<const Expr>& e, at::TensorList operands) {
  const Expr& forward = *e;
  std::vector<bool> reached(operands.size(), true);
  if (static_cast<int64_t>(operands.size()) != forward.numInputs) return reached;
  std::optional<Analysis> a = analyzeCached(e, operands, nullptr);
  if (!a || forward.instrs.empty()) return reached;  // (the call raises eager's error)
  std::fill(reached.begin(), reached.end(), false);
  const size_t m = forward.instrs.size();
  std::vector<bool> flows(m, false);  // the value's gradient reaches instruction j's value
  flows[m - 1] = true;
  for (size_t j = m; j-- > 0;) {
    if (!flows[j]) continue;
    for (size_t p : recordedArgs(forward, *a, j)) {
      const Arg& x = forward.instrs[j].args[p];
      if (x.kind == Arg::Kind::Input && static_cast<size_t>(x.i) < reached.size()) reached[x.i] = true;
      if (x.kind == Arg::Kind::Value) flows[x.i] = true;
    }
  }
  return reached;
}

Gradient gradientOf(const Expr& forward, int wrt, at::TensorList operands) {
  Gradient g;
  std::optional<Analysis> a = analyze(forward, operands, nullptr);
  if (!a) {
    // The analysis's stand-ins (ones) raised where the operands did not, a value-dependent error
    // (a compare's zeros floor-divided by themselves): the forward ran as eager's ops (runFusedAll),
    // and its gradient is ATen's, through the reference.
    g.status = Gradient::Status::Unsupported;
    g.why = "the program's analysis raises on stand-ins (a value-dependent error of eager's ops)";
    return g;
  }
  const int n = forward.numInputs;
  const size_t m = forward.instrs.size();
  // Which values depend on the operand: only their adjoints are needed.
  std::vector<bool> reaches(m, false);
  auto dependent = [&](const Arg& x) {
    return (x.kind == Arg::Kind::Input && x.i == wrt) || (x.kind == Arg::Kind::Value && reaches[x.i]);
  };
  // A value of an integral or bool dtype carries no gradient (autograd's rule: such a tensor cannot
  // require grad), whatever it was computed from: x.to(int64).reciprocal() passes none to x.
  for (size_t j = 0; j < m; ++j) {
    const c10::ScalarType t = a->resultType[j];
    if (!c10::isFloatingType(t) && !c10::isComplexType(t)) continue;
    for (const Arg& x : forward.instrs[j].args) reaches[j] = reaches[j] || dependent(x);
  }
  if (!reaches[m - 1]) return g;

  g.expr.numInputs = n + 1;
  g.expr.instrs = forward.instrs;
  Builder b(g.expr);
  std::vector<std::optional<Arg>> adjoint(m);
  std::optional<Arg> total;
  adjoint[m - 1] = Arg::input(n);
  auto accumulate = [&](std::optional<Arg>& into, const Arg& c) { into = into ? b.push(Op::Add, {*into, c}) : c; };

  for (size_t j = m; j-- > 0;) {
    if (!adjoint[j] || !reaches[j]) continue;
    const Instr& ins = forward.instrs[j];
    const std::vector<Derivative>& ds = derivatives(ins.op);
    if (ds.empty()) continue;  // passes no gradient
    const int k = static_cast<int>(ins.args.size());
    for (int p = 0; p < k; ++p) {
      const Arg& target = ins.args[p];
      if (!dependent(target) || ds[p].kind == Derivative::Kind::None) continue;
      Arg c = *adjoint[j];
      if (ds[p].kind == Derivative::Kind::Formula) {
        const Expr* f = ds[p].formulaFor(ins.args);
        if (!f) {
          g.status = Gradient::Status::Unsupported;
          g.why = std::string(opName(ins.op)) + "'s derivative of argument " + std::to_string(p) +
                  " reads an argument that is None";
          return g;
        }
        std::vector<Arg> local;  // the formula's values, renumbered into the program
        for (const Instr& fi : f->instrs) {
          std::vector<Arg> args;
          for (const Arg& x : fi.args) {
            if (x.kind == Arg::Kind::Input)
              args.push_back(x.i < k ? ins.args[x.i] : x.i == k ? Arg::value(static_cast<int64_t>(j)) : *adjoint[j]);
            else if (x.kind == Arg::Kind::Value)
              args.push_back(local[x.i]);
            else
              args.push_back(x);
          }
          local.push_back(b.push(fi.op, std::move(args)));
        }
        c = local.back();
      }
      const c10::ScalarType to =
          target.kind == Arg::Kind::Input ? operands[target.i].scalar_type() : a->resultType[target.i];
      c = b.push(Op::To, {c, Arg::scalarType(to)});
      if (target.kind == Arg::Kind::Input)
        accumulate(total, c);
      else
        accumulate(adjoint[target.i], c);
    }
  }
  if (!total) return g;
  if (!(total->kind == Arg::Kind::Value && total->i == static_cast<int64_t>(g.expr.instrs.size()) - 1))
    b.push(Op::To, {*total, Arg::scalarType(operands[wrt].scalar_type())});
  g.status = Gradient::Status::Flows;
  g.expr.validate();
  return g;
}

std::vector<Arg> inputArgs(int64_t first, int64_t n) {
  std::vector<Arg> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(Arg::input(first + i));
  return out;
}

Arg appendProgram(Expr& into, const Expr& program, const std::vector<Arg>& inputs) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == program.numInputs, "tsfuse: appendProgram: ", inputs.size(),
              " inputs for a program of ", program.numInputs);
  Builder reuse(into, /*reuse=*/true), fresh(into);
  std::vector<Arg> values;
  for (size_t j = 0; j < program.instrs.size(); ++j) {
    const Instr& ins = program.instrs[j];
    std::vector<Arg> args;
    for (const Arg& x : ins.args)
      args.push_back(x.kind == Arg::Kind::Input ? inputs[x.i] : x.kind == Arg::Kind::Value ? values[x.i] : x);
    values.push_back((j + 1 == program.instrs.size() ? fresh : reuse).push(ins.op, std::move(args)));
  }
  TORCH_CHECK(!values.empty(), "tsfuse: appendProgram: an empty program");
  return values.back();
}

}  // namespace tsfuse
