// TiedParameters: see tied_parameters.h.
#include "dapple/runtime/comm/tied_parameters.h"

#include <fmt/format.h>

#include <algorithm>

#include "dapple/common/error.h"

namespace dapple {
namespace {

int StageOfLayer(const Plan& plan, int layer) {
  for (int s = 0; s < plan.num_stages(); ++s)
    if (layer >= plan.stages[s].first_layer && layer <= plan.stages[s].last_layer) return s;
  return -1;
}

}  // namespace

TiedParameters::TiedParameters(const Model& model, const Plan& plan, const RankGrid& grid,
                               int stage, Communicator& comm)
    : comm_(comm) {
  const int first = plan.stages[stage].first_layer, last = plan.stages[stage].last_layer;
  for (size_t k = 0; k < model.shared_parameters.size(); ++k) {
    const SharedParameter& sp = model.shared_parameters[k];
    std::set<int> stages;
    for (const auto& [layer, name] : sp.uses) stages.insert(StageOfLayer(plan, layer));
    if (stages.size() < 2 || !stages.count(stage)) continue;
    std::vector<int> members;
    for (int s : stages)
      for (int r : grid.RanksOf(s)) members.push_back(r);
    std::sort(members.begin(), members.end());
    // The tensor: this stage's first use.
    torch::Tensor param;
    for (const auto& [layer, name] : sp.uses) {
      if (layer < first || layer > last) continue;
      for (const auto& p : model.layers[layer].module->named_parameters())
        if (p.key() == name) param = p.value();
      break;
    }
    DAPPLE_CHECK(param.defined(), "tied parameter not found in its layer");
    std::string group = fmt::format("tied{}", k);
    comm.CreateGroup(group, members);
    tied_.push_back({param, group});
    impls_.insert(param.unsafeGetTensorImpl());
    if (*stages.begin() != stage) later_copies_.insert(param.unsafeGetTensorImpl());
  }
}

bool TiedParameters::Contains(const torch::Tensor& p) const {
  return impls_.count(p.unsafeGetTensorImpl()) > 0;
}

bool TiedParameters::CountedOnEarlierStage(const torch::Tensor& p) const {
  return later_copies_.count(p.unsafeGetTensorImpl()) > 0;
}

void TiedParameters::AllReduceGradients(const std::string& what) {
  for (auto& t : tied_) {
    if (!t.param.grad().defined()) t.param.mutable_grad() = torch::zeros_like(t.param);
    torch::Tensor g = t.param.mutable_grad();
    comm_.AllReduceSum(g, t.group, what + " (" + t.group + ")");
  }
}

}  // namespace dapple
