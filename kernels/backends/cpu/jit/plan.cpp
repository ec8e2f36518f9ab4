// Which tile programs a compiled kernel can run (jit::Plan, kernels/backends/cpu/jit/codegen.h): dtypes,
// ops, operand layouts, literals, and what each value needs (uniformity, last use, constants).
#include "kernels/backends/cpu/jit/codegen.h"

#include <cstring>

namespace tsfuse::cpu::jit {
namespace {

bool isBool(c10::ScalarType t) { return t == c10::ScalarType::Bool; }

bool fail(std::string* why, const std::string& reason) {
  if (why) *why = reason;
  return false;
}

// The dtypes a kernel converts to float32 or float64 as it broadcasts an element (Gen::load).
bool convertible(c10::ScalarType t) {
  return t == c10::ScalarType::Double || t == c10::ScalarType::Float || t == c10::ScalarType::Long ||
         t == c10::ScalarType::Int;
}

// A uniform leaf of another dtype that the code reads only through casts to one floating dtype
// (a Python number known only at run time, a wrapped double in a float32 program, or a [N, 1]
// int64 column) is read as that dtype: each cast goes and its readers read the leaf, which the
// kernel converts as it broadcasts it, as the cast would (vcvtsd2ss / vcvtsi2ss round to nearest
// like static_cast). Without this such a program mixes dtypes and runs interpreted.
//   s3 = cast<float32>(s1)      (s1: a float64 leaf, stride 0)
//   s4 = div<float32>(s2, s3)   =>   s4 = div<float32>(s2, s1)   (s1 converted as it is loaded)
void foldUniformCasts(Plan& P, int numLeaves, const std::vector<Leaf>& layout) {
  P.convertedFrom.assign(numLeaves, c10::ScalarType::Undefined);
  for (int i = 0; i < numLeaves; ++i) {
    if (layout[i] != Leaf::Uniform || !convertible(P.type[i])) continue;
    c10::ScalarType to = c10::ScalarType::Undefined;
    bool onlyCasts = true;
    for (const lower::Instr& li : P.code)
      for (int x : operandsOf(li)) {
        if (x != i) continue;
        const bool cast = li.op == Prim::Cast &&
                          (li.ct == c10::ScalarType::Float || li.ct == c10::ScalarType::Double) && li.ct != P.type[i] &&
                          li.out != P.source && (to == c10::ScalarType::Undefined || to == li.ct);
        onlyCasts &= cast;
        if (cast) to = li.ct;
      }
    if (!onlyCasts || to == c10::ScalarType::Undefined) continue;
    std::vector<int> renamed(P.type.size());
    for (size_t s = 0; s < renamed.size(); ++s) renamed[s] = static_cast<int>(s);
    std::vector<lower::Instr> code;
    for (lower::Instr li : P.code) {
      if (li.op == Prim::Cast && li.a == i) {
        renamed[li.out] = i;
        continue;
      }
      for (int* x : {&li.a, &li.b, &li.c})
        if (*x >= 0) *x = renamed[*x];
      code.push_back(std::move(li));
    }
    P.code = std::move(code);
    P.convertedFrom[i] = P.type[i];
    P.type[i] = to;
  }
}

}  // namespace

bool widens(const Plan& plan) {
  if (!wideKernels() || (plan.sink != Sink::SumInner && !isExtremum(plan.sink)) || plan.boolValue) return false;
  for (size_t i = 0; i < plan.leaves.size(); ++i)
    if (plan.leaves[i] != Leaf::Unused && isBool(plan.type[i])) return false;  // (loadBools: 32-byte vectors)
  for (const lower::Instr& li : plan.code) {
    if (isBool(plan.type[li.out])) return false;
    switch (li.op) {
      case Prim::Add:
      case Prim::Sub:
      case Prim::Mul:
      case Prim::Div:
      case Prim::Minimum:
      case Prim::Maximum:
      case Prim::ClampMin:
      case Prim::ClampMax:
      case Prim::Neg:
      case Prim::Abs:
        break;
      default:
        return false;
    }
  }
  return true;
}

std::optional<Plan> Plan::make(const TileProgram& p, size_t prefix, int source, Sink sink,
                               const std::vector<Leaf>& layout, const std::vector<char>& perRowLeaves, std::string* why,
                               int64_t innerRows) {
  Plan P;
  P.innerRows = innerRows;
  P.prefix = prefix;
  P.source = source;
  P.sink = sink;
  const int S = static_cast<int>(p.slotType.size());
  P.type = p.slotType;
  P.code.assign(p.code.begin(), p.code.begin() + prefix);
  if (p.numLeaves > kMaxLeaves) return fail(why, "more than " + std::to_string(kMaxLeaves) + " operands"), std::nullopt;
  if (static_cast<int>(layout.size()) != p.numLeaves) return fail(why, "operand layouts missing"), std::nullopt;
  foldUniformCasts(P, p.numLeaves, layout);

  // The primitives the code generator has (prims.def kJit). NB: an ATen tile op keeps its
  // operands in atenSlots (li.a is -1): declined before any look.
  for (const lower::Instr& li : P.code)
    if (!primHas(li.op, kJit))
      return fail(why, li.op == Prim::Aten ? "op runs through ATen" : std::string("no code for ") + primName(li.op)),
             std::nullopt;
  std::vector<char> used(S, 0);
  used[source] = 1;
  for (const lower::Instr& li : P.code) {
    used[li.out] = 1;
    for (int x : operandsOf(li))
      if (x >= 0) used[x] = 1;
  }
  // The one floating dtype of the program; every used slot has it or is a bool.
  bool haveE = false;
  for (int s = 0; s < S; ++s) {
    if (!used[s]) continue;
    const c10::ScalarType t = P.type[s];
    if (isBool(t)) continue;
    if (t != c10::ScalarType::Float && t != c10::ScalarType::Double)
      return fail(why, std::string("dtype ") + c10::toString(t)), std::nullopt;
    if (!haveE) P.f64 = t == c10::ScalarType::Double, haveE = true;
    if ((t == c10::ScalarType::Double) != P.f64) return fail(why, "float32 and float64 mixed"), std::nullopt;
  }
  // A map or count of bools only (a mask from masks) holds them in float32-wide lanes.
  if (!haveE && sink != Sink::Store && sink != Sink::SumInt64)
    return fail(why, "no float32/float64 value"), std::nullopt;
  const c10::ScalarType E = P.f64 ? c10::ScalarType::Double : c10::ScalarType::Float;
  P.boolValue = isBool(P.type[source]);
  if (sink == Sink::SumInt64 && !P.boolValue) return fail(why, "float values summed into integer lanes"), std::nullopt;
  if (sink == Sink::SumFloat && (P.boolValue || P.f64))
    return fail(why, "only float32 values are added in float"), std::nullopt;
  if (sink == Sink::SumInner && P.boolValue) return fail(why, "bools in eager's inner sum order"), std::nullopt;
  if ((sink == Sink::SumInner) != (innerRows > 0)) return fail(why, "inner sum without its rows"), std::nullopt;
  if (isExtremum(sink) && (P.boolValue || P.f64))
    return fail(why, "only float32 values keep their extremum and index"), std::nullopt;
  P.needOnes |= isExtremum(sink);  // the row index steps by subtracting -1
  if (sink == Sink::SumDouble && P.boolValue && P.f64)
    return fail(why, "float64 compares counted into double sums"), std::nullopt;

  P.leaves.assign(p.numLeaves, Leaf::Unused);
  for (int i = 0; i < p.numLeaves; ++i) {
    if (!used[i]) continue;
    // Bools are loaded a whole vector's bytes at a time, also under a lane mask (Gen::loadBools):
    // a map's driver gives whole blocks, a reduction's masked tails read a copy (VerticalReduce).
    if (isBool(P.type[i]) && sink == Sink::SumInner)
      return fail(why, "bool operand of a sum in eager's inner order"), std::nullopt;
    if (layout[i] == Leaf::Strided) return fail(why, "operand strided along the lanes"), std::nullopt;
    P.leaves[i] = layout[i];
  }

  // Literals: their bits as the interpreter holds them (TileProgram::literalValue).
  P.literal.assign(S, std::nullopt);
  for (const auto& lit : p.literals) {
    if (!used[lit.slot]) continue;
    uint64_t bits = 0;
    p.literalValue(lit, &bits);
    if (isBool(P.type[lit.slot])) bits = bits ? ~uint64_t(0) : 0;
    P.literal[lit.slot] = bits;
  }

  P.uniform.assign(S, 0);
  P.perRow.assign(S, 0);
  for (int i = 0; i < p.numLeaves; ++i) {
    P.uniform[i] = P.leaves[i] == Leaf::Uniform;
    P.perRow[i] = P.leaves[i] != Leaf::Unused && i < static_cast<int>(perRowLeaves.size()) && perRowLeaves[i];
  }
  for (int s = 0; s < S; ++s)
    if (P.literal[s]) P.uniform[s] = 1;
  P.lastUse.assign(S, -1);
  for (size_t k = 0; k < P.code.size(); ++k) {
    const lower::Instr& li = P.code[k];
    bool allUniform = true, anyPerRow = false;
    for (int x : operandsOf(li)) {
      if (x < 0) continue;
      P.lastUse[x] = static_cast<int>(k);
      allUniform &= P.uniform[x] != 0;
      anyPerRow |= P.perRow[x] != 0;
    }
    P.uniform[li.out] = allUniform;
    P.perRow[li.out] = anyPerRow;
    // What each op needs, checked against the dtypes the interpreter's loops assume.
    const c10::ScalarType ta = P.type[li.a];
    switch (li.op) {
      case Prim::Add:
      case Prim::Sub:
      case Prim::Mul:
      case Prim::Div:
      case Prim::Minimum:
      case Prim::Maximum:
      case Prim::ClampMin:
      case Prim::ClampMax:
      case Prim::Neg:
      case Prim::Abs:
      case Prim::Floor:
      case Prim::Ceil:
      case Prim::Trunc:
      case Prim::Round:
        if (li.ct != E) return fail(why, "arithmetic on bools"), std::nullopt;
        P.needAbs |= li.op == Prim::Abs;
        P.needSign |= li.op == Prim::Neg;
        P.needNaN |= li.op == Prim::Minimum || li.op == Prim::Maximum;
        break;
      case Prim::Eq:
      case Prim::Ne:
      case Prim::Lt:
      case Prim::Le:
      case Prim::Gt:
      case Prim::Ge:
        if (isBool(li.ct) && li.op != Prim::Eq && li.op != Prim::Ne)
          return fail(why, "ordering of bools"), std::nullopt;
        P.needOnes |= isBool(li.ct) && li.op == Prim::Eq;
        break;
      case Prim::And:
      case Prim::Or:
      case Prim::Xor:
      case Prim::Not:
        for (int x : operandsOf(li))
          if (x >= 0 && !isBool(P.type[x])) return fail(why, "logical op on non-bools"), std::nullopt;
        P.needOnes |= li.op == Prim::Not;
        break;
      case Prim::Where:
        if (!isBool(ta)) return fail(why, "where() condition is not a bool"), std::nullopt;
        break;
      case Prim::Cast:
        if (isBool(ta) == isBool(li.ct)) return fail(why, "cast between equal kinds"), std::nullopt;
        P.needOne |= isBool(ta);
        P.needZero |= isBool(li.ct);
        break;
      default:
        break;  // declined above
    }
  }
  P.lastUse[source] = static_cast<int>(P.code.size());

  // The cache key: everything the generated code depends on (the literals' values are not: see
  // Kernel::get).
  std::string& key = P.key;
  auto put = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(P.f64), put(static_cast<int64_t>(sink)), put(source), put(p.numLeaves), put(innerRows);
  put(wideKernels());  // (whether widens() may hold: the switch picks other kernels)
  for (size_t i = 0; i < P.leaves.size(); ++i)
    put(static_cast<int64_t>(P.leaves[i])), put(P.perRow[i]), put(static_cast<int64_t>(P.convertedFrom[i]));
  for (const lower::Instr& li : P.code) {
    put(static_cast<int64_t>(li.op)), put(static_cast<int64_t>(li.ct));
    put(li.out), put(li.a), put(li.b), put(li.c);
  }
  for (int s = 0; s < S; ++s) {
    if (!used[s]) continue;
    put(s), put(static_cast<int64_t>(P.type[s]));
    put(P.literal[s].has_value());  // not its value: that comes with each call
  }
  return P;
}

}  // namespace tsfuse::cpu::jit
