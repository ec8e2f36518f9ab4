// Compiled runs of a tile program between its MKL routine calls (kernels/backends/cpu/jit/segments.h).
#include "kernels/backends/cpu/jit/segments.h"

#include "tsfuse/log.h"

#include <algorithm>
#include <atomic>
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

}  // namespace

std::optional<SegmentedProgram> SegmentedProgram::make(const TileProgram& p, const std::vector<jit::Leaf>& leaves) {
  if (!jit::enabled() || p.code.empty() || !p.resultWrittenLast()) return std::nullopt;
  SegmentedProgram sp;
  sp.p_ = &p;
  std::vector<char> vector(p.slotType.size());  // slots holding n values once written
  for (size_t k = 0; k < p.code.size();) {
    const lower::Instr& li = p.code[k];
    if (li.op == Prim::Aten) {
      const int in = li.atenSlots.empty() ? -1 : li.atenSlots[0];
      if (!p.vml[k] || !(in >= p.numLeaves ? vector[in] : leaves[in] == jit::Leaf::Contiguous)) return std::nullopt;
      Step st;
      st.instr = k;
      st.out = li.out;
      vector[li.out] = 1;
      sp.steps_.push_back(std::move(st));
      ++k;
      continue;
    }
    size_t e = k;
    while (e < p.code.size() && p.code[e].op != Prim::Aten) ++e;
    // Only the run's last value is stored: no later step may read another of its values.
    for (size_t j = k; j + 1 < e; ++j)
      for (size_t later = e; later < p.code.size(); ++later) {
        const lower::Instr& u = p.code[later];
        const int w = p.code[j].out;
        if (u.a == w || u.b == w || u.c == w || std::count(u.atenSlots.begin(), u.atenSlots.end(), w))
          return std::nullopt;
      }
    Step st;
    TileProgram run = runOf(p, k, e, &st.reads);
    std::vector<jit::Leaf> kinds;
    for (int s : st.reads) kinds.push_back(s < p.numLeaves ? leaves[s] : jit::Leaf::Contiguous);
    st.map = jit::CompiledMap::make(run, run.slotType[run.result], kinds);
    if (!st.map) return std::nullopt;
    st.out = p.code[e - 1].out;
    vector[st.out] = 1;
    sp.steps_.push_back(std::move(st));
    k = e;
  }
  gMade.fetch_add(1, std::memory_order_relaxed);
  return sp;
}

int64_t segmentedProgramsMade() { return gMade.load(); }

void SegmentedProgram::run(TileProgram::Scratch& s, int64_t n, char* dst) const {
  char* leaf[jit::kMaxLeaves];
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& st = steps_[i];
    char* out = i + 1 == steps_.size() ? dst : s.buffer[st.out];
    if (st.map) {
      for (size_t j = 0; j < st.reads.size(); ++j) leaf[j] = s.slot[st.reads[j]];
      st.map->run(leaf, n, out);
    } else {
      p_->vml[st.instr](n, s.slot[p_->code[st.instr].atenSlots[0]], out);
    }
    s.slot[st.out] = out;
  }
  // The scratch's slots point at their own buffers again for the next tile.
  for (const Step& st : steps_) s.slot[st.out] = s.buffer[st.out];
}

}  // namespace tsfuse::cpu::jit
