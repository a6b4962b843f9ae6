// The pipelined held-out evaluation (evaluation.h).
//
// Note [Evaluation protocol]: between the evaluating ranks of stages s and s+1, every chunk k
// of rows is a header of two int64 [rows, bytes] with tag kTagBase + 2(kS + s), then the
// chunk's outputs packed into one message as training packs them (boundary.h: Pack) with
// tag kTagBase + 2(kS + s) + 1 (S: the stages); a header with rows = 0 ends the stream. The
// receiver knows what its stage receives (the boundary spec training used), so the header's
// byte count is a check. Sends stay alive until two chunks later (bounded memory); the next
// stage computes chunk k while this one computes chunk k + 1. A rank that holds several
// stages (the chunks of an interleaved plan) runs, for each chunk of rows, its stages in
// stage order: every receive of (k, s) waits for a send of (k, s - 1), which comes earlier
// in that order on every rank, so the ranks never wait for each other in a cycle; the
// boundary in the tag keeps two boundaries between the same ranks apart. Evaluation starts
// after every training transfer has completed, so its tags cannot meet training's.
#include "dapple/runtime/train/evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"

namespace dapple {
namespace {

constexpr int kHeaderLen = 2;
constexpr uint32_t kTagBase = 1u << 30;
constexpr int64_t kEvalChunkRows = 256;

// The tag of part `part` of rows chunk `chunk` across boundary `boundary` (from stage
// `boundary` to the next) of `stages`.
uint32_t Tag(int64_t chunk, int boundary, int stages, int part) {
  return kTagBase + static_cast<uint32_t>((2 * (chunk * stages + boundary) + part) % (1 << 29));
}

// Running sums of the last stage.
struct Sums {
  int64_t samples = 0;
  double loss_sum = 0;
  int64_t correct = 0, predicted = 0;  // predicted: targets compared (samples or tokens)
  bool has_accuracy = true;

  void Add(const torch::Tensor& out, const torch::Tensor& target,
           const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& loss) {
    const int64_t rows = out.size(0);
    loss_sum += loss(out, target).item<double>() * static_cast<double>(rows);
    samples += rows;
    // Classes: an integer target per sample (or token) and a class dimension last.
    bool classes = target.scalar_type() == torch::kInt64 && out.dim() == target.dim() + 1 &&
                   out.sizes().slice(0, target.dim()) == target.sizes();
    if (!classes) {
      has_accuracy = false;
      return;
    }
    correct += out.argmax(-1).eq(target).sum().item<int64_t>();
    predicted += target.numel();
  }
};

class Pipe {
 public:
  Pipe(Communicator& comm, const std::string& who) : comm_(comm), who_(who) {}

  // Sends chunk `k` of `rows` samples (rows = 0 and no tensors: the end) to `peer`, the
  // evaluating rank of the stage after `boundary` of `stages`. `out` in its wire dtypes.
  void Send(int peer, int64_t k, int boundary, int stages, int64_t rows, const Activations& out) {
    torch::Tensor header = torch::zeros({kHeaderLen}, torch::kInt64);
    torch::Tensor message = rows > 0 ? Pack(out).cpu().contiguous() : torch::Tensor();
    header.data_ptr<int64_t>()[0] = rows;
    header.data_ptr<int64_t>()[1] = Bytes(message);
    std::string what = fmt::format("{}: evaluation chunk {} to rank {}", who_, k, peer);
    pending_.push_back(comm_.Send(header, peer, Tag(k, boundary, stages, 0), what));
    if (rows > 0) pending_.push_back(comm_.Send(message, peer, Tag(k, boundary, stages, 1), what));
    while (pending_.size() > 4) {
      pending_.front().Wait(comm_.timeout());
      pending_.pop_front();
    }
  }

