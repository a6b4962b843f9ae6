# Note [libtorch from the wheel] (CMakeLists.txt): finds the libtorch of DAPPLE_PYTHON's torch
# and sets Torch_FOUND, TORCH_LIBRARIES and the imported targets as find_package(Torch) does.
if(EXISTS "${DAPPLE_PYTHON}")
  execute_process(
    COMMAND "${DAPPLE_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE torch_prefix_rc ERROR_QUIET)
  if(torch_prefix_rc EQUAL 0)
    list(APPEND CMAKE_PREFIX_PATH "${torch_prefix}")
  endif()
  set(Python_EXECUTABLE "${DAPPLE_PYTHON}")  # TorchConfig looks for a Python of its own
endif()

# The wheel is PyTorch's CUDA build, so TorchConfig enables CUDA and needs the toolkit. dapple
# compiles no CUDA code, so the GPU architectures it would compile for only matter to
# TorchConfig: a fixed list keeps it from compiling and running a program that probes the GPUs
# here (there are none, and CMake 3.25 cannot build that probe with nvcc 13). 9.0 is the H100
# and H200 of the GPU machines. PyTorch reads TORCH_CUDA_ARCH_LIST and rejects CMake's own
# CMAKE_CUDA_ARCHITECTURES, which enabling CUDA defines: CUDA is enabled here first and that
# variable dropped, so that TorchConfig's own enable_language(CUDA) finds it enabled.
set(TORCH_CUDA_ARCH_LIST "9.0" CACHE STRING "GPU architectures for TorchConfig (dapple compiles no CUDA)")
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
  unset(CMAKE_CUDA_ARCHITECTURES)
  unset(CMAKE_CUDA_ARCHITECTURES CACHE)
endif()

# The wheel links Kineto, the profiler library, into libtorch_cpu and ships no libkineto of
# its own, which TorchConfig looks for: it is found where it is.
find_library(kineto_LIBRARY torch_cpu PATHS "${torch_prefix}/../../lib" NO_DEFAULT_PATH)

find_package(Torch QUIET)

# NCCL's headers for c10d's ProcessGroupNCCL.hpp: those of the nvidia-nccl wheel that torch
# requires and loads at run time, before the toolkit's (runtime/comm/nccl_backend.cc).
find_path(DAPPLE_NCCL_INCLUDE_DIR nccl.h PATHS "${torch_prefix}/../../../nvidia/nccl/include"
          NO_DEFAULT_PATH)

# Note [The C++ library first]: the wheel is built on an older system (manylinux_2_28) with a
# newer compiler, whose C++ library parts that the old system lacks (std::filesystem,
# std::chrono's time zones) are linked into libtorch.so, and exported. A program that names
# libtorch before libstdc++ (the compiler adds -lstdc++ last) would take those copies: dapple's
# tests crashed in std::filesystem::remove_all through libtorch.so's. Naming libstdc++ before
# everything else makes the system's C++ library the one each such symbol binds to.
if(Torch_FOUND)
  add_link_options("LINKER:--push-state,--no-as-needed" -lstdc++ "LINKER:--pop-state")
endif()
