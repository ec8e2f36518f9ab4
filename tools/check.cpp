#include "tools/check.h"

#include "tools/tool_error.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <cmath>
#include <sstream>

namespace tsfuse::tool {
namespace {

const std::vector<std::pair<std::string, c10::ScalarType>>& dtypeNames() {
  using S = c10::ScalarType;
  static const std::vector<std::pair<std::string, c10::ScalarType>> names = {{"float32", S::Float},
                                                                             {"float", S::Float},
                                                                             {"float64", S::Double},
                                                                             {"double", S::Double},
                                                                             {"float16", S::Half},
                                                                             {"half", S::Half},
                                                                             {"bfloat16", S::BFloat16},
                                                                             {"int64", S::Long},
                                                                             {"long", S::Long},
                                                                             {"int32", S::Int},
                                                                             {"int", S::Int},
                                                                             {"int16", S::Short},
                                                                             {"int8", S::Char},
                                                                             {"uint8", S::Byte},
                                                                             {"bool", S::Bool},
                                                                             {"complex64", S::ComplexFloat},
                                                                             {"complex128", S::ComplexDouble}};
  return names;
}

std::string shapeStr(at::IntArrayRef sizes) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  return os.str() + "]";
}

std::string describeTensor(const at::Tensor& t) { return dtypeName(t.scalar_type()) + shapeStr(t.sizes()); }

at::Tensor randomTensor(const InputSpec& s, at::Generator& gen) {
  auto opts = at::TensorOptions().dtype(s.dtype);
  if (s.dtype == at::kBool) return at::randint(0, 2, s.sizes, gen, opts.dtype(at::kLong)).to(at::kBool);
  if (at::isFloatingType(s.dtype) || at::isComplexType(s.dtype)) return at::randn(s.sizes, gen, opts);
  int64_t lo = s.dtype == at::kByte ? 0 : -8;
  return at::randint(lo, 16, s.sizes, gen, opts);
}

// Deep copy, so an in-place op in one module cannot change what the other one sees.
c10::IValue deepClone(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().clone();
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& e : v.toTupleRef().elements()) items.push_back(deepClone(e));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(t.clone());
    return out;
  }
  return v;
}

bool isTensorType(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  if (auto opt = t->cast<c10::OptionalType>()) return opt->getElementType()->kind() == c10::TypeKind::TensorType;
  return false;
}

struct Comparer {
  double rtol, atol;
  CheckResult& r;

  void differ(const std::string& where, const std::string& what) { r.differences.push_back({where, what}); }

  void tensors(const std::string& where, const at::Tensor& expected, const at::Tensor& actual) {
    if (expected.defined() != actual.defined())
      return differ(where, std::string("one output is an undefined tensor, the other is not"));
    if (!expected.defined()) return;
    ++r.tensorsCompared;
    if (expected.scalar_type() != actual.scalar_type() || expected.sizes() != actual.sizes())
      return differ(where, "expected " + describeTensor(expected) + ", got " + describeTensor(actual));
    if (expected.numel() == 0) return;
    at::Tensor e = expected.cpu(), a = actual.cpu();
    bool floating = at::isFloatingType(e.scalar_type()) || at::isComplexType(e.scalar_type());
    at::Tensor ok = floating ? at::isclose(a, e, rtol, atol, /*equal_nan=*/true) : at::eq(a, e);
    at::Tensor diff;
    if (e.scalar_type() != at::kBool) {
      diff = (a.to(at::kDouble) - e.to(at::kDouble)).abs();
      diff.masked_fill_(ok & diff.isnan(), 0);  // NaN == NaN counts as equal
      double m = diff.max().item<double>();
      if (std::isnan(m) || m > r.maxAbsDiff) r.maxAbsDiff = m;
    }
    int64_t bad = ok.numel() - ok.sum().item<int64_t>();
    if (bad == 0) return;
    at::Tensor first = at::logical_not(ok).nonzero()[0];
    std::vector<int64_t> idx(first.data_ptr<int64_t>(), first.data_ptr<int64_t>() + first.numel());
    std::vector<at::indexing::TensorIndex> ti(idx.begin(), idx.end());
    std::ostringstream os;
    os.precision(9);
    os << bad << " of " << e.numel() << " values of " << describeTensor(e) << " differ";
    if (diff.defined()) os << ", max abs diff " << diff.max().item<double>();
    // (a 0-dim value: no index, Tensor::index refuses an empty list)
    const at::Tensor ef = ti.empty() ? e : e.index(ti), af = ti.empty() ? a : a.index(ti);
    os << "; first at " << shapeStr(idx) << ": expected " << ef.item() << ", got " << af.item() << " (rtol " << rtol
       << ", atol " << atol << ")";
    differ(where, os.str());
  }

