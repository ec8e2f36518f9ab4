// Micro-benchmarks of the fused CPU kernels (Google Benchmark), one thread: each seed workload and
// the distance reductions through tsfuse::pairwise / tsfuse::reduce, next to the same expression
// evaluated op by op with eager ATen (what the unfused graph runs). items_per_second counts
// elements of the broadcast iteration space. `make bench` runs it twice: with the AVX2 tile loops
// (default on a machine that has AVX2; vertical sums then run compiled kernels) and with
// TSFUSE_CPU_ISA=baseline (the SSE2 loops, no compiled kernels).
#include <tsfuse/ops.h>

#include "kernels/reference/analysis.h"
#include "kernels/backends/cpu/jit/jit.h"
#include "kernels/backends/cuda/codegen/call.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

namespace {

const char* kIntersection =
    "v1: minimum($0, $1); maximum($2, $3); sub(%0, %1); clamp(%2, 0, None); minimum($4, $5); "
    "maximum($6, $7); sub(%4, %5); clamp(%6, 0, None); mul(%3, %7)";
const char* kSimilarity = "v1: sub($0, $1); abs(%0); lt(%1, 1)";
const char* kL1 = "v1: sub($0, $1); abs(%0)";

at::Tensor randomBoxes(int64_t n) {
  at::Tensor xy = at::rand({n, 2}) * 100, wh = at::rand({n, 2}) * 30 + 0.5;
  return at::cat({xy, xy + wh}, 1);
}

// The seed's operands: box columns [N, 1] against transposed columns [1, M].
std::vector<at::Tensor> intersectionOperands(int64_t n, int64_t m) {
  auto b1 = randomBoxes(n).chunk(4, 1), b2 = randomBoxes(m).chunk(4, 1);
  return {b1[3], b2[3].t(), b1[1], b2[1].t(), b1[2], b2[2].t(), b1[0], b2[0].t()};
}

void setUp(benchmark::State& state, int64_t elements) {
  at::manual_seed(0);
  at::set_num_threads(1);
  state.SetItemsProcessed(state.iterations() * elements);
}

void BM_Intersection_tsfuse(benchmark::State& state) {
  const int64_t n = state.range(0), m = 500;
  auto ops = intersectionOperands(n, m);
  for (auto _ : state) benchmark::DoNotOptimize(tsfuse::pairwise(ops, kIntersection));
  setUp(state, n * m);
}

void BM_Intersection_eager(benchmark::State& state) {
  const int64_t n = state.range(0), m = 500;
  auto o = intersectionOperands(n, m);
  for (auto _ : state) {
    at::Tensor h = at::clamp(at::minimum(o[0], o[1]) - at::maximum(o[2], o[3]), 0);
    at::Tensor w = at::clamp(at::minimum(o[4], o[5]) - at::maximum(o[6], o[7]), 0);
    benchmark::DoNotOptimize(h * w);
  }
  setUp(state, n * m);
}

std::vector<at::Tensor> similarityOperands(int64_t s, int64_t d) {
  at::Tensor x = at::randn({s, d}), y = at::randn({s, d});
  return {x.unsqueeze(2), y.unsqueeze(1)};
}

void BM_Similarity_tsfuse(benchmark::State& state) {
  const int64_t s = 128, d = state.range(0);
  auto ops = similarityOperands(s, d);
  for (auto _ : state) benchmark::DoNotOptimize(tsfuse::reduce(ops, kSimilarity, "sum", std::vector<int64_t>{0}));
  setUp(state, s * d * d);
}

// The same with the compiled sums off (kernels/backends/cpu/jit/jit.h): the tile interpreter alone.
void BM_Similarity_tsfuse_interpreted(benchmark::State& state) {
  const bool was = tsfuse::cpu::jit::enabled();
  tsfuse::cpu::jit::setEnabled(false);
  BM_Similarity_tsfuse(state);
  tsfuse::cpu::jit::setEnabled(was);
}

void BM_Similarity_eager(benchmark::State& state) {
  const int64_t s = 128, d = state.range(0);
  auto o = similarityOperands(s, d);
  for (auto _ : state) benchmark::DoNotOptimize((o[0] - o[1]).abs().lt(1).sum(0));
  setUp(state, s * d * d);
}

// L1 distance matrix of N x N points in 8 dims: a horizontal reduction over the innermost dim.
std::vector<at::Tensor> pointOperands(int64_t n) {
  at::Tensor x = at::randn({n, 8}), y = at::randn({n, 8});
  return {x.unsqueeze(1), y.unsqueeze(0)};
}

void BM_L1Distance_tsfuse(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto ops = pointOperands(n);
  for (auto _ : state) benchmark::DoNotOptimize(tsfuse::reduce(ops, kL1, "sum", std::vector<int64_t>{-1}));
  setUp(state, n * n * 8);
}

void BM_L1Distance_eager(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto o = pointOperands(n);
  for (auto _ : state) benchmark::DoNotOptimize((o[0] - o[1]).abs().sum(-1));
  setUp(state, n * n * 8);
}

// The per-call overhead: a tiny intersection (parse cache hit, analysis, one tile).
void BM_Intersection_tiny_tsfuse(benchmark::State& state) {
  auto ops = intersectionOperands(8, 8);
  for (auto _ : state) benchmark::DoNotOptimize(tsfuse::pairwise(ops, kIntersection));
  setUp(state, 64);
}

// The host work of one CUDA call before its launch, measured where no GPU is needed (the kernel
// text does not depend on the device): the cached analysis, the iteration plan, and the kernel
// for the call (lowering, text, hash; the compiled module then comes from the cache by that
// hash). Args: the IoU seed's N (M = 500), or 0 for an L2-style sum over D = 64 of [1024, 500];
// then 1 for the whole, 0 for the analysis and plan alone.
void BM_CudaHostWork(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool kernel = state.range(1) != 0;
  const bool sum = n == 0;
  std::vector<at::Tensor> ops =
      sum ? std::vector<at::Tensor>{at::rand({1024, 1, 64}), at::rand({1, 500, 64})} : intersectionOperands(n, 500);
  const auto e = tsfuse::cachedExpr(sum ? "v1: sub($0, $1); mul(%0, %0)" : kIntersection);
  tsfuse::ReduceSpec red;
  red.kind = tsfuse::Reduction::Sum;
  red.dims = std::vector<int64_t>{-1};
  const tsfuse::ReduceSpec* r = sum ? &red : nullptr;
  for (auto _ : state) {
    auto an = tsfuse::analyzeCached(e, ops, r);
    const tsfuse::IterationPlan plan = tsfuse::IterationPlan::make(*e, ops, r, *an, true);
    benchmark::DoNotOptimize(plan);
    if (!kernel) continue;
    std::string why;
    auto k = tsfuse::cuda::kernelForCall(*e, ops, r, *an, plan, tsfuse::cuda::CallOptions{}, &why);
    if (!k) state.SkipWithError(why.c_str());
    benchmark::DoNotOptimize(k);
  }
  setUp(state, 1);
}

}  // namespace

BENCHMARK(BM_Intersection_tsfuse)->Arg(4096)->Arg(30000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Intersection_eager)->Arg(4096)->Arg(30000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Similarity_tsfuse)->Arg(250)->Arg(500)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Similarity_tsfuse_interpreted)->Arg(250)->Arg(500)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Similarity_eager)->Arg(250)->Arg(500)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_L1Distance_tsfuse)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_L1Distance_eager)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Intersection_tiny_tsfuse)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaHostWork)
    ->Args({242991, 1})
    ->Args({242991, 0})
    ->Args({0, 1})
    ->Args({0, 0})
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
