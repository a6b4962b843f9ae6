// Thread counts, cache eviction and the CPU and BLAS description: see blas_env.h.
#include "dapple/cpu/blas_env.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace dapple {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int SetComputeThreads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  return threads;
}

void EvictCpuCaches() {
  // Never freed: a static tensor destroyed at exit could outlive libtorch's allocator.
  static torch::Tensor* buffer = new torch::Tensor(torch::zeros({(64 << 20) / 4}, torch::kFloat32));
  buffer->add_(1);
}

std::string CpuModelName() {
  std::istringstream in(ReadFile("/proc/cpuinfo"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(' ', colon + 1);
        if (start != std::string::npos) return line.substr(start);
      }
    }
  }
  return "unknown cpu";
}

std::string BlasName() {
  const std::string config = at::show_config();
  const std::string key = "BLAS_INFO=";
  const auto at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const auto start = at + key.size();
  return config.substr(start, config.find_first_of(", \n", start) - start);
}

}  // namespace dapple
