// LoadCudaModule: see cuda_module.h (Note [CUDA on demand]).
#include "dapple/runtime/comm/cuda_module.h"

#include <dlfcn.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace dapple {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> ModuleCandidates() {
  std::vector<fs::path> paths;
  if (const char* env = std::getenv("DAPPLE_CUDA_MODULE"); env && *env) paths.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    paths.push_back(exe.parent_path() / "libdapple_cuda.so");
  }
#ifdef DAPPLE_CUDA_MODULE_PATH
  paths.emplace_back(DAPPLE_CUDA_MODULE_PATH);
#endif
  return paths;
}

}  // namespace

void* LoadCudaModule(std::string* why) {
  static std::mutex mu;
  static void* handle = nullptr;
  static std::string error;
  std::lock_guard<std::mutex> lock(mu);
  if (handle) return handle;
  error.clear();
  for (const fs::path& p : ModuleCandidates()) {
    if (!fs::exists(p)) continue;
    handle = ::dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle) return handle;
    const char* e = ::dlerror();
    error = p.string() + ": " + (e ? e : "dlopen failed");
  }
  if (error.empty()) error = "libdapple_cuda.so not found beside the executable or the build";
  if (why) *why = error;
  return nullptr;
}

bool NvidiaDriverPresent() {
  std::error_code ec;
  return fs::exists("/dev/nvidiactl", ec) || fs::exists("/proc/driver/nvidia/gpus", ec);
}

int CudaDeviceCount() {
  if (!NvidiaDriverPresent() || !LoadCudaModule(nullptr)) return 0;
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

}  // namespace dapple