  void values(const std::string& where, const c10::IValue& e, const c10::IValue& a) {
    if (e.isTensor() && a.isTensor()) return tensors(where, e.toTensor(), a.toTensor());
    if (e.tagKind() != a.tagKind()) return differ(where, "expected a " + e.tagKind() + ", got a " + a.tagKind());
    if (e.isTuple() || e.isList()) {
      std::vector<c10::IValue> ev, av;
      if (e.isTuple()) {
        ev = e.toTupleRef().elements().vec();
        av = a.toTupleRef().elements().vec();
      } else {
        ev = e.toListRef().vec();
        av = a.toListRef().vec();
      }
      if (ev.size() != av.size())
        return differ(where, "expected " + std::to_string(ev.size()) + " elements, got " + std::to_string(av.size()));
      for (size_t i = 0; i < ev.size(); ++i) values(where + "[" + std::to_string(i) + "]", ev[i], av[i]);
      return;
    }
    if (e.isGenericDict()) {
      auto ed = e.toGenericDict(), ad = a.toGenericDict();
      if (ed.size() != ad.size()) return differ(where, "dicts of different sizes");
      for (const auto& kv : ed) {
        std::ostringstream key;
        key << kv.key();
        auto it = ad.find(kv.key());
        if (it == ad.end()) return differ(where, "key " + key.str() + " missing");
        values(where + "[" + key.str() + "]", kv.value(), it->value());
      }
      return;
    }
    if (e.isDouble()) {
      double x = e.toDouble(), y = a.toDouble();
      bool ok = (std::isnan(x) && std::isnan(y)) || std::abs(x - y) <= atol + rtol * std::abs(x);
      if (!ok) differ(where, "expected " + std::to_string(x) + ", got " + std::to_string(y));
      return;
    }
    if (!(e == a)) {
      std::ostringstream os;
      os << "expected " << e << ", got " << a;
      differ(where, os.str());
    }
  }
};

// forward on fresh copies of the inputs; `ms` is its wall time, the work it queued on `device` included.
c10::IValue timedForward(torch::jit::Module& m, const CheckInputs& inputs, c10::Device device, double& ms) {
  std::vector<c10::IValue> args;
  for (const auto& a : inputs.args) args.push_back(deepClone(a));
  torch::jit::Kwargs kwargs;
  for (const auto& [k, v] : inputs.kwargs) kwargs[k] = deepClone(v);
  auto t0 = std::chrono::steady_clock::now();
  c10::IValue out = m.get_method("forward")(std::move(args), kwargs);
  if (!device.is_cpu()) at::accelerator::synchronizeDevice(device.index());
  ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Steady state after the compared first call: warm-up calls, then timed calls of the two modules
// alternating, so that a slow spell of a shared machine hits both alike.
void timeSteadyState(torch::jit::Module& original, torch::jit::Module& optimized, const CheckInputs& inputs,
                     c10::Device device, CheckResult& r) {
  at::NoGradGuard noGrad;
  double ms = 0;
  for (int i = 0; i < kWarmupCalls; ++i) {
    timedForward(original, inputs, device, ms);
    timedForward(optimized, inputs, device, ms);
  }
  std::vector<double> a, b;
  double spent = 0;
  for (int n = 0; n < kMaxTimedCalls && (n < kMinTimedCalls || spent < kTimingBudgetMs); ++n) {
    timedForward(original, inputs, device, ms);
    a.push_back(ms);
    spent += ms;
    timedForward(optimized, inputs, device, ms);
    b.push_back(ms);
    spent += ms;
  }
  r.original.medianMs = median(a);
  r.optimized.medianMs = median(b);
  r.timedCalls = static_cast<int>(a.size());
}

}  // namespace

