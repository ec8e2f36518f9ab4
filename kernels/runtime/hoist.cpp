// Hoisting costly narrow work out of a fused call (kernels/runtime/hoist.h).
#include "kernels/runtime/hoist.h"

#include "common/dtype_dispatch.h"

#include "kernels/reference/analysis.h"
#include "kernels/reference/aten_eval.h"
#include "kernels/runtime/eager_order.h"
#include "kernels/ir/op_registry.h"
#include "kernels/ir/prim.h"
#include "kernels/lower/program.h"
#include "tsfuse/log.h"

#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tsfuse {

bool costlyPerValue(const Instr& ins) {
  const OpDef& d = opDef(ins.op);
  if (d.rule == LowerRule::Aten) return true;
  if (d.rule == LowerRule::Square)
    return lower::powForm(ins.args, false, c10::ScalarType::Float) == lower::PowForm::Aten;
  const std::optional<Prim> p = d.prim();
  return d.rule == LowerRule::Map && p && !primHas(*p, kJit);
}

namespace {

// x's values as `to` (float32 or float64, x's layout), checked on the way: undefined where one is
// outside [-exact, exact], the integers `to` holds exactly. A dense tensor of the usual integer
// dtypes (class labels, an arange) in one loop over its memory, where a range reduction, two
// item() reads and a conversion were four dispatched calls, most of a small fused call's time.
at::Tensor exactFloatCopy(const at::Tensor& x, at::ScalarType to, int64_t exact) {
  const auto t = x.scalar_type();
  const bool common = t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt || t == at::kLong;
  if (!common || !x.is_non_overlapping_and_dense()) {
    const auto [lo, hi] = at::aminmax(x);
    return lo.item<int64_t>() >= -exact && hi.item<int64_t>() <= exact ? x.to(to) : at::Tensor();
  }
  at::Tensor out = at::empty_like(x, x.options().dtype(to));  // (x's strides: element k of each
  TORCH_INTERNAL_ASSERT(out.strides() == x.strides());        // memory block is the same element)
  bool ok = true;
  AT_DISPATCH_INTEGRAL_TYPES(t, "tsfuse_exact_float_copy", [&] {
    const scalar_t* p = x.const_data_ptr<scalar_t>();
    const int64_t n = x.numel();
    auto fill = [&](auto* q) {
      using F = std::remove_pointer_t<decltype(q)>;
      int64_t lo = 0, hi = 0;
      for (int64_t k = 0; k < n; ++k) {
        const auto v = static_cast<int64_t>(p[k]);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        q[k] = static_cast<F>(v);
      }
      ok = lo >= -exact && hi <= exact;
    };
    if (to == at::kDouble)
      fill(out.mutable_data_ptr<double>());
    else
      fill(out.mutable_data_ptr<float>());
  });
  return ok ? out : at::Tensor();
}

using Mask = uint64_t;  // the broadcast space's dims a value varies along

// Evaluations a hoisted instruction must save to pay for its own ATen call and the rewritten
// program's lookup: a tiny call keeps its program as it is.
// TSFUSE_HOIST_MIN_SAVED=N sets another bound (the fuzzer's small programs hoist with 1).
int64_t minSaved() {
  static const int64_t n = [] {
    const char* v = std::getenv("TSFUSE_HOIST_MIN_SAVED");
    return v && *v ? std::max<int64_t>(1, std::atoll(v)) : int64_t(1) << 12;
  }();
  return n;
}

// The dims of `space` (right-aligned) along which t varies.
Mask varyingDims(const at::Tensor& t, at::IntArrayRef space) {
  Mask m = 0;
  const int64_t off = static_cast<int64_t>(space.size()) - t.dim();
  for (int64_t k = 0; k < t.dim(); ++k)
    if (t.size(k) > 1) m |= Mask(1) << (off + k);
  return m;
}

int64_t numelOver(Mask m, at::IntArrayRef space) {
  int64_t n = 1;
  for (size_t d = 0; d < space.size(); ++d)
    if (m >> d & 1) n *= space[d];
  return n;
}

// e with instruction hoisted[h]'s value read from operand e.numInputs + h, the hoisted cones'
// instructions that nothing else reads dropped (the others stay, read or not, as in e: eager
// evaluates each, and raises where one does), and its operands renumbered to those still read (the
// text form has no unused operand): used[i] says whether operand i (e's, then the hoisted) stays.
Expr withoutHoisted(const Expr& e, const std::vector<size_t>& hoisted, std::vector<char>& used) {
  const size_t n = e.instrs.size();
  std::vector<int64_t> operandOf(n, -1);
  for (size_t h = 0; h < hoisted.size(); ++h) operandOf[hoisted[h]] = e.numInputs + static_cast<int64_t>(h);
  std::vector<char> inCone(n, 0);
  for (size_t k = n; k-- > 0;)
    if (operandOf[k] >= 0 || inCone[k]) {
      inCone[k] = 1;
      for (const Arg& a : e.instrs[k].args)
        if (a.kind == Arg::Kind::Value) inCone[a.i] = 1;
    }
  std::vector<char> live(n, 0);
  for (size_t k = 0; k < n; ++k) live[k] = !inCone[k];
  used.assign(e.numInputs + hoisted.size(), 0);
  for (size_t k = n; k-- > 0;) {
    if (!live[k]) continue;
    if (operandOf[k] >= 0) {
      used[operandOf[k]] = 1;
      continue;
    }
    for (const Arg& a : e.instrs[k].args) {
      if (a.kind == Arg::Kind::Value) live[a.i] = 1;
      if (a.kind == Arg::Kind::Input) used[a.i] = 1;
    }
  }
  std::vector<int64_t> input(used.size(), -1);
  int next = 0;
  for (size_t i = 0; i < used.size(); ++i)
    if (used[i]) input[i] = next++;
  Expr out;
  out.numInputs = next;
  std::vector<int64_t> renumber(n, -1);
  for (size_t k = 0; k < n; ++k) {
    if (!live[k] || operandOf[k] >= 0) continue;
    Instr ins = e.instrs[k];
    for (Arg& a : ins.args) {
      if (a.kind == Arg::Kind::Input)
        a.i = input[a.i];
      else if (a.kind == Arg::Kind::Value)
        a = operandOf[a.i] >= 0 ? Arg::input(input[operandOf[a.i]]) : Arg::value(renumber[a.i]);
    }
    renumber[k] = static_cast<int64_t>(out.instrs.size());
    out.instrs.push_back(std::move(ins));
  }
  return out;
}

// Bytes of hoisted values one slab of a wide hoist holds (hoistSlabRows), at most: large enough
// that eager's ops over them use its threads (at::internal::GRAIN_SIZE values each).
// TSFUSE_HOIST_SLAB_BYTES=N sets another bound (tests cut small calls into many slabs).
int64_t slabBytes() {
  static const int64_t n = [] {
    const char* v = std::getenv("TSFUSE_HOIST_SLAB_BYTES");
    return v && *v ? std::max<int64_t>(1, std::atoll(v)) : int64_t(2) << 20;
  }();
  return n;
}

// The costly instructions of e worth hoisting out of a call over the CPU operands `main`: each
// varies along at most a quarter of the broadcast space, saves minSaved() evaluations, and holds
// at most `limit` elements. nullopt where nothing is costly or the operands are not on the CPU.
struct NarrowWork {
  std::vector<int64_t> space;
  std::vector<Mask> mask;  // per instruction: the dims its value varies along
  std::vector<size_t> hoisted;
};

std::optional<NarrowWork> narrowWork(const Expr& e, at::TensorList main, int64_t limit) {
  // Work the compiled code has no lanes for: it holds floating values and bools, so an integer
  // compare (labels[:, None] == labels[None] in a triplet mask) leaves a whole tile interpreted.
  auto costly = [&](const Instr& ins) {
    if (costlyPerValue(ins)) return true;
    for (const Arg& a : ins.args)
      if (a.kind == Arg::Kind::Input && main[a.i].defined() && at::isIntegralType(main[a.i].scalar_type(), false))
        return true;
    return false;
  };
  bool any = false;
  for (const Instr& ins : e.instrs) any = any || costly(ins);
  if (!any) return std::nullopt;
  std::optional<std::vector<int64_t>> cpu = cpuSpace(main);
  if (!cpu) return std::nullopt;
  NarrowWork w{std::move(*cpu), std::vector<Mask>(e.instrs.size(), 0), {}};
  const int64_t total = c10::multiply_integers(w.space);
  if (w.space.size() > 63 || total == 0) return std::nullopt;  // (an empty call computes nothing)
  for (size_t j = 0; j < e.instrs.size(); ++j) {
    for (const Arg& a : e.instrs[j].args) {
      if (a.kind == Arg::Kind::Input) w.mask[j] |= varyingDims(main[a.i], w.space);
      if (a.kind == Arg::Kind::Value) w.mask[j] |= w.mask[a.i];
    }
    const int64_t narrow = numelOver(w.mask[j], w.space);
    if (j + 1 < e.instrs.size() && costly(e.instrs[j]) && narrow * 4 <= total && narrow <= limit &&
        total - narrow >= minSaved())
      w.hoisted.push_back(j);
  }
  return w;
}

// The narrow computation around hoisted costly work, whole: a narrow value that a wider
// instruction reads and whose cone holds one of the first `costly` hoisted instructions (an
// envelope's polynomial around its pow, over [E, 1] in an [E, K] basis) is hoisted instead, so the
// wide program neither recomputes its cheap ops per element nor reads each of its hoisted parts as
// an operand; the costly values only such a cone reads are then no longer hoisted on their own.
void hoistNarrowFrontier(const Expr& e, NarrowWork& w, int64_t limit, size_t costly) {
  const size_t n = e.instrs.size();
  const int64_t total = c10::multiply_integers(w.space);
  std::vector<char> holdsCostly(n, 0), readWider(n, 0);
  for (size_t h = 0; h < costly; ++h) holdsCostly[w.hoisted[h]] = 1;
  for (size_t j = 0; j < n; ++j)
    for (const Arg& a : e.instrs[j].args)
      if (a.kind == Arg::Kind::Value) {
        holdsCostly[j] = holdsCostly[j] || holdsCostly[a.i];
        readWider[a.i] = readWider[a.i] || w.mask[j] != w.mask[a.i];
      }
  std::vector<char> covered(n, 0);
  bool any = false;
  for (size_t j = 0; j + 1 < n; ++j) {
    const int64_t narrow = numelOver(w.mask[j], w.space);
    if (!holdsCostly[j] || !readWider[j] || narrow * 4 > total || narrow > limit || total - narrow < minSaved() ||
        std::count(w.hoisted.begin(), w.hoisted.end(), j))
      continue;
    w.hoisted.push_back(j);
    const std::vector<char> cone = coneMask(e, j);
    for (size_t k = 0; k <= j; ++k) covered[k] = covered[k] || cone[k];
    any = true;
  }
  if (!any) return;
  // A costly value read only inside the hoisted cones is computed there.
  std::vector<char> readOutside(n, 0);
  for (size_t k = 0; k < n; ++k)
    if (!covered[k])
      for (const Arg& a : e.instrs[k].args)
        if (a.kind == Arg::Kind::Value) readOutside[a.i] = 1;
  std::vector<size_t> kept;
  for (size_t h = 0; h < w.hoisted.size(); ++h)
    if (h >= costly || !covered[w.hoisted[h]] || readOutside[w.hoisted[h]]) kept.push_back(w.hoisted[h]);
  w.hoisted = std::move(kept);
}

}  // namespace

