// Code generation for jit::Kernel (kernels/cpu/jit.h): the AVX2 code of a Plan (jit_plan.cpp).
// Registers: ymm0-15 hold, for the whole call, the accumulators (sums), the literals, the
// constants some ops need and one scratch register; the rest are allocated per row (block) in
// program order, each value freed after its last use.
#include "kernels/cpu/jit_codegen.h"

#include "tsfuse/log.h"

#include <xbyak/xbyak.h>

#include <array>
#include <cstddef>
#include <cstring>

namespace tsfuse::cpu::jit {
namespace {

struct OutOfRegisters {};

// Compare predicates (VCMPPS imm8), false for NaN except != (like C++) and NLE ("not <=").
// Only the SSE ones (0-7):
// a > b is b < a and a >= b is b <= a (same results; the signaling forms only differ in the FP
// exception flags, which nothing reads), so tools that know SSE but not every AVX predicate
// (valgrind) run the code as the CPU does.
constexpr uint8_t kEq = 0x00, kLt = 0x01, kLe = 0x02, kUnord = 0x03, kNe = 0x04, kNle = 0x06, kOrd = 0x07;

class Gen : public Xbyak::CodeGenerator {
 public:
  Gen(const Plan& plan, const Shape& shape, size_t codeSize)
      : CodeGenerator(codeSize, Xbyak::DontSetProtectRWE), P(plan), U(shape.vectors), R(shape.rows),
        masked(shape.masked), literalsInMemory(shape.literalsInMemory) {
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
  Xbyak::Label pool;            // literalsInMemory: the literals' bits, 8 bytes each
  std::vector<int> poolIndex;   // per slot
  // Per slot, the ymm of each (row, vector) of the block, at row * U + vector; a value the same
  // for every row (vector) uses row (vector) 0 only: see at().
  std::vector<std::array<int, kMaxBlock>> reg;
  std::vector<std::vector<Xbyak::Reg64>> leafPtr;  // per operand: one pointer per row it varies in
  uint32_t freeRegs = 0xFFFF;
  int T = -1, mask = -1, absMask = -1, sign = -1, nan = -1, ones = -1, one = -1, zero = -1;
  int rowIndex = -1;     // extrema: the current row's reduced index in every int32 lane
  std::vector<int> acc;  // per (row, vector) (f32 double sums: lo, hi each; extrema: value, index)

  static Xbyak::Ymm y(int r) { return Xbyak::Ymm(r); }
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
  int constant(uint64_t bits, bool boolLanes = false) {
    const int r = take();
    if (boolLanes || bits == 0) {
      if (bits) vpcmpeqd(y(r), y(r), y(r));
      else vpxor(y(r), y(r), y(r));
    } else if (P.f64) {
      mov(rax, bits);
      vmovq(x(r), rax);
      vpbroadcastq(y(r), x(r));
    } else {
      mov(eax, static_cast<uint32_t>(bits));
      vmovd(x(r), eax);
      vpbroadcastd(y(r), x(r));
    }
    return r;
  }

  Xbyak::Address at(const Xbyak::Reg64& base, int64_t disp) { return ptr[base + static_cast<int>(disp)]; }

  // Operand pointers: one general register per operand and row while there are registers; the
  // operands after that are "spilled": read through their Args::leaf pointer (loaded into rax at
  // each use) and advanced in Args, a load and a memory add per block more, instead of declining
  // the program. A spilled operand cannot vary per output row (its rows would need registers).
  // NB: a Store of bools keeps r13 and r14 for packing bytes; r15 holds out, rcx the row count,
  // rdi the arguments, rax the spilled pointers.
  void assignPointers() {
    using namespace Xbyak::util;
    std::vector<Xbyak::Reg64> pool = {rsi, rdx, r8, r9, r10, r11, rbx, rbp, r12};
    if (!(P.sink == Sink::Store && P.boolValue)) pool.insert(pool.end(), {r13, r14});
    size_t next = 0;
    leafPtr.assign(P.leaves.size(), {});
    for (int i = 0; i < static_cast<int>(P.leaves.size()); ++i) {
      if (P.leaves[i] == Leaf::Unused) continue;
      if (next + rowsOf(i) > pool.size()) {
        if (rowsOf(i) > 1) throw OutOfRegisters();
        continue;  // spilled
      }
      for (int r = 0; r < rowsOf(i); ++r) leafPtr[i].push_back(pool[next++]);
      const auto& g = leafPtr[i];
      mov(g[0], at(rdi, offsetof(Args, leaf) + 8 * i));
      for (int r = 1; r < rowsOf(i); ++r) {
        mov(g[r], g[r - 1]);
        add(g[r], at(rdi, offsetof(Args, outerStride) + 8 * i));
      }
    }
  }

  bool spilled(int i) const { return P.leaves[i] != Leaf::Unused && leafPtr[i].empty(); }

  // Advances operand i's pointer(s) by the Args array entry at `strideField` (its row stride or
  // block step): in its registers, or in Args::leaf where it is spilled.
  void advance(int i, size_t strideField) {
    using namespace Xbyak::util;
    const Xbyak::Address stride = at(rdi, static_cast<int64_t>(strideField) + 8 * i);
    if (spilled(i)) {
      mov(rax, stride);
      add(qword[rdi + static_cast<int>(offsetof(Args, leaf) + 8 * i)], rax);
      return;
    }
    for (const auto& g : leafPtr[i]) add(g, stride);
  }

  bool extremum() const { return isExtremum(P.sink); }
  // Where the sums of (row, vector, half) live: rows kSumsRowBytes apart, 8-byte lanes (SumFloat:
  // 4-byte lanes, one 32-byte vector per vector of values; extrema: h 0 the values, h 1 their
  // indices kExtremumIndexBytes on).
  int64_t sumOffset(int r, int u, int h) const {
    if (P.sink == Sink::SumFloat) return r * kSumsRowBytes + u * 32;
    if (extremum()) return r * kSumsRowBytes + h * kExtremumIndexBytes + u * 32;
    const int64_t lanes = P.f64 ? 4 : 8;
    return r * kSumsRowBytes + u * lanes * 8 + h * 32;
  }
  int halvesPerVector() const { return P.f64 ? 1 : 2; }  // 32-byte halves of 8-byte lanes
  // Accumulators per vector of values: counts and SumFloat add in the values' own lanes; an
  // extremum keeps a value and an index vector.
  int accsPerVector() const {
    if (extremum()) return 2;
    return P.boolValue || P.sink == Sink::SumFloat ? 1 : halvesPerVector();
  }

  void emitKernel() {
    using namespace Xbyak::util;
    static const Xbyak::Reg64 saved[] = {rbx, rbp, r12, r13, r14, r15};
    for (const auto& r : saved) push(r);
    const uint64_t sgn = P.f64 ? uint64_t(1) << 63 : uint64_t(1) << 31;
    const uint64_t qnan = P.f64 ? 0x7ff8000000000000ull : 0x7fc00000ull;
    const uint64_t onev = P.f64 ? 0x3ff0000000000000ull : 0x3f800000ull;
    if (P.needAbs) absMask = constant(sgn - 1);
    if (P.needSign) sign = constant(sgn);
    if (P.needNaN) nan = constant(qnan);
    if (P.needOnes) ones = constant(~uint64_t(0), true);
    if (P.needOne) one = constant(onev);
    if (P.needZero) zero = constant(0);
    poolIndex.assign(P.literal.size(), -1);
    std::vector<uint64_t> poolBits;
    for (size_t s = 0; s < P.literal.size(); ++s) {
      if (!P.literal[s]) continue;
      if (literalsInMemory) {
        poolIndex[s] = static_cast<int>(poolBits.size());
        poolBits.push_back(*P.literal[s]);
        continue;
      }
      const int r = constant(*P.literal[s], P.type[s] == c10::ScalarType::Bool);
      reg[s].fill(r);
    }
    assignPointers();
    mov(rcx, at(rdi, offsetof(Args, rows)));
    if (masked) {
      mask = take();
      mov(r15, at(rdi, offsetof(Args, mask)));
      vmovdqu(y(mask), ptr[r15]);
    }
    mov(r15, at(rdi, offsetof(Args, out)));
    if (P.sums()) {
      for (int k = 0; k < R * U * accsPerVector(); ++k) acc.push_back(take());
      if (extremum()) rowIndex = take();
    } else if (P.boolValue) {
      mov(r13, 0x0101010101010101ull);  // pdep: one bit per byte
    }
    T = take();
    const uint32_t persistent = freeRegs;
    const auto persistentReg = reg;

    Xbyak::Label block, loop, done;
    if (P.sums()) {
      L(block);
      initSums();
      mov(rcx, at(rdi, offsetof(Args, rows)));
    }
    test(rcx, rcx);
    jz(done, T_NEAR);
    L(loop);
    for (size_t k = 0; k < P.code.size(); ++k) instruction(k);
    if (P.sums()) {
      accumulate();
    } else {
      store();
      add(r15, U * (P.boolValue ? 32 / (P.f64 ? 8 : 4) : 32));
    }
    freeRegs = persistent;
    reg = persistentReg;
    for (int i = 0; i < static_cast<int>(P.leaves.size()); ++i) advance(i, offsetof(Args, rowStride));
    dec(rcx);
    jnz(loop, T_NEAR);
    L(done);
    if (P.sums()) {  // the block's sums out, then on to the next block
      storeSums();
      add(r15, U * (P.f64 ? 4 : 8) * sumLaneBytes(P.sink));
      for (int i = 0; i < static_cast<int>(P.leaves.size()); ++i) advance(i, offsetof(Args, blockStep));
      dec(qword[rdi + offsetof(Args, blocks)]);
      jnz(block, T_NEAR);
    }
    vzeroupper();
    for (int i = 5; i >= 0; --i) pop(saved[i]);
    ret();
    align(8);
    L(pool);
    for (uint64_t bits : poolBits) dq(bits);
  }

  // A block's accumulators: counts start at 0 (int32 lanes added to the sums at the end); float
  // sums start from 0 (Args::fresh) or from the running sums, so each lane adds its rows in the
  // interpreter's order; extrema start from -inf (max) or +inf (min) at the call's first index,
  // which a first value that is not -inf (+inf) replaces, as it does the interpreter's empty
  // accumulator (and one that is leaves index 0, the interpreter's choice too).
  void initSums() {
    using namespace Xbyak::util;
    Xbyak::Label fromMemory, ready;
    if (extremum()) vpbroadcastd(y(rowIndex), dword[rdi + offsetof(Args, index)]);
    if (!P.boolValue) {
      cmp(qword[rdi + offsetof(Args, fresh)], 0);
      je(fromMemory, T_NEAR);
    }
    if (extremum()) {
      const float start = extremumStart(P.sink);
      uint32_t bits;
      std::memcpy(&bits, &start, sizeof bits);
      mov(eax, bits);
      vmovd(x(T), eax);
      vpbroadcastd(y(T), x(T));
      for (size_t k = 0; k < acc.size(); k += 2) vmovaps(y(acc[k]), y(T)), vmovdqa(y(acc[k + 1]), y(rowIndex));
    } else {
      for (int a : acc) vpxor(y(a), y(a), y(a));
    }
    if (P.boolValue) return;
    jmp(ready, T_NEAR);
    L(fromMemory);
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < U; ++u)
        for (int h = 0; h < accsPerVector(); ++h) {
          const int a = acc[(r * U + u) * accsPerVector() + h];
          vmovupd(y(a), at(r15, sumOffset(r, u, h)));
        }
    L(ready);
  }