std::string dtypeName(c10::ScalarType t) {
  for (const auto& [name, type] : dtypeNames())
    if (type == t) return name;
  return c10::toString(t);
}

c10::ScalarType parseDType(const std::string& name) {
  std::string known;
  for (const auto& [n, type] : dtypeNames()) {
    if (n == name) return type;
    known += (known.empty() ? "" : ", ") + n;
  }
  throw usageError("unknown dtype '" + name + "' (one of " + known + ")");
}

std::string InputSpec::str() const { return name + ": " + dtypeName(dtype) + shapeStr(sizes); }

InputSpec parseInputSpec(const std::string& text) {
  const std::string form = " (expected NAME:D1,D2,...[@DTYPE], e.g. x:128,1000@float32)";
  auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0) throw usageError("bad --input-shape '" + text + "'" + form);
  InputSpec s;
  s.name = text.substr(0, colon);
  std::string rest = text.substr(colon + 1);
  if (auto at = rest.find('@'); at != std::string::npos) {
    s.dtype = parseDType(rest.substr(at + 1));
    rest = rest.substr(0, at);
  }
  std::stringstream dims(rest);
  std::string d;
  while (!rest.empty() && std::getline(dims, d, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(d, &used);
    } catch (const std::exception&) {}
    if (used != d.size() || v < 0) throw usageError("bad dimension '" + d + "' in --input-shape '" + text + "'" + form);
    s.sizes.push_back(v);
  }
  if (!rest.empty() && rest.back() == ',') throw usageError("bad --input-shape '" + text + "'" + form);
  return s;
}

CheckInputs makeCheckInputs(torch::jit::Module& module, const std::vector<InputSpec>& specs, uint64_t seed) {
  at::NoGradGuard noGrad;
  CheckInputs in;
  if (specs.empty()) {
    if (auto ex = module.find_method("example_inputs")) {
      in.source = "example_inputs";
      c10::IValue v;
      try {
        v = (*ex)(std::vector<c10::IValue>{});
      } catch (const std::exception& e) {
        throw ioError("the module's example_inputs() fails: " + firstLine(e.what()));
      }
      if (v.isTuple())
        in.args = v.toTupleRef().elements().vec();
      else if (v.isList())
        in.args = v.toListRef().vec();
      else
        in.args = {v};
      for (const auto& a : in.args) {
        std::ostringstream os;
        if (a.isTensor())
          os << describeTensor(a.toTensor());
        else
          os << a.tagKind();
        in.described.push_back(os.str());
      }
      return in;
    }
  }
  in.source = "--input-shape";
  const auto& schema = module.get_method("forward").function().getSchema();
  std::map<std::string, const InputSpec*> byName;
  for (const auto& s : specs) {
    if (!byName.emplace(s.name, &s).second) throw usageError("--input-shape given twice for '" + s.name + "'");
  }
  std::string names;
  for (size_t i = 1; i < schema.arguments().size(); ++i)
    names += (names.empty() ? "" : ", ") + schema.arguments()[i].name();
  for (const auto& s : specs) {
    bool known = false;
    for (size_t i = 1; i < schema.arguments().size(); ++i) known |= schema.arguments()[i].name() == s.name;
    if (!known)
      throw usageError("--input-shape '" + s.name + "': forward has no such argument (it takes: " + names + ")");
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (size_t i = 1; i < schema.arguments().size(); ++i) {  // 0 is self
    const c10::Argument& arg = schema.arguments()[i];
    auto it = byName.find(arg.name());
    if (it == byName.end()) {
      if (arg.default_value()) continue;
      if (isTensorType(arg.type()))
        throw usageError("--check needs inputs: forward's argument '" + arg.name() +
                         "' has no shape; give one with --input-shape " + arg.name() +
                         ":D1,D2,...[@DTYPE] (or export an example_inputs() method)");
      throw usageError("--check can only generate tensors, but forward's argument '" + arg.name() + "' is a " +
                       arg.type()->str() + " without a default");
    }
    if (!isTensorType(arg.type()))
      throw usageError("--input-shape '" + arg.name() + "': forward's argument is a " + arg.type()->str() +
                       ", not a Tensor");
    try {
      in.kwargs[arg.name()] = randomTensor(*it->second, gen);
    } catch (const c10::Error& e) {  // e.g. too large to allocate: the user's shape, not a bug
      throw usageError("--input-shape '" + it->second->str() +
                       "': cannot make the tensor: " + firstLine(e.what_without_backtrace()));
    }
    in.described.push_back(it->second->str());
  }
  return in;
}

CheckResult runCheck(torch::jit::Module& original, torch::jit::Module& optimized, CheckInputs inputs,
                     c10::Device device, double rtol, double atol) {
  at::NoGradGuard noGrad;
  CheckResult r;
  r.rtol = rtol;
  r.atol = atol;
  c10::IValue expected;
  try {
    expected = timedForward(original, inputs, device, r.original.firstCallMs);
  } catch (const std::exception& e) {
    std::string msg =
        "the original module's forward fails on the check inputs (" + inputs.source + "): " + firstLine(e.what());
    throw ToolError(inputs.source == "example_inputs" ? kExitIO : kExitUsage, msg);
  }
  c10::IValue actual;
  try {
    actual = timedForward(optimized, inputs, device, r.optimized.firstCallMs);
  } catch (const std::exception& e) {
    r.optimizedError = firstLine(e.what());
    r.differences.push_back({"output", "the optimized module raised: " + r.optimizedError});
  }
  if (r.optimizedError.empty()) Comparer{rtol, atol, r}.values("output", expected, actual);
  r.passed = r.differences.empty();
  r.inputs = std::move(inputs);
  return r;
}

c10::Device parseCheckDevice(const std::string& text) {
  std::optional<c10::Device> d;
  try {
    d = c10::Device(text);
  } catch (const std::exception&) {}
  if (!d || !(d->is_cpu() || d->is_cuda())) throw usageError("--device '" + text + "': expected cpu, cuda or cuda:N");
  if (d->is_cuda()) {
    if (!at::hasCUDA()) throw usageError("--device '" + text + "': CUDA is not available on this machine");
    if (d->has_index() && d->index() >= static_cast<int>(at::getNumGPUs()))
      throw usageError("--device '" + text + "': this machine has " + std::to_string(at::getNumGPUs()) + " GPU(s)");
  }
  return *d;
}

namespace {

c10::IValue mapTensors(const c10::IValue& v, const std::function<at::Tensor(const at::Tensor&)>& f) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& e : v.toTupleRef().elements()) items.push_back(mapTensors(e, f));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(f(t));
    return out;
  }
  return v;
}