std::optional<Hoisted> hoistNarrowWork(const Expr& e, at::TensorList operands, bool wide) {
  if (e.instrs.size() < 2 || static_cast<int64_t>(operands.size()) < e.numInputs) return std::nullopt;
  const at::TensorList main = operands.slice(0, e.numInputs);
  // (nothing larger than the largest operand, unless the caller cut the call into slabs)
  std::optional<NarrowWork> w =
      narrowWork(e, main, wide ? std::numeric_limits<int64_t>::max() : largestFootprint(main));
  if (!w) return std::nullopt;
  const std::vector<Mask>& mask = w->mask;
  std::vector<size_t>& hoisted = w->hoisted;
  // A costly instruction left in the program whose argument is computed from values the same over
  // the whole space (pow by an exponent transformed in the program): that argument, computed once,
  // is an operand of one value, which the compiled code takes as such (a routine with a uniform
  // argument) where a computed one differs per lane. One ATen call replaces one per tile: no
  // size bound.
  const size_t narrowHoisted = hoisted.size();
  for (size_t j = 0; j < e.instrs.size(); ++j) {
    if (!costlyPerValue(e.instrs[j]) || mask[j] == 0 || std::count(hoisted.begin(), hoisted.begin() + narrowHoisted, j))
      continue;
    for (const Arg& a : e.instrs[j].args)
      if (a.kind == Arg::Kind::Value && mask[a.i] == 0 && !std::count(hoisted.begin(), hoisted.end(), a.i))
        hoisted.push_back(static_cast<size_t>(a.i));
  }
  hoistNarrowFrontier(e, *w, wide ? std::numeric_limits<int64_t>::max() : largestFootprint(main), narrowHoisted);
  if (hoisted.empty()) return std::nullopt;
  std::vector<char> used;
  const Expr rest = withoutHoisted(e, hoisted, used);
  Hoisted out;
  for (int64_t i = 0; i < e.numInputs; ++i) {
    out.position.push_back(used[i] ? static_cast<int64_t>(out.operands.size()) : -1);
    if (used[i]) out.operands.push_back(main[i]);
  }
  for (size_t h = 0; h < hoisted.size(); ++h)
    if (used[e.numInputs + h]) out.operands.push_back(evalAten(coneOf(e, hoisted[h]), main));
  for (size_t i = e.numInputs; i < operands.size(); ++i) {
    out.position.push_back(static_cast<int64_t>(out.operands.size()));
    out.operands.push_back(operands[i]);
  }
  out.expr = rest.str();
  TSFUSE_LOG(kernel, debug, "hoisted ", hoisted.size(), " narrow costly value(s) out of ", e.str(), " -> ", out.expr);
  return out;
}

