// The compute kernel that calibrate's compute measurements time (calibration_steps.cc,
// calibration_loads.cc). Internal to the calibrate layer; includes libtorch.
#pragma once

#include <torch/torch.h>

#include "dapple/calibrate/calibration_steps.h"

namespace dapple::internal {

// The kernel every compute measurement times: one 64x1024 @ 1024x1024 float32 matmul (a 4 MiB
// weight, a pipeline op's size here), on this rank's own tensors.
class MatmulLoop {
 public:
  static constexpr const char* kName = "64x1024 @ 1024x1024 float32 matmul";
  MatmulLoop()
      : x_(torch::randn({64, 1024})),
        w_(torch::randn({1024, 1024})),
        y_(torch::empty({64, 1024})) {}
  // Seconds for `iterations` matmuls.
  double operator()(int iterations) {
    torch::NoGradGuard no_grad;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) torch::mm_out(y_, x_, w_);
    return SecondsSince(start);
  }

 private:
  torch::Tensor x_, w_, y_;
};

}  // namespace dapple::internal
