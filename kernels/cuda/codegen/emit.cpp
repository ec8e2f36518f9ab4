// The kernel skeletons and the straight-line code spliced into them (kernels/cuda/codegen/emit.h).
// The program becomes one `const` local per slot: operands loaded from their strided addresses,
// literals as exact bit patterns, each instruction the text of its primitive (prim_text.cpp).
// Skeletons keep every loop bound uniform across a block (barriers only where all threads reach
// them) and index with the kernel's own index type, so 32-bit kernels do no 64-bit arithmetic.
#include "kernels/cuda/codegen/emit.h"

#include "kernels/cuda/codegen/prim_text.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tsfuse::gpu {

std::optional<Ty> tyOf(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool: return Ty::Bool;
    case c10::ScalarType::Byte: return Ty::U8;
    case c10::ScalarType::Char: return Ty::I8;
    case c10::ScalarType::Short: return Ty::I16;
    case c10::ScalarType::Int: return Ty::I32;
    case c10::ScalarType::Long: return Ty::I64;
    case c10::ScalarType::Float: return Ty::F32;
    case c10::ScalarType::Double: return Ty::F64;
    case c10::ScalarType::Half: return Ty::F16;
    case c10::ScalarType::BFloat16: return Ty::BF16;
    default: return std::nullopt;
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
  constexpr const char* n[] = {"map", "redthread", "redblock"};
  return n[static_cast<int>(k)];
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

namespace {

std::string str(int v) { return std::to_string(v); }

struct Emitter {
  Emitter(const lower::Program& prog, const KernelSpec& s) : p(prog), spec(s), idx(s.index64 ? "tsf_i64" : "tsf_i32") {}
  const lower::Program& p;
  const KernelSpec& spec;
  std::string idx;  // the index type
  std::string why;
  std::vector<Ty> slot;
  std::vector<Param> params;
  std::vector<std::string> paramText;
  std::string code;
  int depth = 1;

  bool fail(std::string reason) {
    why = std::move(reason);
    return false;
  }
  void line(const std::string& l) { code += std::string(2 * depth, ' ') + l + "\n"; }
  bool reduces() const { return spec.kind != Kind::Map; }
  std::string name(int s) const { return (s < p.numLeaves ? "a" : "v") + str(s); }

  bool types() {
    for (c10::ScalarType t : p.slotType) {
      auto ty = tyOf(t);
      if (!ty) return fail(std::string("dtype ") + c10::toString(t) + " has no generated form");
      slot.push_back(*ty);
    }
    return true;
  }

  void param(Param pr, const std::string& text) {
    params.push_back(pr);
    paramText.push_back(text);
  }

  void declareParams(Ty outTy) {
    param({Param::Out, -1, outTy}, std::string("TSF_GLOBAL ") + tyName(outTy) + "* TSF_RESTRICT out");
    for (int l = 0; l < p.numLeaves; ++l)
      if (!p.hostLeaf[l])
        param({Param::Data, l, slot[l]}, std::string("TSF_GLOBAL const ") + tyName(slot[l]) + "* TSF_RESTRICT in" + str(l));
    for (int l = 0; l < p.numLeaves; ++l)
      if (p.hostLeaf[l]) param({Param::HostValue, l, slot[l]}, std::string("const ") + localName(slot[l]) + " h" + str(l));
    const Ty it = spec.index64 ? Ty::I64 : Ty::I32;
    auto index = [&](const std::string& n) { param({Param::Index, -1, it}, "const " + idx + " " + n); };
    index("n");
    for (int d = 0; d < spec.keptRank; ++d) index("k" + str(d));
    for (int l = 0; l < p.numLeaves; ++l)
      if (!p.hostLeaf[l])
        for (int d = 0; d < spec.keptRank; ++d) index("s" + str(l) + "_" + str(d));
    if (!reduces()) return;
    index("count");
    for (int d = 0; d < spec.reducedRank; ++d) index("r" + str(d));
    for (int l = 0; l < p.numLeaves; ++l)
      if (!p.hostLeaf[l])
        for (int d = 0; d < spec.reducedRank; ++d) index("t" + str(l) + "_" + str(d));
  }

  // Coordinates c<d> (prefix) of linear index `lin` over sizes <size><d>, innermost last, and
  // each data operand's offset off<l> (+)= sum c<d> * <stride><l>_<d>.
  void offsets(const std::string& lin, const std::string& c, const std::string& size, const std::string& stride,
               int rank, bool accumulate, const std::string& off) {
    line(idx + " " + c + "q = " + lin + ";");
    for (int d = rank - 1; d >= 1; --d) {
      line("const " + idx + " " + c + str(d) + " = " + c + "q % " + size + str(d) + ";");
      line(c + "q = " + c + "q / " + size + str(d) + ";");
    }
    line("const " + idx + " " + c + "0 = " + c + "q;");
    for (int l = 0; l < p.numLeaves; ++l) {
      if (p.hostLeaf[l]) continue;
      std::string sum;
      for (int d = 0; d < rank; ++d) sum += (d ? " + " : "") + c + str(d) + " * " + stride + str(l) + "_" + str(d);
      line((accumulate ? "const " + idx + " " + off + str(l) + " = b" + str(l) + " + " : idx + " " + off + str(l) + " = ") +
           sum + ";");
    }
  }

  void loads(const std::string& off) {
    for (int l = 0; l < p.numLeaves; ++l) {
      const std::string t = localName(slot[l]), at = "in" + str(l) + "[" + off + str(l) + "]";
      if (p.hostLeaf[l]) line("const " + t + " " + name(l) + " = h" + str(l) + ";");
      else if (slot[l] == Ty::Bool) line("const tsf_bool " + name(l) + " = (tsf_bool)(" + at + " != 0);");
      else line("const " + t + " " + name(l) + " = " + loadText(slot[l], at) + ";");
    }
  }

  std::string literalText(const lower::Program::Literal& lit) const {
    uint64_t bits = 0;
    p.literalValue(lit, &bits);  // the value converted to the slot's dtype, as ATen converts it
    char buf[96];
    const Ty t = slot[lit.slot];
    if (isHalfTy(t)) {  // held in float: the half value's float bits
      const float f = t == Ty::F16 ? float(c10::Half(uint16_t(bits), c10::Half::from_bits()))
                                   : float(c10::BFloat16(uint16_t(bits), c10::BFloat16::from_bits()));
      uint32_t u;
      std::memcpy(&u, &f, 4);
      std::snprintf(buf, sizeof buf, "TSF_F32_BITS(0x%08" PRIx32 "u) /* %s %.9g */", u, tyName(t), f);
      return buf;
    }
    switch (t) {
      case Ty::F32: {
        float f;
        std::memcpy(&f, &bits, 4);
        std::snprintf(buf, sizeof buf, "TSF_F32_BITS(0x%08" PRIx32 "u) /* %.9g */", uint32_t(bits), f);
        break;
      }
      case Ty::F64: {
        double f;
        std::memcpy(&f, &bits, 8);
        std::snprintf(buf, sizeof buf, "TSF_F64_BITS(TSF_U64(0x%016" PRIx64 ")) /* %.17g */", bits, f);
        break;
      }
      case Ty::I64: std::snprintf(buf, sizeof buf, "(tsf_i64)TSF_U64(0x%016" PRIx64 ")", bits); break;
      default: {
        int64_t v = 0;
        switch (tySize(t)) {
          case 1: v = t == Ty::I8 ? int64_t(int8_t(bits)) : int64_t(uint8_t(bits)); break;
          case 2: v = int16_t(bits); break;
          default: v = int32_t(bits); break;
        }
        std::snprintf(buf, sizeof buf, "(%s)(%" PRId64 ")", tyName(t), v);
      }
    }
    return buf;
  }

  // The program's straight-line code; its value is in name(p.result).
  bool body() {
    for (const auto& lit : p.literals)
      line(std::string("const ") + localName(slot[lit.slot]) + " " + name(lit.slot) + " = " + literalText(lit) + ";");
    for (const lower::Instr& in : p.code) {
      const Ty ct = *tyOf(in.ct);
      // An op of a half dtype computes in float (operands that are float already, such as a host
      // scalar kept in opmath, stay unrounded) and rounds its result to the dtype.
      const Ty mt = in.op == Prim::Cast ? ct : mathTy(ct);
      auto operand = [&](int s, Ty want) { return s < 0 ? std::string() : convText(slot[s], want, name(s)); };
      PrimArgs g{mt, in.a >= 0 ? slot[in.a] : ct, "", "", "", spec.cudaRules};
      if (in.op == Prim::Cast) {
        g.a = name(in.a);
      } else {
        g.a = operand(in.a, in.op == Prim::Where ? Ty::Bool : mt);
        g.b = operand(in.b, mt);
        g.c = operand(in.c, mt);
      }
      std::string v = primText(in.op, g);
      if (v.empty())
        return fail(std::string("primitive ") + primName(in.op) + " has no device form for " + tyName(ct));
      const Ty valueTy = primHas(in.op, kBoolResult) ? Ty::Bool : mt;
      line(std::string("const ") + localName(slot[in.out]) + " " + name(in.out) + " = " + convText(valueTy, slot[in.out], v) + ";");
    }
    return true;
  }

  std::string gridStart() const { return "(" + idx + ")(TSF_BID * TSF_BDIM + TSF_TID)"; }
  std::string gridStep() const { return "(" + idx + ")(TSF_GDIM * TSF_BDIM)"; }

  bool map() {
    declareParams(slot[p.result]);
    line("for (" + idx + " i = " + gridStart() + "; i < n; i += " + gridStep() + ") {");
    ++depth;
    offsets("i", "c", "k", "s", spec.keptRank, false, "o");
    loads("o");
    if (!body()) return false;
    line("out[i] = " + storeText(slot[p.result], name(p.result)) + ";");
    --depth;
    line("}");
    return true;
  }

  // --- reductions: a wide accumulator (double for floating values, wrapping int64 otherwise;
  // any/all: int64 0/1),
  // the rules of kernels/reduction_rules.h.
  Ty wide = Ty::I64;
  bool isArg() const { return spec.reduction == Reduction::Argmax || spec.reduction == Reduction::Argmin; }
  bool anyAll() const { return spec.reduction == Reduction::Any || spec.reduction == Reduction::All; }
  bool isMax() const { return spec.reduction == Reduction::Amax || spec.reduction == Reduction::Argmax; }

  std::string initValue() const {
    const bool f = wide == Ty::F64;
    switch (spec.reduction) {
      case Reduction::Prod: return f ? "1.0" : "(tsf_i64)1";
      case Reduction::All: return "(tsf_i64)1";
      case Reduction::Amax: return f ? "TSF_F64_BITS(TSF_U64(0xfff0000000000000))" : "(tsf_i64)TSF_U64(0x8000000000000000)";
      case Reduction::Amin: return f ? "TSF_F64_BITS(TSF_U64(0x7ff0000000000000))" : "(tsf_i64)TSF_U64(0x7fffffffffffffff)";
      default: return f ? "0.0" : "(tsf_i64)0";
    }
  }

  // Whether x (at a later index) replaces best: NaN counts as the extremum, the first one wins.
  std::string laterBeats(const std::string& x, const std::string& best) const {
    const std::string gt = "(" + x + (isMax() ? " > " : " < ") + best + ")";
    if (wide != Ty::F64) return gt;
    return "((" + best + " == " + best + ") && ((" + x + " != " + x + ") || " + gt + "))";
  }

  // acc (op)= x, for x met after everything acc holds (index `at` for arg reductions).
  void fold(const std::string& acc, const std::string& aidx, const std::string& x, const std::string& at) {
    const bool f = wide == Ty::F64;
    switch (spec.reduction) {
      case Reduction::Sum: case Reduction::Mean:
        line(acc + " = " + (f ? acc + " + " + x : "(tsf_i64)((tsf_u64)" + acc + " + (tsf_u64)" + x + ")") + ";");
        break;
      case Reduction::Prod:
        line(acc + " = " + (f ? acc + " * " + x : "(tsf_i64)((tsf_u64)" + acc + " * (tsf_u64)" + x + ")") + ";");
        break;
      case Reduction::Amax: case Reduction::Amin: {
        const std::string takes = std::string(f ? "(" + x + " != " + x + ") || " : "") + "(" + x +
                                  (isMax() ? " > " : " < ") + acc + ")";
        line("if (" + takes + ") " + acc + " = " + x + ";");
        break;
      }
      case Reduction::Any: line(acc + " = " + acc + " | " + x + ";"); break;  // x is 0 or 1
      case Reduction::All: line(acc + " = " + acc + " & " + x + ";"); break;
      default:  // argmax / argmin
        line("if (" + aidx + " < 0 || " + laterBeats(x, acc) + ") { " + acc + " = " + x + "; " + aidx + " = " + at + "; }");
    }
  }

  // acc (op)= a partial (x, xi) met in any index order.
  void merge(const std::string& acc, const std::string& aidx, const std::string& x, const std::string& xi) {
    if (!isArg()) return fold(acc, aidx, x, xi);
    line("if (" + xi + " >= 0 && (" + aidx + " < 0 || (" + xi + " < " + aidx + " ? !" + laterBeats(acc, x) + " : " +
         laterBeats(x, acc) + "))) { " + acc + " = " + x + "; " + aidx + " = " + xi + "; }");
  }

  void store(const std::string& acc, const std::string& aidx, Ty outTy) {
    if (isArg()) return line("out[o] = " + aidx + ";");
    const std::string v = spec.reduction == Reduction::Mean ? convText(Ty::F64, outTy, "(" + acc + " / (tsf_f64)count)")
                                                           : convText(wide, outTy, acc);
    line("out[o] = " + storeText(outTy, v) + ";");
  }

  // One reduced element at linear index r: its value, widened, in `x`.
  bool element(const std::string& r) {
    offsets(r, "e", "r", "t", spec.reducedRank, true, "o");
    loads("o");
    if (!body()) return false;
    // any/all fold the value's truth (0/1), everything else the value in the wide domain.
    const std::string x = anyAll() ? "(tsf_i64)" + convText(slot[p.result], Ty::Bool, name(p.result))
                                   : convText(slot[p.result], wide, name(p.result));
    line(std::string("const ") + tyName(wide) + " x = " + x + ";");
    return true;
  }

  bool reduce() {
    switch (spec.reduction) {
      case Reduction::Logsumexp: case Reduction::Norm: case Reduction::Max: case Reduction::Min:
        return fail(std::string("no generated kernel for ") + reductionName(spec.reduction));
      default: break;
    }
    if (spec.reducedRank < 1) return fail("a reduction kernel needs a reduced dim");
    wide = isFloatTy(slot[p.result]) && !anyAll() ? Ty::F64 : Ty::I64;
    if (spec.reduction == Reduction::Mean && wide != Ty::F64) return fail("mean of an integer value");
    const Ty outTy = isArg() ? Ty::I64 : tyOf(spec.outDtype).value_or(Ty::Bool);
    if (!isArg() && !tyOf(spec.outDtype)) return fail(std::string("output dtype ") + c10::toString(spec.outDtype));
    declareParams(outTy);
    const std::string w = tyName(wide);
    const bool block = spec.kind == Kind::ReduceBlock;
    const int bs = spec.blockSize;
    if (block) {
      if (bs < 1 || (bs & (bs - 1))) return fail("block size is not a power of two");
      line("TSF_LOCAL " + w + " pa[" + str(bs) + "];");
      if (isArg()) line("TSF_LOCAL tsf_i64 pi[" + str(bs) + "];");
      line("const tsf_i32 t = TSF_TID;");
      line("for (" + idx + " o = (" + idx + ")TSF_BID; o < n; o += (" + idx + ")TSF_GDIM) {");
    } else {
      line("for (" + idx + " o = " + gridStart() + "; o < n; o += " + gridStep() + ") {");
    }
    ++depth;
    offsets("o", "c", "k", "s", spec.keptRank, false, "b");
    line(w + " acc = " + initValue() + ";");
    if (isArg()) line("tsf_i64 aidx = -1;");
    line(block ? "for (" + idx + " r = (" + idx + ")t; r < count; r += (" + idx + ")" + str(bs) + ") {"
               : "for (" + idx + " r = 0; r < count; ++r) {");
    ++depth;
    if (!element("r")) return false;
    fold("acc", "aidx", "x", "(tsf_i64)r");
    --depth;
    line("}");
    if (block) {
      line("pa[t] = acc;");
      if (isArg()) line("pi[t] = aidx;");
      line("TSF_BARRIER();");
      line("for (tsf_i32 h = " + str(bs / 2) + "; h > 0; h >>= 1) {");
      ++depth;
      line("if (t < h) {");
      ++depth;
      line(w + " m = pa[t];");
      line("const " + w + " y = pa[t + h];");
      if (isArg()) line("tsf_i64 mi = pi[t];");
      if (isArg()) line("const tsf_i64 yi = pi[t + h];");
      merge("m", "mi", "y", "yi");
      line("pa[t] = m;");
      if (isArg()) line("pi[t] = mi;");
      --depth;
      line("}");
      line("TSF_BARRIER();");
      --depth;
      line("}");
      line("if (t == 0) {");
      ++depth;
      line(w + " fin = pa[0];");
      if (isArg()) line("const tsf_i64 finIdx = pi[0];");
      store("fin", "finIdx", outTy);
      --depth;
      line("}");
      line("TSF_BARRIER();  /* pa is reused by the next output */");
    } else {
      store("acc", "aidx", outTy);
    }
    --depth;
    line("}");
    return true;
  }
};

}  // namespace

std::optional<KernelSource> emitKernel(const lower::Program& p, const KernelSpec& spec, std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<KernelSource> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (spec.keptRank < 1) return no("a kernel needs a kept dim");
  Emitter E(p, spec);
  if (!E.types()) return no(E.why);
  if (!(spec.kind == Kind::Map ? E.map() : E.reduce())) return no(E.why);

  std::string sig;
  for (size_t i = 0; i < E.paramText.size(); ++i) sig += (i ? ",\n    " : "\n    ") + E.paramText[i];
  const std::string kernel = "TSF_KERNEL @NAME@(" + sig + ") {\n" + E.code + "}\n";
  KernelSource k;
  k.hash = fnv1a(kernel);
  char hash[20];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, k.hash);
  k.name = std::string("tsf_") + kindName(spec.kind) + "_r" + str(spec.keptRank) +
           (spec.kind == Kind::Map ? "" : "x" + str(spec.reducedRank)) + (spec.index64 ? "_i64_" : "_i32_") + hash;
  k.text = std::string(prelude()) + kernel.substr(0, kernel.find("@NAME@")) + k.name +
           kernel.substr(kernel.find("@NAME@") + 6);
  k.params = std::move(E.params);
  return k;
}

}  // namespace tsfuse::gpu
