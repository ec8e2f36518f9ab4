// Loads a TorchScript model with plain torch::jit::load and runs it. Linking libtsfuse is the
// only change an app needs: its first call is already fused (see docs/registration.md).
//
//   tsfuse-example-app MODEL.pt [N M]
//
// Inputs come from the model's exported example_inputs(); N M scale the two box sets of the
// seed Intersection model instead. Prints whether the executed graph used tsfuse ops.
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::cerr << "usage: " << argv[0] << " MODEL.pt [N M]\n";
    return 2;
  }
  try {
    torch::jit::Module model = torch::jit::load(argv[1]);
    std::vector<torch::jit::IValue> inputs;
    if (argc == 4) {
      auto boxes = [](int64_t n) {
        auto xy = torch::rand({n, 2}) * 100, wh = torch::rand({n, 2}) * 20;
        return torch::cat({xy, xy + wh}, 1);
      };
      inputs = {boxes(std::atoll(argv[2])), boxes(std::atoll(argv[3]))};
    } else {
      for (const auto& v : model.get_method("example_inputs")({}).toTupleRef().elements()) inputs.push_back(v);
    }
    torch::NoGradGuard noGrad;
    at::Tensor out = model.forward(inputs).toTensor();
    auto graph = torch::jit::lastExecutedOptimizedGraph();
    bool fused = false;
    for (auto* n : graph->nodes()) fused |= n->kind().ns().toUnqualString() == std::string("tsfuse");
    std::cout << "output " << out.sizes() << " " << out.scalar_type() << " sum=" << out.sum().item<double>()
              << "\nfirst call fused: " << (fused ? "yes" : "no") << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
