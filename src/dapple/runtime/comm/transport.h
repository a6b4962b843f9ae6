// Note [Transport by device]
// The communicator carries every tensor on the transport its device allows:
//   - CPU tensors: Gloo, as always (the only transport of a CPU run).
//   - CUDA tensors, when every rank of the job has a CUDA device of its own (no two ranks on
//     one GPU of one host): NCCL (ProcessGroupNCCL). Collectives of a group go through one
//     NCCL group; point-to-point through two more, one per direction (from the lower member
//     to the higher, and back), so that a send each way between two ranks never queues
//     behind the other on one NCCL stream (NCCL's sends block until matched, and PyTorch
//     batches them for the same reason). NCCL matches a pair's messages in the order they
//     were posted, not by tag: both sides post them in the schedule's order. c10d runs NCCL
//     on its own CUDA stream, which waits for the compute stream's event before each
//     operation, so a bucket's allreduce, started from the backward's hook, runs beside the
//     rest of the backward; CommWork::Wait makes the compute stream wait for the operation's
//     event (with a timeout c10d may also hold the host until the operation completed).
//   - CUDA tensors otherwise (two ranks share a GPU, which NCCL refuses, or some rank is on
//     the CPU): Gloo with staging through CPU copies. The send or collective copies the
//     tensor to the host (blocking the host until the compute stream got there); a receive or
//     collective lands in a host buffer and is copied back into the CUDA tensor when waited
//     for (queued on the compute stream).
// The choice is made once, when the communicator is built, from every rank's place (host and
// device) gathered through the rendezvous store; DAPPLE_CUDA_TRANSPORT=staged forces staging
// (a check of the fallback on a machine with several GPUs). The NCCL and staged paths have not
// run on a GPU yet (docs/gpu.md); the staged path's copies run on the CPU in the tests
// (DAPPLE_TEST_STAGE_THROUGH_HOST=1 stages CPU tensors too, through host clones).
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

namespace dapple {

enum class Transport { kGloo, kStaged, kNccl };

const char* TransportName(Transport t);

// This process's place: "HOST/cpu" or "HOST/cuda:I".
std::string PlaceOf(const torch::Device& device);

// The transport of this rank's tensors on `mine` given every rank's place (PlaceOf).
// DAPPLE_CUDA_TRANSPORT=staged|nccl overrides the choice for CUDA devices (nccl only where
// it is possible); DAPPLE_TEST_STAGE_THROUGH_HOST=1 makes a CPU rank stage (a test hook).
Transport ChooseTransport(const torch::Device& mine, const std::vector<std::string>& places);

// The host copy that a staged send or collective hands to Gloo: a CPU copy of `t` (a clone
// for a CPU tensor, so that the test hook exercises the copy back). REQUIRES: contiguous.
torch::Tensor HostCopy(const torch::Tensor& t);

}  // namespace dapple
