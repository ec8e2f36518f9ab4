// The reduction skeletons of the generated kernels (emit.h): a thread per output walking the
// reduced space in order, or a block per output whose threads stride it and merge their states in
// local memory. Each reduction is a state of a few fields with an in-order fold, an any-order
// merge and a result, following the CPU accumulators (kernels/backends/cpu/accumulators.h) and the
// rules of kernels/backends/reduction_rules.h.
#include "kernels/backends/cuda/codegen/emitter.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace tsfuse::cuda::detail {
namespace {

std::string f64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  char buf[80];
  std::snprintf(buf, sizeof buf, "TSF_F64_BITS(TSF_U64(0x%016" PRIx64 "))", bits);
  return buf;
}

const std::string kInf = "TSF_F64_BITS(TSF_U64(0x7ff0000000000000))";
const std::string kNegInf = "TSF_F64_BITS(TSF_U64(0xfff0000000000000))";

struct Field {
  std::string name;
  Ty type;
  std::string init;
};

// The state of one reduction kind, as text over variables <P>_<field>:
//   sum, mean, prod   acc in the wide domain (double for floating values, wrapping int64)
//   amax, amin        acc; a NaN replaces it (NaN propagates)
//   any, all          acc 0/1 (int64)
//   argmax, argmin,   acc + idx: the first extremum wins, NaN counts as the extremum
//   max, min          (values and indices: two outputs)
//   logsumexp         m (running maximum), s (sum of exp(x - m), rescaled as m grows), fl (NaN /
//                     +inf seen)
//   norm              acc: sum |x|^p (p = 2, 1, 0 and general) or max / min |x| (p = +-inf)
//   var, std          Welford's mean, m2, nf, with ATen's update and merge steps
struct State {
  const KernelSpec& spec;
  Emitter& E;
  Ty wide;

  enum class NormMode { Two, One, Max, Min, Zero, General };
  NormMode norm() const {
    const double p = spec.normOrder, inf = std::numeric_limits<double>::infinity();
    return p == 2      ? NormMode::Two
           : p == 1    ? NormMode::One
           : p == inf  ? NormMode::Max
           : p == -inf ? NormMode::Min
           : p == 0    ? NormMode::Zero
                       : NormMode::General;
  }
  Reduction kind() const { return spec.reduction; }
  bool indexed() const {
    const Reduction k = kind();
    return k == Reduction::Argmax || k == Reduction::Argmin || k == Reduction::Max || k == Reduction::Min;
  }
  bool isMax() const { return kind() == Reduction::Amax || kind() == Reduction::Argmax || kind() == Reduction::Max; }
  bool anyAll() const { return kind() == Reduction::Any || kind() == Reduction::All; }

  std::vector<Field> fields() const {
    const bool f = wide == Ty::F64;
    switch (kind()) {
      case Reduction::Logsumexp:
        return {{"m", Ty::F64, kNegInf}, {"s", Ty::F64, "0.0"}, {"fl", Ty::I64, "(tsf_i64)0"}};
      case Reduction::Var:
      case Reduction::Std:
        return {{"mean", Ty::F64, "0.0"}, {"m2", Ty::F64, "0.0"}, {"nf", Ty::F64, "0.0"}};
      case Reduction::Norm:
        return {{"acc", Ty::F64, norm() == NormMode::Min ? kInf : "0.0"}};
      case Reduction::Prod:
        return {{"acc", wide, f ? "1.0" : "(tsf_i64)1"}};
      case Reduction::All:
        return {{"acc", wide, "(tsf_i64)1"}};
      case Reduction::Amax:
        return {{"acc", wide, f ? kNegInf : "(tsf_i64)TSF_U64(0x8000000000000000)"}};
      case Reduction::Amin:
        return {{"acc", wide, f ? kInf : "(tsf_i64)TSF_U64(0x7fffffffffffffff)"}};
      default:
        if (indexed()) return {{"acc", wide, f ? "0.0" : "(tsf_i64)0"}, {"idx", Ty::I64, "(tsf_i64)-1"}};
        return {{"acc", wide, f ? "0.0" : "(tsf_i64)0"}};
    }
  }

  // The program's value v (of dtype `valueTy`) as folded: any/all its truth (0/1), else widened.
  void widen(Ty valueTy, const std::string& v) {
    E.line(std::string("const ") + tyName(wide) +
           " x = " + (anyAll() ? "(tsf_i64)" + convText(valueTy, Ty::Bool, v) : convText(valueTy, wide, v)) + ";");
  }

