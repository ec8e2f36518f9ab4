// Compiled tile programs: the process switches, compilation and the kernel cache (code generation:
// jit/codegen.cpp; the vertical reduction's driver: jit/vertical_reduce.cpp).
#include "kernels/backends/cpu/jit/jit.h"

#include "kernels/backends/cpu/jit/codegen.h"
#include "kernels/backends/cpu/jit/gen.h"
#include "kernels/backends/path_counts.h"
#include "tsfuse/log.h"

#include <xbyak/xbyak.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace tsfuse::cpu::jit {

struct Kernel::Code {
  std::shared_ptr<Xbyak::CodeGenerator> gen;
};

namespace {

// AVX2 (the op loops' choice, which TSFUSE_CPU_ISA=baseline turns off) and BMI2 (pdep).
bool supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  return usingAvx2() && __builtin_cpu_supports("bmi2");
#else
  return false;
#endif
}
// AVX-512 F and DQ (the wide kernels' instructions).
bool supportedWide() {
#if defined(__x86_64__) && defined(__GNUC__)
  return supported() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

// The process-wide switches: on where the CPU has what they need, unless their variable is "0".
bool envIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::string(v) == value;
}
bool envAllows(const char* name) { return !envIs(name, "0"); }
std::atomic<bool>& switchState() {
  static std::atomic<bool> on{envAllows("TSFUSE_CPU_JIT") && supported()};
  return on;
}
std::atomic<bool>& wideState() {
  static std::atomic<bool> on{envAllows("TSFUSE_CPU_AVX512") && supportedWide()};
  return on;
}

std::atomic<int64_t> compiledKernels{0};

// Kernels by Plan::key, declined programs included (as nullptr with the reason). Bounded: full,
// it starts afresh (the kernels in use stay alive with their callers), so that no program, however
// many came before it, compiles on every call.
struct Cache {
  static constexpr size_t kMaxEntries = 512;
  struct Entry {
    std::shared_ptr<const Kernel> kernel;
    std::string why;
  };
  std::mutex mu;
  std::unordered_map<std::string, Entry> entries;
};

Cache& cache() {
  static Cache* c = new Cache();  // NB: leaked on purpose: kernels may run during static destruction
  return *c;
}

const char* sinkName(Sink s) {
  switch (s) {
    case Sink::SumInt64:
      return "count";
    case Sink::SumDouble:
      return "sum";
    case Sink::SumFloat:
      return "sumf";
    case Sink::SumInner:
      return "sumi";
    case Sink::MaxFirst:
      return "max";
    case Sink::MinFirst:
      return "min";
    case Sink::Store:
      return "map";
  }
  return "?";
}

// Generated code named for profilers: with TSFUSE_JIT_PERF_MAP=1 each kernel's address range goes
// to /tmp/perf-<pid>.map under a name that says what it is (perf report then shows
// "tsfuse_jit_sum_2i_2x2_block_3f9a..." instead of an unknown address in an anonymous mapping):
// the sink, the instruction count, rows x vectors per block, block or masked tail, the program's key.
// With TSFUSE_JIT_DUMP=1 each kernel's bytes also go to <that name>.bin in the working directory
// (read them with `objdump -D -b binary -m i386:x86-64 -M intel FILE`).
void recordForProfilers(const Plan& plan, const std::vector<std::shared_ptr<Kernel::Code>>& code, int rows, int vectors,
                        bool wide) {
  const bool perfMap = envIs("TSFUSE_JIT_PERF_MAP", "1"), dump = envIs("TSFUSE_JIT_DUMP", "1");
  if (!perfMap && !dump) return;
  std::FILE* map = perfMap ? std::fopen(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str(), "a") : nullptr;
  const size_t key = std::hash<std::string>()(plan.key);
  for (size_t i = 0; i < code.size(); ++i) {
    if (!code[i]) continue;  // a map's absent masked kernel
    const Xbyak::CodeGenerator& g = *code[i]->gen;
    const int r = i < 2 && code.size() > 2 ? 1 : rows;  // the single-row kernels come first (compile)
    char name[160];
    std::snprintf(name, sizeof(name), "tsfuse_jit_%s%s_%zui_%dx%d_%s_%zx", sinkName(plan.sink), wide ? "z" : "",
                  plan.code.size(), r, i % 2 ? 1 : vectors, i % 2 ? "tail" : "block", key);
    if (map)
      std::fprintf(map, "%lx %zx %s\n", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(g.getCode())),
                   g.getSize(), name);
    if (!dump) continue;
    if (std::FILE* f = std::fopen((std::string(name) + ".bin").c_str(), "wb")) {
      std::fwrite(g.getCode(), 1, g.getSize(), f);
      std::fclose(f);
    }
  }
  if (map) std::fclose(map);
}

