// OpenBLAS kernel choice, thread counts and CPU description: see blas_env.h.
#include "dapple/cpu/blas_env.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "dapple/common/openblas_core.h"

namespace dapple {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

void EnsureOpenBlasCoreType(char** argv) {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  if (set != nullptr && *set != '\0') return;
  std::string type = OpenBlasCoreTypeForThisCpu();
  if (type.empty()) return;
  setenv("OPENBLAS_CORETYPE", type.c_str(), 1);
  std::string cmdline;
  std::vector<char*> args;
  if (argv != nullptr) {
    for (char** a = argv; *a != nullptr; ++a) args.push_back(*a);
  } else {
    cmdline = ReadFile("/proc/self/cmdline");
    for (size_t i = 0; i < cmdline.size(); i += std::strlen(&cmdline[i]) + 1)
      args.push_back(&cmdline[i]);
  }
  if (args.empty()) return;
  args.push_back(nullptr);
  std::fflush(nullptr);
  execv("/proc/self/exe", args.data());
  std::fprintf(stderr, "dapple: warning: could not re-execute with OPENBLAS_CORETYPE=%s: %s\n",
               type.c_str(), std::strerror(errno));
}

int SetComputeThreads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    fn(threads);
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

std::string OpenBlasCoreType() {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  return set != nullptr && *set != '\0' ? set : "unset";
}

std::string OpenBlasCoreName() {
  using CoreName = char* (*)();
  if (auto fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
    if (const char* name = fn()) return name;
  return "not loaded";
}

}  // namespace dapple