  void load(int s) {
    if (reg[s][0] >= 0) return;
    if (poolIndex[s] >= 0) {  // a literal, broadcast from the pool for this row
      const int r = take();
      const auto bits = ptr[Xbyak::util::rip + pool + 8 * poolIndex[s]];
      if (P.f64) vbroadcastsd(y(r), bits);
      else vbroadcastss(y(r), bits);
      reg[s].fill(r);
      return;
    }
    TORCH_INTERNAL_ASSERT(s < static_cast<int>(P.leaves.size()) && P.leaves[s] != Leaf::Unused,
                          "tsfuse: compiled kernel reads slot ", s, " before it is computed");
    if (spilled(s)) mov(Xbyak::util::rax, at(rdi, offsetof(Args, leaf) + 8 * s));
    for (int r = 0; r < rowsOf(s); ++r) {
      const Xbyak::Reg64& g = spilled(s) ? Xbyak::util::rax : leafPtr[s][r];
      for (int u = 0; u < vectorsOf(s); ++u) {
        const int v = take();
        if (P.leaves[s] == Leaf::Uniform) P.f64 ? vbroadcastsd(y(v), ptr[g]) : vbroadcastss(y(v), ptr[g]);
        else if (masked) P.f64 ? vmaskmovpd(y(v), y(mask), at(g, 32 * u)) : vmaskmovps(y(v), y(mask), at(g, 32 * u));
        else vmovups(y(v), at(g, 32 * u));
        regAt(s, r, u) = v;
      }
    }
  }

