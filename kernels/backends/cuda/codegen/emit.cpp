// The kernel texts (kernels/backends/cuda/codegen/emit.h): the dtypes, the common parts of the writer
// (emitter.h) and the map skeleton. A program becomes one `const` local per slot: operands loaded
// from their strided addresses, literals as exact bit patterns passed with each call, each instruction the text of its
// primitive (prim_text.cpp). Skeletons keep every loop bound uniform across a block (barriers only
// where all threads reach them) and index with the kernel's own index type, so 32-bit kernels do
// no 64-bit arithmetic.
#include "kernels/backends/cuda/codegen/emit.h"

#include "kernels/backends/cuda/codegen/emitter.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tsfuse::cuda {

std::optional<Ty> tyOf(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool:
      return Ty::Bool;
    case c10::ScalarType::Byte:
      return Ty::U8;
    case c10::ScalarType::Char:
      return Ty::I8;
    case c10::ScalarType::Short:
      return Ty::I16;
    case c10::ScalarType::Int:
      return Ty::I32;
    case c10::ScalarType::Long:
      return Ty::I64;
    case c10::ScalarType::Float:
      return Ty::F32;
    case c10::ScalarType::Double:
      return Ty::F64;
    case c10::ScalarType::Half:
      return Ty::F16;
    case c10::ScalarType::BFloat16:
      return Ty::BF16;
    default:
      return std::nullopt;
  }
}

c10::ScalarType scalarTypeOf(Ty t) {
  using S = c10::ScalarType;
  constexpr S k[] = {S::Bool, S::Byte, S::Char, S::Short, S::Int, S::Long, S::Float, S::Double, S::Half, S::BFloat16};
  return k[static_cast<int>(t)];
}

const char* tyName(Ty t) {
  constexpr const char* k[] = {"tsf_bool", "tsf_u8",  "tsf_i8",  "tsf_i16", "tsf_i32",
                               "tsf_i64",  "tsf_f32", "tsf_f64", "tsf_f16", "tsf_bf16"};
  return k[static_cast<int>(t)];
}

const char* localName(Ty t) { return tyName(mathTy(t)); }

int tySize(Ty t) {
  constexpr int k[] = {1, 1, 1, 2, 4, 8, 4, 8, 2, 2};
  return k[static_cast<int>(t)];
}

bool isHalfTy(Ty t) { return t == Ty::F16 || t == Ty::BF16; }
bool isFloatTy(Ty t) { return t == Ty::F32 || t == Ty::F64 || isHalfTy(t); }
Ty mathTy(Ty t) { return isHalfTy(t) ? Ty::F32 : t; }

