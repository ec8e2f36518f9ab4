#include "kernels/backends/cpu/vml.h"

#include "kernels/reference/aten_eval.h"
#include "tsfuse/log.h"

#include <ATen/ATen.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

namespace tsfuse::cpu {
namespace {

// The mode ATen passes: VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE (mkl_vml_defines.h).
constexpr int64_t kAtenMode = 0x2 | 0x140000 | 0x100;

struct Entry {
  Op op;
  const char* name;  // MKL's function, after the VMS / VMD prefix
};
// The ops whose ATen CPU kernel is at::vml::v<op>, specialised to MKL for float and double.
constexpr Entry kRoutines[] = {{Op::Exp, "EXP_"}, {Op::Log, "LN_"},  {Op::Sqrt, "SQRT_"}, {Op::Atan, "ATAN_"},
                               {Op::Sin, "SIN_"}, {Op::Cos, "COS_"}, {Op::Tanh, "TANH_"}};

// The loaded libtorch_cpu: the library that defines ATen's own functions.
void* torchCpu() {
  static void* handle = []() -> void* {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&at::_ops::exp::call), &info) || !info.dli_fname) return nullptr;
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  return handle;
}

bool enabledByEnvironment() {
  const char* v = std::getenv("TSFUSE_CPU_VML");
  return !(v && (std::string(v) == "0" || std::string(v) == "off" || std::string(v) == "false"));
}

// Probe values: a spread of magnitudes of both signs, the edges of exp's range, subnormals,
// zeros of both signs, infinities and NaN.
at::Tensor probes(c10::ScalarType t) {
  at::Tensor spread =
      at::cat({at::linspace(-120, 120, 4801, at::kDouble), at::exp(at::linspace(-750, 710, 2921, at::kDouble)),
               -at::exp(at::linspace(-750, 710, 2921, at::kDouble))});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  at::Tensor special =
      at::tensor({0.0,     -0.0,   inf,    -inf,   nan,     1e-45, -1e-45, 1e-38, 1e-310, 88.72, 88.73,
                  -103.97, -87.34, 709.78, 709.79, -745.13, 1.0,   2.0,    42.0,  0.5,    1e30,  -1e30},
                 at::kDouble);
  return at::cat({spread, special}).to(t).contiguous();
}

// Same bits, NaNs included.
bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() &&
         std::memcmp(a.const_data_ptr(), b.const_data_ptr(), a.numel() * a.element_size()) == 0;
}

// MKL's thread-local thread count (MKL_Set_Num_Threads_Local, by value: it returns the previous
// count, 0 meaning the global one; mkl_set_num_threads_local is the Fortran form, by pointer),
// set to 1 around each call. Inside a parallel region VML would otherwise enter its own OpenMP
// region on every call (mkl_vml_serv_threader: a GOMP_parallel and its futex wake-ups per tile,
// costing more than the tile's work); the elements are independent, so the bits are the same.
using SetLocalThreads = int (*)(int);
SetLocalThreads setLocalThreads() {
  static const SetLocalThreads fn =
      torchCpu() ? reinterpret_cast<SetLocalThreads>(dlsym(torchCpu(), "MKL_Set_Num_Threads_Local")) : nullptr;
  return fn;
}

template <typename T>
void callFortran(FortranVml f, int64_t n, const void* in, void* out) {
  const auto* a = static_cast<const T*>(in);
  auto* r = static_cast<T*>(out);
  for (int64_t done = 0; done < n;) {  // ATen splits the same way beyond INT32_MAX
    const int32_t k = static_cast<int32_t>(std::min<int64_t>(n - done, std::numeric_limits<int32_t>::max()));
    f(&k, a + done, r + done, &kAtenMode);
    done += k;
  }
}

thread_local bool tlsSerial = false;  // a VmlSerialScope holds MKL's count at 1

}  // namespace

VmlSerialScope::VmlSerialScope() {
  if (tlsSerial) return;
  const SetLocalThreads setLocal = setLocalThreads();
  if (!setLocal) return;
  previous_ = setLocal(1);
  owner_ = tlsSerial = true;
}

VmlSerialScope::~VmlSerialScope() {
  if (!owner_) return;
  setLocalThreads()(previous_);
  tlsSerial = false;
}

void VmlRoutine::operator()(int64_t n, const void* in, void* out) const {
  const SetLocalThreads setLocal = tlsSerial ? nullptr : setLocalThreads();
  const int previous = setLocal ? setLocal(1) : 0;
  double_ ? callFortran<double>(fn_, n, in, out) : callFortran<float>(fn_, n, in, out);
  if (setLocal) setLocal(previous);
}

// Resolved and verified once per (routine, dtype), at first use.
VmlRoutine vmlRoutine(Op op, c10::ScalarType t) {
  if (t != c10::ScalarType::Float && t != c10::ScalarType::Double) return {};
  int index = -1;
  for (size_t i = 0; i < std::size(kRoutines); ++i)
    if (kRoutines[i].op == op) index = static_cast<int>(i);
  if (index < 0) return {};
  const bool dbl = t == c10::ScalarType::Double;
  static std::once_flag once[std::size(kRoutines)][2];
  static FortranVml fns[std::size(kRoutines)][2];
  std::call_once(once[index][dbl], [&] {
    if (!enabledByEnvironment() || !torchCpu()) return;
    const std::string name = std::string(dbl ? "VMD" : "VMS") + kRoutines[index].name;
    auto f = reinterpret_cast<FortranVml>(dlsym(torchCpu(), name.c_str()));
    if (!f) {
      TSFUSE_LOG(kernel, info, name, " not in libtorch_cpu: ", opName(op), " runs through ATen on tiles");
      return;
    }
    at::Tensor x = probes(t), got = at::empty_like(x);
    VmlRoutine(f, dbl)(x.numel(), x.const_data_ptr(), got.data_ptr());
    Expr e;
    e.instrs.push_back(Instr{op, {Arg::input(0)}});
    e.numInputs = 1;
    if (!sameBits(evalAten(e, {x}), got)) {
      TSFUSE_LOG(kernel, info, name, " differs from ATen's ", opName(op), ": ", opName(op),
                 " runs through ATen on tiles");
      return;
    }
    fns[index][dbl] = f;
  });
  return VmlRoutine(fns[index][dbl], dbl);
}

}  // namespace tsfuse::cpu