  void release(int s) {
    if ((P.literal[s] && poolIndex[s] < 0) || reg[s][0] < 0) return;
    for (int r = 0; r < rowsOf(s); ++r)
      for (int u = 0; u < vectorsOf(s); ++u) give(regAt(s, r, u));
    reg[s].fill(-1);
  }

  void instruction(size_t k) {
    const lower::Instr& li = P.code[k];
    const auto ops = operandsOf(li);
    for (int s : ops)
      if (s >= 0) load(s);
    std::array<std::array<int, kMaxBlock>, 3> in{};
    for (int j = 0; j < 3; ++j)
      if (ops[j] >= 0)
        for (int r = 0; r < R; ++r)
          for (int u = 0; u < U; ++u) in[j][r * U + u] = regAt(ops[j], r, u);
    // NB: a dying operand's registers may be reused for the result only when it has the result's
    // shape (varies in the same rows and vectors): each (row, vector) of the result is written
    // after its own operands are read. Any other dying operand is freed after the whole block.
    const int out = li.out;
    std::vector<int> later;
    for (int j = 0; j < 3; ++j) {
      const int s = ops[j];
      if (s < 0 || P.lastUse[s] != static_cast<int>(k) || (j > 0 && (s == ops[0] || (j > 1 && s == ops[1]))))
        continue;
      if (P.perRow[s] == P.perRow[out] && P.uniform[s] == P.uniform[out]) release(s);
      else later.push_back(s);
    }
    for (int r = 0; r < rowsOf(out); ++r)
      for (int u = 0; u < vectorsOf(out); ++u) regAt(out, r, u) = take();
    for (int r = 0; r < rowsOf(out); ++r)
      for (int u = 0; u < vectorsOf(out); ++u)
        op(li, y(regAt(out, r, u)), y(in[0][r * U + u]), y(in[1][r * U + u]), y(in[2][r * U + u]));
    for (int s : later) release(s);
    if (P.lastUse[out] < 0) release(out);  // computed, never read
  }

