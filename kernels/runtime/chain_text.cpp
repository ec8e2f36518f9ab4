#include "kernels/runtime/chain_text.h"

#include "kernels/runtime/reduce_spec.h"

#include <cstring>
#include <optional>

namespace tsfuse {
namespace {

// The int that starts at s[pos] (std::stoll's form), pos then just past it; nullopt where none does.
std::optional<int64_t> intAt(const std::string& s, size_t& pos) {
  size_t used = 0;
  try {
    const int64_t v = std::stoll(s.substr(pos), &used);
    pos += used;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// One stage's text: describe()'s form, "sum(dim=[2], keepdim=False[, dtype=float64])[ |> epilogue]".
class StageParser {
 public:
  StageParser(const std::string& text, size_t k) : s_(text), k_(k) {}

  ReduceSpec run() {
    const size_t open = s_.find('(');
    if (open == std::string::npos) fail("expected '<reduction>(dim=..., keepdim=...)'");
    const std::string reduction = s_.substr(0, open);
    pos_ = open + 1;
    expect("dim=");
    std::optional<std::vector<int64_t>> dims;
    if (!accept("None")) dims = intList();
    expect(", keepdim=");
    bool keepdim = false;
    if (accept("True"))
      keepdim = true;
    else if (!accept("False"))
      fail("keepdim must be True or False");
    std::optional<c10::ScalarType> dtype;
    if (accept(", dtype=")) {
      const size_t end = s_.find(')', pos_);
      c10::ScalarType t;
      if (end == std::string::npos || !dtypeFromName(s_.substr(pos_, end - pos_), t)) fail("unknown dtype");
      dtype = t;
      pos_ = end;
    }
    expect(")");
    std::optional<c10::string_view> epilogue;
    if (accept(" |> "))
      epilogue = c10::string_view(s_).substr(pos_);
    else if (pos_ != s_.size())
      fail("unexpected text after ')'");
    at::OptionalIntArrayRef d;
    if (dims) d = at::IntArrayRef(*dims);
    return makeReduceSpec(reduction, d, keepdim, dtype, epilogue);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    TORCH_CHECK(false, "tsfuse::reduce_chain: stage ", k_, " '", s_, "': ", why);
  }
  bool accept(const char* lit) {
    const size_t n = std::char_traits<char>::length(lit);
    if (s_.compare(pos_, n, lit) != 0) return false;
    pos_ += n;
    return true;
  }
  void expect(const char* lit) {
    if (!accept(lit)) fail(std::string("expected '") + lit + "' at " + std::to_string(pos_));
  }
  std::vector<int64_t> intList() {
    expect("[");
    std::vector<int64_t> out;
    while (!accept("]")) {
      if (!out.empty()) expect(", ");
      const std::optional<int64_t> v = intAt(s_, pos_);
      if (!v) fail("expected an int at " + std::to_string(pos_));
      out.push_back(*v);
    }
    return out;
  }

  const std::string& s_;
  size_t k_;
  size_t pos_ = 0;
};

constexpr const char* kSqueeze = "squeeze() |> ";
// A normalizing stage's text before its dim, by NormalizeStage::Kind.
constexpr const char* kNormalize[] = {"softmax(dim=", "log_softmax(dim=", "div_sum(dim="};
constexpr const char* kFused = "fused(";
constexpr const char* kThen = ") |> ";

// A fused stage's input, "fused(<expr>; $<i> = value[.unsqueeze(<d>)...]) |> " at the start of
// `text` (an expression's text holds no "|>"); the rest of the text, the reduction, in *rest.
std::shared_ptr<const StageInput> parseInput(const std::string& text, size_t k, std::string* rest) {
  auto fail = [&](const std::string& why) {
    TORCH_CHECK(false, "tsfuse::reduce_chain: stage ", k, " '", text, "': ", why);
  };
  const size_t end = text.find(kThen), open = std::strlen(kFused);
  if (end == std::string::npos) fail("expected 'fused(<expr>; $<i> = value) |> <reduction>'");
  const std::string inner = text.substr(open, end - open);
  const size_t bind = inner.rfind("; $");
  if (bind == std::string::npos) fail("expected '; $<i> = value' after the expression");
  auto in = std::make_shared<StageInput>();
  try {
    in->expr = cachedExpr(inner.substr(0, bind));
  } catch (const c10::Error& e) {
    fail(e.what_without_backtrace());
  }
  const std::string binding = inner.substr(bind + 3);
  size_t pos = 0;
  auto integer = [&] {
    const std::optional<int64_t> v = intAt(binding, pos);
    if (!v) fail("expected an int in '" + binding + "'");
    return v.value_or(0);
  };
  auto accept = [&](const char* lit) {
    const size_t n = std::strlen(lit);
    if (binding.compare(pos, n, lit) != 0) return false;
    pos += n;
    return true;
  };
  in->value = integer();
  if (!accept(" = value")) fail("expected '$<i> = value'");
  while (accept(".unsqueeze(")) {
    in->unsqueeze.push_back(integer());
    if (!accept(")")) fail("expected ')' after unsqueeze's dim");
  }
  if (pos != binding.size()) fail("unexpected text after the value's views: '" + binding.substr(pos) + "'");
  if (in->value < 0) fail("the value is $" + std::to_string(in->value) + ", not an operand");
  in->text = in->expr->str();
  *rest = text.substr(end + std::strlen(kThen));
  return in;
}

}  // namespace

std::string StageInput::str() const {
  std::string out = kFused + text + "; $" + std::to_string(value) + " = value";
  for (int64_t d : unsqueeze) out += ".unsqueeze(" + std::to_string(d) + ")";
  return out + ")";
}

at::Tensor StageInput::view(const at::Tensor& previous) const {
  at::Tensor v = previous;
  for (int64_t d : unsqueeze) v = v.unsqueeze(d);
  return v;
}

std::vector<at::Tensor> StageInput::operands(const at::Tensor& previous, at::TensorList inputs,
                                             at::TensorList epilogue) const {
  std::vector<at::Tensor> ops;
  const size_t n = static_cast<size_t>(expr->numInputs) + epilogue.size() + (inEpilogue() ? 1 : 0);
  ops.reserve(n);
  for (size_t i = 0, j = 0, e = 0; i < n; ++i) {
    if (static_cast<int64_t>(i) == value)
      ops.push_back(view(previous));
    else
      ops.push_back(i < static_cast<size_t>(expr->numInputs) ? inputs[j++] : epilogue[e++]);
  }
  return ops;
}

StageText parseStage(const std::string& text, size_t k) {
  StageText st;
  for (size_t kind = 0; k > 0 && kind < std::size(kNormalize); ++kind) {
    const char* head = kNormalize[kind];
    if (text.rfind(head, 0) != 0) continue;
    size_t pos = std::strlen(head);
    const std::optional<int64_t> dim = intAt(text, pos);
    TORCH_CHECK(dim && text.size() == pos + 1 && text.back() == ')', "tsfuse::reduce_chain: stage ", k, " '", text,
                "': expected '", head, "<int>)'");
    st.normalize = NormalizeStage{static_cast<NormalizeStage::Kind>(kind), *dim};
    return st;
  }
  st.squeeze = k > 0 && text.rfind(kSqueeze, 0) == 0;
  std::string rest = st.squeeze ? text.substr(std::strlen(kSqueeze)) : text;
  if (k > 0 && !st.squeeze && rest.rfind(kFused, 0) == 0) st.input = parseInput(text, k, &rest);
  st.spec = StageParser(rest, k).run();
  if (st.input && st.input->inEpilogue()) {
    const int64_t extras = st.spec.epilogue ? st.spec.epilogue->numInputs - 1 : 0;
    TORCH_CHECK(st.input->value < st.input->expr->numInputs + extras, "tsfuse::reduce_chain: stage ", k, " '", text,
                "': the value is $", st.input->value, ", not an operand of the expression or its epilogue");
  }
  return st;
}

std::string stageText(bool squeeze, const StageInput* input, const ReduceSpec& spec) {
  return (squeeze ? kSqueeze : "") + (input ? input->str() + " |> " : "") + describe(spec);
}

std::string stageText(const NormalizeStage& normalize) {
  return kNormalize[static_cast<size_t>(normalize.kind)] + std::to_string(normalize.dim) + ")";
}

}  // namespace tsfuse
