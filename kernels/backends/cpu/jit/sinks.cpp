// Where a compiled kernel's row values go (kernels/backends/cpu/jit/gen.h): sums (counts, double, float and
// eager's inner order), first extrema with their index, and stores; their start and their end.
#include "kernels/backends/cpu/jit/gen.h"

#include <cstring>

namespace tsfuse::cpu::jit::gen {

void Gen::innerLanes() {
  using namespace Xbyak::util;
  const int64_t rows = P.innerRows, groups = rows / InnerSumOrder::kPartials, rest = rows % InnerSumOrder::kPartials;
  auto partial = [&](int k, bool set) {
    load(P.source);
    for (int i = 0; i < R * U; ++i) {
      const int s = regAt(P.source, i / U, i % U), a = acc[i * accsPerVector() + k];
      if (set)
        vmovaps(v(a), v(s));
      else
        P.f64 ? vaddpd(v(a), v(a), v(s)) : vaddps(v(a), v(a), v(s));
    }
  };
  Xbyak::Label lane, group;
  mov(rax, at(rdi, offsetof(Args, lanes)));
  mov(at(rdi, offsetof(Args, lanesLeft)), rax);
  L(lane);
  for (int k = 0; groups > 0 && k < InnerSumOrder::kPartials; ++k) row([&] { partial(k, true); });
  if (groups > 1) {
    mov(rcx, groups - 1);
    L(group);
    for (int k = 0; k < InnerSumOrder::kPartials; ++k) row([&] { partial(k, false); });
    dec(rcx);
    jnz(group, T_NEAR);
  }
  for (int64_t i = 0; i < rest; ++i) row([&] { partial(0, groups == 0 && i == 0); });
  for (int i = 0; i < R * U; ++i) {
    const int* a = &acc[i * accsPerVector()];
    if (groups > 0)
      for (int k = 1; k < InnerSumOrder::kPartials; ++k)
        P.f64 ? vaddpd(v(a[0]), v(a[0]), v(a[k])) : vaddps(v(a[0]), v(a[0]), v(a[k]));
    const Xbyak::Address sum = at(r15, sumOffset(i / U, i % U, 0));
    vmovups(v(T), sum);
    P.f64 ? vaddpd(v(T), v(T), v(a[0])) : vaddps(v(T), v(T), v(a[0]));
    vmovups(sum, v(T));
  }
  for (int i = 0; i < static_cast<int>(P.leaves.size()); ++i) advance(i, offsetof(Args, laneStep));
  dec(qword[rdi + offsetof(Args, lanesLeft)]);
  jnz(lane, T_NEAR);
}

void Gen::initSums() {
  using namespace Xbyak::util;
  Xbyak::Label fromMemory, ready;
  if (P.sink == Sink::SumInner) {  // its lane sums: zeroed (Args::fresh), else kept
    cmp(qword[rdi + offsetof(Args, fresh)], 0);
    je(ready, T_NEAR);
    W ? vpxord(v(T), v(T), v(T)) : vpxor(y(T), y(T), y(T));
    for (int i = 0; i < R * U; ++i) vmovups(at(r15, sumOffset(i / U, i % U, 0)), v(T));
    L(ready);
    return;
  }
  if (extremum()) vpbroadcastd(v(rowIndex), dword[rdi + offsetof(Args, index)]);
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
    vpbroadcastd(v(T), x(T));
    for (size_t k = 0; k < acc.size(); k += 2) vmovaps(v(acc[k]), v(T)), vmovaps(v(acc[k + 1]), v(rowIndex));
  } else {
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < U; ++u)
        for (int h = 0; h < storedPerVector(); ++h) {
          const int a = acc[(r * U + u) * accsPerVector() + h];
          vpxor(y(a), y(a), y(a));
        }
  }
  if (P.boolValue) return;
  jmp(ready, T_NEAR);
  L(fromMemory);
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u)
      for (int h = 0; h < storedPerVector(); ++h) {
        const int a = acc[(r * U + u) * accsPerVector() + h];
        vmovupd(v(a), at(r15, sumOffset(r, u, h)));
      }
  L(ready);
}

void Gen::accumulate() {
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

void Gen::keepExtremum() {
  if (W) return keepExtremumWide();
  const int notNaN = take();
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u) {
      const int v = regAt(P.source, r, u), k = (r * U + u) * 2;
      const Xbyak::Ymm kept = y(acc[k]), index = y(acc[k + 1]);
      if (P.sink == Sink::MaxFirst)
        vcmpps(y(T), y(v), kept, kNle);
      else
        vcmpps(y(T), kept, y(v), kNle);
      vcmpps(y(notNaN), kept, kept, kOrd);
      vandps(y(T), y(T), y(notNaN));
      vblendvps(kept, kept, y(v), y(T));
      vblendvps(index, index, y(rowIndex), y(T));
    }
  give(notNaN);
  vpsubd(y(rowIndex), y(rowIndex), y(ones));  // the next row: + 1
}

// The same rule on 16 lanes, the lanes to take in k2: those where the kept value is not NaN (k3)
// and the row's value beats it (or is NaN).
void Gen::keepExtremumWide() {
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u) {
      const int val = regAt(P.source, r, u), k = (r * U + u) * 2;
      const Xbyak::Zmm kept(acc[k]), index(acc[k + 1]);
      vcmpps(k3, kept, kept, kOrd);
      if (P.sink == Sink::MaxFirst)
        vcmpps(k2 | k3, v(val), kept, kNle);
      else
        vcmpps(k2 | k3, kept, v(val), kNle);
      vmovaps(kept | k2, v(val));
      vmovdqa32(index | k2, v(rowIndex));
    }
  vpsubd(v(rowIndex), v(rowIndex), v(ones));
}

void Gen::store() {
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

void Gen::storeSums() {
  using namespace Xbyak::util;
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u) {
      const int a = (r * U + u) * accsPerVector();
      if (!P.boolValue) {
        for (int h = 0; h < storedPerVector(); ++h) vmovupd(at(r15, sumOffset(r, u, h)), v(acc[a + h]));
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

}  // namespace tsfuse::cpu::jit::gen
