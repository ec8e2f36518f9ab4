// Compiled tile programs: the kernel cache and the tile drivers (code generation: jit/codegen.cpp).
#include "kernels/backends/cpu/jit/jit.h"

#include "kernels/backends/cpu/gather.h"
#include "kernels/backends/cpu/jit/codegen.h"
#include "kernels/backends/cpu/jit/gen.h"
#include "tsfuse/log.h"

#include <xbyak/xbyak.h>

#include <ATen/Parallel.h>

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
    case Sink::SumInt64: return "count";
    case Sink::SumDouble: return "sum";
    case Sink::SumFloat: return "sumf";
    case Sink::SumInner: return "sumi";
    case Sink::MaxFirst: return "max";
    case Sink::MinFirst: return "min";
    case Sink::Store: return "map";
  }
  return "?";
}

// Generated code named for profilers: with TSFUSE_JIT_PERF_MAP=1 each kernel's address range goes
// to /tmp/perf-<pid>.map under a name that says what it is (perf report then shows
// "tsfuse_jit_sum_2i_2x2_block_3f9a..." instead of an unknown address in an anonymous mapping):
// the sink, the instruction count, rows x vectors per block, block or masked tail, the program's key.
// With TSFUSE_JIT_DUMP=1 each kernel's bytes also go to <that name>.bin in the working directory
// (read them with `objdump -D -b binary -m i386:x86-64 -M intel FILE`).
void recordForProfilers(const Plan& plan, const std::vector<std::shared_ptr<Kernel::Code>>& code, int rows,
                        int vectors, bool wide) {
  const bool perfMap = envIs("TSFUSE_JIT_PERF_MAP", "1"), dump = envIs("TSFUSE_JIT_DUMP", "1");
  if (!perfMap && !dump) return;
  std::FILE* map = perfMap ? std::fopen(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str(), "a") : nullptr;
  const size_t key = std::hash<std::string>()(plan.key);
  for (size_t i = 0; i < code.size(); ++i) {
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
// is one register short); nullptr where the registers do not suffice.
std::vector<std::shared_ptr<Kernel::Code>> kernelsOf(const Plan& plan, int rows, int vectors, bool inMemory,
                                                     bool wide, bool hold = false) {
  std::shared_ptr<Xbyak::CodeGenerator> block = generate(plan, {vectors, false, inMemory, rows, wide, hold});
  if (!block) return {};
  std::shared_ptr<Xbyak::CodeGenerator> tail = generate(plan, {1, true, inMemory, rows, wide, hold});
  if (!tail) tail = generate(plan, {1, true, true, rows, wide});
  if (!tail) return {};
  auto code = [](std::shared_ptr<Xbyak::CodeGenerator> g) { return std::make_shared<Kernel::Code>(Kernel::Code{std::move(g)}); };
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
        TSFUSE_LOG(kernel, debug, "compiled ", !plan.sums() ? "map" : isExtremum(plan.sink) ? "extremum" : "sum", ": ",
                   plan.code.size(), " instructions, ", rows, " row(s) x ", vectors, " x ", lanes, " lanes per block",
                   wide ? " (AVX-512), " : ", ", inMemory ? "literals in memory, " : "",
                   hold ? "converted uniform operands held, " : "",
                   code.back()->gen->getSize(), " bytes of code per kernel");
        compiledKernels.fetch_add(1, std::memory_order_relaxed);
        return {std::make_shared<Kernel>(std::move(code),
                                         Kernel::Layout{lanes, lanes * vectors, maxRows, esz, outBytes, rows, wide}),
                ""};
      }
  }
  return {nullptr, "more live values than vector registers"};
}

}  // namespace

// Tiles run, counted per thread in its own cache line: one shared counter bumped by every tile
// was 7% of a 64-coordinate distance's profile (its line moving between the cores). The bump is a
// plain load and store, not a locked add: a `lock add` waits for the tile's stores to drain (7% of
// a Gaussian kernel sum's profile). Threads beyond kTileCounts share a slot and may then lose a
// count; the counts only tell tests that compiled kernels ran.
namespace {
struct alignas(64) TileCount {
  std::atomic<int64_t> n{0};
};
constexpr int kTileCounts = 64;
TileCount tileCounts[kTileCounts];
std::atomic<int> nextTileCount{0};
}  // namespace