std::optional<SlabRows> hoistSlabRows(const Expr& e, at::TensorList operands) {
  if (e.instrs.size() < 2 || static_cast<int64_t>(operands.size()) != e.numInputs) return std::nullopt;
  for (const at::Tensor& t : operands)
    if (!t.defined() || !t.is_contiguous()) return std::nullopt;
  std::optional<NarrowWork> w = narrowWork(e, operands, std::numeric_limits<int64_t>::max());
  if (!w || w->space.size() < 2 || w->space[0] < 2) return std::nullopt;
  const int64_t largest = largestFootprint(operands);
  const int64_t rows = w->space[0];
  // Per row of a slab, 8 bytes (at most) per element of each hoisted value; its output is written
  // into the call's (OutputInto).
  int64_t bytesPerRow = 0;
  bool wide = false;  // a value larger than every operand
  for (size_t j : w->hoisted) {
    const int64_t narrow = numelOver(w->mask[j], w->space);
    if (narrow > largest && !(w->mask[j] & 1)) return std::nullopt;  // (a slab of rows would not cut it)
    wide = wide || narrow > largest;
    bytesPerRow += narrow / rows * 8;
  }
  if (!wide) return std::nullopt;
  const int64_t perSlab = std::max<int64_t>(64, slabBytes() / bytesPerRow / 64 * 64);
  return SlabRows{std::move(w->space), std::min(perSlab, rows)};
}

