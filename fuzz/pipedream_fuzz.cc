// libFuzzer target: the PipeDream graph reader. InputError is the only acceptable failure;
// any other exception, crash or sanitizer report is a bug. A parsed profile must be valid,
// and must survive the writer and a second read with the same layers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cost_probe.h"
#include "dapple/common/error.h"
#include "dapple/format/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  dapple::Profile p;
  try {
    p = dapple::ParsePipeDreamGraph(text, "fuzz.txt", 4);
  } catch (const dapple::InputError&) {
    return 0;
  }
  dapple::ValidateProfile(p, "fuzz.txt");  // must not throw: the reader validated it
  for (int i = 0; i < p.num_layers(); ++i) (void)p.CutBytes(i);
  dapple::fuzz::ProbeCostModel(p);
  std::string written;
  try {
    written = dapple::PipeDreamGraphText(p);
  } catch (const dapple::InputError&) {
    return 0;  // ids with spaces cannot be written; that is reported, not a bug
  }
  dapple::Profile q = dapple::ParsePipeDreamGraph(written, "again.txt", 4);
  if (q.num_layers() != p.num_layers()) abort();
  return 0;
}
