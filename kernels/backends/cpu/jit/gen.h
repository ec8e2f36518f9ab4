// Internal to the compiled kernels' code generation (jit/codegen.cpp: registers, operands, the
// program's ops; jit/sinks.cpp: where a row's value goes): the generator of one kernel, the AVX2
// code of a Plan (jit/plan.cpp). Registers: ymm0-15 hold, for the whole call, the accumulators
// (sums), the literals, the constants some ops need and one scratch register; the rest are
// allocated per row (block) in program order, each value freed after its last use.
#pragma once

#include "kernels/backends/cpu/jit/codegen.h"

#include <xbyak/xbyak.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tsfuse::cpu::jit::gen {

struct OutOfRegisters {};

// Compare predicates (VCMPPS imm8), false for NaN except != (like C++) and NLE ("not <=").
// Only the SSE ones (0-7):
// a > b is b < a and a >= b is b <= a (same results; the signaling forms only differ in the FP
// exception flags, which nothing reads), so tools that know SSE but not every AVX predicate
// (valgrind) run the code as the CPU does.
inline constexpr uint8_t kEq = 0x00, kLt = 0x01, kLe = 0x02, kUnord = 0x03, kNe = 0x04, kNle = 0x06, kOrd = 0x07;
// VROUNDPS's imm8 for a rounding primitive: bits 0-1 the direction (nearest, down, up, toward
// zero: IEEE's roundings, as the C library's), bit 3 suppresses the precision exception.
inline uint8_t roundingMode(Prim op) {
  switch (op) {
    case Prim::Floor:
      return 0x09;
    case Prim::Ceil:
      return 0x0a;
    case Prim::Trunc:
      return 0x0b;
    default:
      return 0x08;  // Round: to nearest, ties to even
  }
}

class Gen : public Xbyak::CodeGenerator {
 public:
  Gen(const Plan& plan, const Shape& shape, size_t codeSize)
      : CodeGenerator(codeSize, Xbyak::DontSetProtectRWE),
        P(plan),
        U(shape.vectors),
        R(shape.rows),
        masked(shape.masked),
        literalsInMemory(shape.literalsInMemory),
        holdUniforms(shape.holdUniforms),
        W(shape.wide),
        freeRegs(shape.wide ? 0xFFFFFFFFu : 0xFFFFu) {
    TORCH_INTERNAL_ASSERT(U * R <= kMaxBlock, "tsfuse: compiled kernel block too large");
    reg.assign(plan.type.size(), {});
    for (auto& r : reg) r.fill(-1);
    emitKernel();
  }

 private:
  static constexpr int kMaxBlock = 8;  // vectors x rows of one block
  const Plan& P;
  const int U;  // vectors of lanes per block
  const int R;  // output rows per block (sums): operands with a per-row stride get R pointers
  const bool masked;
  const bool literalsInMemory;  // else each literal holds a register for the whole call
  const bool holdUniforms;
  const bool W;                   // 64-byte vectors (Shape::wide): v() is a zmm, masks live in k1
  std::vector<int> literalIndex;  // per slot: its literal's index in Kernel::literals, or -1
  int frameBytes = 0;             // literalsInMemory: the literals' copy on the stack, 8 bytes each
  std::vector<char> held;         // per slot: in a register for the whole call (literals, a map's
                                  // converted uniform operands): not loaded, released or advanced per block
  // Per slot, the ymm of each (row, vector) of the block, at row * U + vector; a value the same
  // for every row (vector) uses row (vector) 0 only: see at().
  std::vector<std::array<int, kMaxBlock>> reg;
  std::vector<std::vector<Xbyak::Reg64>> leafPtr;  // per operand: one pointer per row it varies in
  std::vector<int> rowStrideReg;  // per operand: the register holding its Args::rowStride, or -1 (read from Args)
  uint32_t freeRegs;
  int T = -1, mask = -1, absMask = -1, sign = -1, nan = -1, ones = -1, one = -1, zero = -1;
  int rowIndex = -1;  // extrema: the current row's reduced index in every int32 lane
  // Per (row, vector): f32 double sums: lo, hi; extrema: value, index; SumInner: the four partial
  // sums (its lane sums stay in memory: the registers go to a second output row instead).
  std::vector<int> acc;
  uint32_t persistent = 0;  // the registers free at the start of each row, and their values
  std::vector<std::array<int, kMaxBlock>> persistentReg;

