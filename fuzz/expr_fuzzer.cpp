// libFuzzer target for the expression decoder (kernels/ir/expr.cpp): every input must satisfy the
// property in tests/expr_fuzz.h (rejected with a tsfuse expr c10::Error, or accepted, valid and
// round-tripping). Built and run by fuzz/run.sh (`make fuzz-expr`; needs clang++).
#include "tests/expr_fuzz.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string failure = tsfuse_fuzz::checkExprText(text);
  if (!failure.empty()) {
    std::fprintf(stderr, "expr fuzzer: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
