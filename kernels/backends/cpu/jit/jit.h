// Compiled tile programs: a TileProgram as x86-64 AVX2 machine code (Xbyak), every value in a
// vector register, a block of lanes at a time. For short programs the interpreter's store and
// reload of each instruction's tile are most of the cost. VerticalReduce keeps a block's
// accumulators in registers while it walks the reduced rows (sums, counts, an extremum with its
// first index); CompiledMap loads the operands, runs the ops and stores straight to the output.
#pragma once

#include "kernels/plan/iteration.h"
#include "kernels/backends/cpu/inner_sum.h"
#include "kernels/backends/cpu/scratch.h"
#include "kernels/backends/cpu/tile_program.h"
#include "kernels/backends/reduction_rules.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

// Exactness: each op is the instruction the interpreter's loop computes, in the same order
// (min/max/clamp operand order, NaN to the same quiet NaN, compares, casts), no FMA. Counts add 0/1
// in int32 lanes widened each call (a call covers at most maxRows rows); float sums add each row's
// value in double, in row order, from the lanes' running sums (SumFloat: each addition rounded to
// float); an extremum takes a row's value where rules::laterBeats says the interpreter would. So
// all give the interpreter's bits.
//
// Scope: float32 or float64 values (one per program) and bools, native ops only (no ATen tile ops,
// no integers); operands constant or contiguous along the lanes (a vertical sum packs a lane-strided
// operand that is the same for every output row: kMaxPackBytes, packsPerLine). Anything else is
// declined to the interpreter. Needs AVX2 and BMI2; sums in eager's inner order of arithmetic
// programs get 64-byte vectors with AVX-512 F and DQ (jit/codegen.h, widens): the same
// instructions on twice the lanes, so the same bits.
namespace tsfuse::cpu::jit {

// Operands a kernel reads: the first ones get a general register for their pointer, the rest
// (an IoU over four box columns of two views each has 16, torchvision's distance IoU 32) are read
// through Args, their pointers advanced there (see Gen::assignPointers).
constexpr int kMaxLeaves = 48;

// How a kernel reads one operand along the lanes of a block.
enum class Leaf : uint8_t {
  Unused,      // no instruction reads it
  Uniform,     // one element for every lane (stride 0): broadcast
  Contiguous,  // consecutive elements: vector loads
  Strided,     // neither: a kernel cannot read it (declined if an instruction does)
};

// Where a kernel's value goes.
enum class Sink : uint8_t {
  SumInt64,   // added into int64 lane sums (a bool value counts)
  SumDouble,  // added into double lane sums
  SumFloat,   // float32 values added in float32 into float32 lane sums (rules::foldsInFloat:
              // eager's own order for a few values)
  SumInner,   // float32/float64 values added in their dtype as one lane of eager's inner sum
              // (cpu::InnerSumOrder): Args::lanes times, `rows` rows rotating through four partial
              // sums, which are then combined and added into the lane sum (of the values' dtype)
  MaxFirst,   // float32 values: each lane keeps its greatest (MinFirst: least) value and the reduced
  MinFirst,   // index where it first met it (int32), as rules::laterBeats folds them
  Store,      // written to consecutive lanes (its dtype: float32/float64, or bool bytes)
};

constexpr bool isExtremum(Sink s) { return s == Sink::MaxFirst || s == Sink::MinFirst; }
// The value an extremum's lanes start from, the interpreter's accumulators' own: -inf (max), +inf.
constexpr float extremumStart(Sink s) {
  return s == Sink::MaxFirst ? reduce_rules::lowestOf<float>() : reduce_rules::highestOf<float>();
}

// A block of sums covers several output rows (the same lanes of consecutive outputs along the
// kept dim next to the lanes' dim): each row's lane sums (8-byte lanes; SumFloat: 4-byte ones;
// extrema: kTile 4-byte values, then kTile int32 indices) lie in its own buffer, this many bytes
// after the previous row's.
constexpr int64_t kSumsRowBytes = kTile * 8;
// Bytes of one lane sum for a sink (an extremum's value; its index lies kTile * 4 bytes on).
// (SumInner: the values' own, f64: float64.)
constexpr int64_t sumLaneBytes(Sink s, bool f64 = false) {
  if (s == Sink::SumInner) return f64 ? 8 : 4;
  return s == Sink::SumFloat || isExtremum(s) ? 4 : 8;
}
constexpr int64_t kExtremumIndexBytes = kTile * 4;

// One call. Sums: rows [0, rows) of the reduced space's innermost dim for `blocks` consecutive
// blocks of lanes (of one or several output rows), block after block: a few reduced rows (a
// distance over 3 coordinates) then cost one call per tile, not one per block. Store: `rows`
// consecutive blocks of lanes (rowStride is then the operand's step per block).
struct Args {
  // Each operand's element at row 0, first lane of the block (an operand without a register: its
  // current element, advanced by the kernel as it goes).
  const char* leaf[kMaxLeaves] = {};
  int64_t rowStride[kMaxLeaves] = {};    // bytes from one row (block) to the next
  int64_t outerStride[kMaxLeaves] = {};  // bytes from one output row to the next (sums)
  int64_t blockStep[kMaxLeaves] = {};    // sums: bytes from the end of a block's rows to the next block
  int64_t laneStep[kMaxLeaves] = {};     // SumInner: bytes from the end of one lane's rows to the next's
  int64_t lanes = 1;                     // SumInner: the lanes of eager's vectors, each `rows` rows
  int64_t lanesLeft = 0;                 // SumInner: the kernel's own counter
  int64_t rows = 0;
  int64_t blocks = 1;          // sums: blocks of lanes (vector(): 1); counts down to 0
  int64_t fresh = 0;           // float sums and extrema: start afresh, not from `out`
  int64_t index = 0;           // extrema: the reduced index of row 0
  void* out = nullptr;         // the first block's lane sums, or where the values go
  const void* mask = nullptr;  // vector(): 32 bytes, all-ones for the lanes to load (wide
                               // kernels: a 16-bit lane mask in its first two bytes)
};

class Kernel {
 public:
  // The kernels for code[0, prefix) of `p`, sinking slot `source`. perRow (sums; empty: none):
  // which operands change from one output row to the next (their outerStride), so that a block
  // can cover several rows and reuse the others' loads. Compiled once per program and operand
  // layout, then shared; the program's literals are not in the code but passed with each call
  // (the kernel returned holds `p`'s values), so a number bound per call (bind_numbers.h) compiles
  // nothing new. nullptr, with the reason in *why, where the scope above ends.
  // SumInner kernels are made for one row count (innerRows: InnerSumOrder::vectors).
  static std::shared_ptr<const Kernel> get(const TileProgram& p, size_t prefix, int source, Sink sink,
                                           const std::vector<Leaf>& leaves, const std::vector<char>& perRow,
                                           std::string* why, int64_t innerRows = 0);

