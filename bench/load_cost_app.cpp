// One cell of bench/load_cost.py as a LibTorch app sees it: the model is called through
// torch::jit::Module::forward (torch::jit::Method), as an app linking libtsfuse calls it.
//
//   tsfuse_load_cost_app MODEL.pt INPUT.pt THREADS CALLS [--grad] [--lib SO]...
//
// --lib dlopens a library before the model loads (torchvision's ops; libtsfuse.so for the "on"
// cells: loading it runs the same static registration as linking it). This binary does not link
// libtsfuse. Prints one line "RESULT {json}" with the same fields as load_cost.py's Python cell.
#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/serialize.h>

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

namespace {

double cpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: " << argv[0] << " MODEL.pt INPUT.pt THREADS CALLS [--grad] [--lib SO]...\n";
    return 2;
  }
  bool grad = false;
  double loadMs = -1;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--grad") {
      grad = true;
    } else if (a == "--lib" && i + 1 < argc) {
      const auto t0 = std::chrono::steady_clock::now();
      if (!dlopen(argv[++i], RTLD_NOW | RTLD_GLOBAL)) {
        std::cerr << "dlopen " << argv[i] << ": " << dlerror() << "\n";
        return 1;
      }
      if (std::string(argv[i]).find("libtsfuse") != std::string::npos)
        loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    } else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  at::set_num_threads(std::atoi(argv[3]));
  const int calls = std::atoi(argv[4]);

  torch::jit::Module model = torch::jit::load(argv[1]);
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue input = torch::pickle_load(bytes);
  if (input.isList()) {  // a detector's images: pickled as List[Any], the schema wants List[Tensor]
    c10::List<at::Tensor> images;
    for (const c10::IValue& v : input.toListRef()) images.push_back(v.toTensor());
    input = images;
  }

  c10::AutoGradMode gradMode(grad);
  auto call = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpuMs();
    model.forward({input});
    return std::make_pair(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                          cpuMs() - c0);
  };
  const auto first = call(), second = call();
  std::vector<double> wall, cpu;
  for (int k = 0; k < calls; ++k) {
    const auto r = call();
    wall.push_back(r.first);
    cpu.push_back(r.second);
  }
  const std::string graph = torch::jit::lastExecutedOptimizedGraph()->toString();
  const std::regex fused("tsfuse::(pairwise|reduce|reduce_with_indices|softmax)\\(");
  const auto ops = std::distance(std::sregex_iterator(graph.begin(), graph.end(), fused), std::sregex_iterator());

  std::printf(
      "RESULT {\"threads\": %d, \"first\": [%.3f, %.3f], \"second\": [%.3f, %.3f], "
      "\"steady\": [%.3f, %.3f], \"tsfuse_ops\": %ld, \"graph_nodes\": %ld%s}\n",
      at::get_num_threads(), first.first, first.second, second.first, second.second, median(wall), median(cpu),
      static_cast<long>(ops), static_cast<long>(std::count(graph.begin(), graph.end(), '\n')),
      loadMs >= 0 ? (", \"load_ms\": " + std::to_string(loadMs)).c_str() : "");
  return 0;
}
