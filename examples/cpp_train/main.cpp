// A LibTorch training app that knows nothing about tsfuse except that it links it: it loads a
// scripted loss module, reads its starting points (`x0`) and target (`target`) attributes, and takes
// SGD steps on the points through the module. The loss's kernel matrices run as fused ops with a
// fused backward (kernels/runtime/fused_grad.h). Prints one loss per step and whether the executed
// graph held tsfuse ops.
//
//   tsfuse-example-train LOSS.pt [STEPS [LR]]
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/optim/sgd.h>
#include <torch/script.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::cerr << "usage: " << argv[0] << " LOSS.pt [STEPS [LR]]\n";
    return 2;
  }
  try {
    torch::jit::Module loss = torch::jit::load(argv[1]);
    const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
    const double lr = argc > 3 ? std::atof(argv[3]) : 20.0;
    at::Tensor x = loss.attr("x0").toTensor().clone().requires_grad_(true);
    at::Tensor target = loss.attr("target").toTensor();
    torch::optim::SGD opt({x}, torch::optim::SGDOptions(lr));
    bool fused = false;
    for (int step = 0; step < steps; ++step) {
      opt.zero_grad();
      at::Tensor value = loss.forward({x, target}).toTensor();
      value.backward();
      opt.step();
      for (auto* n : torch::jit::lastExecutedOptimizedGraph()->nodes())
        fused |= n->kind().ns().toUnqualString() == std::string("tsfuse");
      std::cout << "step " << step << ": loss " << std::setprecision(9) << value.item<double>() << "\n";
    }
    std::cout << "fused with grad: " << (fused ? "yes" : "no") << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