std::optional<Hoisted> compareIntegersAsFloats(const Expr& e, at::TensorList operands, c10::string_view text) {
  if (static_cast<int64_t>(operands.size()) < e.numInputs) return std::nullopt;
  const at::TensorList main = operands.slice(0, e.numInputs);
  // (every fused call comes here: a program without an integer operand leaves at once)
  std::vector<char> convert(e.numInputs, 0);
  for (int64_t i = 0; i < e.numInputs; ++i)
    convert[i] = main[i].defined() && at::isIntegralType(main[i].scalar_type(), false) && main[i].numel() > 1;
  if (std::find(convert.begin(), convert.end(), 1) == convert.end()) return std::nullopt;
  const std::optional<std::vector<int64_t>> space = cpuSpace(main);
  if (!space) return std::nullopt;
  const int64_t total = c10::multiply_integers(*space), largest = largestFootprint(main);
  bool f64 = false, f32 = false;
  for (const at::Tensor& t : main) f64 |= t.scalar_type() == at::kDouble, f32 |= t.scalar_type() == at::kFloat;
  // The floating dtype the kernels then hold (the program's own, float32 unless it is float64),
  // and the integers it holds exactly (exactIntegerBound).
  const at::ScalarType to = f64 && !f32 ? at::kDouble : at::kFloat;
  const int64_t exact = exactIntegerBound(to);
  // An expanded operand (labels.expand(n, n)) counts, is checked and is converted by the elements
  // its memory holds, and keeps its zero strides.
  auto held = [](const at::Tensor& t) {
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.stride(d) == 0) sizes[d] = std::min<int64_t>(sizes[d], 1);
    return t.as_strided(sizes, t.strides(), t.storage_offset());
  };
  // Each candidate's held values converted in one pass that also checks them: undefined where one
  // is not exact in `to`.
  std::vector<at::Tensor> converted(e.numInputs);
  for (int64_t i = 0; i < e.numInputs; ++i) {
    convert[i] = convert[i] && footprint(main[i]) * 4 <= total && footprint(main[i]) <= largest;
    if (convert[i]) converted[i] = exactFloatCopy(held(main[i]), to, exact);
    convert[i] = convert[i] && converted[i].defined();
  }
  // Every reader of a converted operand is a compare of converted operands and small integers that
  // the compare's integer dtype holds; where one is not, its operands stay integers, which may take
  // a compare's other side with them (to a fixed point).
  for (bool again = true; again;) {
    again = false;
    for (const Instr& ins : e.instrs) {
      bool reads = false, onlyConverted = opDef(ins.op).has(kCompare);
      // The integer dtype eager compares in: its tensors' promoted dtype, which a number beside
      // them is cast to (comparesExactlyIn).
      std::optional<at::ScalarType> ct;
      for (const Arg& a : ins.args)
        if (a.kind == Arg::Kind::Input)
          ct = ct ? c10::promoteTypes(*ct, main[a.i].scalar_type()) : main[a.i].scalar_type();
      for (const Arg& a : ins.args) {
        if (a.kind == Arg::Kind::Input) {
          reads |= convert[a.i] != 0;
          onlyConverted = onlyConverted && convert[a.i];
        } else if (a.kind != Arg::Kind::Int || !ct || !comparesExactlyIn(*ct, to, a.i)) {
          onlyConverted = false;
        }
      }
      if (reads && !onlyConverted)
        for (const Arg& a : ins.args)
          if (a.kind == Arg::Kind::Input && convert[a.i]) convert[a.i] = 0, again = true;
    }
  }
  Hoisted out;
  bool any = false;
  for (int64_t i = 0; i < e.numInputs; ++i) {
    out.position.push_back(i);
    any |= convert[i] != 0;
    out.operands.push_back(convert[i] ? converted[i].expand(main[i].sizes()) : main[i]);
  }
  if (!any) return std::nullopt;
  for (size_t i = e.numInputs; i < operands.size(); ++i) {
    out.position.push_back(static_cast<int64_t>(i));
    out.operands.push_back(operands[i]);
  }
  out.expr = text.empty() ? e.str() : std::string(text);
  TSFUSE_LOG(kernel, debug, "integer operands compared as ", c10::toString(to), " (values exact there): ", out.expr);
  return out;
}

}  // namespace tsfuse
