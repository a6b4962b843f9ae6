// RunTraining and the checks of a plan against the model it trains (train_options.h).
#include "dapple/runtime/train/train_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dapple/common/error.h"
#include "dapple/format/cluster.h"
#include "dapple/format/message_tags.h"
#include "dapple/runtime/train/training_run.h"
#include "dapple/runtime/worker/chunk_set.h"

namespace dapple {

std::vector<std::string> LayerNames(const Model& m) {
  std::vector<std::string> names;
  for (const auto& l : m.layers) names.push_back(l.name);
  return names;
}

std::string FewNames(const std::vector<std::string>& names) {
  if (names.size() <= 6) return fmt::format("{}", fmt::join(names, ", "));
  return fmt::format("{}, {}, {}, ..., {}", names[0], names[1], names[2], names.back());
}

ModelSource SourceOf(const TrainOptions& o) { return {o.model, o.model_options, o.script}; }

CheckedPlan LoadAndCheckPlan(const TrainOptions& o, int world_size,
                             std::optional<Model> names_only) {
  const std::string source = o.plan_path.string();
  CheckedPlan c{
      o.plan ? *o.plan : ReadPlanJson(o.plan_path),
      names_only ? std::move(*names_only) : LoadModel(SourceOf(o), o.seed, o.dtype, kNoLayers)};
  for (const auto& l : c.model.layers)
    DAPPLE_CHECK(!l.held(), "the model of a plan check holds layer " + l.name);
  Plan& plan = c.plan;
  if (o.shard_optimizer) {  // --shard-optimizer
    if (plan.virtual_stages > 1)
      ThrowInput("--shard-optimizer: not supported with a plan of chunks ({}: virtual_stages {})",
                 source, plan.virtual_stages);
    for (StagePlan& st : plan.stages) st.shard_optimizer = st.shard_optimizer || st.replicas() > 1;
  }
  if (plan.num_devices() > world_size) {
    ThrowInput("{}: the plan uses {} devices but the job has {} processes (--nproc or WORLD_SIZE)",
               source, plan.num_devices(), world_size);
  }
  // The model's layer names are the layer ids of its profile (`dapple profile`).
  Profile names;
  names.model = o.model;
  names.batch_size = 1;
  for (const auto& l : c.model.layers) {
    LayerProfile named;
    named.id = named.name = l.name;
    names.layers.push_back(std::move(named));
  }
  const int n = names.num_layers();
  for (int s = 0; s < plan.num_stages(); ++s) {
    const StagePlan& st = plan.stages[s];
    for (const std::string* id : {&st.first_layer_id, &st.last_layer_id}) {
      if (!id->empty() && names.IndexOf(*id) < 0) {
        ThrowInput("{}: stages[{}]: layer id '{}' is not a layer of model {} ({} layers: {})",
                   source, s, *id, o.model, n, FewNames(LayerNames(c.model)));
      }
    }
    for (auto [id, index] : {std::pair{&st.first_layer_id, st.first_layer},
                             std::pair{&st.last_layer_id, st.last_layer}}) {
      if (id->empty() && (index < 0 || index >= n)) {
        ThrowInput(
            "{}: stages[{}]: layer {} is not a layer of model {}, which has {} layers; was "
            "the plan made for another model or model options?",
            source, s, index, o.model, n);
      }
    }
  }
  ResolvePlanLayers(plan, names, source);
  // After the layer ids are resolved: the check reads the chunks' layer ranges.
  if (auto why = ChunkedPlanError(plan, c.model)) ThrowInput("{}: {}", source, *why);
  if (plan.stages.back().last_layer != n - 1) {
    ThrowInput(
        "{}: the plan's stages end at layer {} ('{}') but model {} has {} layers (last: "
        "'{}'); was the plan made for another model or model options?",
        source, plan.stages.back().last_layer, plan.stages.back().last_layer_id, o.model, n,
        names.layers.back().id);
  }
  Cluster job;
  job.name = "job";
  job.servers = {ServerSpec{world_size, std::nullopt}};
  ValidatePlan(plan, names, job, source);
  if (auto why = MessageTagError(plan, world_size)) ThrowInput("{}: {}", source, *why);
  return c;
}

void RunTraining(const TrainOptions& options, const DistEnv& env, std::optional<Model> names_only) {
  TrainingRun run(options, env, std::move(names_only));
  for (int64_t step = run.first_step(); step < options.steps; ++step) run.Step(step);
  run.Finish();
}

}  // namespace dapple