  int64_t lanesPerVector() const { return vectorLanes_; }
  int64_t lanesPerBlock() const { return blockLanes_; }
  // Output rows per block of the `allRows` calls (1: the kernels cover one row only).
  int64_t rowsPerBlock() const { return rowsPerBlock_; }
  int64_t maxRows() const { return maxRows_; }
  // Bytes a Store kernel writes per lane (sums: 8).
  int64_t outBytesPerLane() const { return outBytes_; }
  // blockLanes_ lanes, all in range, of one output row (or rowsPerBlock() rows: allRows).
  void block(const Args& a, bool allRows = false) const { fn_[allRows][0](&a, literals_.data()); }
  // vectorLanes_ lanes of which those set in a.mask are loaded (the others are computed on zeros:
  // callers use only the masked lanes' sums or values; a Store writes the whole vector).
  // (Maps have none: see CompiledMap::run.)
  void vector(const Args& a, bool allRows = false) const {
    TORCH_INTERNAL_ASSERT(fn_[allRows][1], "tsfuse: a map kernel has no masked vector form");
    fn_[allRows][1](&a, literals_.data());
  }
  // Fills the 32-byte mask of a vector() call for its first n lanes.
  void fillMask(int64_t n, void* mask) const;

  struct Code;  // the generated code, kept alive with the kernel
  struct Layout {
    int64_t vectorLanes, blockLanes, maxRows, elemSize, outBytes, rowsPerBlock;
    bool wide = false;  // 64-byte vectors: masks are lane bits
  };
  // code: block and vector kernels of one row, then (rowsPerBlock > 1) of rowsPerBlock rows.
  Kernel(std::vector<std::shared_ptr<Code>> code, const Layout& layout);

