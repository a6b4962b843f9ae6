// `dapple export`: writes a user's TorchScript module with the weights of a dapple
// checkpoint, for torch.jit.load in Python (docs/your-model.md); for a program of
// torch.export, a state_dict for load_state_dict (docs/torch-export.md).
#include <cstdio>
#include <filesystem>
#include <string>

#include "commands.h"
#include "dapple/common/error.h"
#include "dapple/runtime/checkpoint/checkpoint.h"
#include "dapple/runtime/checkpoint/export.h"

namespace dapple {
namespace {

struct ExportArgs {
  std::string model;
  std::filesystem::path checkpoint;
  std::filesystem::path output;
  int64_t step = -1;
};

void RunExport(const ExportArgs& a) {
  std::filesystem::path step_dir;
  if (a.step >= 0) {
    step_dir = CheckpointStepDir(a.checkpoint, a.step);
    if (!std::filesystem::exists(step_dir / "meta.json"))
      ThrowInput("{}: no checkpoint after step {} (no {})", a.checkpoint.string(), a.step,
                 (step_dir / "meta.json").string());
  } else if (std::filesystem::exists(a.checkpoint / "meta.json")) {
    step_dir = a.checkpoint;  // a step folder itself
  } else {
    auto latest = LatestCheckpoint(a.checkpoint);
    if (!latest) ThrowInput("{}: no checkpoint (no 'latest' file)", a.checkpoint.string());
    step_dir = *latest;
  }
  ExportScriptModel(a.model, step_dir, a.output);
  std::printf("wrote %s with the weights of %s\n", a.output.c_str(), step_dir.c_str());
}

}  // namespace

void AddExportCommand(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write a TorchScript model (for a .pt2 model: a state_dict, or the program) with the "
      "trained weights of a dapple checkpoint");
  cmd->add_option("--model", a->model,
                  "The file that was trained: TorchScript (PATH.pt) or torch.export (PATH.pt2)")
      ->required();
  cmd->add_option("--checkpoint", a->checkpoint,
                  "Checkpoint directory of `dapple train` (its newest checkpoint), or one "
                  "step-N folder")
      ->required();
  cmd->add_option("--step", a->step, "The checkpoint after this step (default: the newest)");
  cmd->add_option("-o,--output", a->output,
                  "Output TorchScript file; for a .pt2 model, a state_dict file (torch.load), or a "
                  "program (PATH.pt2, torch.export.load)")
      ->required();
  cmd->callback([a] { RunExport(*a); });
}

}  // namespace dapple