  static Xbyak::Ymm y(int r) { return Xbyak::Ymm(r); }
  // A vector register of the kernel's width (what every path a wide kernel takes uses).
  Xbyak::Xmm v(int r) const { return W ? Xbyak::Xmm(Xbyak::Zmm(r)) : Xbyak::Xmm(Xbyak::Ymm(r)); }
  int vectorBytes() const { return W ? 64 : 32; }
  // One element (at an address, or in lane 0 of an xmm) in every lane of register r.
  void broadcast(int r, const Xbyak::Operand& a) {
    if (!P.f64)
      vbroadcastss(v(r), a);
    else if (W)
      vbroadcastsd(Xbyak::Zmm(r), a);
    else
      vbroadcastsd(Xbyak::Ymm(r), a);
  }
  // The element of dtype `from` at `base` converted to the program's dtype, in every lane of
  // register r (Undefined: stored in it). Round to nearest, as static_cast (ew::cast) converts.
  void broadcastConverted(int r, const Xbyak::Reg64& base, c10::ScalarType from) {
    using c10::ScalarType;
    if (from == ScalarType::Undefined || from == (P.f64 ? ScalarType::Double : ScalarType::Float))
      return broadcast(r, ptr[base]);
    const bool wide = from == ScalarType::Double || from == ScalarType::Long;
    const Xbyak::Address e = wide ? qword[base] : dword[base];
    const bool integer = from == ScalarType::Long || from == ScalarType::Int;
    if (P.f64)
      integer ? vcvtsi2sd(x(r), x(r), e) : vcvtss2sd(x(r), x(r), e);
    else
      integer ? vcvtsi2ss(x(r), x(r), e) : vcvtsd2ss(x(r), x(r), e);
    broadcast(r, x(r));
  }
  int lanesPerVector() const { return vectorBytes() / (P.f64 ? 8 : 4); }
  // Vector u of a bool operand (one byte a lane) at g into register n, as compare lanes.
  void loadBools(int n, const Xbyak::Reg64& g, int u, bool uniform);
  static Xbyak::Xmm x(int r) { return Xbyak::Xmm(r); }
  int rowsOf(int s) const { return P.perRow[s] ? R : 1; }
  int vectorsOf(int s) const { return P.uniform[s] ? 1 : U; }
  int& regAt(int s, int r, int u) { return reg[s][(P.perRow[s] ? r : 0) * U + (P.uniform[s] ? 0 : u)]; }
  int take() {
    if (!freeRegs) throw OutOfRegisters();
    const int r = __builtin_ctz(freeRegs);
    freeRegs &= ~(1u << r);
    return r;
  }
  void give(int r) { freeRegs |= 1u << r; }

  // A register holding `bits` in every lane (uses rax: before the operand pointers are loaded).
  int constant(uint64_t bits, bool boolLanes = false);

  Xbyak::Address at(const Xbyak::Reg64& base, int64_t disp) { return ptr[base + static_cast<int>(disp)]; }

  // Operand pointers: one general register per operand and row while there are registers; the
  // operands after that are "spilled": read through their Args::leaf pointer (loaded into rax at
  // each use) and advanced in Args, a load and a memory add per block more, instead of declining
  // the program. A spilled operand cannot vary per output row (its rows would need registers).
  // NB: a Store of bools keeps r13 and r14 for packing bytes; r15 holds out, rcx the row count,
  // rdi the arguments, rax the spilled pointers. The general registers left over then hold
  // operands' row strides, so a row's pointer steps read no memory (else a short row's kernel
  // issues as many loads for its pointer steps as for its operands).
  void assignPointers();

  bool spilled(int i) const { return P.leaves[i] != Leaf::Unused && !held[i] && leafPtr[i].empty(); }

