// Reader and writer of plan JSON (`dapple-plan/1`, docs/design.md section 8). The reader checks
// the shape only; ResolvePlanLayers and ValidatePlan check it against a profile and cluster.
#include "dapple/common/error.h"
#include "dapple/format/json_text.h"
#include "dapple/format/plan.h"

namespace dapple {
namespace {

constexpr const char* kPlanFormat = "dapple-plan/1";

// `recompute_layers`: layer ids or indices, each as the stage's first_layer(_id) names one.
void ReadRecomputeLayers(const JsonField& f, StagePlan& st) {
  f.ExpectArray();
  for (size_t i = 0; i < f.size(); ++i) {
    JsonField layer = f[i];
    if (layer.json().is_string())
      st.recompute_layer_ids.push_back(layer.String());
    else
      st.recompute_layers.push_back(layer.NonNegativeInt());
  }
}

StagePlan ReadStage(const JsonField& f) {
  f.ExpectObject();
  StagePlan st;
  st.first_layer = f.Has("first_layer") ? f["first_layer"].NonNegativeInt() : -1;
  st.last_layer = f.Has("last_layer") ? f["last_layer"].NonNegativeInt() : -1;
  if (f.Has("first_layer_id")) st.first_layer_id = f["first_layer_id"].String();
  if (f.Has("last_layer_id")) st.last_layer_id = f["last_layer_id"].String();
  if (st.first_layer < 0 && st.first_layer_id.empty())
    f.Fail("needs first_layer or first_layer_id");
  if (st.last_layer < 0 && st.last_layer_id.empty()) f.Fail("needs last_layer or last_layer_id");
  JsonField devices = f["devices"];
  for (size_t r = 0; r < devices.size(); ++r) st.devices.push_back(devices[r].NonNegativeInt());
  if (st.devices.empty()) devices.Fail("must not be empty");
  if (f.Has("recompute")) st.recompute = f["recompute"].Bool();
  if (f.Has("shard_optimizer")) st.shard_optimizer = f["shard_optimizer"].Bool();
  if (f.Has("recompute_layers")) ReadRecomputeLayers(f["recompute_layers"], st);
  return st;
}

PlanEstimate ReadEstimate(const JsonField& f) {
  f.ExpectObject();
  PlanEstimate e;
  if (f.Has("iteration_ms")) e.iteration_ms = f["iteration_ms"].NonNegative();
  if (f.Has("speedup")) e.speedup = f["speedup"].NonNegative();
  if (f.Has("latency_ms")) e.latency_ms = f["latency_ms"].NonNegative();
  if (f.Has("pivot_stage")) e.pivot_stage = f["pivot_stage"].NonNegativeInt();
  if (f.Has("bubble_fraction")) e.bubble_fraction = f["bubble_fraction"].NonNegative();
  if (f.Has("process_memory_bytes"))
    e.process_memory_bytes = f["process_memory_bytes"].NonNegative();
  if (f.Has("stage_peak_memory_bytes")) {
    JsonField m = f["stage_peak_memory_bytes"];
    for (size_t s = 0; s < m.size(); ++s) e.stage_peak_memory_bytes.push_back(m[s].NonNegative());
  }
  return e;
}

}  // namespace

Plan ParsePlanJson(const std::string& text, const std::string& source) {
  Json j = format_internal::ParseJsonText(text, source);
  JsonField root(j, source);
  format_internal::ExpectFormat(root, kPlanFormat);
  Plan plan;
  plan.planner = root.Has("planner") ? root["planner"].String() : "hand";
  // Any two of GBS, m and M give the third; all three must agree (checked by ValidatePlan).
  bool has_gbs = root.Has("global_batch_size"), has_m = root.Has("micro_batch_size"),
       has_mm = root.Has("num_micro_batches");
  if (has_gbs) plan.global_batch_size = root["global_batch_size"].PositiveInt();
  if (has_m) plan.micro_batch_size = root["micro_batch_size"].PositiveInt();
  if (has_mm) plan.num_micro_batches = root["num_micro_batches"].PositiveInt();
  if (!has_gbs && has_m && has_mm) {
    long long gbs = static_cast<long long>(plan.micro_batch_size) * plan.num_micro_batches;
    if (gbs > 2000000000) root.Fail("num_micro_batches x micro_batch_size is too large");
    plan.global_batch_size = static_cast<int>(gbs);
  } else if (has_gbs && has_m != has_mm) {
    JsonField given = root[has_m ? "micro_batch_size" : "num_micro_batches"];
    int by = has_m ? plan.micro_batch_size : plan.num_micro_batches;
    if (plan.global_batch_size % by != 0)
      given.Fail(
          fmt::format("global_batch_size {} is not divisible by {}", plan.global_batch_size, by));
    (has_m ? plan.num_micro_batches : plan.micro_batch_size) = plan.global_batch_size / by;
  } else if (!(has_gbs && has_m && has_mm)) {
    root.Fail("needs two of global_batch_size, micro_batch_size and num_micro_batches");
  }
  if (root.Has("schedule")) {
    JsonField f = root["schedule"];
    try {
      plan.schedule = ParseScheduleKind(f.String());
    } catch (const InputError& e) {
      f.Fail(e.what());
    }
  }
  if (root.Has("recompute")) plan.recompute = root["recompute"].Bool();
  if (root.Has("virtual_stages")) plan.virtual_stages = root["virtual_stages"].PositiveInt();
  if (root.Has("allreduce_overlap")) plan.allreduce_overlap = root["allreduce_overlap"].Bool();
  if (root.Has("steady_state")) plan.steady_state = root["steady_state"].Bool();
  if (root.Has("precision")) plan.precision = format_internal::ReadPrecision(root["precision"]);
  JsonField stages = root["stages"];
  for (size_t s = 0; s < stages.size(); ++s) plan.stages.push_back(ReadStage(stages[s]));
  if (plan.stages.empty()) stages.Fail("the plan has no stages");
  if (root.Has("estimate")) plan.estimate = ReadEstimate(root["estimate"]);
  if (root.Has("profile")) plan.profile = root["profile"].String();
  if (root.Has("cluster")) plan.cluster = root["cluster"].String();
  return plan;
}

Plan ReadPlanJson(const std::filesystem::path& path) {
  return ParsePlanJson(format_internal::ReadTextFile(path.string()), path.string());
}

std::string PlanToJsonText(const Plan& plan) {
  using OJson = nlohmann::ordered_json;
  OJson root;
  root["format"] = kPlanFormat;
  root["planner"] = plan.planner;
  root["global_batch_size"] = plan.global_batch_size;
  root["micro_batch_size"] = plan.micro_batch_size;
  root["num_micro_batches"] = plan.num_micro_batches;
  root["schedule"] = ToString(plan.schedule);
  root["recompute"] = plan.recompute;
  root["allreduce_overlap"] = plan.allreduce_overlap;
  if (plan.steady_state) root["steady_state"] = true;
  if (plan.virtual_stages != 1) root["virtual_stages"] = plan.virtual_stages;
  if (plan.precision != Precision::kFloat32) root["precision"] = ToString(plan.precision);
  OJson stages = OJson::array();
  for (const StagePlan& st : plan.stages) {
    OJson o;
    if (st.first_layer >= 0) o["first_layer"] = st.first_layer;
    if (st.last_layer >= 0) o["last_layer"] = st.last_layer;
    if (!st.first_layer_id.empty()) o["first_layer_id"] = st.first_layer_id;
    if (!st.last_layer_id.empty()) o["last_layer_id"] = st.last_layer_id;
    o["devices"] = st.devices;
    if (st.recompute) o["recompute"] = true;
    // Ids when the stage names its layers by id (ResolvePlanLayers fills both).
    if (!st.recompute_layer_ids.empty())
      o["recompute_layers"] = st.recompute_layer_ids;
    else if (!st.recompute_layers.empty())
      o["recompute_layers"] = st.recompute_layers;
    if (st.shard_optimizer) o["shard_optimizer"] = true;
    stages.push_back(std::move(o));
  }
  root["stages"] = std::move(stages);
  if (plan.estimate) {
    const PlanEstimate& e = *plan.estimate;
    root["estimate"] = {{"iteration_ms", e.iteration_ms},
                        {"speedup", e.speedup},
                        {"latency_ms", e.latency_ms},
                        {"pivot_stage", e.pivot_stage},
                        {"stage_peak_memory_bytes", e.stage_peak_memory_bytes}};
    if (e.bubble_fraction >= 0) root["estimate"]["bubble_fraction"] = e.bubble_fraction;
    if (e.process_memory_bytes > 0)
      root["estimate"]["process_memory_bytes"] = e.process_memory_bytes;
  }
  if (!plan.profile.empty()) root["profile"] = plan.profile;
  if (!plan.cluster.empty()) root["cluster"] = plan.cluster;
  return root.dump(2) + "\n";
}

void WritePlanJson(const Plan& plan, const std::filesystem::path& path) {
  WriteFileAtomic(path, PlanToJsonText(plan));
}

}  // namespace dapple
