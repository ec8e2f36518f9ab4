// Line diffs (Myers' O((N+M)D) algorithm) and unified-diff output, for optimize-ts --diff and the
// side-by-side --html viewer.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace tsfuse::tool {

struct Edit {
  enum Op { Equal, Delete, Insert } op;
  size_t a, b;  // the line of A (Equal, Delete) / of B (Equal, Insert); else the position in it
};

// A shortest edit script turning `a` into `b`, in order.
std::vector<Edit> diffLines(const std::vector<std::string>& a, const std::vector<std::string>& b);

// Writes a unified diff ("--- from", "+++ to", "@@ -l,n +l,n @@" hunks with `context` lines),
// with ANSI colors when `color`. Writes nothing when a == b.
void printUnifiedDiff(std::ostream& os, const std::string& from, const std::string& to,
                      const std::vector<std::string>& a, const std::vector<std::string>& b, size_t context, bool color);

}  // namespace tsfuse::tool