 private:
  // The generated code's ABI (System V): rdi the call's Args, rsi the literals' bits, 8 bytes
  // each, in slot order (Plan::literal).
  using Fn = void (*)(const Args*, const uint64_t*);
  std::vector<std::shared_ptr<Code>> code_;
  std::vector<uint64_t> literals_;
  Fn fn_[2][2] = {};  // [all rows][vector]
  int64_t vectorLanes_ = 0, blockLanes_ = 0, maxRows_ = 0, elemSize_ = 0, outBytes_ = 0, rowsPerBlock_ = 1;
  bool wide_ = false;
};

// Runs vertical reduction tiles through a Kernel: the tile's lanes in blocks, the reduced space's
// outer dims and row chunks in order, so each lane folds its rows in the interpreter's order. A
// tile covers up to rowsPerBlock() consecutive outputs along the kept dim next to the lanes' dim.
class VerticalReduce {
 public:
  // Lanes along the innermost of the plan's kept dims, rows along its reduced space. nullopt
  // where no kernel applies (disabled, an operand gathered along the lanes, more reduced rows
  // than int32 indices count, or Kernel::get declined); the reason goes to the kernel log. sink:
  // how the values are folded (not Store).
  // order: a sum in eager's inner order (its only reduced dim of size > 1 innermost in the
  // reduced space): sink SumInner, where the values after the vectors go first through a SumFloat
  // (SumDouble) kernel; a sum in that order with another sink is declined (interpreted).
  static std::optional<VerticalReduce> make(const TileProgram& p, size_t prefix, int source, Sink sink,
                                            const IterationPlan& plan, const InnerSumOrder* order = nullptr);
  // Output rows a tile may cover, and the length of the kept dim they run along (a tile's rows
  // must not cross its end).
  int64_t rowsPerTile() const { return kernel_->rowsPerBlock(); }
  int64_t lanesPerBlock() const { return kernel_->lanesPerBlock(); }
  // Bytes of one lane's sum in the sums run() folds into.
  int64_t laneBytes() const { return sumLaneBytes(sink_, f64_); }
  int64_t lineLength() const { return line_; }
  // Folds the reduced rows of lanes [start, start + n) of `rows` (<= rowsPerTile()) consecutive
  // outputs into their sums: output r's lane j at sums + r * kSumsRowBytes + sumLaneBytes() * j,
  // whose operand i starts at byte offset base[i] + r * (its stride along that kept dim) at reduced
  // row 0.
  void run(const std::vector<int64_t>& base, int64_t start, int64_t rows, int64_t n, void* sums) const;
  // Whether run() overwrites the sums instead of folding into them: float sums and extrema whose
  // reduced space one call covers (the caller then need not clear them).
  bool startsFromZero() const { return fresh_; }
  Sink sink() const { return sink_; }
  // Sets n lanes of one output's sums to the fold's start: 0, or (extrema) -inf / +inf at index 0.
  void clear(void* sums, int64_t n) const;

  // An operand the plan marks Packed (strided along the lanes but the same for every output:
  // An operand the plan marks Packed (strided along the lanes but the same for every output:
  // `y[j, d]` summed over d) is packed, reduced rows by lanes, into at most this many bytes (the
  // operand's own elements: a bounded copy, never of the broadcast shape): all its lanes once per
  // call where they fit, else a panel of lanes at a time (a multiple of kTile lanes; the caller
  // packs each with pack() and runs the tiles of its lanes).
  static constexpr int64_t kMaxPackBytes = int64_t(1) << 20;
  // Lanes packed at a time: the kept innermost dim's whole length unless packed by panels.
  int64_t panelLanes() const { return panel_; }
  bool panelled() const { return panel_ < inner_; }
  // Whether an operand is packed per line: it differs from one line (index of the kept dims
  // outside the rows' dim) to the next but not from row to row within one (a batch of point
  // clouds: y[b, j, d] read along j). run() then reads only the current line's rows.
  bool packsPerLine() const { return perLine_; }
  // Whether lines are too small to share among threads one at a time (packsPerLine() outside a
  // parallel region): each thread then takes whole lines, packing them into its own copy
  // (forAnotherThread()).
  bool linesInParallel() const { return perLine_ && linesInParallel_; }
  // The same reduction with pack buffers of its own (nothing packed yet).
  VerticalReduce forAnotherThread() const { return *this; }
  // Packs lanes [p0, p0 + panelLanes()) of line `line` (0 unless packsPerLine()) of the packed
  // operands; run() then reads only tiles of those lanes (and rows of that line). Not while a
  // run() is under way.
  void pack(int64_t line, int64_t p0);
  // Bytes from one packed row to the next: the row's bytes in whole cache lines, an odd number of
  // them. A block reads the same lanes of every row; rows a multiple of 4 KiB apart (1024 float32
  // lanes) all fall in one L1 set and evict each other; an odd line count spreads them over every
  // set.
  static constexpr int64_t packedRowBytes(int64_t bytes) { return ((bytes + 63) / 64 | 1) * 64; }
  // Bytes a vector of bool lanes loads whole (Gen::loadBools), masked lanes too: the readable bytes
  // past a bool operand's last lane that its masked tails need.
  static constexpr int64_t kBoolSlack = 32;

