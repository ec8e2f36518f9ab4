// Every generated kernel of the corpus (tests/gpu/gpu_corpus.h) compiled by NVRTC for sm_80 and
// sm_90, as the CUDA path compiles it at first use (no GPU needed): ptxas must report 0 bytes of
// spills, 0 bytes of stack (libdevice's sin/cos: their argument reduction's frame, as in ATen's
// kernels) and at most the kernel's register budget (kernels/backends/cuda/codegen/emit.h), and the PTX
// must hold no fused multiply-add (-fmad=false: eager rounds every op; libdevice's exp/log/sin/...
// have their own by design, as in ATen's CUDA kernels). Also the kernel cache (memory, disk, a
// corrupt entry).
#include "gpu_corpus.h"
#include "gradient_cases.h"

#include "kernels/backends/cuda/codegen/nvrtc.h"

#include <atomic>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <unistd.h>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace {

using namespace tsfuse_gpu;

// The files of a directory (no std::filesystem: libtorch.so exports its own copies of some of its
// symbols, which crash when called from here).
std::vector<std::string> filesIn(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
    ::closedir(d);
  }
  return out;
}
void removeDir(const std::string& dir) {
  for (const std::string& f : filesIn(dir)) ::unlink(f.c_str());
  ::rmdir(dir.c_str());
}
using tsfuse::cuda::Kind;

// Registers per thread: 64 keeps 32 warps (50% occupancy on sm_80/sm_90) resident per SM. A
// kernel calling libdevice's double pow (a norm of general order) gets 80 (24 warps): pow alone
// holds about 40.

const tsfuse::cuda::Nvrtc* nvrtcOrSkip() {
  std::string why;
  return tsfuse::cuda::Nvrtc::get(&why);
}

struct Kernel {
  std::string label, name, text;
  Kind kind;
  int registerBudget;
  // libdevice's expf/logf/sinf/... (ATen's CUDA kernels call the same) contain explicit FMAs by design:
  // -fmad=false stops contraction of our own arithmetic, which is what the check is about.
  bool libdeviceMath = false;
  // libdevice's sinf/cosf (ATen's CUDA sin/cos kernels are the same code) reduce an argument
  // beyond about 1e5 by Payne-Hanek into a small local array: a stack frame of 32-40 bytes per
  // function a kernel calls (sin and cos each keep their own: 72 B for both), touched on that
  // path only. Every other kernel: no stack.
  int stackBudget = 0;
};

int stackBudgetOf(const std::string& kernelText) {
  return 48 * (bodyCalls(kernelText, {"TSF_SIN_"}) + bodyCalls(kernelText, {"TSF_COS_"}));
}

// The corpus's unique kernel texts (device rules), every skeleton a call can take.
std::vector<Kernel> corpusKernels() {
  std::vector<GpuCase> cs = seedCases(11);
  for (auto& c : benchCases(14)) cs.push_back(std::move(c));
  for (auto& c : registryCases(12)) cs.push_back(std::move(c));
  for (auto& c : randomCases(13, 500)) cs.push_back(std::move(c));
  for (auto& c : gradientCases(15)) cs.push_back(std::move(c.call));
  std::vector<Kernel> ks;
  std::set<uint64_t> seen;
  int declined = 0;
  for (const GpuCase& c : cs) {
    Prepared p = prepare(c);
    if (!p.an || p.plan->unsupported) continue;
    std::vector<tsfuse::cuda::CallOptions> variants;
    // 64-bit variants of the hand-written cases only: the index code does not depend on the program.
    for (bool i64 : {false, true}) {
      if (i64 && (c.label == "random" || c.label.rfind("op ", 0) == 0)) continue;
      tsfuse::cuda::CallOptions o;
      o.index64 = i64;
      // Every skeleton that applies (a forced one that does not declines and is counted so).
      const auto kinds = c.reduce ? std::vector<Kind>{Kind::ReduceThread, Kind::ReduceBlock, Kind::Gemm}
                                  : std::vector<Kind>{Kind::Map, Kind::Pair2};
      for (Kind k : kinds) {
        o.kind = k;
        variants.push_back(o);
      }
    }
    for (const auto& o : variants) {
      std::string why;
      auto k = tsfuse::cuda::kernelForCall(*p.e, c.ops, c.reduce ? &*c.reduce : nullptr, *p.an, *p.plan, o, &why);
      if (!k) {
        ++declined;
        continue;
      }
      if (seen.insert(k->source.hash).second)
        ks.push_back({c.label + ": " + c.expr, k->source.name, k->source.text, k->spec.kind, k->source.registerBudget,
                      callsLibm(k->source.text), stackBudgetOf(k->source.text)});
    }
  }
  std::printf("[corpus] %zu calls, %zu unique kernels, %d variants declined\n", cs.size(), ks.size(), declined);
  return ks;
}