  // Receives chunk `k` across `boundary` from `peer` as `spec` describes it; nullopt at the
  // end of the stream.
  std::optional<Activations> Recv(int peer, int64_t k, int boundary, int stages,
                                  const BoundarySpec& spec, int64_t* rows) {
    std::string what = fmt::format("{}: evaluation chunk {} from rank {}", who_, k, peer);
    torch::Tensor header = torch::zeros({kHeaderLen}, torch::kInt64);
    comm_.Recv(header, peer, Tag(k, boundary, stages, 0), what).Wait(comm_.timeout());
    const auto* h = header.data_ptr<int64_t>();
    *rows = h[0];
    if (*rows == 0) return std::nullopt;
    const std::vector<bool> all(spec.size(), true);
    torch::Tensor message = MessageBuffer(spec, all, *rows, torch::kCPU);
    if (Bytes(message) != h[1])
      throw Error(fmt::format("{}: {} bytes announced for {} rows, {} expected", what, h[1], *rows,
                              Bytes(message)));
    comm_.Recv(message, peer, Tag(k, boundary, stages, 1), what).Wait(comm_.timeout());
    return FromWire(Unpack(message, spec, all, *rows), spec, all);
  }

  void Flush() {
    for (CommWork& w : pending_) w.Wait(comm_.timeout());
    pending_.clear();
  }