// The block and masked-vector kernels of one shape (the vector's literals move to memory if it
// is one register short; a map has no vector kernel); empty where the registers do not suffice.
std::vector<std::shared_ptr<Kernel::Code>> kernelsOf(const Plan& plan, int rows, int vectors, bool inMemory, bool wide,
                                                     bool hold = false) {
  std::shared_ptr<Xbyak::CodeGenerator> block = generate(plan, {vectors, false, inMemory, rows, wide, hold});
  if (!block) return {};
  auto code = [](std::shared_ptr<Xbyak::CodeGenerator> g) {
    return std::make_shared<Kernel::Code>(Kernel::Code{std::move(g)});
  };
  // A map's driver runs its last lanes as one more block over padded copies (CompiledMap::run):
  // no masked vector kernel (one could not load bool operands, a byte a lane, under a lane mask).
  if (plan.sink == Sink::Store) return {code(block), nullptr};
  std::shared_ptr<Xbyak::CodeGenerator> tail = generate(plan, {1, true, inMemory, rows, wide, hold});
  if (!tail) tail = generate(plan, {1, true, true, rows, wide});
  if (!tail) return {};
  return {code(block), code(tail)};
}

Cache::Entry compile(const Plan& plan) {
  // The widest block that fits in the 16 registers, literals in registers if they fit too. Where
  // an operand changes per output row (sums), blocks of several rows come first: each load of the
  // other operands then serves every row (and the single-row kernels take the rows left over).
  const bool perRow = plan.sums() && std::any_of(plan.perRow.begin(), plan.perRow.begin() + plan.leaves.size(),
                                                 [](char c) { return c != 0; });
  // 64-byte vectors first where they apply (widens): twice the lanes per instruction, and 32
  // registers for a block's partial sums.
  static const std::pair<int, int> kShapes[] = {{4, 2}, {2, 4}, {2, 2}, {4, 1}, {2, 1}, {1, 4}, {1, 2}, {1, 1}};
  // A map's converted uniform operands held in registers first (Shape::holdUniforms), if they fit.
  bool uniforms = false;
  for (size_t i = 0; i < plan.leaves.size(); ++i) uniforms |= plan.holdable(i);
  for (bool wide : {true, false}) {
    if (wide && !widens(plan)) continue;
    for (auto [inMemory, hold] : {std::pair{false, true}, {false, false}, {true, true}, {true, false}})
      for (auto [rows, vectors] : kShapes) {
        if ((rows > 1 && !perRow) || (hold && !uniforms)) continue;
        std::vector<std::shared_ptr<Kernel::Code>> code = kernelsOf(plan, rows, vectors, inMemory, wide, hold);
        if (code.empty()) continue;
        if (rows > 1) {  // the rows left over: single-row kernels with the same lanes per block
          std::vector<std::shared_ptr<Kernel::Code>> one = kernelsOf(plan, 1, vectors, inMemory, wide);
          if (one.empty()) one = kernelsOf(plan, 1, vectors, true, wide);
          if (one.empty()) continue;
          code.insert(code.begin(), one.begin(), one.end());
        }
        const int64_t esz = plan.f64 ? 8 : 4, lanes = (wide ? 64 : 32) / esz;
        // int32 count lanes (float32 compares) and int32 extremum indices hold up to 2^31 - 1 rows.
        const bool int32Lanes = (plan.sums() && plan.boolValue && !plan.f64) || isExtremum(plan.sink);
        const int64_t maxRows = int32Lanes ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
        const int64_t outBytes = plan.sums() ? 8 : plan.boolValue ? 1 : esz;
        recordForProfilers(plan, code, rows, vectors, wide);
        TSFUSE_LOG(kernel, debug, "compiled ",
                   !plan.sums()            ? "map"
                   : isExtremum(plan.sink) ? "extremum"
                                           : "sum",
                   ": ", plan.code.size(), " instructions, ", rows, " row(s) x ", vectors, " x ", lanes,
                   " lanes per block", wide ? " (AVX-512), " : ", ", inMemory ? "literals in memory, " : "",
                   hold ? "converted uniform operands held, " : "", code.front()->gen->getSize(),
                   " bytes of code per kernel");
        compiledKernels.fetch_add(1, std::memory_order_relaxed);
        return {std::make_shared<Kernel>(std::move(code),
                                         Kernel::Layout{lanes, lanes * vectors, maxRows, esz, outBytes, rows, wide}),
                ""};
      }
  }
  return {nullptr, "more live values than vector registers"};
}

}  // namespace