const char* kindName(Kind k) {
  constexpr const char* n[] = {"map", "redthread", "redblock", "pair2", "gemm"};
  return n[static_cast<int>(k)];
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t literalArg(const lower::Program& p, const lower::Program::Literal& lit) {
  uint64_t bits = 0;
  p.literalValue(lit, &bits);  // the value converted to the slot's dtype, as ATen converts it
  const Ty t = *tyOf(p.slotType[lit.slot]);
  if (isHalfTy(t)) {  // held in float: the half value's float bits
    const float f = t == Ty::F16 ? float(c10::Half(uint16_t(bits), c10::Half::from_bits()))
                                 : float(c10::BFloat16(uint16_t(bits), c10::BFloat16::from_bits()));
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  }
  switch (t) {
    case Ty::F32:
      return uint32_t(bits);
    case Ty::F64:
    case Ty::I64:
      return bits;
    case Ty::I8:
      return static_cast<uint64_t>(int64_t(int8_t(bits)));
    case Ty::Bool:
    case Ty::U8:
      return uint8_t(bits);
    case Ty::I16:
      return static_cast<uint64_t>(int64_t(int16_t(bits)));
    default:
      return static_cast<uint64_t>(int64_t(int32_t(bits)));
  }
}

namespace detail {

Emitter::Emitter(const lower::Program& prog, const lower::Program* epilogue, const KernelSpec& s)
    : spec(s), idx(s.index64 ? "tsf_i64" : "tsf_i32") {
  main.p = &prog;
  if (epilogue) {
    hasEpilogue = true;
    epi.p = epilogue;
    epi.pre = "e";
    epi.firstLeaf = 1;
    epi.operandBase = prog.numLeaves - 1;  // epilogue leaf l >= 1 is fused operand numLeaves + l - 1
  }
}

bool Emitter::types(Code& c) {
  for (c10::ScalarType t : c.p->slotType) {
    auto ty = tyOf(t);
    if (!ty) return fail(std::string("dtype ") + c10::toString(t) + " has no generated form");
    c.slot.push_back(*ty);
  }
  return true;
}

void Emitter::declareParams(const std::vector<Ty>& outs) {
  auto param = [&](Param pr, const std::string& text) {
    params.push_back(pr);
    paramText.push_back(text);
  };
  for (size_t o = 0; o < outs.size(); ++o)
    param({Param::Out, static_cast<int>(o), outs[o]},
          std::string("TSF_GLOBAL ") + tyName(outs[o]) + "* TSF_RESTRICT out" + (o ? str(static_cast<int>(o)) : ""));
  std::vector<const Code*> codes{&main};
  if (hasEpilogue) codes.push_back(&epi);
  for (const Code* c : codes)
    for (int l = 0; l < c->p->numLeaves; ++l)
      if (c->data(l))
        param({Param::Data, c->operandBase + l, c->slot[l]},
              std::string("TSF_GLOBAL const ") + tyName(c->slot[l]) + "* TSF_RESTRICT " + c->pre + "in" + str(l));
  for (const Code* c : codes)
    for (int l = c->firstLeaf; l < c->p->numLeaves; ++l)
      if (c->p->hostLeaf[l])
        param({Param::HostValue, c->operandBase + l, c->slot[l]},
              std::string("const ") + localName(c->slot[l]) + " " + c->pre + "h" + str(l));
  // The literals, each as 8 bytes (literalArg), so that the text, and the compiled kernel, serve
  // every value of them: a number bound per call (kernels/runtime/bind_numbers.h) compiles nothing new.
  int literalIndex = 0;
  for (const Code* c : codes)
    for (size_t k = 0; k < c->p->literals.size(); ++k)
      param({Param::Literal, literalIndex++, c->slot[c->p->literals[k].slot]},
            "const tsf_u64 " + c->pre + "lit" + str(static_cast<int>(k)));
  const Ty it = spec.index64 ? Ty::I64 : Ty::I32;
  auto index = [&](const std::string& n) { param({Param::Index, -1, it}, "const " + idx + " " + n); };
  auto space = [&](const Code& c, const std::string& count, const std::string& size, const std::string& stride,
                   int rank) {
    if (!count.empty()) index(count);
    for (int d = 0; d < rank; ++d) index(size + str(d));
    for (int l = 0; l < c.p->numLeaves; ++l)
      if (c.data(l))
        for (int d = 0; d < rank; ++d) index(c.pre + stride + str(l) + "_" + str(d));
  };
  space(main, "n", "k", "s", spec.keptRank);
  if (spec.kind != Kind::Map && spec.kind != Kind::Pair2) space(main, "count", "r", "t", spec.reducedRank);
  if (hasEpilogue) space(epi, "", "q", "u", spec.epilogueRank);
}

void Emitter::offsets(const Code& c, const std::string& lin, const std::string& coord, const std::string& size,
                      const std::string& stride, int rank, const std::string& base, const std::string& off) {
  line(idx + " " + coord + "q = " + lin + ";");
  for (int d = rank - 1; d >= 1; --d) {
    line("const " + idx + " " + coord + str(d) + " = " + coord + "q % " + size + str(d) + ";");
    line(coord + "q = " + coord + "q / " + size + str(d) + ";");
  }
  line("const " + idx + " " + coord + "0 = " + coord + "q;");
  for (int l = 0; l < c.p->numLeaves; ++l) {
    if (!c.data(l)) continue;
    std::string sum = base.empty() ? "" : base + str(l) + " + ";
    for (int d = 0; d < rank; ++d)
      sum += (d ? " + " : "") + coord + str(d) + " * " + c.pre + stride + str(l) + "_" + str(d);
    line("const " + idx + " " + off + str(l) + " = " + sum + ";");
  }
}

std::string Emitter::load(const Code& c, int l, const std::string& offset) const {
  if (c.p->hostLeaf[l]) return c.pre + "h" + str(l);
  const std::string at = c.pre + "in" + str(l) + "[" + offset + "]";
  return c.slot[l] == Ty::Bool ? "(tsf_bool)(" + at + " != 0)" : loadText(c.slot[l], at);
}

void Emitter::declareLeaf(const Code& c, int l, const std::string& value) {
  line("const " + std::string(localName(c.slot[l])) + " " + c.name(l) + " = " + value + ";");
}

void Emitter::loads(const Code& c, const std::string& off) {
  for (int l = c.firstLeaf; l < c.p->numLeaves; ++l) declareLeaf(c, l, load(c, l, off + str(l)));
}

std::string Emitter::literalText(const Code& c, int k) const {
  const lower::Program::Literal& lit = c.p->literals[k];
  const std::string param = c.pre + "lit" + str(k);
  const Ty t = c.slot[lit.slot];
  if (isHalfTy(t) || t == Ty::F32) return "TSF_F32_BITS(" + param + ")";
  if (t == Ty::F64) return "TSF_F64_BITS(" + param + ")";
  if (t == Ty::I64) return "(tsf_i64)" + param;
  return "(" + std::string(tyName(t)) + ")(tsf_i64)" + param;
}

bool Emitter::body(const Code& c) {
  for (size_t k = 0; k < c.p->literals.size(); ++k) {
    const int slot = c.p->literals[k].slot;
    line(std::string("const ") + localName(c.slot[slot]) + " " + c.name(slot) + " = " +
         literalText(c, static_cast<int>(k)) + ";");
  }
  for (const lower::Instr& in : c.p->code) {
    const Ty ct = *tyOf(in.ct);
    // An op of a half dtype computes in float (operands that are float already, such as a host
    // scalar kept in opmath, stay unrounded) and rounds its result to the dtype.
    const Ty mt = in.op == Prim::Cast ? ct : mathTy(ct);
    auto operand = [&](int s, Ty want) { return s < 0 ? std::string() : convText(c.slot[s], want, c.name(s)); };
    PrimArgs g{mt, in.a >= 0 ? c.slot[in.a] : ct, "", "", "", spec.cudaRules};
    if (in.op == Prim::Cast) {
      g.a = c.name(in.a);
    } else {
      g.a = operand(in.a, in.op == Prim::Where ? Ty::Bool : mt);
      g.b = operand(in.b, mt);
      g.c = operand(in.c, mt);
    }
    std::string v = primText(in.op, g);
    if (v.empty()) return fail(std::string("primitive ") + primName(in.op) + " has no device form for " + tyName(ct));
    const Ty valueTy = primHas(in.op, kBoolResult) ? Ty::Bool : mt;
    line(std::string("const ") + localName(c.slot[in.out]) + " " + c.name(in.out) + " = " +
         convText(valueTy, c.slot[in.out], v) + ";");
  }
  return true;
}

bool Emitter::storeResult(const std::string& value, Ty valueTy) {
  if (!hasEpilogue) {
    line("out[o] = " + storeText(valueTy, value) + ";");
    return true;
  }
  line("const " + std::string(localName(epi.slot[0])) + " " + epi.name(0) + " = " +
       convText(valueTy, epi.slot[0], value) + ";");
  offsets(epi, "o", "ec", "q", "u", spec.epilogueRank, "", "eo");
  loads(epi, "eo");
  if (!body(epi)) return false;
  const int r = epi.p->result;
  line("out[o] = " + storeText(epi.slot[r], epi.name(r)) + ";");
  return true;
}

bool Emitter::map() {
  declareParams({main.slot[main.p->result]});
  open("for (" + idx + " i = " + gridStart() + "; i < n; i += " + gridStep() + ") {");
  offsets(main, "i", "c", "k", "s", spec.keptRank, "", "o");
  loads(main, "o");
  if (!body(main)) return false;
  line("out[i] = " + storeText(main.slot[main.p->result], main.name(main.p->result)) + ";");
  close();
  return true;
}

// A block owns kPairRows x TM outputs of [N = k0, M = k1] (TM = the block size): it stages the
// tile's row operands (one value per row, by the first kPairRows threads) and column operands
// (one per column) in local memory once, then each thread computes its column for every row of
// the tile. Writes are coalesced along M and each operand element is read once per tile.
bool Emitter::pair2() {
  const int tm = spec.blockSize;
  if (tm < kPairRows || (tm & (tm - 1))) return fail("pair2 needs a power-of-two block of at least kPairRows threads");
  declareParams({main.slot[main.p->result]});
  const auto& acc = spec.access;
  for (int l = 0; l < main.p->numLeaves; ++l) {
    if (main.p->hostLeaf[l]) continue;
    const std::string t = localName(main.slot[l]);
    if (acc[l] == Access2::Row) line("TSF_LOCAL " + t + " rw" + str(l) + "[" + str(kPairRows) + "];");
    if (acc[l] == Access2::Col) line("TSF_LOCAL " + t + " cl" + str(l) + "[" + str(tm) + "];");
  }
  line("const tsf_i32 t = TSF_TID;");
  line("const " + idx + " tilesM = (k1 + " + str(tm - 1) + ") / " + str(tm) + ";");
  line("const " + idx + " tiles = ((k0 + " + str(kPairRows - 1) + ") / " + str(kPairRows) + ") * tilesM;");
  open("for (" + idx + " tile = (" + idx + ")TSF_BID; tile < tiles; tile += (" + idx + ")TSF_GDIM) {");
  line("const " + idx + " n0 = tile / tilesM * " + str(kPairRows) + ", m0 = tile % tilesM * " + str(tm) + ";");
  for (int l = 0; l < main.p->numLeaves; ++l) {
    if (main.p->hostLeaf[l]) continue;
    const std::string L = str(l);
    if (acc[l] == Access2::Row)
      line("if (t < " + str(kPairRows) + " && n0 + t < k0) rw" + L +
           "[t] = " + load(main, l, "(n0 + t) * s" + L + "_0") + ";");
    if (acc[l] == Access2::Col)
      line("if (m0 + t < k1) cl" + L + "[t] = " + load(main, l, "(m0 + t) * s" + L + "_1") + ";");
  }
  line("TSF_BARRIER();");
  line("const " + idx + " m = m0 + t;");
  line("const " + idx + " rows = k0 - n0 < " + str(kPairRows) + " ? k0 - n0 : " + str(kPairRows) + ";");
  open("if (m < k1) {");
  open("for (" + idx + " rr = 0; rr < rows; ++rr) {");
  line("const " + idx + " nn = n0 + rr;");
  for (int l = 0; l < main.p->numLeaves; ++l) {
    const std::string L = str(l);
    switch (main.p->hostLeaf[l] ? Access2::Scalar : acc[l]) {
      case Access2::Row:
        declareLeaf(main, l, "rw" + L + "[rr]");
        break;
      case Access2::Col:
        declareLeaf(main, l, "cl" + L + "[t]");
        break;
      case Access2::Scalar:
        declareLeaf(main, l, load(main, l, "0"));
        break;
      case Access2::Full:
        declareLeaf(main, l, load(main, l, "nn * s" + L + "_0 + m * s" + L + "_1"));
        break;
    }
  }
  if (!body(main)) return false;
  line("out[nn * k1 + m] = " + storeText(main.slot[main.p->result], main.name(main.p->result)) + ";");
  close();
  close();
  line("TSF_BARRIER();  /* the staged operands are rewritten by the next tile */");
  close();
  return true;
}

}  // namespace detail

std::optional<KernelSource> emitKernel(const lower::Program& p, const KernelSpec& spec, std::string* why,
                                       const lower::Program* epilogue) {
  auto no = [&](const std::string& reason) -> std::optional<KernelSource> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (spec.keptRank < 1) return no("a kernel needs a kept dim");
  const bool reduces = spec.kind != Kind::Map && spec.kind != Kind::Pair2;
  if (epilogue && (!reduces || spec.epilogueRank < 1)) return no("an epilogue needs a reduction and its space");
  if ((spec.kind == Kind::Pair2 || spec.kind == Kind::Gemm) &&
      (spec.keptRank != 2 || spec.access.size() != static_cast<size_t>(p.numLeaves)))
    return no(std::string(kindName(spec.kind)) + " needs two kept dims and each operand's access");
  detail::Emitter E(p, epilogue, spec);
  if (!E.types(E.main) || (epilogue && !E.types(E.epi))) return no(E.why);
  const bool ok = spec.kind == Kind::Map ? E.map() : spec.kind == Kind::Pair2 ? E.pair2() : E.reduce();
  if (!ok) return no(E.why);

  std::string sig;
  for (size_t i = 0; i < E.paramText.size(); ++i) sig += (i ? ",\n    " : "\n    ") + E.paramText[i];
  // The register budget as a bound ptxas keeps: blockSize threads, at least as many blocks per SM
  // as 64 K registers hold at the budget.
  const bool doubleValues = E.code.find("tsf_f64 ") != std::string::npos;
  const int budget = doubleValues ? kDoubleRegisterBudget : kRegisterBudget;
  const std::string bounds =
      "TSF_BOUNDS(" + detail::str(spec.blockSize) + ", " + detail::str(65536 / (spec.blockSize * budget)) + ")";
  const std::string kernel = "TSF_KERNEL " + bounds + " @NAME@(" + sig + ") {\n" + E.code + "}\n";
  KernelSource k;
  k.registerBudget = budget;
  k.hash = fnv1a(kernel);
  char hash[20];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, k.hash);
  using detail::str;
  k.name = std::string("tsf_") + kindName(spec.kind) + "_r" + str(spec.keptRank) +
           (reduces ? "x" + str(spec.reducedRank) : "") + (spec.index64 ? "_i64_" : "_i32_") + hash;
  k.text = std::string(prelude()) + kernel.substr(0, kernel.find("@NAME@")) + k.name +
           kernel.substr(kernel.find("@NAME@") + 6);
  k.params = std::move(E.params);
  return k;
}

}  // namespace tsfuse::cuda
