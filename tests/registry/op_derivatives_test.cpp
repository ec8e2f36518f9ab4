// Derivatives of every op in the registry (kernels/ir/ops.def: TSFUSE_GRAD, TSFUSE_NOGRAD),
// generated from its entries: for each argument form its signature allows (tensors, Python
// numbers, None, dtypes) over broadcast float64 operands, the gradient each formula gives, summed
// to its argument's shape, must equal ATen's autograd through the op's reference on values full of
// ties and zeros (so the tie and boundary rules are ATen's) and match a central finite difference
// on smooth values (gradcheck's test). An op passing no gradient must be one ATen gives none or
// zeros through. An op added to the registry is covered here with no test to write.
#include "registry_util.h"
#include "test_util.h"

#include "kernels/ir/derivatives.h"
#include "kernels/ir/op_registry.h"
#include "kernels/reference/aten_eval.h"

#include <ATen/ExpandUtils.h>
#include <torch/csrc/autograd/autograd.h>

namespace registry_op_derivatives_test {

namespace {

using namespace tsfuse_test;
using tsfuse::Arg;
using tsfuse::Derivative;

// The choices for one argument: tensors (the first argument always, as in every ATen overload the
// registry names), numbers, None, dtypes, the CPU for a device.
std::vector<Arg> choices(char kind, size_t position) {
  switch (kind) {
    case 'v':
      return position > 0 ? std::vector<Arg>{Arg::input(0), Arg::floating(1.5)} : std::vector<Arg>{Arg::input(0)};
    case 'o':
      return {Arg::input(0), Arg::none(), Arg::floating(0.5)};
    case 's':
      return {Arg::integer(0), Arg::integer(1)};
    case 'c':
      return {Arg::onDevice(c10::kCPU)};  // the operands' device
    case 'p':
      return {Arg::input(0)};  // a 0-dim prototype, never differentiated
    default:
      return {Arg::scalarType(at::kDouble), Arg::scalarType(at::kFloat)};
  }
}

// A condition or mask operand: bool, never differentiated.
bool isMask(tsfuse::Op op, size_t position) {
  return (op == tsfuse::Op::Where && position == 0) || (op == tsfuse::Op::MaskedFill && position == 1);
}

enum class Values { Ties, Smooth };

at::Tensor values(Gen& gen, at::IntArrayRef shape, Values kind) {
  if (kind == Values::Smooth) return at::rand(shape, gen.gen, at::kDouble) * 1.3 + 0.6;  // in [0.6, 1.9)
  static const at::Tensor pool = at::tensor({-1.0, 0.0, 0.5, 1.0, 2.0}, at::kDouble);
  return pool.index({at::randint(0, pool.numel(), shape, gen.gen, at::kLong)});
}

struct Case {
  tsfuse::Expr op;                 // the one instruction
  std::vector<at::Tensor> leaves;  // its operands ($i), float64 leaves requiring grad, or bool masks
  at::Tensor result, grad;         // the reference's result (detached) and the incoming gradient
};

// The derivative's value for argument `position`, summed to `leaf`'s shape and cast to its dtype,
// or an undefined tensor where each of its formulas reads an argument that is None (no gradient is
// generated for that form).
at::Tensor gradientOf(const Derivative& d, const Case& c, size_t position) {
  const tsfuse::Instr& ins = c.op.instrs[0];
  const at::Tensor& leaf = c.leaves[ins.args[position].i];
  at::Tensor value;
  if (d.kind == Derivative::Kind::Incoming) {
    value = c.grad;
  } else {
    const tsfuse::Expr* formula = d.formulaFor(ins.args);
    if (!formula) return {};
    std::vector<at::Tensor> in;
    for (const Arg& a : ins.args) {
      if (a.kind == Arg::Kind::Input)
        in.push_back(c.leaves[a.i].detach());
      else if (a.isLiteral())
        in.push_back(tsfuse::wrappedLiteral(a, at::kCPU));
      else
        in.push_back(at::Tensor());  // a dtype or None the formula does not read
    }
    in.push_back(c.result);
    in.push_back(c.grad);
    value = tsfuse::evalAten(*formula, in);
  }
  return at::sum_to(value, leaf.sizes()).to(leaf.scalar_type());
}

struct Outcome {
  int checked = 0, unsupported = 0;
  std::vector<std::string> failures;
};

// Checks `ds` (the op's derivatives, or a mutation of them) on one argument form and layout.
void check(const tsfuse::OpDef& def, const std::vector<Derivative>& ds, const std::vector<Arg>& args,
           const std::vector<std::vector<int64_t>>& shapes, Values kind, Gen& gen, Outcome& out) {
  Case c;
  c.op.instrs.push_back({def.op, args});
  std::vector<at::Tensor> inputs;
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k].kind != Arg::Kind::Input) continue;
    if (def.signature[k] == 'p') {
      c.leaves.push_back(values(gen, {}, kind));
      continue;
    }
    at::Tensor x = values(gen, shapes[args[k].i], kind);
    c.leaves.push_back(isMask(def.op, k) ? x.gt(0.6) : x.requires_grad_());
  }
  c.op.numInputs = static_cast<int>(c.leaves.size());
  at::Tensor r;
  try {
    c.op.validate();
    r = tsfuse::evalAten(c.op, c.leaves);
  } catch (const c10::Error&) {
    return;  // a form the op rejects on these operands
  }
  if (!r.requires_grad()) return;  // an integer or bool result: no gradient to check
  c.result = r.detach();
  c.grad = values(gen, r.sizes(), Values::Smooth).sub(1.2).to(r.scalar_type());
  std::vector<at::Tensor> wrt;
  for (const at::Tensor& l : c.leaves)
    if (l.requires_grad()) wrt.push_back(l);
  torch::autograd::variable_list aten;
  try {
    aten = torch::autograd::grad({r}, wrt, {c.grad}, /*retain_graph=*/true, false, /*allow_unused=*/true);
  } catch (const c10::Error&) {
    return;  // ATen's backward raises for this form (clamp's in-place mask over broadcast bounds)
  }
  const std::string form = c.op.str();
  size_t w = 0;
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k].kind != Arg::Kind::Input || isMask(def.op, k) || def.signature[k] == 'p') continue;
    const at::Tensor& want = aten[w++];
    if (ds.empty() || ds[k].kind == Derivative::Kind::None) {
      if (want.defined() && !at::equal(want, at::zeros_like(want)))
        out.failures.push_back(form + ": ATen passes a gradient to $" + std::to_string(args[k].i) +
                               " where the registry states none");
      continue;
    }
    at::Tensor got = gradientOf(ds[k], c, k);
    if (!got.defined()) {
      ++out.unsupported;
      continue;
    }
    ++out.checked;
    const at::Tensor ref = want.defined() ? want : at::zeros_like(got);
    if (!got.sizes().equals(ref.sizes()) || !at::allclose(got, ref, 1e-12, 1e-12, /*equal_nan=*/true)) {
      out.failures.push_back(form + ": gradient of $" + std::to_string(args[k].i) + " differs from ATen's by " +
                             std::to_string((got - ref).abs().nan_to_num(0).max().item<double>()));
      continue;
    }
    if (kind != Values::Smooth || c.result.scalar_type() != at::kDouble) continue;
    // gradcheck's test (in float64: a float32 result cannot resolve the step), along one direction: (f(x + h u) - f(x - h u)) / 2h = <gradient, u>.
    const double h = 1e-6;
    at::Tensor u = values(gen, got.sizes(), Values::Smooth).sub(1.2);
    auto along = [&](double step) {
      std::vector<at::Tensor> moved;
      for (const at::Tensor& l : c.leaves) moved.push_back(l.detach());
      moved[args[k].i] = moved[args[k].i] + u * step;
      return (tsfuse::evalAten(c.op, moved) * c.grad).sum().item<double>();
    };
    const double fd = (along(h) - along(-h)) / (2 * h), analytic = (got * u).sum().item<double>();
    if (std::abs(fd - analytic) > 1e-6 * (1 + std::abs(analytic)))
      out.failures.push_back(form + ": gradient of $" + std::to_string(args[k].i) + " along u is " +
                             std::to_string(analytic) + ", the finite difference " + std::to_string(fd));
  }
}

