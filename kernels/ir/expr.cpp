#include "kernels/ir/expr.h"

#include "kernels/ir/op_registry.h"

#include <c10/util/Exception.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace tsfuse {
namespace {

struct DTypeName {
  c10::ScalarType type;
  const char* name;
};
constexpr std::array<DTypeName, 12> kDTypes = {{
    {c10::ScalarType::Bool, "bool"},
    {c10::ScalarType::Byte, "uint8"},
    {c10::ScalarType::Char, "int8"},
    {c10::ScalarType::Short, "int16"},
    {c10::ScalarType::Int, "int32"},
    {c10::ScalarType::Long, "int64"},
    {c10::ScalarType::Half, "float16"},
    {c10::ScalarType::BFloat16, "bfloat16"},
    {c10::ScalarType::Float, "float32"},
    {c10::ScalarType::Double, "float64"},
    {c10::ScalarType::ComplexFloat, "complex64"},
    {c10::ScalarType::ComplexDouble, "complex128"},
}};

constexpr std::array<const char*, 15> kReductions = {"sum",  "mean", "prod",   "amax",   "amin",
                                                     "any",  "all",  "argmax", "argmin", "logsumexp",
                                                     "norm", "max",  "min",    "var",    "std"};

std::string formatFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);  // shortest text that round-trips
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

constexpr int64_t kMaxReference = 1 << 20;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Expr run() {
    Expr e;
    skipWs();
    expectChar('v');
    int64_t version = parseInt();
    TORCH_CHECK(version == kExprVersion, "tsfuse expr: unsupported version v", version, " (this build reads v",
                kExprVersion, ")");
    expectChar(':');
    while (true) {
      skipWs();
      if (pos_ >= s_.size()) break;
      e.instrs.push_back(parseInstr());
      skipWs();
      if (pos_ >= s_.size()) break;
      expectChar(';');
    }
    if (e.instrs.empty()) fail("no instructions");
    for (const Instr& ins : e.instrs)
      for (const Arg& a : ins.args)
        if (a.kind == Arg::Kind::Input) e.numInputs = std::max<int>(e.numInputs, static_cast<int>(a.i) + 1);
    e.validate();
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    // The text quoted whole when short, else an excerpt around the offset (one line either way).
    std::string text = s_.size() <= 160 ? s_ : "..." + s_.substr(pos_ > 60 ? pos_ - 60 : 0, 120) + "...";
    for (char& c : text)
      if (c == '\n' || c == '\r') c = ' ';
    TORCH_CHECK(false, "tsfuse expr: ", why.substr(0, 200), " at offset ", pos_, " in '", text, "'");
  }
  void skipWs() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expectChar(char c) {
    skipWs();
    if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parseWord() {
    skipWs();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                                (pos_ > start && std::isdigit(static_cast<unsigned char>(s_[pos_])))))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }
  int64_t parseInt() {
    skipWs();
    int64_t v = 0;
    auto res = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
    if (res.ec != std::errc()) fail("expected an integer");
    pos_ = static_cast<size_t>(res.ptr - s_.data());
    return v;
  }

  Instr parseInstr() {
    size_t at = pos_;
    std::string name = parseWord();
    Instr ins;
    if (!opFromName(name, ins.op)) {
      pos_ = at;
      fail("unknown op '" + name + "'");
    }
    expectChar('(');
    skipWs();
    if (pos_ < s_.size() && s_[pos_] == ')') {
      ++pos_;
      return ins;
    }
    while (true) {
      ins.args.push_back(parseArg());
      skipWs();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      expectChar(')');
      break;
    }
    return ins;
  }

  Arg parseArg() {
    skipWs();
    if (pos_ >= s_.size()) fail("expected an argument");
    char c = s_[pos_];
    if (c == '$' || c == '%') {
      ++pos_;
      int64_t idx = parseInt();
      if (idx < 0) fail("negative reference");
      // Indices are compared and counted as int elsewhere: bound them (far above any region).
      if (idx > kMaxReference) fail("reference " + std::to_string(idx) + " out of range");
      return c == '$' ? Arg::input(idx) : Arg::value(idx);
    }
    if (std::isalpha(static_cast<unsigned char>(c))) {
      std::string w = parseWord();
      if (w == "True") return Arg::boolean(true);
      if (w == "False") return Arg::boolean(false);
      if (w == "None") return Arg::none();
      if (w == "inf") return Arg::floating(INFINITY);
      if (w == "nan") return Arg::floating(NAN);
      if (c10::ScalarType t; dtypeFromName(w, t)) return Arg::scalarType(t);
      if (w == "cpu" || w == "cuda") {  // a device: cpu, cuda, cuda:N
        if (pos_ < s_.size() && s_[pos_] == ':') {
          ++pos_;
          int64_t index = parseInt();
          if (index < 0 || index > std::numeric_limits<c10::DeviceIndex>::max()) fail("device index out of range");
          w += ":" + std::to_string(index);
        }
        return Arg::onDevice(c10::Device(w));
      }
      fail("unknown word '" + w + "'");
    }
    // A number: int unless it has '.', 'e' or is "-inf".
    size_t start = pos_;
    if (s_.compare(pos_, 4, "-inf") == 0) {
      pos_ += 4;
      return Arg::floating(-INFINITY);
    }
    size_t end = pos_;
    if (end < s_.size() && (s_[end] == '-' || s_[end] == '+')) ++end;
    bool isFloat = false;
    while (end < s_.size() &&
           (std::isdigit(static_cast<unsigned char>(s_[end])) || s_[end] == '.' || s_[end] == 'e' || s_[end] == 'E' ||
            ((s_[end] == '-' || s_[end] == '+') && (s_[end - 1] == 'e' || s_[end - 1] == 'E')))) {
      if (s_[end] == '.' || s_[end] == 'e' || s_[end] == 'E') isFloat = true;
      ++end;
    }
    if (end == start) fail("expected an argument");
    std::string tok = s_.substr(start, end - start);
    if (isFloat) {
      char* stop = nullptr;
      double v = std::strtod(tok.c_str(), &stop);
      if (stop != tok.c_str() + tok.size()) fail("malformed float '" + tok + "'");
      pos_ = end;
      return Arg::floating(v);
    }
    int64_t v = 0;
    const char* b = tok.c_str() + (tok[0] == '+' ? 1 : 0);
    auto res = std::from_chars(b, tok.c_str() + tok.size(), v);
    if (res.ec != std::errc() || res.ptr != tok.c_str() + tok.size()) fail("malformed int '" + tok + "'");
    pos_ = end;
    return Arg::integer(v);
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

const char* dtypeName(c10::ScalarType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  TORCH_CHECK(false, "tsfuse expr: dtype ", t, " has no text form");
}

bool dtypeFromName(const std::string& name, c10::ScalarType& out) {
  for (const auto& d : kDTypes)
    if (name == d.name) {
      out = d.type;
      return true;
    }
  return false;
}

bool Arg::operator==(const Arg& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::Float:
      return (std::isnan(f) && std::isnan(o.f)) || f == o.f;
    case Kind::DType:
      return dtype == o.dtype;
    case Kind::Device:
      return device == o.device;
    case Kind::None:
      return true;
    default:
      return i == o.i;
  }
}