 private:
  void runRows(const std::vector<int64_t>& base, int64_t start, bool allRows, int64_t n, void* sums) const;
  void runInner(const std::vector<int64_t>& base, int64_t start, bool allRows, int64_t n, void* sums) const;
  // Packed operand i's element at reduced row `row` (any row of a once-packed one: its only row)
  // and lane `lane` of the current panel: rows rowStride_ apart (0 when packed once).
  char* packedAt(size_t i, int64_t row, int64_t lane) const {
    return packed_[i].data() + row * rowStride_[i] + (lane - panelStart_) * (*views_)[i].elemSize;
  }
  std::shared_ptr<const Kernel> kernel_;
  std::shared_ptr<const Kernel> after_;  // SumInner: the values after the vectors (one row a call)
  std::optional<InnerSumOrder> order_;
  const std::vector<BroadcastView>* views_ = nullptr;
  std::vector<Leaf> leaves_;
  std::vector<int64_t> outerStride_;  // per operand: bytes from one output row to the next
  int64_t line_ = 1;
  int64_t inner_ = 0;                // lanes of the kept innermost dim
  ScratchSet packed_;                // per operand: its packed copy (of the current panel), or empty
  std::vector<char> packedOnce_;     // per operand: packed as one row, the same for every row
  SubSpace lines_;                   // the kept dims outside the rows' dim (a line's offsets)
  std::vector<char> packedPerLine_;  // per operand: packed again for each line
  bool perLine_ = false;             // some operand is
  bool linesInParallel_ = false;
  int64_t panel_ = 0, panelStart_ = 0;  // lanes per packed panel (inner_: no panels), the current one's first
  SubSpace reduced_;                    // the plan's reduced space (pack()'s rows)
  std::vector<int64_t> laneStride_;     // per operand: its stride along the lanes (elements)
  SubSpace outer_;                      // the reduced space without its innermost dim
  int64_t rows_ = 1;
  std::vector<int64_t> rowStride_;
  bool fresh_ = false;
  Sink sink_ = Sink::SumDouble;
  bool f64_ = false;  // the folded values are float64
};

// Runs a map tile through a Kernel: the whole program, its result written to the output.
class CompiledMap {
 public:
  // nullopt, with the reason in *why, where no kernel applies (see VerticalReduce::make) or the
  // result's dtype is not `out`'s.
  static std::optional<CompiledMap> make(const TileProgram& p, c10::ScalarType out, const std::vector<Leaf>& leaves,
                                         std::string* why = nullptr);
  // n lanes: operand i at leaf[i] (Contiguous: its n elements; Uniform: its one element); the n
  // results go to dst. (Its callers count the tile: tilesRun() or, as a piece, path_counts.h.)
  void run(char* const* leaf, int64_t n, char* dst) const;

 private:
  std::shared_ptr<const Kernel> kernel_;
  std::vector<Leaf> leaves_;
  std::vector<int64_t> elemSize_;
};

// Process-wide switch (TSFUSE_CPU_JIT=0 turns it off at load; TSFUSE_CPU_ISA=baseline too).
bool enabled();
void setEnabled(bool on);
// AVX-512 kernels where they apply (jit/codegen.h, widens): on where the CPU has AVX-512 F and DQ
// unless TSFUSE_CPU_AVX512=0; tests turn it off to run the AVX2 kernels too.
bool wideKernels();
void setWideKernels(bool on);
// Tiles run by compiled kernels so far (tests check that the kernels ran).
int64_t tilesRun();
// Programs compiled so far (tests check that a literal's new value compiles nothing).
int64_t kernelsCompiled();

}  // namespace tsfuse::cpu::jit