Outcome checkOp(const tsfuse::OpDef& def, const std::vector<Derivative>& ds) {
  // An outer product with a third operand over both dims, and operands of one shape (the ops that
  // check sizes: inplace_result, cat_piece).
  const std::vector<std::vector<std::vector<int64_t>>> layouts = {{{3, 1}, {1, 4}, {3, 4}}, {{3, 4}, {3, 4}, {3, 4}}};
  Gen gen(7);
  Outcome out;
  for (const auto& args : argumentForms(def, choices))
    for (const auto& shapes : layouts)
      for (Values kind : {Values::Ties, Values::Smooth}) check(def, ds, args, shapes, kind, gen, out);
  return out;
}

TEST(RegistryDerivatives, EveryOpStatesItsDerivativeOrThatItHasNone) {
  for (const tsfuse::OpDef& def : tsfuse::allOps()) {
    const auto& ds = tsfuse::derivatives(def.op);  // throws where ops.def states neither
    EXPECT_TRUE(ds.empty() == (tsfuse::noGradientReason(def.op) != nullptr)) << def.name;
    for (size_t k = 0; k < ds.size(); ++k)
      if (def.signature[k] == 'd' || def.signature[k] == 's' || def.signature[k] == 'c')
        EXPECT_EQ(ds[k].kind, Derivative::Kind::None)
            << def.name << ": a number, dtype or device argument has no gradient";
  }
}

TEST(RegistryDerivatives, EveryDerivativeIsAtensAndPassesGradcheck) {
  int total = 0;
  for (const tsfuse::OpDef& def : tsfuse::allOps()) {
    SCOPED_TRACE(def.name);
    Outcome out = checkOp(def, tsfuse::derivatives(def.op));
    for (const std::string& f : out.failures) ADD_FAILURE() << f;
    if (!tsfuse::derivatives(def.op).empty()) EXPECT_GT(out.checked, 0) << "no gradient of " << def.name << " checked";
    EXPECT_EQ(out.unsupported, 0) << "argument forms with no derivative formula (a None read by each alternative)";
    total += out.checked;
  }
  EXPECT_GT(total, 300) << "gradients checked";  // 366 today: a floor against a generator checking nothing
}

// The check can fail: a derivative broken in one place (exp's g * result as g * x, minimum's
// half-gradient on ties dropped) is caught.
TEST(RegistryDerivatives, AWrongDerivativeIsCaught) {
  const tsfuse::OpDef& exp = tsfuse::opDef(tsfuse::Op::Exp);
  EXPECT_FALSE(checkOp(exp, {tsfuse::parseDerivative("v1: mul($2, $0)", 1)}).failures.empty());
  const tsfuse::OpDef& minimum = tsfuse::opDef(tsfuse::Op::Minimum);
  std::vector<Derivative> ds = tsfuse::derivatives(tsfuse::Op::Minimum);
  ds[0] = tsfuse::parseDerivative("v1: gt($0, $1); masked_fill($3, %0, 0)", 2);
  Outcome out = checkOp(minimum, ds);
  ASSERT_FALSE(out.failures.empty());
  EXPECT_NE(out.failures[0].find("differs from ATen's"), std::string::npos) << out.failures[0];
}

}  // namespace
}  // namespace registry_op_derivatives_test