Expr Expr::parse(const std::string& text) { return Parser(text).run(); }

std::vector<char> coneMask(const Expr& e, size_t j) {
  std::vector<char> in(j + 1, 0);
  in[j] = 1;
  for (size_t k = j + 1; k-- > 0;)
    if (in[k])
      for (const Arg& a : e.instrs[k].args)
        if (a.kind == Arg::Kind::Value) in[a.i] = 1;
  return in;
}

Expr coneOf(const Expr& e, size_t j) {
  const std::vector<char> in = coneMask(e, j);
  Expr sub;
  sub.numInputs = e.numInputs;
  std::vector<int64_t> renumber(j + 1, -1);
  for (size_t k = 0; k <= j; ++k) {
    if (!in[k]) continue;
    Instr ins = e.instrs[k];
    for (Arg& a : ins.args)
      if (a.kind == Arg::Kind::Value) a.i = renumber[a.i];
    renumber[k] = static_cast<int64_t>(sub.instrs.size());
    sub.instrs.push_back(std::move(ins));
  }
  return sub;
}

std::string Expr::str() const {
  std::ostringstream os;
  os << "v" << kExprVersion << ":";
  for (size_t k = 0; k < instrs.size(); ++k) {
    const Instr& ins = instrs[k];
    os << (k ? "; " : " ") << opName(ins.op) << "(";
    for (size_t a = 0; a < ins.args.size(); ++a) {
      const Arg& arg = ins.args[a];
      if (a) os << ", ";
      switch (arg.kind) {
        case Arg::Kind::Input:
          os << "$" << arg.i;
          break;
        case Arg::Kind::Value:
          os << "%" << arg.i;
          break;
        case Arg::Kind::Int:
          os << arg.i;
          break;
        case Arg::Kind::Float:
          os << formatFloat(arg.f);
          break;
        case Arg::Kind::Bool:
          os << (arg.i ? "True" : "False");
          break;
        case Arg::Kind::None:
          os << "None";
          break;
        case Arg::Kind::DType:
          os << dtypeName(arg.dtype);
          break;
        case Arg::Kind::Device:
          os << arg.device.str();
          break;
      }
    }
    os << ")";
  }
  return os.str();
}