int64_t kernelsCompiled() { return compiledKernels.load(std::memory_order_relaxed); }

void countTile() { countPath(PathCount::CompiledTiles); }

Kernel::Kernel(std::vector<std::shared_ptr<Code>> code, const Layout& l)
    : code_(std::move(code)),
      vectorLanes_(l.vectorLanes),
      blockLanes_(l.blockLanes),
      maxRows_(l.maxRows),
      elemSize_(l.elemSize),
      outBytes_(l.outBytes),
      rowsPerBlock_(l.rowsPerBlock),
      wide_(l.wide) {
  for (int all = 0; all < 2; ++all)
    for (int v = 0; v < 2; ++v) {
      const size_t i = (all && rowsPerBlock_ > 1 ? 2 : 0) + v;
      fn_[all][v] = code_[i] ? code_[i]->gen->getCode<Fn>() : nullptr;
    }
}

void Kernel::fillMask(int64_t n, void* mask) const {
  std::memset(mask, 0, 32);
  if (wide_) {
    const uint16_t bits = static_cast<uint16_t>((1u << std::min(n, vectorLanes_)) - 1);
    std::memcpy(mask, &bits, sizeof bits);
    return;
  }
  std::memset(mask, 0xFF, static_cast<size_t>(std::min(n, vectorLanes_) * elemSize_));
}

std::shared_ptr<const Kernel> Kernel::get(const TileProgram& p, size_t prefix, int source, Sink sink,
                                          const std::vector<Leaf>& leaves, const std::vector<char>& perRow,
                                          std::string* why, int64_t innerRows) {
  std::optional<Plan> plan = Plan::make(p, prefix, source, sink, leaves, perRow, why, innerRows);
  if (!plan) return nullptr;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.entries.find(plan->key);
  if (it == c.entries.end()) {
    Cache::Entry e = compile(*plan);
    if (c.entries.size() >= Cache::kMaxEntries) c.entries.clear();
    it = c.entries.emplace(plan->key, std::move(e)).first;
  }
  if (why) *why = it->second.why;
  const std::shared_ptr<const Kernel>& shared = it->second.kernel;
  std::vector<uint64_t> literals;
  for (const auto& bits : plan->literal)
    if (bits) literals.push_back(*bits);
  if (!shared || literals.empty()) return shared;
  auto kernel = std::make_shared<Kernel>(*shared);
  kernel->literals_ = std::move(literals);
  return kernel;
}

bool enabled() { return switchState().load(std::memory_order_relaxed); }
bool wideKernels() { return wideState().load(std::memory_order_relaxed); }
void setWideKernels(bool on) { wideState().store(on && supportedWide(), std::memory_order_relaxed); }
void setEnabled(bool on) { switchState().store(on && supported(), std::memory_order_relaxed); }
int64_t tilesRun() { return pathCount(PathCount::CompiledTiles); }

}  // namespace tsfuse::cpu::jit