  void op(const lower::Instr& li, const Xbyak::Ymm& d, const Xbyak::Ymm& a, const Xbyak::Ymm& b, const Xbyak::Ymm& c) {
    const bool f64 = P.f64;
    auto cmp = [&](const Xbyak::Ymm& dst, const Xbyak::Ymm& l, const Xbyak::Ymm& r, uint8_t pred) {
      if (f64) vcmppd(dst, l, r, pred);
      else vcmpps(dst, l, r, pred);
    };
    auto blend = [&](const Xbyak::Ymm& dst, const Xbyak::Ymm& no, const Xbyak::Ymm& yes, const Xbyak::Ymm& sel) {
      if (f64) vblendvpd(dst, no, yes, sel);
      else vblendvps(dst, no, yes, sel);
    };
    // ew::minimum / ew::maximum: NaN if either operand is NaN, else minps/maxps(a, b), which
    // return b when the two compare equal or unordered.
    auto minmax = [&](bool isMin) {
      cmp(y(T), a, b, kUnord);
      if (isMin) f64 ? vminpd(d, a, b) : vminps(d, a, b);
      else f64 ? vmaxpd(d, a, b) : vmaxps(d, a, b);
      blend(d, d, y(nan), y(T));
    };
    const bool boolCompare = li.ct == c10::ScalarType::Bool;
    switch (li.op) {
      case Prim::Add: f64 ? vaddpd(d, a, b) : vaddps(d, a, b); break;
      case Prim::Sub: f64 ? vsubpd(d, a, b) : vsubps(d, a, b); break;
      case Prim::Mul: f64 ? vmulpd(d, a, b) : vmulps(d, a, b); break;
      case Prim::Div: f64 ? vdivpd(d, a, b) : vdivps(d, a, b); break;
      case Prim::Minimum: minmax(true); break;
      case Prim::Maximum: minmax(false); break;
      case Prim::ClampMin: f64 ? vmaxpd(d, b, a) : vmaxps(d, b, a); break;  // lo > a ? lo : a
      case Prim::ClampMax: f64 ? vminpd(d, b, a) : vminps(d, b, a); break;  // hi < a ? hi : a
      case Prim::Eq:
        if (boolCompare) vxorps(d, a, b), vxorps(d, d, y(ones));
        else cmp(d, a, b, kEq);
        break;
      case Prim::Ne: boolCompare ? vxorps(d, a, b) : cmp(d, a, b, kNe); break;
      case Prim::Lt: cmp(d, a, b, kLt); break;
      case Prim::Le: cmp(d, a, b, kLe); break;
      case Prim::Gt: cmp(d, b, a, kLt); break;
      case Prim::Ge: cmp(d, b, a, kLe); break;
      case Prim::And: vandps(d, a, b); break;
      case Prim::Or: vorps(d, a, b); break;
      case Prim::Xor: vxorps(d, a, b); break;
      case Prim::Not: vxorps(d, a, y(ones)); break;
      case Prim::Neg: vxorps(d, a, y(sign)); break;
      case Prim::Abs: vandps(d, a, y(absMask)); break;
      case Prim::Where: blend(d, c, b, a); break;  // a ? b : c
      case Prim::Cast:
        if (P.type[li.a] == c10::ScalarType::Bool) vandps(d, a, y(one));  // 1.0 / 0.0
        else cmp(d, a, y(zero), kNe);                                     // x != 0 (NaN: true)
        break;
      default: TORCH_INTERNAL_ASSERT(false, "tsfuse: ", primName(li.op), " in a compiled kernel (Plan::make declines it)");
    }
  }

