// Compiled runs of a tile program between its MKL routine calls (kernels/backends/cpu/jit/segments.h).
#include "kernels/backends/cpu/jit/segments.h"

#include "kernels/backends/path_counts.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>

namespace tsfuse::cpu::jit {
namespace {

std::atomic<int64_t> gMade{0};

// Instructions [b, e) of p as a program of their own whose result is instruction e - 1's value.
// reads: p's slots that become its leaves, in order.
TileProgram runOf(const TileProgram& p, size_t b, size_t e, std::vector<int>* reads) {
  std::map<int, int> slotOf;  // p's slot -> the run's
  std::map<int, const lower::Program::Literal*> literal;
  for (const auto& lit : p.literals) literal[lit.slot] = &lit;
  std::vector<int> written;
  for (size_t k = b; k < e; ++k) written.push_back(p.code[k].out);
  auto isWritten = [&](int s) { return std::find(written.begin(), written.end(), s) != written.end(); };
  for (size_t k = b; k < e; ++k)
    for (int s : {p.code[k].a, p.code[k].b, p.code[k].c})
      if (s >= 0 && !literal.count(s) && !isWritten(s) && !slotOf.count(s)) {
        slotOf[s] = static_cast<int>(reads->size());
        reads->push_back(s);
      }
  TileProgram r;
  for (int s : *reads) r.slotType.push_back(p.slotType[s]);
  r.numLeaves = static_cast<int>(reads->size());
  auto slot = [&](int s) {
    if (s < 0) return s;
    auto it = slotOf.find(s);
    if (it != slotOf.end()) return it->second;
    const int mine = static_cast<int>(r.slotType.size());
    r.slotType.push_back(p.slotType[s]);
    if (literal.count(s)) r.literals.push_back({mine, literal[s]->value});
    slotOf[s] = mine;
    return mine;
  };
  for (size_t k = b; k < e; ++k) {
    lower::Instr li = p.code[k];
    li.a = slot(li.a), li.b = slot(li.b), li.c = slot(li.c);
    li.out = slot(li.out);
    r.code.push_back(li);
  }
  r.vml.resize(r.code.size());
  r.result = r.code.back().out;
  return r;
}

// Whether no compiled run can hold instruction li: an op the code generator lacks, an integer
// result, or a cast between float32 and float64 of a value that is not a uniform operand (which a
// kernel converts as it loads it). Runs end before such an instruction, so that the search for the
// longest run that compiles tries few lengths.
bool kernelsLack(const TileProgram& p, const lower::Instr& li, const std::vector<jit::Leaf>& leaves) {
  auto held = [](c10::ScalarType t) {
    return t == c10::ScalarType::Float || t == c10::ScalarType::Double || t == c10::ScalarType::Bool;
  };
  if (li.op == Prim::Aten || !primHas(li.op, kJit) || !held(p.slotType[li.out])) return true;
  const bool uniformLeaf = li.a >= 0 && li.a < p.numLeaves && leaves[li.a] == jit::Leaf::Uniform;
  return li.op == Prim::Cast && p.slotType[li.a] != p.slotType[li.out] && p.slotType[li.a] != c10::ScalarType::Bool &&
         p.slotType[li.out] != c10::ScalarType::Bool && !uniformLeaf;
}

// Whether some value of instructions [b, e - 1) is read at or after instruction e (a run stores
// only its last value).
bool innerValueEscapes(const TileProgram& p, size_t b, size_t e) {
  for (size_t j = b; j + 1 < e; ++j)
    for (size_t later = e; later < p.code.size(); ++later) {
      const lower::Instr& u = p.code[later];
      const int w = p.code[j].out;
      if (u.a == w || u.b == w || u.c == w || std::count(u.atenSlots.begin(), u.atenSlots.end(), w)) return true;
    }
  return false;
}

}  // namespace

std::optional<SegmentedProgram> SegmentedProgram::make(const TileProgram& p, const std::vector<jit::Leaf>& leaves,
                                                       std::string* why) {
  auto decline = [&](const char* reason) -> std::optional<SegmentedProgram> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (!jit::enabled()) return decline("compiled kernels are off");
  if (p.code.empty() || !p.resultWrittenLast()) return decline("the result is not the last instruction's value");
  SegmentedProgram sp;
  sp.p_ = &p;
  bool anyCompiled = false;  // a compiled run or a vector routine
  // Slots that hold one value for every lane: uniform leaves, literals, and native results of them
  // (a compiled run stores such a value on every lane alike, so its first element is the value).
  std::vector<char> oneValue(p.slotType.size(), 0);
  for (int i = 0; i < p.numLeaves; ++i) oneValue[i] = leaves[i] == jit::Leaf::Uniform;
  for (const auto& lit : p.literals) oneValue[lit.slot] = 1;
  for (const lower::Instr& li : p.code)
    oneValue[li.out] = li.op != Prim::Aten && (li.a < 0 || oneValue[li.a]) && (li.b < 0 || oneValue[li.b]) &&
                       (li.c < 0 || oneValue[li.c]);
  for (size_t k = 0; k < p.code.size();) {
    const lower::Instr& li = p.code[k];
    if (kernelsLack(p, li, leaves)) {
      // One instruction: eager's routine where it has one (its number argument one value on
      // every tile), else through the interpreter.
      const int arg = p.routineArgOf(k);
      const bool routine = li.op == Prim::Aten && p.routineOf(k) && (arg < 0 || oneValue[arg]);
      Step st;
      st.kind = routine ? Step::Routine : Step::Interpreted;
      st.instr = k;
      st.out = li.out;
      sp.steps_.push_back(std::move(st));
      anyCompiled |= routine;
      ++k;
      continue;
    }
    size_t end = k;
    while (end < p.code.size() && !kernelsLack(p, p.code[end], leaves)) ++end;
    // The longest run from k that compiles and keeps its inner values to itself; none: instruction
    // k alone through the interpreter.
    Step st;
    for (size_t e = end; e > k && !st.map; --e) {
      if (innerValueEscapes(p, k, e)) continue;
      std::vector<int> reads;
      TileProgram run = runOf(p, k, e, &reads);
      std::vector<jit::Leaf> kinds;
      for (int s : reads) kinds.push_back(s < p.numLeaves ? leaves[s] : jit::Leaf::Contiguous);
      st.map = jit::CompiledMap::make(run, run.slotType[run.result], kinds);
      if (!st.map) continue;
      st.kind = Step::Map;
      st.reads = std::move(reads);
      st.instr = e - 1;
      st.out = p.code[e - 1].out;
    }
    if (!st.map) {
      st.kind = Step::Interpreted;
      st.instr = k;
      st.out = li.out;
    }
    anyCompiled |= st.kind == Step::Map;
    k = st.instr + 1;
    sp.steps_.push_back(std::move(st));
  }
  if (!anyCompiled) return decline("neither a vector routine nor a run of native instructions that compiles");
  if (sp.steps_.size() >= 2) {
    const Step& last = sp.steps_.back();
    const Step& before = sp.steps_[sp.steps_.size() - 2];
    sp.endsInRoutine_ = last.kind == Step::Routine && before.kind == Step::Map && p.routineArgOf(last.instr) < 0 &&
                        p.code[last.instr].atenSlots[0] == before.out;
  }
  gMade.fetch_add(1, std::memory_order_relaxed);
  return sp;
}

int64_t segmentedProgramsMade() { return gMade.load(); }

void SegmentedProgram::run(TileProgram::Scratch& s, int64_t n, char* dst) const { runSteps(s, steps_.size(), n, dst); }

void SegmentedProgram::runBeforeRoutine(TileProgram::Scratch& s, int64_t n, char* dst) const {
  TORCH_INTERNAL_ASSERT(endsInRoutine_);
  runSteps(s, steps_.size() - 1, n, dst);
}

void SegmentedProgram::routineInPlace(int64_t n, char* dst) const {
  TORCH_INTERNAL_ASSERT(endsInRoutine_);
  (*p_->routineOf(steps_.back().instr))(n, dst, dst);
}

// Steps [0, count), the last of them writing to dst.
void SegmentedProgram::runSteps(TileProgram::Scratch& s, size_t count, int64_t n, char* dst) const {
  char* leaf[jit::kMaxLeaves];
  for (size_t i = 0; i < count; ++i) {
    const Step& st = steps_[i];
    const bool last = i + 1 == count;
    char* out = last ? dst : s.buffer[st.out];
    switch (st.kind) {
      case Step::Map:
        for (size_t j = 0; j < st.reads.size(); ++j) leaf[j] = s.slot[st.reads[j]];
        st.map->run(leaf, n, out);
        break;
      case Step::Routine: {
        const int in = p_->code[st.instr].atenSlots[0], arg = p_->routineArgOf(st.instr);
        const VmlRoutine& routine = *p_->routineOf(st.instr);
        if (arg < 0)
          routine(n, p_->vectorOf(s, in, n), out);
        else
          routine(n, p_->vectorOf(s, in, n), out, p_->uniformValue(s, arg));
        break;
      }
      case Step::Interpreted: {
        countPath(PathCount::InterpretedSteps);
        p_->runInstr(s, n, st.instr);
        const char* v = p_->vectorOf(s, st.out, n);  // a value computed once is expanded
        if (last) std::memcpy(dst, v, n * c10::elementSize(p_->slotType[st.out]));
        out = const_cast<char*>(v);
        break;
      }
    }
    s.slot[st.out] = out;
    s.fill[st.out] = TileProgram::Fill::Vector;
  }
  // The scratch's slots point at their own buffers again for the next tile.
  for (size_t i = 0; i < count; ++i) s.slot[steps_[i].out] = s.buffer[steps_[i].out];
}

}  // namespace tsfuse::cpu::jit