TEST(GeneratedKernels, NvrtcCompilesCorpusWithoutSpillsOrFma) {
  const tsfuse::cuda::Nvrtc* nvrtc = nvrtcOrSkip();
  ASSERT_NE(nvrtc, nullptr) << "NVRTC is needed by this test (scripts/setup.sh: the CUDA toolkit or the torch wheel's)";
  const std::vector<Kernel> ks = corpusKernels();
  ASSERT_GT(ks.size(), 150u);
  // TSFUSE_DUMP_KERNELS=DIR writes each text to DIR/<name>.cu (for cuobjdump/ptxas by hand).
  if (const char* dir = std::getenv("TSFUSE_DUMP_KERNELS"))
    for (const Kernel& k : ks) std::ofstream(std::string(dir) + "/" + k.name + ".cu") << k.text;
  const int archs[] = {80, 90};
  struct Result {
    std::string failure;
    tsfuse::cuda::PtxasReport rep;
  };
  std::vector<Result> results(ks.size() * 2);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j; (j = next++) < results.size();) {
      const Kernel& k = ks[j / 2];
      const int arch = archs[j % 2];
      auto out = nvrtc->compile(k.text, k.name, tsfuse::cuda::kernelOptions(arch, false, true));
      Result& r = results[j];
      if (!out.ok) {
        r.failure = "does not compile: " + out.log;
        continue;
      }
      r.rep = tsfuse::cuda::parsePtxas(out.log, k.name);
      if (!r.rep.found)
        r.failure = "no ptxas report in: " + out.log;
      else if (r.rep.stackBytes > k.stackBudget || r.rep.spillStores || r.rep.spillLoads)
        r.failure = "local memory: " + std::to_string(r.rep.stackBytes) + " B stack, " +
                    std::to_string(r.rep.spillStores) + "/" + std::to_string(r.rep.spillLoads) + " B spilled";
      else if (r.rep.registers > k.registerBudget)
        r.failure = std::to_string(r.rep.registers) + " registers";
      else if (!k.libdeviceMath && out.ptx.find("fma.rn") != std::string::npos)
        r.failure = "fma in the PTX";
    }
  };
  std::vector<std::thread> pool;
  const unsigned n = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  for (unsigned t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  std::map<std::string, std::pair<int, int>> regs;  // "<kind> sm_<arch>" -> (max, count)
  int failures = 0, framed = 0, maxFrame = 0;
  for (size_t j = 0; j < results.size(); ++j) {
    const Kernel& k = ks[j / 2];
    if (!results[j].failure.empty()) {
      if (++failures <= 10)
        ADD_FAILURE() << k.name << " (sm_" << archs[j % 2] << ", " << k.label << "): " << results[j].failure << "\n"
                      << k.text;
      continue;
    }
    auto& [mx, cnt] = regs[std::string(tsfuse::cuda::kindName(k.kind)) + " sm_" + std::to_string(archs[j % 2])];
    mx = std::max(mx, results[j].rep.registers);
    ++cnt;
    if (results[j].rep.stackBytes) {
      ++framed;
      maxFrame = std::max(maxFrame, results[j].rep.stackBytes);
    }
  }
  std::printf("[ptxas] %d kernels (sin/cos) with a stack frame, at most %d B\n", framed, maxFrame);
  for (const auto& [key, v] : regs)
    std::printf("[ptxas] %-16s %4d kernels, max %d registers, 0 spills\n", key.c_str(), v.second, v.first);
  EXPECT_EQ(failures, 0);
}

TEST(GeneratedKernels, KernelCacheMemoryDiskAndCorruptEntries) {
  const tsfuse::cuda::Nvrtc* nvrtc = nvrtcOrSkip();
  ASSERT_NE(nvrtc, nullptr);
  const std::string dir = ::testing::TempDir() + "/tsfuse_kernel_cache_test_" + std::to_string(::getpid());
  removeDir(dir);
  GpuCase c = seedCases(1).front();
  Prepared p = prepare(c);
  auto k = tsfuse::cuda::kernelForCall(*p.e, c.ops, nullptr, *p.an, *p.plan, {}, nullptr);
  ASSERT_TRUE(k);
  std::string why;
  {
    tsfuse::cuda::KernelCache cache(dir);
    auto e1 = cache.get(*nvrtc, k->source.text, k->source.name, 90, &why);
    ASSERT_TRUE(e1) << why;
    EXPECT_FALSE(e1->isPtx);
    auto e2 = cache.get(*nvrtc, k->source.text, k->source.name, 90, &why);
    EXPECT_EQ(e1.get(), e2.get());
    EXPECT_EQ(cache.compiles, 1);
    EXPECT_EQ(cache.memoryHits, 1);
    // An arch NVRTC does not know: PTX of the newest one it does.
    auto e3 = cache.get(*nvrtc, k->source.text, k->source.name, 9999, &why);
    ASSERT_TRUE(e3) << why;
    EXPECT_TRUE(e3->isPtx);
  }
  {
    tsfuse::cuda::KernelCache cache(dir);  // a new process: from disk
    ASSERT_TRUE(cache.get(*nvrtc, k->source.text, k->source.name, 90, &why));
    EXPECT_EQ(cache.diskHits, 1);
    EXPECT_EQ(cache.compiles, 0);
  }
  const std::vector<std::string> entries = filesIn(dir);
  ASSERT_EQ(entries.size(), 2u);  // sm_90 and the PTX of the unknown arch; no temp file left
  for (const std::string& f : entries) ASSERT_EQ(::truncate(f.c_str(), 100), 0);
  {
    tsfuse::cuda::KernelCache cache(dir);
    ASSERT_TRUE(cache.get(*nvrtc, k->source.text, k->source.name, 90, &why));
    EXPECT_EQ(cache.diskHits, 0);
    EXPECT_EQ(cache.compiles, 1);
  }
  removeDir(dir);
}

TEST(GeneratedKernels, PtxasReportParsing) {
  const std::string log =
      "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
      "ptxas info    : Function properties for a\n"
      "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
      "ptxas info    : Function properties for b\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers\n";
  auto a = tsfuse::cuda::parsePtxas(log, "a"), b = tsfuse::cuda::parsePtxas(log, "b");
  EXPECT_TRUE(a.found && b.found);
  EXPECT_EQ(a.registers, 40);
  EXPECT_EQ(a.stackBytes, 8);
  EXPECT_EQ(a.spillStores, 4);
  EXPECT_EQ(a.sharedBytes, 2048);
  EXPECT_EQ(b.registers, 12);
  EXPECT_EQ(b.stackBytes, 0);
  EXPECT_FALSE(tsfuse::cuda::parsePtxas(log, "c").found);
}

}  // namespace