  // Advances operand i's pointer(s) by the Args array entry at `strideField` (its row stride or
  // block step): in its registers, or in Args::leaf where it is spilled.
  void advance(int i, size_t strideField);

  bool extremum() const { return isExtremum(P.sink); }
  // Where the sums of (row, vector, half) live: rows kSumsRowBytes apart, 8-byte lanes (SumFloat:
  // 4-byte lanes, one 32-byte vector per vector of values; extrema: h 0 the values, h 1 their
  // indices kExtremumIndexBytes on).
  int64_t sumOffset(int r, int u, int h) const {
    if (P.sink == Sink::SumInner) return r * kSumsRowBytes + u * vectorBytes();
    if (P.sink == Sink::SumFloat) return r * kSumsRowBytes + u * 32;
    if (extremum()) return r * kSumsRowBytes + h * kExtremumIndexBytes + u * vectorBytes();
    const int64_t lanes = P.f64 ? 4 : 8;
    return r * kSumsRowBytes + u * lanes * 8 + h * 32;
  }
  int halvesPerVector() const { return P.f64 ? 1 : 2; }  // 32-byte halves of 8-byte lanes
  // The accumulators of a vector that live in the sums between calls (SumInner: none).
  int storedPerVector() const { return P.sink == Sink::SumInner ? 0 : accsPerVector(); }
  // Accumulators per vector of values: counts and SumFloat add in the values' own lanes; an
  // extremum keeps a value and an index vector.
  int accsPerVector() const {
    if (extremum()) return 2;
    if (P.sink == Sink::SumInner) return InnerSumOrder::kPartials;
    return P.boolValue || P.sink == Sink::SumFloat ? 1 : halvesPerVector();
  }

  void emitKernel();

  // One row: the program, its value into the sink, then every operand on to the next row.
  template <typename SinkFn>
  void row(const SinkFn& sink) {
    for (size_t k = 0; k < P.code.size(); ++k) instruction(k);
    sink();
    freeRegs = persistent;
    reg = persistentReg;
    for (int i = 0; i < static_cast<int>(P.leaves.size()); ++i) advance(i, offsetof(Args, rowStride));
  }

  // SumInner (cpu::InnerSumOrder): per lane of eager's vectors, its P.innerRows rows (Args'
  // row stride steps a whole vector of eager's): the first 4G rotate through the four partial
  // sums (the first four set them, as adding to eager's zeros would: a -0.0 partial only changes
  // the sign of a zero sum, and the lane sum starts from +0.0), the rest add into partial 0; then
  // ((p0 + p1) + p2) + p3 is added to the lane sum in memory (sum + q, eager's operand order),
  // and every operand goes on to the next lane.
  void innerLanes();

  // A block's accumulators: counts start at 0 (int32 lanes added to the sums at the end); float
  // sums start from 0 (Args::fresh) or from the running sums, so each lane adds its rows in the
  // interpreter's order; extrema start from -inf (max) or +inf (min) at the call's first index,
  // which a first value that is not -inf (+inf) replaces, as it does the interpreter's empty
  // accumulator (and one that is leaves index 0, the interpreter's choice too).
  void initSums();

  void load(int s);

  void release(int s);

  void instruction(size_t k);

  void op(const lower::Instr& li, const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Xmm& b, const Xbyak::Xmm& c);

  void accumulate();

  // Each lane takes the row's value and index where rules::laterBeats(value, kept, max) holds:
  // the kept value is not NaN, and the value is NaN or beyond it. NLE(x, y) is "not x <= y",
  // true where x > y or either is NaN; ORD(k, k) where k is not NaN.
  void keepExtremum();
  void keepExtremumWide();

  // The value of each vector to out: its elements, or bools as bytes (the compare mask's sign bits,
  // one bit deposited per byte).
  void store();

  void storeSums();
};

}  // namespace tsfuse::cpu::jit::gen

namespace tsfuse::cpu::jit {

// Counts one tile run by a compiled kernel (jit.h, tilesRun; jit.cpp).
void countTile();

}  // namespace tsfuse::cpu::jit