CheckInputs mapInputs(const CheckInputs& in, const std::function<at::Tensor(const at::Tensor&)>& f) {
  CheckInputs out = in;
  for (auto& a : out.args) a = mapTensors(a, f);
  for (auto& [k, v] : out.kwargs) v = mapTensors(v, f);
  return out;
}

}  // namespace

CheckResult runChecks(torch::jit::Module& original, torch::jit::Module& optimized, const CheckInputs& base, int runs,
                      uint64_t seed, c10::Device device, double rtol, double atol) {
  original.to(device);
  optimized.to(device);
  auto onDevice = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  CheckResult total;
  for (int i = 0; i < runs; ++i) {
    CheckInputs in = base;
    if (i > 0) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + i);
      in = mapInputs(base, [&](const at::Tensor& t) {
        if (!t.defined()) return t;
        return randomTensor(InputSpec{"", t.sizes().vec(), t.scalar_type()}, gen);
      });
    }
    CheckInputs onDev = mapInputs(in, onDevice);
    CheckResult r = runCheck(original, optimized, onDev, device, rtol, atol);
    if (i == 0) {
      total = r;
      total.inputs = base;
      if (r.optimizedError.empty()) timeSteadyState(original, optimized, onDev, device, total);
      continue;
    }
    for (auto& d : r.differences) total.differences.push_back({"run " + std::to_string(i) + ": " + d.where, d.what});
    total.tensorsCompared += r.tensorsCompared;
    if (std::isnan(r.maxAbsDiff) || r.maxAbsDiff > total.maxAbsDiff) total.maxAbsDiff = r.maxAbsDiff;
    if (total.optimizedError.empty()) total.optimizedError = r.optimizedError;
  }
  total.passed = total.differences.empty();
  total.runs = runs;
  total.device = device.str();
  return total;
}

}  // namespace tsfuse::tool
