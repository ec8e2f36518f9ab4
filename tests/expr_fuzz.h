// The property every expression text must satisfy, shared by the bounded fuzz test in the gtest
// suite (tests/reliability/expr_fuzz_test.cpp) and the libFuzzer target (fuzz/expr_fuzzer.cpp):
//
//   Expr::parse(text) either throws c10::Error whose message starts "tsfuse expr: ", or returns an
//   expression that validates, whose references are in range (operands < numInputs, values
//   defined before use), and whose printed form parses back to the same expression and the same
//   text (str() is a fixed point).
//
// Plus the mutation generator both use to turn valid expressions into hostile ones.
#pragma once

#include "kernels/ir/expr.h"

#include <c10/util/Exception.h>

#include <random>
#include <string>
#include <vector>

namespace tsfuse_fuzz {

// Returns "" when the property holds, else what broke. `accepted` tells whether parse accepted.
inline std::string checkExprText(const std::string& text, bool* accepted = nullptr) {
  if (accepted) *accepted = false;
  tsfuse::Expr e;
  try {
    e = tsfuse::Expr::parse(text);
  } catch (const c10::Error& err) {
    std::string msg = err.what_without_backtrace();
    if (msg.rfind("tsfuse expr: ", 0) != 0) return "rejected without a tsfuse expr message: " + msg;
    return "";
  } catch (const std::exception& err) {
    return std::string("rejected with a non-c10 exception: ") + err.what();
  }
  if (accepted) *accepted = true;
  if (e.instrs.empty()) return "accepted an expression without instructions";
  for (size_t k = 0; k < e.instrs.size(); ++k) {
    for (const tsfuse::Arg& a : e.instrs[k].args) {
      if (a.kind == tsfuse::Arg::Kind::Input && (a.i < 0 || a.i >= e.numInputs))
        return "operand reference $" + std::to_string(a.i) + " out of range";
      if (a.kind == tsfuse::Arg::Kind::Value && (a.i < 0 || a.i >= static_cast<int64_t>(k)))
        return "value reference %" + std::to_string(a.i) + " out of range";
    }
  }
  try {
    e.validate();
    std::string printed = e.str();
    tsfuse::Expr back = tsfuse::Expr::parse(printed);
    if (back.str() != printed) return "str() is not a fixed point: '" + printed + "' -> '" + back.str() + "'";
    if (back.numInputs != e.numInputs || back.instrs.size() != e.instrs.size())
      return "re-parse changed the expression: '" + printed + "'";
    for (size_t k = 0; k < e.instrs.size(); ++k)
      if (back.instrs[k].op != e.instrs[k].op || !(back.instrs[k].args == e.instrs[k].args))
        return "re-parse changed instruction " + std::to_string(k) + " of '" + printed + "'";
  } catch (const std::exception& err) {
    return std::string("an accepted expression fails to validate or round-trip: ") + err.what();
  }
  return "";
}

// Valid expressions the mutator starts from (every op, literal kind and dtype appears).
inline const std::vector<std::string>& seedExpressions() {
  static const std::vector<std::string> seeds = {
      "v1: sub($0, $1); abs(%0); lt(%1, 1)",
      "v1: minimum($0, $1); maximum($2, $3); sub(%0, %1); clamp(%2, 0, None); mul(%3, 2.5)",
      "v1: add($0, 1e-07); mul(%0, -2.5); div(%1, $1); div_floor(%2, 3); div_trunc(%3, -inf)",
      "v1: clamp($0, None, 0.0); where($1, %0, inf); pow(%1, 2); exp(%2); log(%3); sqrt(%4)",
      "v1: to($0, bfloat16); eq(%0, True); logical_not(%1); logical_and(%2, $1); logical_xor(%3, False)",
      "v1: sub_alpha($0, $1, 2); clamp(%0, $1, $2); add_alpha(%1, $0, 0.5); neg(%2); relu(%3)",
      "v1: mul($0, nan); add(%0, -inf); ne(%1, $1); le($0, $1); gt(%2, %3); ge($1, 0); logical_or(%4, %5)",
      "v1: to($0, float16); to(%0, complex64); to($1, int8); to(%2, uint8); to(%3, int16); to(%4, int32)",
      "v1: sigmoid($0); to(%0, float64); to(%1, int64); to(%2, complex128); to(%3, float32); to(%4, bool)",
      "v1: where($0, $1, $2); clamp(%0, -9223372036854775808, 9223372036854775807)",
  };
  return seeds;
}

// Hostile fragments spliced in by the mutator.
inline const std::vector<std::string>& hostileTokens() {
  static const std::vector<std::string> tokens = {
      "$",
      "%",
      "$0",
      "%0",
      "$-1",
      "%-1",
      "$4294967296",
      "%4294967297",
      "$2147483647",
      "$1048577",
      "9223372036854775807",
      "-9223372036854775808",
      "99999999999999999999",
      "1e999",
      "-1e-999",
      "-0.0",
      "nan",
      "-nan",
      "inf",
      "-inf",
      "+",
      "-",
      "e",
      "1e",
      "1.e5",
      ".5",
      "0x10",
      "(",
      ")",
      ",",
      ";",
      ":",
      "v1:",
      "v0:",
      "v99999999999999999999:",
      "None",
      "True",
      "False",
      "float99",
      "clamp",
      "to",
      "where",
      "add",
      "()",
      "(,)",
      " ",
      "\t",
      "\n",
      std::string(1, '\0'),
      "\xff",
      "\x80",
      "%%",
      "$$",
      ";;",
      "abs(",
      "))",
  };
  return tokens;
}

// One mutant of `s`: 1-4 random edits (byte flips, insertions, deletions, duplicated spans,
// hostile tokens), or a splice of two seeds, or random bytes.
inline std::string mutate(std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % (n ? n : 1)); };
  const auto& seeds = seedExpressions();
  const auto& tokens = hostileTokens();
  std::string s = seeds[pick(seeds.size())];
  switch (pick(16)) {
    case 0: {  // random bytes
      s.assign(pick(64), '\0');
      for (char& c : s) c = static_cast<char>(rng());
      return s;
    }
    case 1: {  // splice two seeds at random points
      const std::string& t = seeds[pick(seeds.size())];
      return s.substr(0, pick(s.size() + 1)) + t.substr(pick(t.size() + 1));
    }
    default:
      break;
  }
  int edits = 1 + static_cast<int>(pick(4));
  for (int k = 0; k < edits; ++k) {
    size_t at = pick(s.size() + 1);
    switch (pick(6)) {
      case 0:  // flip a byte
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
        break;
      case 1:  // printable insertion
        s.insert(at, 1, static_cast<char>(32 + pick(95)));
        break;
      case 2:  // deletion of a span
        if (!s.empty()) s.erase(pick(s.size()), 1 + pick(6));
        break;
      case 3: {  // duplicate a span
        size_t from = pick(s.size() + 1), len = pick(12);
        s.insert(at, s.substr(from, len));
        break;
      }
      default: {  // replace a span with a hostile token
        size_t len = pick(5);
        if (at + len > s.size()) len = s.size() - at;
        s.replace(at, len, tokens[pick(tokens.size())]);
        break;
      }
    }
  }
  return s;
}

}  // namespace tsfuse_fuzz
