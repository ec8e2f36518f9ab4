// A parse cache keyed by the text it parses (expressions, chains, sweeps; also analyses, keyed by
// a call's signature as bytes, kernels/reference/analysis.cpp): thread-safe and bounded
// (models hold few texts; what a fuzzer can grow is cleared when full). Parsing runs outside the
// lock, so a malformed text throws without holding it and two threads may parse the same text once
// each; the first entry stored wins.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tsfuse {

template <typename T>
class TextCache {
 public:
  explicit TextCache(size_t maxEntries) : max_(maxEntries) {}

  std::shared_ptr<const T> get(const std::string& key, const std::function<T()>& parse) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    auto parsed = std::make_shared<const T>(parse());
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= max_) map_.clear();
    return map_.emplace(key, std::move(parsed)).first->second;
  }

 private:
  size_t max_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const T>> map_;
};

}  // namespace tsfuse
