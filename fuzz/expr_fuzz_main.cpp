// The expression decoder's fuzz property (tests/expr_fuzz.h) over N seeded mutants, for builds
// without libFuzzer: CMake builds it with g++ under AddressSanitizer + UndefinedBehaviorSanitizer
// as tsfuse_expr_asan (kernels/ir/expr.cpp instrumented, c10 as shipped), and ctest `expr_asan` runs
// it in every `make test` — the sanitizer subset CI can afford (docs/reliability.md).
//
//   tsfuse_expr_asan [N=100000] [SEED=1]
#include "tests/expr_fuzz.h"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const long long n = argc > 1 ? std::atoll(argv[1]) : 100000;
  const unsigned long long seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  std::mt19937_64 rng(seed);
  long long accepted = 0;
  for (long long i = 0; i < n; ++i) {
    const std::string text = tsfuse_fuzz::mutate(rng);
    bool ok = false;
    const std::string failure = tsfuse_fuzz::checkExprText(text, &ok);
    if (!failure.empty()) {
      std::fprintf(stderr, "expr fuzz: mutant %lld (seed %llu): %s\n  input (%zu bytes):", i, seed, failure.c_str(),
                   text.size());
      for (unsigned char c : text) {
        if (c >= 32 && c < 127)
          std::fputc(c, stderr);
        else
          std::fprintf(stderr, "\\x%02x", c);
      }
      std::fprintf(stderr, "\n");
      return 1;
    }
    accepted += ok;
  }
  std::printf("expr fuzz: %lld mutants (seed %llu), %lld accepted, property held for all\n", n, seed, accepted);
  return 0;
}
