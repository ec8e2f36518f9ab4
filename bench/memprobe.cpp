// The memory a call allocates, without the resident set's noise: a counting wrapper around c10's
// CPU allocator (every CPU tensor, and tsfuse's scratch, which takes its buffers from the same
// allocator: kernels/backends/cpu/scratch.h). bench scripts load it with torch.ops.load_library and call
//   torch.ops.tsfuse_memprobe.begin()   installs the wrapper (once) and restarts the count at 0;
//   torch.ops.tsfuse_memprobe.peak()    the most bytes held at once, since begin(), by blocks
//                                       allocated since begin().
// The resident set's growth during a first call also holds what is not the call's data: code pages
// of libtorch touched for the first time, new threads' stacks and malloc arenas, TorchScript's own
// graphs and executors (5.1 MiB for a scripted nearest neighbour on [8, 3] inputs, no tsfuse). This
// counts none of those. Not part of libtsfuse: only bench/ builds and loads it.
#include <c10/core/CPUAllocator.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace {

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base), baseDelete_(base->raw_deleter()) {
    TORCH_CHECK(baseDelete_ != nullptr, "tsfuse_memprobe: the CPU allocator has no raw deleter to wrap");
  }

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr d = base_->allocate(n);
    void* p = d.get();
    if (p == nullptr || d.get_context() != p || d.get_deleter() != baseDelete_) return d;  // not ours to count
    d.release_context();
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = n;
    now_ += static_cast<int64_t>(n);
    peak_ = std::max(peak_, now_);
    return {p, p, &CountingAllocator::release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountingAllocator::release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  void restart() {
    std::lock_guard<std::mutex> lock(mu_);
    sizes_.clear();  // blocks from before begin() are freed uncounted
    now_ = peak_ = 0;
  }
  int64_t peak() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }

 private:
  static void release(void* p);

  c10::Allocator* base_;
  c10::DeleterFnPtr baseDelete_;
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  int64_t now_ = 0, peak_ = 0;
};

CountingAllocator* installed = nullptr;

void CountingAllocator::release(void* p) {
  {
    std::lock_guard<std::mutex> lock(installed->mu_);
    auto it = installed->sizes_.find(p);
    if (it != installed->sizes_.end()) {
      installed->now_ -= static_cast<int64_t>(it->second);
      installed->sizes_.erase(it);
    }
  }
  installed->baseDelete_(p);
}

void begin() {
  if (installed == nullptr) {
    installed = new CountingAllocator(c10::GetCPUAllocator());  // lives as long as the process
    c10::SetCPUAllocator(installed, /*priority=*/UINT8_MAX);
  }
  installed->restart();
}

int64_t peak() {
  TORCH_CHECK(installed != nullptr, "tsfuse_memprobe.peak() before begin()");
  return installed->peak();
}

}  // namespace

TORCH_LIBRARY(tsfuse_memprobe, m) {
  m.def("begin() -> ()", &begin);
  m.def("peak() -> int", &peak);
}