  void declare(const std::string& P) {
    for (const Field& f : fields()) E.line(std::string(tyName(f.type)) + " " + P + "_" + f.name + " = " + f.init + ";");
  }
  void copy(const std::string& to, const std::string& from, bool declare) {
    for (const Field& f : fields())
      E.line((declare ? std::string(tyName(f.type)) + " " : "") + to + "_" + f.name + " = " + from + "_" + f.name +
             ";");
  }
  void toShared(const std::string& P, const std::string& at) {
    for (const Field& f : fields()) E.line("sh_" + f.name + "[" + at + "] = " + P + "_" + f.name + ";");
  }
  void fromShared(const std::string& P, const std::string& at) {
    for (const Field& f : fields())
      E.line(std::string(tyName(f.type)) + " " + P + "_" + f.name + " = sh_" + f.name + "[" + at + "];");
  }

  // Whether x (met after best) replaces best: NaN counts as the extremum, the first one wins.
  std::string laterBeats(const std::string& x, const std::string& best) const {
    const std::string gt = "(" + x + (isMax() ? " > " : " < ") + best + ")";
    if (wide != Ty::F64) return gt;
    return "((" + best + " == " + best + ") && ((" + x + " != " + x + ") || " + gt + "))";
  }
  // amax/amin and norm's +-inf: a NaN takes the place of the running extremum.
  std::string takes(const std::string& x, const std::string& acc, bool max, bool floating) const {
    return std::string(floating ? "(" + x + " != " + x + ") || " : "") + "(" + x + (max ? " > " : " < ") + acc + ")";
  }
  // P_s/P_m absorb weight w at exponent x (logsumexp's rescaling step).
  void addScaled(const std::string& P, const std::string& x, const std::string& w) {
    E.line("if (" + x + " > " + P + "_m) { " + P + "_s = " + P + "_s * TSF_EXP_F64(" + P + "_m - " + x + ") + " + w +
           "; " + P + "_m = " + x + "; } else { " + P + "_s = " + P + "_s + " + w + " * TSF_EXP_F64(" + x + " - " + P +
           "_m); }");
  }

  // P (op)= x, for x met after everything P holds (at index `at`).
  void fold(const std::string& P, const std::string& x, const std::string& at) {
    const bool f = wide == Ty::F64;
    const std::string acc = P + "_acc";
    switch (kind()) {
      case Reduction::Sum:
      case Reduction::Mean:
        return E.line(acc + " = " + (f ? acc + " + " + x : "(tsf_i64)((tsf_u64)" + acc + " + (tsf_u64)" + x + ")") +
                      ";");
      case Reduction::Prod:
        return E.line(acc + " = " + (f ? acc + " * " + x : "(tsf_i64)((tsf_u64)" + acc + " * (tsf_u64)" + x + ")") +
                      ";");
      case Reduction::Amax:
      case Reduction::Amin:
        return E.line("if (" + takes(x, acc, isMax(), f) + ") " + acc + " = " + x + ";");
      case Reduction::Any:
        return E.line(acc + " = " + acc + " | " + x + ";");  // x is 0 or 1
      case Reduction::All:
        return E.line(acc + " = " + acc + " & " + x + ";");
      case Reduction::Logsumexp:
        E.open("if (" + x + " != " + x + ") " + P + "_fl = " + P + "_fl | 1; else if (" + x + " == " + kInf + ") " + P +
               "_fl = " + P + "_fl | 2; else if (" + x + " != " + kNegInf + ") {");
        addScaled(P, x, "1.0");
        return E.close();
      case Reduction::Var:
      case Reduction::Std:
        E.line(P + "_nf = " + P + "_nf + 1.0;");
        E.line("{ const tsf_f64 d = " + x + " - " + P + "_mean; " + P + "_mean = " + P + "_mean + d / " + P + "_nf; " +
               P + "_m2 = " + P + "_m2 + d * (" + x + " - " + P + "_mean); }");
        return;
      case Reduction::Norm: {
        const std::string a = "TSF_FABS_F64(" + x + ")";
        switch (norm()) {
          case NormMode::Two:
            return E.line("{ const tsf_f64 na = " + a + "; " + acc + " = " + acc + " + na * na; }");
          case NormMode::One:
            return E.line(acc + " = " + acc + " + " + a + ";");
          case NormMode::Max:
          case NormMode::Min:
            return E.line("{ const tsf_f64 na = " + a + "; if (" + takes("na", acc, norm() == NormMode::Max, true) +
                          ") " + acc + " = na; }");
          case NormMode::Zero:
            return E.line(acc + " = " + acc + " + (" + x + " != 0.0 ? 1.0 : 0.0);");
          case NormMode::General:
            return E.line(acc + " = " + acc + " + TSF_POW_F64(" + a + ", " + f64(spec.normOrder) + ");");
        }
        return;
      }
      default:  // argmax / argmin / max / min
        E.line("if (" + P + "_idx < 0 || " + laterBeats(x, acc) + ") { " + acc + " = " + x + "; " + P + "_idx = " + at +
               "; }");
    }
  }

