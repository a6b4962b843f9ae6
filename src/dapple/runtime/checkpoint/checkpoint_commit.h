// Note [Checkpoint commit]: `latest` moves only after every writer confirmed its files.
// Each layer file is written by replica 0 of its stage, possibly on another node whose
// filesystem rank 0 cannot see. So each rank reports the layer files it wrote (after they
// were fsynced, with their sizes) through the rendezvous store, and rank 0 checks, before it
// writes meta.json and moves `latest`, that every layer of the model was confirmed exactly
// once, and that each confirmed file it can see has the confirmed size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple {

struct WrittenLayer {
  std::string layer;
  int64_t bytes = 0;
  uint32_t crc32 = 0;  // of the file as read back (Note [Checkpoint checksums])
};

// One rank's report of what it wrote (JSON text), for Communicator::GatherStrings.
std::string DescribeWrittenLayers(const std::vector<WrittenLayer>& written);

// Rank 0: checks `reports` (every rank's DescribeWrittenLayers, by rank) against the model's
// `layers` for the checkpoint in `step_dir`. Throws Error with one line naming the step
// folder and the first layer that is missing, confirmed twice, or present with another
// size than confirmed; the checkpoint must then not be committed. Returns every layer's
// confirmed size and checksum, for meta.json.
std::map<std::string, LayerFileSum> VerifyWrittenLayers(const std::filesystem::path& step_dir,
                                                        const std::vector<std::string>& layers,
                                                        const std::vector<std::string>& reports);

}  // namespace dapple