int64_t kernelsCompiled() { return compiledKernels.load(std::memory_order_relaxed); }

void countTile() {
  thread_local const int slot = nextTileCount.fetch_add(1, std::memory_order_relaxed) % kTileCounts;
  std::atomic<int64_t>& n = tileCounts[slot].n;
  n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

Kernel::Kernel(std::vector<std::shared_ptr<Code>> code, const Layout& l)
    : code_(std::move(code)), vectorLanes_(l.vectorLanes), blockLanes_(l.blockLanes), maxRows_(l.maxRows),
      elemSize_(l.elemSize), outBytes_(l.outBytes), rowsPerBlock_(l.rowsPerBlock), wide_(l.wide) {
  for (int all = 0; all < 2; ++all)
    for (int v = 0; v < 2; ++v) {
      const size_t i = (all && rowsPerBlock_ > 1 ? 2 : 0) + v;
      fn_[all][v] = code_[i]->gen->getCode<Fn>();
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

std::optional<VerticalReduce> VerticalReduce::make(const TileProgram& p, size_t prefix, int source, Sink sink,
                                             const IterationPlan& plan, const InnerSumOrder* order) {
  const auto& views = plan.views;
  const SubSpace &kept = plan.kept, &reduced = plan.reduced;
  if (!enabled() || kept.size.empty()) return std::nullopt;
  VerticalReduce v;
  v.views_ = &views;
  v.inner_ = kept.size.back();
  v.packed_ = ScratchSet(views.size());
  v.packedOnce_.assign(views.size(), 0);
  if (isExtremum(sink) && reduced.numel() > std::numeric_limits<int32_t>::max()) {
    TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: more rows than int32 indices count");
    return std::nullopt;
  }
  if (reduced.numel() == 0) {  // (a sum over an empty dim: the interpreter writes each output's start)
    TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: an empty reduced space");
    return std::nullopt;
  }
  // Operands packed per line: strided along the lanes, the same for every row of a line (stride 0
  // along the rows' dim) but not for every line. Each line is then a pass of its own: packed, then
  // its tiles run on every thread where a line holds enough work to pay for that, else lines run
  // in parallel, each thread packing its own (a batch of small point clouds), or one after another
  // where the call runs on one thread anyway (a slab of a chain or sweep, inside a parallel region).
  constexpr int64_t kMinLineWork = int64_t(1) << 16;  // values a line's tiles fold
  const size_t kd = kept.size.size();
  v.packedPerLine_.assign(views.size(), 0);
  if (kd >= 3) {
    v.linesInParallel_ = !at::in_parallel_region() && kept.size[kd - 2] * v.inner_ * reduced.numel() < kMinLineWork;
    v.lines_ = kept.outer().outer();
    for (size_t i = 0; i < views.size(); ++i)
      v.packedPerLine_[i] = plan.keptAccess[i] == Access::Gathered && kept.stride[i][kd - 2] == 0;
  }
  // The panel: every lane, or the most lanes (whole tiles) of which each packed operand's copy fits
  // (none: the operands stay strided, and a kernel that reads one is declined).
  auto packable = [&](size_t i) { return plan.keptAccess[i] == Access::Packed || v.packedPerLine_[i]; };
  int64_t fit = v.inner_;
  for (size_t i = 0; i < views.size(); ++i)
    if (packable(i))
      fit = std::min(fit, kMaxPackBytes / ((reduced.constantFor(i) ? 1 : reduced.numel()) * views[i].elemSize));
  const bool pack = fit >= std::min(v.inner_, kTile);
  v.panel_ = !pack ? v.inner_ : fit < v.inner_ ? fit / kTile * kTile : v.inner_;
  for (size_t i = 0; i < views.size(); ++i) {
    const Access access = plan.keptAccess[i];
    Leaf kind = access == Access::Uniform ? Leaf::Uniform : access == Access::InPlace ? Leaf::Contiguous : Leaf::Strided;
    // Reduced rows (in the reduced space's row-major order) by lanes, contiguous; one row where the
    // operand is the same for every reduced row (an anchor's coordinate against every box).
    const bool once = reduced.constantFor(i);
    if (packable(i) && pack) {
      const int64_t packedRows = once ? 1 : reduced.numel();
      v.packed_.allocate(i, packedRows * packedRowBytes(v.panel_ * views[i].elemSize));
      kind = Leaf::Contiguous;
      v.packedOnce_[i] = once;
      v.perLine_ = v.perLine_ || v.packedPerLine_[i];
    }
    v.leaves_.push_back(kind);
  }
  v.reduced_ = reduced;
  for (size_t i = 0; i < views.size(); ++i) v.laneStride_.push_back(kept.stride[i].back());
  // Output rows along the kept dim next to the lanes' dim: operands that move along it change per
  // row; the others are read once for a tile's rows.
  std::vector<char> perRow(views.size(), 0);
  v.outerStride_.assign(views.size(), 0);
  if (kd >= 2) {
    v.line_ = kept.size[kd - 2];
    for (size_t i = 0; i < views.size(); ++i) {
      v.outerStride_[i] = kept.stride[i][kd - 2];
      perRow[i] = v.outerStride_[i] != 0;
    }
  }
  v.outer_ = reduced;
  v.rowStride_.assign(views.size(), 0);
  if (!reduced.size.empty()) {
    v.rows_ = reduced.size.back();
    v.outer_.size.pop_back();
    for (size_t i = 0; i < views.size(); ++i) {
      v.rowStride_[i] = v.packed_[i].empty() ? reduced.stride[i].back()
                        : v.packedOnce_[i]    ? 0
                                              : packedRowBytes(v.panel_ * views[i].elemSize);
      v.outer_.stride[i].pop_back();
    }
  }
  if (pack) v.pack(0, 0);  // (after rowStride_, which packedAt reads)
  std::string why;
  if (order) {
    // Eager's inner order: the kernels walk one reduced dim of `rows_` values (the values after
    // the vectors through a SumFloat kernel, one output row a call: no per-row operands).
    if (sink != Sink::SumInner || v.outer_.numel() != 1 || v.rows_ != order->vectors * order->lanes + order->rest) {
      TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: a sum in eager's inner order ",
                 sink == Sink::SumInner ? "over another reduced layout" : "into another sink");
      return std::nullopt;
    }
    v.order_ = *order;
    const Sink after = p.slotType[source] == c10::ScalarType::Double ? Sink::SumDouble : Sink::SumFloat;
    if (order->rest > 0 && !(v.after_ = Kernel::get(p, prefix, source, after, v.leaves_, {}, &why))) {
      TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: ", why);
      return std::nullopt;
    }
  }
  v.kernel_ = Kernel::get(p, prefix, source, sink, v.leaves_, perRow, &why, order ? order->vectors : 0);
  if (!v.kernel_) {
    TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: ", why);
    return std::nullopt;
  }
  v.fresh_ = sink != Sink::SumInt64 && p.slotType[source] != c10::ScalarType::Bool && v.outer_.numel() == 1 &&
             v.rows_ <= v.kernel_->maxRows();  // (always so in eager's inner order)
  v.sink_ = sink;
  v.f64_ = p.slotType[source] == c10::ScalarType::Double;
  return v;
}

void VerticalReduce::clear(void* sums, int64_t n) const {
  char* p = static_cast<char*>(sums);
  if (!isExtremum(sink_)) {
    std::memset(p, 0, n * laneBytes());
    return;
  }
  std::fill_n(reinterpret_cast<float*>(p), n, extremumStart(sink_));
  std::memset(p + kExtremumIndexBytes, 0, n * sizeof(int32_t));
}

void VerticalReduce::pack(int64_t line, int64_t p0) {
  TORCH_INTERNAL_ASSERT(p0 % std::max<int64_t>(panel_, 1) == 0 && p0 < inner_ && (line == 0 || perLine_),
                        "tsfuse: a packed panel off its grid");
  panelStart_ = p0;
  const int64_t lanes = std::min(panel_, inner_ - p0);
  // Blocks of lanes, every row of a block before the next: a block's source lines (x[i, :] of 64
  // coordinates is four lines a lane) stay in L1 across its rows, where row after row over the
  // whole panel read each line once per row from L2 (packing 50000 x 64 coordinates: 45% of a
  // distance call). Blocks are packed in parallel where there are many (at::parallel_for itself,
  // even where it runs inline, cost a sweep's eight small packs 0.1 ms: Chamfer 1024² 0.23 -> 0.33).
  constexpr int64_t kBlockLanes = 64;
  for (size_t i = 0; i < packed_.size(); ++i) {
    if (packed_[i].empty()) continue;
    const int64_t rows = packedOnce_[i] ? 1 : reduced_.numel(), esz = (*views_)[i].elemSize;
    std::vector<const char*> rowStart(rows);
    const char* data = (*views_)[i].data + (packedPerLine_[i] ? lines_.offset(i, line) : 0);
    for (int64_t r = 0; r < rows; ++r) rowStart[r] = data + reduced_.offset(i, r);
    const int64_t grain = grainFor(rows * kBlockLanes);
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t l0 = p0 + b * kBlockLanes; l0 < std::min(p0 + lanes, p0 + e * kBlockLanes); l0 += kBlockLanes) {
        const int64_t n = std::min(kBlockLanes, p0 + lanes - l0);
        for (int64_t r = 0; r < rows; ++r) gather(rowStart[r], esz, &inner_, &laneStride_[i], 1, l0, n, packedAt(i, r, l0));
      }
    };
    const int64_t blocks = (lanes + kBlockLanes - 1) / kBlockLanes;
    if (blocks <= grain || at::in_parallel_region()) body(0, blocks);
    else at::parallel_for(0, blocks, grain, body);
  }
}