  // P (op)= Q, a partial state met in any index order.
  void merge(const std::string& P, const std::string& Q) {
    switch (kind()) {
      case Reduction::Logsumexp:
        E.line(P + "_fl = " + P + "_fl | " + Q + "_fl;");
        E.open("if (" + Q + "_s > 0.0) {");
        addScaled(P, Q + "_m", Q + "_s");
        return E.close();
      case Reduction::Var:
      case Reduction::Std:
        E.open("if (" + P + "_nf == 0.0) {");
        copy(P, Q, false);
        --E.depth;
        E.open("} else if (" + Q + "_nf != 0.0) {");
        E.line("const tsf_f64 d = " + Q + "_mean - " + P + "_mean, cnt = " + P + "_nf + " + Q + "_nf, b = " + Q +
               "_nf / cnt;");
        E.line(P + "_mean = " + P + "_mean + d * b;");
        E.line(P + "_m2 = " + P + "_m2 + " + Q + "_m2 + d * d * " + P + "_nf * b;");
        E.line(P + "_nf = cnt;");
        return E.close();
      case Reduction::Norm:
        if (norm() == NormMode::Max || norm() == NormMode::Min)
          return E.line("if (" + takes(Q + "_acc", P + "_acc", norm() == NormMode::Max, true) + ") " + P +
                        "_acc = " + Q + "_acc;");
        return E.line(P + "_acc = " + P + "_acc + " + Q + "_acc;");
      default:
        if (!indexed()) return fold(P, Q + "_acc", "");
        E.line("if (" + Q + "_idx >= 0 && (" + P + "_idx < 0 || (" + Q + "_idx < " + P + "_idx ? !" +
               laterBeats(P + "_acc", Q + "_acc") + " : " + laterBeats(Q + "_acc", P + "_acc") + "))) { " + P +
               "_acc = " + Q + "_acc; " + P + "_idx = " + Q + "_idx; }");
    }
  }

  // The reduced value of state P, as a double (or the wide integer / index) expression.
  std::string result(const std::string& P, Ty reduced) const {
    switch (kind()) {
      case Reduction::Mean:
        return "(" + P + "_acc / (tsf_f64)count)";
      case Reduction::Argmax:
      case Reduction::Argmin:
        return P + "_idx";
      case Reduction::Logsumexp:
        return "((" + P + "_fl & 1) ? TSF_NAN_F64 : (" + P + "_fl & 2) ? " + kInf + " : " + P + "_s == 0.0 ? " +
               kNegInf + " : TSF_LOG_F64(" + P + "_s) + " + P + "_m)";
      case Reduction::Var:
      case Reduction::Std: {
        const std::string c = f64(spec.correction);
        const std::string var = "(" + P + "_m2 / (" + P + "_nf > " + c + " ? " + P + "_nf - " + c + " : 0.0))";
        return "(" + P + "_nf == 0.0 ? TSF_NAN_F64 : " + (kind() == Reduction::Std ? "TSF_SQRT_F64" + var : var) + ")";
      }
      case Reduction::Norm: {
        std::string sum = P + "_acc";
        // Eager sums |x|^p in the value's dtype: a float sum overflows to inf exactly when the
        // double one exceeds float's range.
        if (reduced != Ty::F64 && norm() != NormMode::Max && norm() != NormMode::Min)
          sum = "(" + sum + " > " + f64(std::numeric_limits<float>::max()) + " ? " + kInf + " : " + sum + ")";
        if (norm() == NormMode::Two) return "TSF_SQRT_F64(" + sum + ")";
        if (norm() == NormMode::General) return "TSF_POW_F64(" + sum + ", " + f64(1.0 / spec.normOrder) + ")";
        return sum;
      }
      default:
        return P + "_acc";
    }
  }
  Ty resultType() const {
    switch (kind()) {
      case Reduction::Argmax:
      case Reduction::Argmin:
        return Ty::I64;
      case Reduction::Mean:
      case Reduction::Logsumexp:
      case Reduction::Var:
      case Reduction::Std:
      case Reduction::Norm:
        return Ty::F64;
      default:
        return wide;
    }
  }
};

}  // namespace