  void accumulate() {
    load(P.source);
    if (extremum()) return keepExtremum();
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < U; ++u) {
        const int s = regAt(P.source, r, u);
        const int a = ((r * U + u) * accsPerVector());
        if (P.boolValue) {
          P.f64 ? vpsubq(y(acc[a]), y(acc[a]), y(s)) : vpsubd(y(acc[a]), y(acc[a]), y(s));  // true is -1
        } else if (P.sink == Sink::SumFloat) {
          vaddps(y(acc[a]), y(acc[a]), y(s));
        } else if (P.f64) {
          vaddpd(y(acc[a]), y(acc[a]), y(s));
        } else {
          vcvtps2pd(y(T), x(s));
          vaddpd(y(acc[a]), y(acc[a]), y(T));
          vextractf128(x(T), y(s), 1);
          vcvtps2pd(y(T), x(T));
          vaddpd(y(acc[a + 1]), y(acc[a + 1]), y(T));
        }
      }
  }

  // Each lane takes the row's value and index where rules::laterBeats(value, kept, max) holds:
  // the kept value is not NaN, and the value is NaN or beyond it. NLE(x, y) is "not x <= y",
  // true where x > y or either is NaN; ORD(k, k) where k is not NaN.
  void keepExtremum() {
    const int notNaN = take();
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < U; ++u) {
        const int v = regAt(P.source, r, u), k = (r * U + u) * 2;
        const Xbyak::Ymm kept = y(acc[k]), index = y(acc[k + 1]);
        if (P.sink == Sink::MaxFirst) vcmpps(y(T), y(v), kept, kNle);
        else vcmpps(y(T), kept, y(v), kNle);
        vcmpps(y(notNaN), kept, kept, kOrd);
        vandps(y(T), y(T), y(notNaN));
        vblendvps(kept, kept, y(v), y(T));
        vblendvps(index, index, y(rowIndex), y(T));
      }
    give(notNaN);
    vpsubd(y(rowIndex), y(rowIndex), y(ones));  // the next row: + 1
  }

