#include "kernels/ir/derivatives.h"

#include "kernels/ir/op_registry.h"

#include <c10/util/Exception.h>

namespace tsfuse {
namespace {

struct Declared {
  bool declared = false;
  const char* noGradient = nullptr;
  std::vector<const char*> texts;
};

std::vector<Declared> declarations() {
  std::vector<Declared> t(allOps().size());
#define TSFUSE_GRAD(Id, ...) t[static_cast<size_t>(Op::Id)] = Declared{true, nullptr, {__VA_ARGS__}};
#define TSFUSE_NOGRAD(Id, why) t[static_cast<size_t>(Op::Id)] = Declared{true, why, {}};
#include "kernels/ir/ops.def"
  return t;
}

struct Table {
  std::vector<Declared> declared = declarations();
  std::vector<std::vector<Derivative>> parsed;

  Table() {
    for (const OpDef& def : allOps()) {
      const Declared& d = declared[static_cast<size_t>(def.op)];
      TORCH_CHECK(d.declared, "tsfuse: op ", def.name, " states neither TSFUSE_GRAD nor TSFUSE_NOGRAD (ops.def)");
      TORCH_CHECK(d.noGradient || static_cast<int>(d.texts.size()) == def.arity(), "tsfuse: op ", def.name, " has ",
                  d.texts.size(), " derivatives for ", def.arity(), " arguments");
      std::vector<Derivative> ds;
      for (const char* text : d.texts) {
        try {
          ds.push_back(parseDerivative(text, def.arity()));
        } catch (const c10::Error& e) {
          TORCH_CHECK(false, "tsfuse: derivative of ", def.name, ": ", e.what_without_backtrace());
        }
      }
      parsed.push_back(std::move(ds));
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

Derivative parseDerivative(const std::string& text, int arity) {
  Derivative d;
  if (text == "g") {
    d.kind = Derivative::Kind::Incoming;
    return d;
  }
  if (text == "-") return d;
  d.kind = Derivative::Kind::Formula;
  for (size_t start = 0; start <= text.size();) {
    size_t bar = text.find(" | ", start);
    if (bar == std::string::npos) bar = text.size();
    const std::string one = text.substr(start, bar - start);
    Expr e = Expr::parse(one);
    TORCH_CHECK(e.numInputs <= arity + 2, "'", one, "' reads $", e.numInputs - 1, " of an op of ", arity,
                " arguments (the result is $", arity, ", the incoming gradient $", arity + 1, ")");
    e.numInputs = arity + 2;
    e.validate();
    d.formulas.push_back(std::move(e));
    start = bar + 3;
  }
  return d;
}

const Expr* Derivative::formulaFor(const std::vector<Arg>& args) const {
  for (const Expr& e : formulas) {
    bool readsNone = false;
    for (const Instr& ins : e.instrs)
      for (const Arg& a : ins.args)
        readsNone |=
            a.kind == Arg::Kind::Input && static_cast<size_t>(a.i) < args.size() && args[a.i].kind == Arg::Kind::None;
    if (!readsNone) return &e;
  }
  return nullptr;
}

const std::vector<Derivative>& derivatives(Op op) { return table().parsed.at(static_cast<size_t>(op)); }

const char* noGradientReason(Op op) { return table().declared.at(static_cast<size_t>(op)).noGradient; }

}  // namespace tsfuse