void VerticalReduce::run(const std::vector<int64_t>& base, int64_t start, int64_t rows, int64_t n, void* sums) const {
  const Kernel& k = *kernel_;
  if (rows != k.rowsPerBlock()) {  // fewer rows than a block takes: one row at a time
    std::vector<int64_t> rowBase(base);
    for (int64_t r = 0; r < rows; ++r) {
      for (size_t i = 0; i < rowBase.size(); ++i) rowBase[i] = base[i] + r * outerStride_[i];
      runRows(rowBase, start, false, n, static_cast<char*>(sums) + r * kSumsRowBytes);
    }
  } else {
    runRows(base, start, rows > 1, n, sums);
  }
  countTile();
}

void VerticalReduce::runRows(const std::vector<int64_t>& base, int64_t start, bool allRows, int64_t n,
                          void* sums) const {
  if (order_) return runInner(base, start, allRows, n, sums);
  const Kernel& k = *kernel_;
  const auto& views = *views_;
  const int64_t outerCount = outer_.numel(), maxRows = k.maxRows();
  alignas(32) char mask[32];
  Args a;
  a.mask = mask;
  for (size_t i = 0; i < views.size(); ++i) {
    a.rowStride[i] = rowStride_[i];
    a.outerStride[i] = outerStride_[i];
  }
  // Operand i's first element for lanes from v0, outer reduced row ro, row r0.
  auto point = [&](int64_t v0, int64_t ro, int64_t r0) {
    for (size_t i = 0; i < views.size(); ++i) {
      const int64_t esz = views[i].elemSize, lane = leaves_[i] == Leaf::Contiguous ? v0 * esz : 0;
      if (packed_[i].empty())
        a.leaf[i] = views[i].data + base[i] + outer_.offset(i, ro) + r0 * rowStride_[i] + lane;
      else  // packed: [outer reduced][rows][lanes], or once: [lanes]
        a.leaf[i] = packedAt(i, ro * rows_ + r0, start) + lane;
    }
  };
  int64_t v0 = 0;
  if (startsFromZero()) {
    // One call walks every full block: each starts from 0 and reads all rows, then every operand
    // steps to the next block (contiguous ones by a block of lanes, uniform ones not at all).
    const int64_t blocks = n / k.lanesPerBlock();
    if (blocks > 0) {
      point(0, 0, 0);
      for (size_t i = 0; i < views.size(); ++i)
        a.blockStep[i] = (leaves_[i] == Leaf::Contiguous ? k.lanesPerBlock() * views[i].elemSize : 0) -
                         rows_ * rowStride_[i];
      a.rows = rows_;
      a.blocks = blocks;
      a.fresh = 1;
      a.index = 0;
      a.out = sums;
      k.block(a, allRows);
      v0 = blocks * k.lanesPerBlock();
    }
  }
  while (v0 < n) {
    const bool full = v0 + k.lanesPerBlock() <= n;
    const int64_t lanes = full ? k.lanesPerBlock() : std::min(k.lanesPerVector(), n - v0);
    if (!full) k.fillMask(lanes, mask);
    a.out = static_cast<char*>(sums) + v0 * laneBytes();
    for (int64_t ro = 0; ro < outerCount; ++ro) {
      for (int64_t r0 = 0; r0 < rows_; r0 += maxRows) {
        point(v0, ro, r0);
        a.rows = std::min(maxRows, rows_ - r0);
        a.blocks = 1;
        a.fresh = startsFromZero();
        a.index = ro * rows_ + r0;
        full ? k.block(a, allRows) : k.vector(a, allRows);
      }
    }
    v0 += lanes;
  }
}