  // The value of each vector to out: its elements, or bools as bytes (the compare mask's sign bits,
  // one bit deposited per byte).
  void store() {
    using namespace Xbyak::util;
    load(P.source);
    for (int u = 0; u < U; ++u) {
      const int s = regAt(P.source, 0, u);
      if (!P.boolValue) {
        vmovups(at(r15, 32 * u), y(s));
      } else if (P.f64) {
        vmovmskpd(r14d, y(s));
        pdep(r14d, r14d, r13d);
        mov(dword[r15 + 4 * u], r14d);
      } else {
        vmovmskps(r14d, y(s));
        pdep(r14, r14, r13);
        mov(qword[r15 + 8 * u], r14);
      }
    }
  }

  void storeSums() {
    using namespace Xbyak::util;
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < U; ++u) {
        const int a = (r * U + u) * accsPerVector();
        if (!P.boolValue) {
          for (int h = 0; h < accsPerVector(); ++h) vmovupd(at(r15, sumOffset(r, u, h)), y(acc[a + h]));
          continue;
        }
        // Counts: 64-bit lanes already (f64), or two halves of int32 lanes widened (f32).
        for (int h = 0; h < halvesPerVector(); ++h) {
          const auto sum = at(r15, sumOffset(r, u, h));
          if (P.f64) {
            vpaddq(y(T), y(acc[a]), sum);  // int64 sums only (Plan::make)
          } else {
            const Xbyak::Xmm half = h == 0 ? x(acc[a]) : x(T);
            if (h == 1) vextracti128(x(T), y(acc[a]), 1);
            if (P.sink == Sink::SumDouble) {
              vcvtdq2pd(y(T), half);  // exact: a count below 2^31
              vaddpd(y(T), y(T), sum);
            } else {
              vpmovzxdq(y(T), half);
              vpaddq(y(T), y(T), sum);
            }
          }
          vmovdqu(sum, y(T));
        }
      }
  }
};

}  // namespace

std::unique_ptr<Xbyak::CodeGenerator> generate(const Plan& plan, const Shape& shape) {
  const size_t size =
      4096 + (plan.code.size() + plan.literal.size()) * static_cast<size_t>(shape.vectors * shape.rows) * 128;
  try {
    auto g = std::make_unique<Gen>(plan, shape, size);
    g->setProtectModeRE();
    return g;
  } catch (const OutOfRegisters&) {
    return nullptr;
  } catch (const std::exception& e) {  // Xbyak::Error: code buffer too small, protection refused
    TSFUSE_LOG(kernel, debug, "compiled kernel: code generation failed: ", e.what());
    return nullptr;
  }
}

}  // namespace tsfuse::cpu::jit