// Gemm: a block of 16 x 16 threads owns a kGemmTile x kGemmTile tile of [N = k0, M = k1], each
// thread 2 x 2 outputs (rows ty*2+i, columns tx*2+j). K is walked in steps of kGemmK: the step's
// (k, n) and (k, m) operands are staged in local memory by all threads, then every thread folds
// them into its four states in k order. Operands that depend on k alone (or nothing) are read
// directly: every thread reads the same address.
namespace {

template <typename Finish>
bool gemmSkeleton(Emitter& E, State& st, Ty valueTy, Finish&& finish) {
  const KernelSpec& spec = E.spec;
  const Code& main = E.main;
  const std::string& idx = E.idx;
  const std::string T = str(kGemmTile), K = str(kGemmK);
  for (int l = 0; l < main.p->numLeaves; ++l)
    if (!main.p->hostLeaf[l] && (spec.access[l] == Access2::Row || spec.access[l] == Access2::Col))
      E.line("TSF_LOCAL " + std::string(localName(main.slot[l])) + " sg" + str(l) + "[" + K + "][" + T + "];");
  E.line("const tsf_i32 t = TSF_TID, tx = t % 16, ty = t / 16;");
  E.line("const " + idx + " tilesM = (k1 + " + str(kGemmTile - 1) + ") / " + T + ";");
  E.line("const " + idx + " tiles = ((k0 + " + str(kGemmTile - 1) + ") / " + T + ") * tilesM;");
  E.open("for (" + idx + " tile = (" + idx + ")TSF_BID; tile < tiles; tile += (" + idx + ")TSF_GDIM) {");
  E.line("const " + idx + " n0 = tile / tilesM * " + T + ", m0 = tile % tilesM * " + T + ";");
  const char* sub[] = {"00", "01", "10", "11"};
  for (const char* s : sub) st.declare(std::string("s") + s);
  E.open("for (" + idx + " kb = 0; kb < count; kb += " + K + ") {");
  E.open("for (tsf_i32 q = t; q < " + str(kGemmK * kGemmTile) + "; q += 256) {");
  E.line("const tsf_i32 kk = q / " + T + ", j = q % " + T + ";");
  E.line("const " + idx + " k = kb + kk;");
  for (int l = 0; l < main.p->numLeaves; ++l) {
    if (main.p->hostLeaf[l]) continue;
    const std::string L = str(l);
    if (spec.access[l] == Access2::Row)
      E.line("if (k < count && n0 + j < k0) sg" + L +
             "[kk][j] = " + E.load(main, l, "(n0 + j) * s" + L + "_0 + k * t" + L + "_0") + ";");
    if (spec.access[l] == Access2::Col)
      E.line("if (k < count && m0 + j < k1) sg" + L +
             "[kk][j] = " + E.load(main, l, "(m0 + j) * s" + L + "_1 + k * t" + L + "_0") + ";");
  }
  E.close();
  E.line("TSF_BARRIER();");
  E.line("const " + idx + " kend = count - kb < " + K + " ? count - kb : " + K + ";");
  E.open("for (" + idx + " kk = 0; kk < kend; ++kk) {");
  E.line("const " + idx + " k = kb + kk;");
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      E.open("{");
      for (int l = 0; l < main.p->numLeaves; ++l) {
        const std::string L = str(l);
        switch (main.p->hostLeaf[l] ? Access2::Scalar : spec.access[l]) {
          case Access2::Row:
            E.declareLeaf(main, l, "sg" + L + "[kk][ty * 2 + " + str(i) + "]");
            break;
          case Access2::Col:
            E.declareLeaf(main, l, "sg" + L + "[kk][tx * 2 + " + str(j) + "]");
            break;
          default:
            E.declareLeaf(main, l, E.load(main, l, "k * t" + L + "_0"));
            break;  // (k) or nothing
        }
      }
      if (!E.body(main)) return false;
      st.widen(valueTy, main.name(main.p->result));
      st.fold(std::string("s") + sub[i * 2 + j], "x", "(tsf_i64)k");
      E.close();
    }
  E.close();
  E.line("TSF_BARRIER();  /* the staged step is rewritten by the next one */");
  E.close();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      E.open("{");
      E.line("const " + idx + " nn = n0 + ty * 2 + " + str(i) + ", mm = m0 + tx * 2 + " + str(j) + ";");
      E.open("if (nn < k0 && mm < k1) {");
      E.line("const " + idx + " o = nn * k1 + mm;");
      if (!finish(std::string("s") + sub[i * 2 + j])) return false;
      E.close();
      E.close();
    }
  E.close();
  return true;
}

}  // namespace

