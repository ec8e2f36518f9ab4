#include "tools/line_diff.h"

#include <algorithm>

namespace tsfuse::tool {

std::vector<Edit> diffLines(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const long n = static_cast<long>(a.size()), m = static_cast<long>(b.size()), max = n + m;
  // v[k] = furthest x on diagonal k = x - y; trace[d] keeps v (for k in [-d-1, d+1]) before round d.
  std::vector<long> v(2 * max + 3, 0);
  const long off = max + 1;
  std::vector<std::vector<long>> trace;
  bool done = n == 0 && m == 0;
  for (long d = 0; d <= max && !done; ++d) {
    trace.emplace_back(v.begin() + (off - d - 1), v.begin() + (off + d + 2));
    for (long k = -d; k <= d; k += 2) {
      long x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
      long y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      v[off + k] = x;
      if (x >= n && y >= m) {
        done = true;
        break;
      }
    }
  }
  std::vector<Edit> edits;
  long x = n, y = m;
  for (long d = static_cast<long>(trace.size()) - 1; d >= 0; --d) {
    const std::vector<long>& t = trace[d];
    auto at = [&](long k) { return t[k + d + 1]; };
    long k = x - y;
    long prevK = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    long prevX = d == 0 ? 0 : at(prevK), prevY = d == 0 ? 0 : prevX - prevK;
    while (x > prevX && y > prevY) {
      --x, --y;
      edits.push_back({Edit::Equal, size_t(x), size_t(y)});
    }
    if (d == 0) break;
    if (x == prevX)
      edits.push_back({Edit::Insert, size_t(x), size_t(y - 1)});
    else
      edits.push_back({Edit::Delete, size_t(x - 1), size_t(y)});
    x = prevX, y = prevY;
  }
  std::reverse(edits.begin(), edits.end());
  return edits;
}

void printUnifiedDiff(std::ostream& os, const std::string& from, const std::string& to,
                      const std::vector<std::string>& a, const std::vector<std::string>& b, size_t context,
                      bool color) {
  std::vector<Edit> edits = diffLines(a, b);
  auto paint = [&](const char* code, const std::string& s) {
    return color ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
  };
  std::vector<size_t> changes;
  for (size_t i = 0; i < edits.size(); ++i)
    if (edits[i].op != Edit::Equal) changes.push_back(i);
  if (changes.empty()) return;
  os << paint("1", "--- " + from) << "\n" << paint("1", "+++ " + to) << "\n";
  size_t c = 0;
  while (c < changes.size()) {
    // A hunk: changes closer than 2 * context lines apart, with `context` lines around them.
    size_t last = c;
    while (last + 1 < changes.size() && changes[last + 1] - changes[last] <= 2 * context) ++last;
    size_t begin = changes[c] > context ? changes[c] - context : 0;
    size_t end = std::min(edits.size(), changes[last] + context + 1);
    size_t aLen = 0, bLen = 0;
    for (size_t i = begin; i < end; ++i) {
      aLen += edits[i].op != Edit::Insert;
      bLen += edits[i].op != Edit::Delete;
    }
    // Unified-diff convention: an empty side's start is the line before it.
    size_t aStart = edits[begin].a + (aLen ? 1 : 0), bStart = edits[begin].b + (bLen ? 1 : 0);
    os << paint("36", "@@ -" + std::to_string(aStart) + "," + std::to_string(aLen) + " +" + std::to_string(bStart) +
                          "," + std::to_string(bLen) + " @@")
       << "\n";
    for (size_t i = begin; i < end; ++i) {
      const Edit& e = edits[i];
      if (e.op == Edit::Equal)
        os << " " << a[e.a] << "\n";
      else if (e.op == Edit::Delete)
        os << paint("31", "-" + a[e.a]) << "\n";
      else
        os << paint("32", "+" + b[e.b]) << "\n";
    }
    c = last + 1;
  }
}

}  // namespace tsfuse::tool
