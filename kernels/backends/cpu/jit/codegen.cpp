// Code generation for jit::Kernel (kernels/backends/cpu/jit/jit.h): the generator's registers, operand
// pointers, loads and the program's ops (kernels/backends/cpu/jit/gen.h); its sinks are in jit/sinks.cpp.
#include "kernels/backends/cpu/jit/gen.h"

#include "tsfuse/log.h"

#include <cstring>

namespace tsfuse::cpu::jit {
namespace gen {

int Gen::constant(uint64_t bits, bool boolLanes) {
  const int r = take();
  if (boolLanes || bits == 0) {  // all ones (bools' true, an extremum's index step -1) or zeros
    if (bits && W)
      vpternlogd(v(r), v(r), v(r), 0xff);
    else if (bits)
      vpcmpeqd(y(r), y(r), y(r));
    else if (W)
      vpxord(v(r), v(r), v(r));
    else
      vpxor(y(r), y(r), y(r));
  } else if (P.f64) {
    mov(rax, bits);
    vmovq(x(r), rax);
    vpbroadcastq(v(r), x(r));
  } else {
    mov(eax, static_cast<uint32_t>(bits));
    vmovd(x(r), eax);
    vpbroadcastd(v(r), x(r));
  }
  return r;
}

void Gen::assignPointers() {
  using namespace Xbyak::util;
  std::vector<Xbyak::Reg64> pool = {rsi, rdx, r8, r9, r10, r11, rbx, rbp, r12};
  if (!(P.sink == Sink::Store && P.boolValue)) pool.insert(pool.end(), {r13, r14});
  size_t next = 0;
  leafPtr.assign(P.leaves.size(), {});
  for (int i = 0; i < static_cast<int>(P.leaves.size()); ++i) {
    if (P.leaves[i] == Leaf::Unused || held[i]) continue;
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
  rowStrideReg.assign(P.leaves.size(), -1);
  for (int i = 0; i < static_cast<int>(P.leaves.size()) && next < pool.size(); ++i) {
    if (leafPtr[i].empty()) continue;
    const Xbyak::Reg64 s = pool[next++];
    rowStrideReg[i] = s.getIdx();
    mov(s, at(rdi, offsetof(Args, rowStride) + 8 * i));
  }
}

void Gen::advance(int i, size_t strideField) {
  using namespace Xbyak::util;
  if (held[i]) return;
  const Xbyak::Address stride = at(rdi, static_cast<int64_t>(strideField) + 8 * i);
  if (spilled(i)) {
    mov(rax, stride);
    add(qword[rdi + static_cast<int>(offsetof(Args, leaf) + 8 * i)], rax);
    return;
  }
  if (strideField == offsetof(Args, rowStride) && rowStrideReg[i] >= 0) {
    for (const auto& g : leafPtr[i]) add(g, Xbyak::Reg64(rowStrideReg[i]));
    return;
  }
  for (const auto& g : leafPtr[i]) add(g, stride);
}

void Gen::emitKernel() {
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
  // The literals come with each call (the second argument, rsi: Kernel::literals), so one kernel
  // serves every value of them (a number the model computes at run time, bound per call). Those
  // held in registers are broadcast here, before rsi becomes an operand pointer; the others are
  // copied to the stack frame and broadcast from it where used.
  literalIndex.assign(P.literal.size(), -1);
  held.assign(P.literal.size(), 0);
  int count = 0;
  for (size_t s = 0; s < P.literal.size(); ++s)
    if (P.literal[s]) literalIndex[s] = count++;
  frameBytes = literalsInMemory ? 8 * count : 0;
  if (frameBytes) sub(rsp, frameBytes);
  for (size_t s = 0; s < P.literal.size(); ++s) {
    if (literalIndex[s] < 0) continue;
    const Xbyak::Address bits = ptr[rsi + 8 * literalIndex[s]];
    if (literalsInMemory) {
      mov(rax, bits);
      mov(ptr[rsp + 8 * literalIndex[s]], rax);
      continue;
    }
    const int r = take();
    broadcast(r, bits);
    reg[s].fill(r);
    held[s] = 1;
  }
  // A map's uniform operands are one value for the whole call (CompiledMap steps them by 0). Those
  // converted as they are broadcast (a runtime threshold, a 0-dim float64 operand of a float32
  // map: a load, a convert and a shuffle a block) are held like the literals: converted once a
  // call, and no pointer register. A plain broadcast is one load; holding every uniform operand
  // would cost vectors.
  if (holdUniforms)
    for (int i = 0; i < static_cast<int>(P.leaves.size()); ++i) {
      if (!P.holdable(i)) continue;
      const int r = take();
      mov(rax, at(rdi, offsetof(Args, leaf) + 8 * i));
      broadcastConverted(r, rax, P.convertedFrom[i]);
      reg[i].fill(r);
      held[i] = 1;
    }
  assignPointers();
  mov(rcx, at(rdi, offsetof(Args, rows)));
  if (masked) {  // the lanes to load: a vector of all-ones lanes, or (wide) k1's bits
    mov(r15, at(rdi, offsetof(Args, mask)));
    if (W) {
      kmovw(k1, word[r15]);
    } else {
      mask = take();
      vmovdqu(y(mask), ptr[r15]);
    }
  }
  mov(r15, at(rdi, offsetof(Args, out)));
  if (P.sums()) {
    for (int k = 0; k < R * U * accsPerVector(); ++k) acc.push_back(take());
    if (extremum()) rowIndex = take();
  } else if (P.boolValue) {
    mov(r13, 0x0101010101010101ull);  // pdep: one bit per byte
  }
  T = take();
  persistent = freeRegs;
  persistentReg = reg;

  Xbyak::Label block, loop, done;
  if (P.sums()) {
    L(block);
    initSums();
    mov(rcx, at(rdi, offsetof(Args, rows)));
  }
  if (P.sink == Sink::SumInner) {
    innerLanes();
  } else {
    test(rcx, rcx);
    jz(done, T_NEAR);
    L(loop);
    row([&] {
      if (P.sums()) return accumulate();
      store();
      add(r15, U * (P.boolValue ? 32 / (P.f64 ? 8 : 4) : 32));
    });
    dec(rcx);
    jnz(loop, T_NEAR);
    L(done);
  }
  if (P.sums()) {  // the block's sums out, then on to the next block
    storeSums();
    add(r15, U * lanesPerVector() * sumLaneBytes(P.sink, P.f64));
    for (int i = 0; i < static_cast<int>(P.leaves.size()); ++i) advance(i, offsetof(Args, blockStep));
    dec(qword[rdi + offsetof(Args, blocks)]);
    jnz(block, T_NEAR);
  }
  vzeroupper();
  if (frameBytes) add(rsp, frameBytes);
  for (int i = 5; i >= 0; --i) pop(saved[i]);
  ret();
}

void Gen::load(int s) {
  if (reg[s][0] >= 0) return;
  if (literalsInMemory && literalIndex[s] >= 0) {  // a literal, broadcast from the frame for this row
    const int r = take();
    broadcast(r, ptr[Xbyak::util::rsp + 8 * literalIndex[s]]);
    reg[s].fill(r);
    return;
  }
  TORCH_INTERNAL_ASSERT(s < static_cast<int>(P.leaves.size()) && P.leaves[s] != Leaf::Unused,
                        "tsfuse: compiled kernel reads slot ", s, " before it is computed");
  if (spilled(s)) mov(Xbyak::util::rax, at(rdi, offsetof(Args, leaf) + 8 * s));
  for (int r = 0; r < rowsOf(s); ++r) {
    const Xbyak::Reg64& g = spilled(s) ? Xbyak::util::rax : leafPtr[s][r];
    for (int u = 0; u < vectorsOf(s); ++u) {
      const int n = take();
      const Xbyak::Address lane = at(g, vectorBytes() * u);
      if (P.type[s] == c10::ScalarType::Bool)
        loadBools(n, g, u, P.leaves[s] == Leaf::Uniform);
      else if (P.leaves[s] == Leaf::Uniform)
        broadcastConverted(n, g, P.convertedFrom[s]);
      else if (masked && W)
        P.f64 ? vmovupd(v(n) | k1 | T_z, lane) : vmovups(v(n) | k1 | T_z, lane);
      else if (masked)
        P.f64 ? vmaskmovpd(y(n), y(mask), lane) : vmaskmovps(y(n), y(mask), lane);
      else
        vmovups(v(n), lane);
      regAt(s, r, u) = n;
    }
  }
}

void Gen::loadBools(int n, const Xbyak::Reg64& g, int u, bool uniform) {
  // Bytes 0 or 1 become lanes of all zeros or all ones (the compares' form): widened (or, uniform,
  // broadcast) then subtracted from zero. A vector's bytes are read whole, masked lanes too: the
  // drivers make them readable (a map runs its last lanes over padded copies, a reduction's masked
  // tail reads bools from a padded copy or its pack buffer's slack). No 64-byte vector (widens).
  TORCH_INTERNAL_ASSERT(!W, "tsfuse: bool operand of a wide kernel");
  const int lanes = lanesPerVector();
  if (uniform)
    vpbroadcastb(y(n), byte[g]);
  else if (P.f64)
    vpmovzxbq(y(n), dword[g + lanes * u]);
  else
    vpmovzxbd(y(n), qword[g + lanes * u]);
  vpxor(y(T), y(T), y(T));
  if (uniform)
    vpsubb(y(n), y(T), y(n));
  else
    P.f64 ? vpsubq(y(n), y(T), y(n)) : vpsubd(y(n), y(T), y(n));
}

void Gen::release(int s) {
  if (held[s] || reg[s][0] < 0) return;
  for (int r = 0; r < rowsOf(s); ++r)
    for (int u = 0; u < vectorsOf(s); ++u) give(regAt(s, r, u));
  reg[s].fill(-1);
}

void Gen::instruction(size_t k) {
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
    if (s < 0 || P.lastUse[s] != static_cast<int>(k) || (j > 0 && (s == ops[0] || (j > 1 && s == ops[1])))) continue;
    if (P.perRow[s] == P.perRow[out] && P.uniform[s] == P.uniform[out])
      release(s);
    else
      later.push_back(s);
  }
  for (int r = 0; r < rowsOf(out); ++r)
    for (int u = 0; u < vectorsOf(out); ++u) regAt(out, r, u) = take();
  for (int r = 0; r < rowsOf(out); ++r)
    for (int u = 0; u < vectorsOf(out); ++u)
      op(li, v(regAt(out, r, u)), v(in[0][r * U + u]), v(in[1][r * U + u]), v(in[2][r * U + u]));
  for (int s : later) release(s);
  if (P.lastUse[out] < 0) release(out);  // computed, never read
}

void Gen::op(const lower::Instr& li, const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Xmm& b,
             const Xbyak::Xmm& c) {
  using namespace Xbyak::util;
  const bool f64 = P.f64;
  auto cmp = [&](const Xbyak::Xmm& dst, const Xbyak::Xmm& l, const Xbyak::Xmm& r, uint8_t pred) {
    if (f64)
      vcmppd(dst, l, r, pred);
    else
      vcmpps(dst, l, r, pred);
  };
  auto blend = [&](const Xbyak::Xmm& dst, const Xbyak::Xmm& no, const Xbyak::Xmm& yes, const Xbyak::Xmm& sel) {
    if (f64)
      vblendvpd(dst, no, yes, sel);
    else
      vblendvps(dst, no, yes, sel);
  };
  // ew::minimum / ew::maximum: NaN if either operand is NaN, else minps/maxps(a, b), which
  // return b when the two compare equal or unordered. (Wide: the unordered lanes in k2.)
  auto minmax = [&](bool isMin) {
    if (W)
      f64 ? vcmppd(k2, a, b, kUnord) : vcmpps(k2, a, b, kUnord);
    else
      cmp(y(T), a, b, kUnord);
    if (isMin)
      f64 ? vminpd(d, a, b) : vminps(d, a, b);
    else
      f64 ? vmaxpd(d, a, b) : vmaxps(d, a, b);
    if (W)
      f64 ? vblendmpd(d | k2, d, v(nan)) : vblendmps(d | k2, d, v(nan));
    else
      blend(d, d, y(nan), y(T));
  };
  const bool boolCompare = li.ct == c10::ScalarType::Bool;
  switch (li.op) {
    case Prim::Add:
      f64 ? vaddpd(d, a, b) : vaddps(d, a, b);
      break;
    case Prim::Sub:
      f64 ? vsubpd(d, a, b) : vsubps(d, a, b);
      break;
    case Prim::Mul:
      f64 ? vmulpd(d, a, b) : vmulps(d, a, b);
      break;
    case Prim::Div:
      f64 ? vdivpd(d, a, b) : vdivps(d, a, b);
      break;
    case Prim::Minimum:
      minmax(true);
      break;
    case Prim::Maximum:
      minmax(false);
      break;
    case Prim::ClampMin:
      f64 ? vmaxpd(d, b, a) : vmaxps(d, b, a);
      break;  // lo > a ? lo : a
    case Prim::ClampMax:
      f64 ? vminpd(d, b, a) : vminps(d, b, a);
      break;  // hi < a ? hi : a
    case Prim::Eq:
      if (boolCompare)
        vxorps(d, a, b), vxorps(d, d, y(ones));
      else
        cmp(d, a, b, kEq);
      break;
    case Prim::Ne:
      boolCompare ? vxorps(d, a, b) : cmp(d, a, b, kNe);
      break;
    case Prim::Lt:
      cmp(d, a, b, kLt);
      break;
    case Prim::Le:
      cmp(d, a, b, kLe);
      break;
    case Prim::Gt:
      cmp(d, b, a, kLt);
      break;
    case Prim::Ge:
      cmp(d, b, a, kLe);
      break;
    case Prim::And:
      vandps(d, a, b);
      break;
    case Prim::Or:
      vorps(d, a, b);
      break;
    case Prim::Xor:
      vxorps(d, a, b);
      break;
    case Prim::Not:
      vxorps(d, a, y(ones));
      break;
    case Prim::Neg:
      vxorps(d, a, v(sign));
      break;
    case Prim::Abs:
      vandps(d, a, v(absMask));
      break;
    case Prim::Floor:
    case Prim::Ceil:
    case Prim::Trunc:
    case Prim::Round:
      f64 ? vroundpd(d, a, roundingMode(li.op)) : vroundps(d, a, roundingMode(li.op));
      break;
    case Prim::Where:
      blend(d, c, b, a);
      break;  // a ? b : c
    case Prim::Cast:
      if (P.type[li.a] == c10::ScalarType::Bool)
        vandps(d, a, y(one));  // 1.0 / 0.0
      else
        cmp(d, a, y(zero), kNe);  // x != 0 (NaN: true)
      break;
    default:
      TORCH_INTERNAL_ASSERT(false, "tsfuse: ", primName(li.op), " in a compiled kernel (Plan::make declines it)");
  }
}

}  // namespace gen

std::unique_ptr<Xbyak::CodeGenerator> generate(const Plan& plan, const Shape& shape) {
  // SumInner: 4 + 4 + 3 rows of code.
  const size_t rowBodies = plan.sink == Sink::SumInner ? 11 : 1;
  const size_t size =
      4096 +
      (plan.code.size() * rowBodies + plan.literal.size()) * static_cast<size_t>(shape.vectors * shape.rows) * 128 +
      rowBodies * plan.leaves.size() * 16;
  try {
    auto g = std::make_unique<gen::Gen>(plan, shape, size);
    g->setProtectModeRE();
    return g;
  } catch (const gen::OutOfRegisters&) {
    return nullptr;
  } catch (const std::exception& e) {  // Xbyak::Error: code buffer too small, protection refused
    TSFUSE_LOG(kernel, debug, "compiled kernel: code generation failed: ", e.what(), " (", shape.rows, " row(s) x ",
               shape.vectors, " vectors", shape.masked ? ", masked" : "", shape.wide ? ", AVX-512" : "",
               shape.literalsInMemory ? ", literals in memory" : "", shape.holdUniforms ? ", uniforms held" : "", ")");
    return nullptr;
  }
}

}  // namespace tsfuse::cpu::jit
