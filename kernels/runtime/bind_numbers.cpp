#include "kernels/runtime/bind_numbers.h"

#include <algorithm>
#include <cstring>

namespace tsfuse {
namespace {

// The literal of a wrapped number (a 0-dim CPU tensor): its Python type and value, read from its
// element directly (the dispatcher's item() would cost as much as the rest of the binding).
Arg literalOf(const at::Tensor& number) {
  switch (number.scalar_type()) {
    case at::kDouble:
      return Arg::floating(*number.const_data_ptr<double>());
    case at::kLong:
      return Arg::integer(*number.const_data_ptr<int64_t>());
    case at::kBool:
      return Arg::boolean(*number.const_data_ptr<bool>());
    default: {
      const c10::Scalar s = number.item();
      if (s.isBoolean()) return Arg::boolean(s.toBool());
      if (s.isIntegral(/*includeBool=*/false)) return Arg::integer(s.toLong());
      return Arg::floating(s.toDouble());
    }
  }
}

// `e`'s $k is the reduction's own input for k < own, else operand base + k - own.
struct Binder {
  at::TensorList operands;

  bool byValue(const Instr& ins, size_t p, int64_t own, int64_t base) const {
    const Arg& a = ins.args[p];
    return a.kind == Arg::Kind::Input && a.i >= own && numberReadByValue(ins, p, operands[base + a.i - own]);
  }
  // Each number read by value, in program order: its operand, then the literal it binds to.
  void values(const Expr& e, int64_t own, int64_t base, std::vector<Arg>& out) const {
    for (const Instr& ins : e.instrs)
      for (size_t p = 0; p < ins.args.size(); ++p)
        if (byValue(ins, p, own, base)) {
          const int64_t i = base + ins.args[p].i - own;
          out.push_back(Arg::input(i));
          out.push_back(literalOf(operands[i]));
        }
  }
  Expr bind(const Expr& e, int64_t own, int64_t base, std::vector<char>& read) const {
    Expr out = e;
    for (Instr& ins : out.instrs)
      for (size_t p = 0; p < ins.args.size(); ++p) {
        Arg& a = ins.args[p];
        if (byValue(ins, p, own, base))
          a = literalOf(operands[base + a.i - own]);
        else if (a.kind == Arg::Kind::Input && a.i >= own)
          read[base + a.i - own] = 1;
      }
    return out;
  }
};

// `e` with its operand references renumbered: $k (k >= own) -> own + index[base + k - own] - first.
std::shared_ptr<const Expr> renumbered(Expr e, int64_t own, int64_t base, int64_t first,
                                       const std::vector<int64_t>& index) {
  e.numInputs = 0;  // as the text form counts them: the largest reference, plus one
  for (Instr& ins : e.instrs)
    for (Arg& a : ins.args) {
      if (a.kind != Arg::Kind::Input) continue;
      if (a.i >= own) a.i = own + index[base + a.i - own] - first;
      e.numInputs = std::max<int>(e.numInputs, static_cast<int>(a.i) + 1);
    }
  return std::make_shared<const Expr>(std::move(e));
}

// The last binding this thread made: a call repeated with the same numbers (a module attribute,
// a fixed threshold) reuses its program and text. The expressions are held, so their addresses
// name them.
struct LastBinding {
  std::shared_ptr<const Expr> expr, epilogue;
  std::vector<Arg> values;
  BoundNumbers bound;  // operands left empty
};

// Literals equal bit for bit (Arg's == takes -0.0 for 0.0, which clamp tells apart).
bool sameBits(const std::vector<Arg>& a, const std::vector<Arg>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].kind != b[k].kind || a[k].i != b[k].i || std::memcmp(&a[k].f, &b[k].f, sizeof(double)) != 0) return false;
  return true;
}

}  // namespace

std::optional<BoundNumbers> bindNumbers(const std::shared_ptr<const Expr>& e, const ReduceSpec* reduce,
                                        at::TensorList operands) {
  // Most calls read no number by value: they pay a scan, nothing more.
  bool anyNumber = false;
  for (const at::Tensor& t : operands) anyNumber |= isWrappedNumber(t);
  if (!anyNumber) return std::nullopt;
  const Binder b{operands};
  const std::shared_ptr<const Expr> epilogue = reduce ? reduce->epilogue : nullptr;
  const int64_t own = reduce && reduce->withIndices() ? 2 : 1;
  std::vector<Arg> values;
  b.values(*e, 0, 0, values);
  if (epilogue) b.values(*epilogue, own, e->numInputs, values);
  if (values.empty()) return std::nullopt;

  thread_local LastBinding last;
  // The call's operands and reduction over a binding (its epilogue bound).
  auto forThisCall = [&](BoundNumbers out) {
    for (size_t i = 0; i < operands.size(); ++i)
      if (out.position[i] >= 0) out.operands.push_back(operands[i]);
    if (reduce) {
      std::shared_ptr<const Expr> boundEpilogue = out.reduce ? out.reduce->epilogue : nullptr;
      out.reduce = *reduce;
      out.reduce->epilogue = boundEpilogue;
    }
    return out;
  };
  if (last.expr == e && last.epilogue == epilogue && sameBits(last.values, values)) return forThisCall(last.bound);

  std::vector<char> read(operands.size(), 0);
  const Expr main = b.bind(*e, 0, 0, read);
  const Expr epi = epilogue ? b.bind(*epilogue, own, e->numInputs, read) : Expr{};
  BoundNumbers out;
  out.position.assign(operands.size(), -1);
  int64_t next = 0, mainRead = 0;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!read[i]) continue;
    out.position[i] = next++;
    if (static_cast<int64_t>(i) < e->numInputs) ++mainRead;
  }
  out.expr = renumbered(main, 0, 0, 0, out.position);
  out.text = out.expr->str();
  if (epilogue) {
    out.reduce.emplace();
    out.reduce->epilogue = renumbered(epi, own, e->numInputs, mainRead, out.position);
  }
  last = LastBinding{e, epilogue, std::move(values), out};
  return forThisCall(std::move(out));
}

}  // namespace tsfuse