 private:
  Communicator& comm_;
  std::string who_;
  std::deque<CommWork> pending_;
};

// Runs this rank's stages over the stream (Note [Evaluation protocol]); the last stage's sums.
Sums RunStages(Communicator& comm, const std::vector<int>& stage_ranks,
               const std::vector<EvalStage>& mine, int64_t chunk_rows) {
  const int S = static_cast<int>(stage_ranks.size());
  std::string stages;
  for (const EvalStage& me : mine)
    stages += (stages.empty() ? "" : ", ") + std::to_string(me.stage);
  Pipe pipe(comm, fmt::format("rank {} (stage {})", comm.rank(), stages));
  Sums sums;
  torch::NoGradGuard no_grad;
  std::vector<int64_t> offset(mine.size(), 0);  // rows seen so far by each stage
  for (int64_t k = 0;; ++k) {
    bool ended = false;
    for (size_t i = 0; i < mine.size(); ++i) {
      const EvalStage& me = mine[i];
      const bool first = me.stage == 0, last = me.stage == S - 1;
      Activations x;
      int64_t rows = 0;
      if (first) {
        const int64_t n = me.held_out.inputs.defined() ? me.held_out.inputs.size(0) : 0;
        rows = std::min(chunk_rows, n - offset[i]);
        if (rows > 0) x = {me.held_out.inputs.narrow(0, offset[i], rows)};
      } else if (auto got =
                     pipe.Recv(stage_ranks[me.stage - 1], k, me.stage - 1, S, me.input, &rows)) {
        x = std::move(*got);
      }
      if (rows <= 0) {  // the end: pass it on (every stage ends at the same k)
        if (!last) pipe.Send(stage_ranks[me.stage + 1], k, me.stage, S, 0, {});
        ended = true;
        continue;
      }
      for (auto& t : x) t = t.to(me.device);
      Activations y = me.forward(x);
      if (last) {
        if (offset[i] + rows > me.held_out.targets.size(0))
          throw Error(fmt::format("evaluation: more rows than the {} targets",
                                  me.held_out.targets.size(0)));
        torch::Tensor target = me.held_out.targets.narrow(0, offset[i], rows).to(me.device);
        sums.Add(y.at(0), target, me.loss);
      } else {
        pipe.Send(stage_ranks[me.stage + 1], k, me.stage, S, rows, ToWire(y, me.precision));
      }
      offset[i] += rows;
    }
    if (ended || mine.empty()) break;
  }
  pipe.Flush();
  return sums;
}

}  // namespace

EvalStage ModelEvalStage(Model& model, int stage, int first, int last, BoundarySpec input,
                         torch::Device device) {
  EvalStage s;
  s.stage = stage;
  s.device = device;
  s.input = std::move(input);
  s.precision = model.precision;
  s.forward = [&model, first, last](const Activations& x) {
    return model.ForwardActivations(x, first, last);
  };
  return s;
}

std::optional<EvalResult> EvaluatePipelined(Communicator& comm, const std::vector<int>& stage_ranks,
                                            const std::vector<EvalStage>& mine, int64_t chunk_rows,
                                            bool language_model) {
  DAPPLE_CHECK(chunk_rows > 0 && !stage_ranks.empty());
  Json part = nullptr;
  if (!mine.empty()) {
    Sums s = RunStages(comm, stage_ranks, mine, chunk_rows);
    if (mine.back().stage + 1 == static_cast<int>(stage_ranks.size())) {
      part = {{"samples", s.samples}, {"loss_sum", s.loss_sum}};
      if (s.has_accuracy && s.predicted > 0) {
        part["correct"] = s.correct;
        part["predicted"] = s.predicted;
      }
    }
  }
  auto all = comm.GatherStrings("evaluation", part.dump(), 0);
  if (comm.rank() != 0) return std::nullopt;
  Json j = Json::parse(all.at(stage_ranks.back()));
  EvalResult r;
  r.samples = j["samples"].get<int64_t>();
  r.loss = r.samples > 0 ? j["loss_sum"].get<double>() / static_cast<double>(r.samples) : 0;
  if (j.contains("correct"))
    r.accuracy = static_cast<double>(j["correct"].get<int64_t>()) /
                 static_cast<double>(j["predicted"].get<int64_t>());
  if (language_model) r.perplexity = std::exp(r.loss);
  return r;
}

void EvaluateTrainedStages(const TrainOptions& o, Model& model, const RankGrid& grid, int rank,
                           const std::vector<HeldStage>& held, Dataset* data, torch::Device device,
                           Communicator& comm) {
  const int V = grid.num_virtual_stages();
  std::vector<int> stage_ranks;  // virtual stage vs runs on its device group's replica 0
  for (int vs = 0; vs < V; ++vs) stage_ranks.push_back(grid.RanksOf(grid.GroupOf(vs)).front());
  std::vector<EvalStage> mine;
  if (!grid.Idle(rank) && grid.Of(rank).replica == 0) {
    model.SetTraining(false);
    for (const HeldStage& h : held) {
      EvalStage& e = mine.emplace_back(
          ModelEvalStage(model, h.stage, h.first_layer, h.last_layer, h.input, device));
      if (h.stage != 0 && h.stage != V - 1) continue;
      DAPPLE_CHECK(data != nullptr, "EvaluateTrainedStages: no data on the first or last stage");
      Batch test = data->TestSet();
      int64_t n = test.rows();
      if (o.eval_samples > 0) n = std::min(n, o.eval_samples);
      if (n > 0) e.held_out = SliceBatch(test, 0, n);
      e.loss = model.loss;
    }
  }
  const bool language_model =
      model.input_dtype == torch::kInt64 && model.target_shape == model.input_shape;
  auto r = EvaluatePipelined(comm, stage_ranks, mine, kEvalChunkRows, language_model);
  if (!mine.empty()) model.SetTraining(true);
  // The file evaluated: --eval-data, or the held-out split of --data.
  const std::string evaluated =
      o.data_files.eval_path.empty() ? o.data : o.data_files.eval_path.string();
  if (r) PrintEvaluation(*r, evaluated, o.log_json);
}

void PrintEvaluation(const EvalResult& r, const std::string& data, bool json) {
  if (json) {
    Json e = {{"data", data}, {"test_samples", r.samples}, {"loss", r.loss}};
    if (r.accuracy) e["accuracy"] = *r.accuracy;
    if (r.perplexity) e["perplexity"] = *r.perplexity;
    std::printf("%s\n", Json{{"eval", e}}.dump().c_str());
  } else {
    if (r.samples == 0) {
      std::printf("held-out %s: the data set has no held-out samples\n", data.c_str());
      std::fflush(stdout);
      return;
    }
    std::string line = fmt::format("held-out {}: {} samples, loss {:.4f}", data, r.samples, r.loss);
    if (r.perplexity) line += fmt::format(", perplexity {:.2f}", *r.perplexity);
    if (r.accuracy) line += fmt::format(", accuracy {:.4f}", *r.accuracy);
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

}  // namespace dapple