bool Emitter::reduce() {
  if (spec.reducedRank < 1) return fail("a reduction kernel needs a reduced dim");
  const Ty valueTy = main.slot[main.p->result];
  State st{spec, *this,
           isFloatTy(valueTy) && !(spec.reduction == Reduction::Any || spec.reduction == Reduction::All) ? Ty::F64
                                                                                                         : Ty::I64};
  const Reduction k = spec.reduction;
  const bool floatOnly = k == Reduction::Mean || k == Reduction::Logsumexp || k == Reduction::Norm ||
                         k == Reduction::Var || k == Reduction::Std;
  if (floatOnly && st.wide != Ty::F64) return fail(std::string(reductionName(k)) + " of a non-floating value");
  const bool withIndices = k == Reduction::Max || k == Reduction::Min;
  if (withIndices && hasEpilogue) return fail("max/min with indices and an epilogue");
  auto reduced = tyOf(spec.reducedDtype);
  if (!reduced && k != Reduction::Argmax && k != Reduction::Argmin)
    return fail(std::string("reduced dtype ") + c10::toString(spec.reducedDtype));
  const Ty redTy = (k == Reduction::Argmax || k == Reduction::Argmin) ? Ty::I64 : *reduced;
  std::vector<Ty> outs{hasEpilogue ? epi.slot[epi.p->result] : redTy};
  if (withIndices) outs.push_back(Ty::I64);
  declareParams(outs);

  // The value at reduced index r, widened into x (any/all: its truth, 0/1).
  auto element = [&]() {
    offsets(main, "r", "e", "r", "t", spec.reducedRank, "b", "o");
    loads(main, "o");
    if (!body(main)) return false;
    st.widen(valueTy, main.name(main.p->result));
    return true;
  };
  auto finish = [&](const std::string& P) {
    line("const " + std::string(localName(redTy)) + " rv = " + convText(st.resultType(), redTy, st.result(P, redTy)) +
         ";");
    if (withIndices) line("out1[o] = " + P + "_idx;");
    return storeResult("rv", redTy);
  };

  if (spec.kind == Kind::Gemm) {
    if (st.fields().size() > 2)
      return fail(std::string("gemm holds at most two state fields, not ") + reductionName(k));
    return gemmSkeleton(*this, st, valueTy, finish);
  }

  const bool block = spec.kind == Kind::ReduceBlock;
  const int bs = spec.blockSize;
  if (block) {
    if (bs < 1 || (bs & (bs - 1))) return fail("block size is not a power of two");
    for (const Field& f : st.fields())
      line("TSF_LOCAL " + std::string(tyName(f.type)) + " sh_" + f.name + "[" + str(bs) + "];");
    line("const tsf_i32 t = TSF_TID;");
    open("for (" + idx + " o = (" + idx + ")TSF_BID; o < n; o += (" + idx + ")TSF_GDIM) {");
  } else {
    open("for (" + idx + " o = " + gridStart() + "; o < n; o += " + gridStep() + ") {");
  }
  offsets(main, "o", "c", "k", "s", spec.keptRank, "", "b");
  st.declare("st");
  open(block ? "for (" + idx + " r = (" + idx + ")t; r < count; r += (" + idx + ")" + str(bs) + ") {"
             : "for (" + idx + " r = 0; r < count; ++r) {");
  if (!element()) return false;
  st.fold("st", "x", "(tsf_i64)r");
  close();
  if (!block) {
    if (!finish("st")) return false;
    close();
    return true;
  }
  st.toShared("st", "t");
  line("TSF_BARRIER();");
  open("for (tsf_i32 h = " + str(bs / 2) + "; h > 0; h >>= 1) {");
  open("if (t < h) {");
  st.fromShared("m", "t");
  st.fromShared("y", "t + h");
  st.merge("m", "y");
  st.toShared("m", "t");
  close();
  line("TSF_BARRIER();");
  close();
  open("if (t == 0) {");
  st.fromShared("fin", "0");
  if (!finish("fin")) return false;
  close();
  line("TSF_BARRIER();  /* the shared state is reused by the next output */");
  close();
  return true;
}

}  // namespace tsfuse::cuda::detail
