// The bytecode of a call: the typed program of the one lowering (kernels/lower/lower.cpp, with the
// device target's rules: ATen's CUDA kernels where they differ from the CPU ones) encoded in the
// fixed-size Program the device evaluator reads. Ops without a device primitive (pow, floor/trunc
// division, alpha-scaled add/sub, ...) make compile() decline; the caller then takes the exact
// chunked path.
#include "kernels/bytecode_compile.h"

#include "kernels/lower/program.h"

namespace tsfuse::bc {
namespace {

// Encodes the typed program as registers [leaves][preloaded: literals, host scalars][the rest].
std::optional<Program> encode(const lower::Program& lp, at::TensorList operands, Flavour flavour, std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<Program> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const int S = static_cast<int>(lp.slotType.size()), L = lp.numLeaves;
  if (L > kMaxLeaves) return no("more than 12 operands");
  if (S > kMaxRegs) return no("more than 48 registers");
  if (lp.code.size() > static_cast<size_t>(kMaxIns)) return no("more than 48 instructions");
  Program p;
  p.flavour = flavour;
  std::vector<char> literal(S, 0);
  for (const auto& lit : lp.literals) literal[lit.slot] = 1;
  std::vector<int> order, map(S);
  for (int s = 0; s < L; ++s) order.push_back(s);
  for (int s = L; s < S; ++s)
    if (literal[s]) order.push_back(s);
  const int nInit = static_cast<int>(order.size());
  for (int s = L; s < S; ++s)
    if (!literal[s]) order.push_back(s);
  for (int i = 0; i < S; ++i) map[order[i]] = i;
  for (int i = 0; i < S; ++i) {
    if (!toDT(lp.slotType[order[i]], p.type[i])) return no(std::string("dtype ") + c10::toString(lp.slotType[order[i]]));
    p.init[i].i64 = 0;
  }
  for (const auto& lit : lp.literals) lp.literalValue(lit, &p.init[map[lit.slot]]);
  for (int i = 0; i < L; ++i) {
    if (!lp.hostLeaf[i]) continue;
    at::Tensor c = operands[i].contiguous();
    p.init[i] = loadElem(c.const_data_ptr(), p.type[i]);
    p.constLeaves |= uint16_t(1u << i);
  }
  p.nLeaves = uint8_t(L);
  p.nRegs = uint8_t(S);
  p.nInit = uint8_t(nInit);
  p.nIns = uint8_t(lp.code.size());
  for (size_t k = 0; k < lp.code.size(); ++k) {
    const lower::Instr& li = lp.code[k];
    DT ct;
    if (!toDT(li.ct, ct)) return no(std::string("dtype ") + c10::toString(li.ct));
    auto reg = [&](int s) { return uint8_t(s < 0 ? 0 : map[s]); };
    p.code[k] = Ins{li.op, ct, reg(li.out), reg(li.a), reg(li.b), reg(li.c)};
  }
  p.result = uint8_t(map[lp.result]);
  return p;
}

}  // namespace

bool toDT(c10::ScalarType t, DT& out) {
  switch (t) {
    case c10::ScalarType::Bool: out = DT::Bool; return true;
    case c10::ScalarType::Byte: out = DT::U8; return true;
    case c10::ScalarType::Char: out = DT::I8; return true;
    case c10::ScalarType::Short: out = DT::I16; return true;
    case c10::ScalarType::Int: out = DT::I32; return true;
    case c10::ScalarType::Long: out = DT::I64; return true;
    case c10::ScalarType::Half: out = DT::F16; return true;
    case c10::ScalarType::BFloat16: out = DT::BF16; return true;
    case c10::ScalarType::Float: out = DT::F32; return true;
    case c10::ScalarType::Double: out = DT::F64; return true;
    default: return false;
  }
}

c10::ScalarType fromDT(DT t) {
  constexpr c10::ScalarType k[] = {c10::ScalarType::Bool, c10::ScalarType::Byte,  c10::ScalarType::Char,
                                   c10::ScalarType::Short, c10::ScalarType::Int,  c10::ScalarType::Long,
                                   c10::ScalarType::Half, c10::ScalarType::BFloat16, c10::ScalarType::Float,
                                   c10::ScalarType::Double};
  return k[static_cast<int>(t)];
}

bool isCpuScalar(const at::Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }

std::optional<Program> compile(const Expr& e, const Analysis& an, at::TensorList operands, Flavour flavour,
                               std::string* why, std::optional<c10::ScalarType> resultAs) {
  const auto target = flavour == Flavour::Cuda ? lower::Target::device() : lower::Target::deviceWithCpuRules();
  auto lp = lower::lowerExpr(e, an, operands, target, why);
  if (!lp) return std::nullopt;
  if (resultAs) {
    if (!lower::holdsDtype(target, *resultAs)) {
      if (why) *why = std::string("result dtype ") + c10::toString(*resultAs);
      return std::nullopt;
    }
    lp->castResultTo(*resultAs);
  }
  return encode(*lp, operands, flavour, why);
}

}  // namespace tsfuse::bc
