// StageWorker's messages: posting and waiting for receives, unpacking what arrived, sending
// activations and gradients (stage_worker.h).
//
// Note [Receive order and send lifetime]: receives block (at RA/RG) and sends never do, the
// semantics FindScheduleError validated, so a sound list cannot deadlock. The next receive
// of each kind is posted as soon as the previous one completes, so a transfer overlaps the
// compute before it; receives are still posted in schedule order. A send's buffer is kept
// until the send is known complete: SA(mb) once every RG(mb) piece arrived (a receiver
// computes that gradient only after receiving the activation), SG and everything else at
// the end of the step, when nothing this rank waits for can depend on it any more.
#include <fmt/format.h>

#include "dapple/common/clock.h"
#include "dapple/common/error.h"
#include "dapple/models/mixed_precision.h"
#include "dapple/runtime/worker/stage_worker.h"

namespace dapple {

Activations StageWorker::TakeReceived(Op op, int mb) {
  auto it = recvs_.find({op, mb});
  DAPPLE_CHECK(it != recvs_.end(), op == Op::kRecvAct ? "F before its RA" : "B before its RG");
  const bool act = op == Op::kRecvAct;
  const BoundarySpec& spec = act ? in_spec_ : out_spec_;
  const std::vector<bool>& select = act ? in_all_ : out_grad_;
  const std::vector<TransferPiece>& pieces = act ? in_pieces_ : out_pieces_;
  std::vector<Activations> parts;
  for (size_t i = 0; i < it->second.size(); ++i) {
    parts.push_back(Unpack(it->second[i].tensors().at(0), spec, select, pieces.at(i).rows.size()));
  }
  recvs_.erase(it);
  Activations joined;
  size_t k = 0;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (!select[i]) continue;
    if (parts.size() == 1 || !spec[i].batched) {
      joined.push_back(parts[0][k]);
    } else {
      std::vector<torch::Tensor> rows;
      for (const auto& p : parts) rows.push_back(p[k]);
      joined.push_back(torch::cat(rows));
    }
    ++k;
  }
  if (act) return joined;  // kept as received; RunLayers casts (Note [Mixed precision])
  return FromWire(std::move(joined), spec, select);
}

void StageWorker::SendActivation(int mb) {
  Slot& s = slots_.at(mb);
  auto& works = sends_[{Op::kSendAct, mb}];
  for (const auto& p : out_pieces_) {
    Activations piece;
    for (size_t i = 0; i < s.output.size(); ++i) {
      torch::Tensor t = s.output[i].detach();
      if (out_spec_[i].batched) t = t.narrow(0, p.rows.begin - my_rows_.begin, p.rows.size());
      piece.push_back(t.to(out_spec_[i].Wire()));
    }
    torch::Tensor t = Pack(piece);
    uint32_t tag = grid_.Tag(stage_, Direction::kForward, mb, rank_, p.receiver_rank);
    works.push_back(comm_.Send(t, p.receiver_rank, tag,
                               Where(mb, fmt::format("SA{} to rank {}", mb, p.receiver_rank))));
  }
}

void StageWorker::SendGradient(int mb) {
  auto it = slots_.find(mb);
  DAPPLE_CHECK(it != slots_.end() && !it->second.grad_in.empty(), "SG before its B");
  auto& works = sends_[{Op::kSendGrad, mb}];
  for (const auto& p : in_pieces_) {
    Activations piece;
    size_t k = 0;
    for (size_t i = 0; i < in_spec_.size(); ++i) {
      if (!in_grad_[i]) continue;
      torch::Tensor g = it->second.grad_in.at(k++);
      if (in_spec_[i].batched) g = g.narrow(0, p.rows.begin - my_rows_.begin, p.rows.size());
      piece.push_back(g.to(in_spec_[i].Wire()));
    }
    torch::Tensor t = Pack(piece);
    uint32_t tag = grid_.Tag(stage_ - 1, Direction::kBackward, mb, rank_, p.sender_rank);
    works.push_back(comm_.Send(t, p.sender_rank, tag,
                               Where(mb, fmt::format("SG{} to rank {}", mb, p.sender_rank))));
  }
  if (split_)  // W still needs the slot
    it->second.grad_in.clear();
  else
    slots_.erase(it);
}

void StageWorker::PostRecv(const Instruction& inst) {
  auto key = std::make_pair(inst.op, inst.micro_batch);
  if (recvs_.count(key)) return;
  auto& works = recvs_[key];
  const int mb = inst.micro_batch;
  if (inst.op == Op::kRecvAct) {
    for (const auto& p : in_pieces_) {
      torch::Tensor buf = MessageBuffer(in_spec_, in_all_, p.rows.size(), device_);
      uint32_t tag = grid_.Tag(stage_ - 1, Direction::kForward, mb, p.sender_rank, rank_);
      works.push_back(comm_.Recv(buf, p.sender_rank, tag,
                                 Where(mb, fmt::format("RA{} from rank {}", mb, p.sender_rank))));
    }
  } else {
    DAPPLE_CHECK(inst.op == Op::kRecvGrad);
    for (const auto& p : out_pieces_) {
      torch::Tensor buf = MessageBuffer(out_spec_, out_grad_, p.rows.size(), device_);
      uint32_t tag = grid_.Tag(stage_, Direction::kBackward, mb, p.receiver_rank, rank_);
      works.push_back(comm_.Recv(buf, p.receiver_rank, tag,
                                 Where(mb, fmt::format("RG{} from rank {}", mb, p.receiver_rank))));
    }
  }
}

void StageWorker::WaitRecv(const Instruction& inst) {
  PostRecv(inst);
  const Deadline deadline(opt_.timeout);  // all pieces together: one timeout
  for (auto& w : recvs_.at({inst.op, inst.micro_batch})) w.Wait(deadline);
}

void StageWorker::PostNextRecv(int pc, Op op) {
  for (int i = pc + 1; i < static_cast<int>(program_.size()); ++i) {
    if (program_[i].op == op) {
      PostRecv(program_[i]);
      return;
    }
  }
}

}  // namespace dapple