// Eager's inner order (InnerSumOrder): the values after the vectors start each lane sum (0 + each,
// in order: a SumFloat kernel per output row), then the SumInner kernel adds each lane of eager's
// vectors: its rows a whole vector apart, lane after lane.
void VerticalReduce::runInner(const std::vector<int64_t>& base, int64_t start, bool allRows, int64_t n,
                              void* sums) const {
  const auto& views = *views_;
  const InnerSumOrder& o = *order_;
  alignas(32) char mask[32];
  Args a;
  a.mask = mask;
  // Operand i's element for lanes from v0 at reduced row `row`, the output rows from base + r.
  auto point = [&](int64_t v0, int64_t row, int64_t r) {
    for (size_t i = 0; i < views.size(); ++i) {
      const int64_t esz = views[i].elemSize, lane = leaves_[i] == Leaf::Contiguous ? v0 * esz : 0;
      if (packed_[i].empty())
        a.leaf[i] = views[i].data + base[i] + r * outerStride_[i] + row * rowStride_[i] + lane;
      else
        a.leaf[i] = packedAt(i, row, start) + lane;
    }
  };
  // Every lane from v0 = 0: whole blocks in one call, then a masked vector at a time.
  auto sweep = [&](const Kernel& k, int64_t row, int64_t stepsPerBlock, bool rowsTogether, int64_t r,
                   char* out) {
    const int64_t blocks = n / k.lanesPerBlock();
    for (size_t i = 0; i < views.size(); ++i)
      a.blockStep[i] = (leaves_[i] == Leaf::Contiguous ? k.lanesPerBlock() * views[i].elemSize : 0) -
                       stepsPerBlock * rowStride_[i];
    for (int64_t v0 = 0; v0 < n;) {
      const bool full = v0 == 0 && blocks > 0;
      point(v0, row, r);
      a.out = out + v0 * laneBytes();
      a.blocks = full ? blocks : 1;  // (the kernel counts it down)
      if (full) {
        k.block(a, rowsTogether);
        v0 = blocks * k.lanesPerBlock();
        continue;
      }
      k.fillMask(std::min(k.lanesPerVector(), n - v0), mask);
      k.vector(a, rowsTogether);
      v0 += k.lanesPerVector();
    }
  };
  const int64_t outRows = allRows ? kernel_->rowsPerBlock() : 1;
  a.fresh = 1;
  if (after_) {
    a.rows = o.rest;
    for (size_t i = 0; i < views.size(); ++i) a.rowStride[i] = rowStride_[i], a.outerStride[i] = outerStride_[i];
    for (int64_t r = 0; r < outRows; ++r)
      sweep(*after_, o.vectors * o.lanes, o.rest, false, r, static_cast<char*>(sums) + r * kSumsRowBytes);
    a.fresh = 0;
  }
  a.rows = o.vectors;
  a.lanes = o.lanes;
  for (size_t i = 0; i < views.size(); ++i) {
    a.rowStride[i] = o.lanes * rowStride_[i];
    a.laneStep[i] = rowStride_[i] - o.vectors * a.rowStride[i];
    a.outerStride[i] = outerStride_[i];
  }
  sweep(*kernel_, 0, o.lanes, allRows, 0, static_cast<char*>(sums));
}

bool enabled() { return switchState().load(std::memory_order_relaxed); }
bool wideKernels() { return wideState().load(std::memory_order_relaxed); }
void setWideKernels(bool on) { wideState().store(on && supportedWide(), std::memory_order_relaxed); }
void setEnabled(bool on) { switchState().store(on && supported(), std::memory_order_relaxed); }
int64_t tilesRun() {
  int64_t n = 0;
  for (const TileCount& c : tileCounts) n += c.n.load(std::memory_order_relaxed);
  return n;
}

}  // namespace tsfuse::cpu::jit