void Expr::validate() const {
  TORCH_CHECK(!instrs.empty(), "tsfuse expr: empty expression");
  int64_t maxInput = -1;
  for (size_t k = 0; k < instrs.size(); ++k) {
    const Instr& ins = instrs[k];
    const OpDef& def = opDef(ins.op);
    const int n = static_cast<int>(ins.args.size());
    TORCH_CHECK(n == def.arity(), "tsfuse expr: instruction %", k, " ", def.name, " takes ", def.arity(),
                " arguments, got ", n);
    bool anyTensor = false;
    for (size_t a = 0; a < ins.args.size(); ++a) {
      const Arg& arg = ins.args[a];
      if (arg.kind == Arg::Kind::Value)
        TORCH_CHECK(arg.i < static_cast<int64_t>(k), "tsfuse expr: instruction %", k, " uses %", arg.i,
                    " before it is defined");
      if (arg.isTensor()) TORCH_CHECK(arg.i >= 0, "tsfuse expr: instruction %", k, " has a negative reference");
      if (arg.kind == Arg::Kind::Input) maxInput = std::max<int64_t>(maxInput, arg.i);
      anyTensor |= arg.isTensor();
      const char want = def.signature[a];
      const bool dtypeSlot = want == 'd', deviceSlot = want == 'c';
      TORCH_CHECK((arg.kind == Arg::Kind::DType) == dtypeSlot, "tsfuse expr: instruction %", k, " ", def.name,
                  ": argument ", a, (dtypeSlot ? " must" : " must not"), " be a dtype");
      TORCH_CHECK((arg.kind == Arg::Kind::Device) == deviceSlot, "tsfuse expr: instruction %", k, " ", def.name,
                  ": argument ", a, (deviceSlot ? " must" : " must not"), " be a device");
      TORCH_CHECK(want != 'p' || arg.kind == Arg::Kind::Input, "tsfuse expr: instruction %", k, " ", def.name,
                  ": argument ", a, " must be an operand (a prototype)");
      TORCH_CHECK(arg.kind != Arg::Kind::None || want == 'o', "tsfuse expr: instruction %", k, " ", def.name,
                  ": argument ", a, " may not be None");
      // (an operand there holds a number known only at run time, read by value: bind_numbers.h)
      TORCH_CHECK(want != 's' || arg.isLiteral() || (arg.kind == Arg::Kind::Input && readsNumberByValue(ins.op, a)),
                  "tsfuse expr: instruction %", k, " ", def.name, ": argument ", a, " must be a number");
    }
    TORCH_CHECK(anyTensor, "tsfuse expr: instruction %", k, " ", def.name, " has no tensor argument");
    if (ins.op == Op::Clamp) {
      TORCH_CHECK(ins.args[0].isTensor(), "tsfuse expr: clamp's first argument must be a tensor");
      // An operand bound beside a literal one is a number known only at run time (RefArgs reads it
      // by value); a value of the program is a tensor, and ATen's clamp takes two of a kind.
      bool lo = ins.args[1].kind == Arg::Kind::Value, hi = ins.args[2].kind == Arg::Kind::Value;
      bool loS = ins.args[1].isLiteral(), hiS = ins.args[2].isLiteral();
      TORCH_CHECK(!((lo && hiS) || (hi && loS)),
                  "tsfuse expr: clamp bounds must be both scalars/None or both tensors/None");
      TORCH_CHECK(ins.args[1].kind != Arg::Kind::None || ins.args[2].kind != Arg::Kind::None,
                  "tsfuse expr: clamp needs at least one bound");
    }
  }
  TORCH_CHECK(maxInput < numInputs, "tsfuse expr: references $", maxInput, " but has ", numInputs, " operands");
}

std::string floatText(double v) { return formatFloat(v); }

const char* reductionName(Reduction r) { return kReductions[static_cast<size_t>(r)]; }

bool reductionFromName(const std::string& name, Reduction& out) {
  for (size_t i = 0; i < kReductions.size(); ++i) {
    if (name == kReductions[i]) {
      out = static_cast<Reduction>(i);
      return true;
    }
  }
  return false;
}

}  // namespace tsfuse
