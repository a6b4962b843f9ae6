// GPT-style decoder for (character-level) language modelling: "embed" (token + position
// embedding), `layers` causal pre-norm blocks "block<i>", and "head" (final layer norm and
// an untied projection to the vocabulary). Input: int64 tokens [n, seq]; target: the next
// token at every position [n, seq]; loss: mean token cross-entropy.
#include <torch/nn/functional/loss.h>

#include "dapple/common/error.h"
#include "dapple/models/transformer.h"
#include "dapple/models/zoo_internal.h"

namespace dapple::internal {
namespace {

class LmHeadImpl : public torch::nn::Module {
 public:
  LmHeadImpl(int64_t hidden, int64_t vocab)
      : norm_(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})))),
        out_(register_module("out", torch::nn::Linear(hidden, vocab))) {}
  torch::Tensor forward(torch::Tensor x) { return out_(norm_(x)); }

 private:
  torch::nn::LayerNorm norm_;
  torch::nn::Linear out_;
};

struct GptSizes {
  int64_t hidden, heads, layers, seq, vocab, ffn;
};

GptSizes ReadGptSizes(const OptionReader& o) {
  GptSizes s{o.Int("hidden"), o.Int("heads"), o.NonNegativeInt("layers"),
             o.Int("seq"),    o.Int("vocab"), o.NonNegativeInt("ffn")};
  if (s.ffn == 0) s.ffn = 4 * s.hidden;
  if (s.hidden % s.heads != 0)
    ThrowInput("model gpt: option heads: {} does not divide hidden {}", s.heads, s.hidden);
  return s;
}

ZooModel BuildGpt(const OptionReader& o) {
  GptSizes s = ReadGptSizes(o);
  ZooModel z;
  Model& m = z.model;
  z.layers.push_back({"embed", [s] {
                        auto embed =
                            std::make_shared<EmbeddingLayerImpl>(s.vocab, s.seq, s.hidden, false);
                        InitTransformerWeights(*embed);
                        return torch::nn::AnyModule(embed);
                      }});
  for (int64_t i = 0; i < s.layers; ++i) {
    z.layers.push_back({"block" + std::to_string(i), [s] {
                          auto block = std::make_shared<TransformerBlockImpl>(BlockOptions{
                              s.hidden, s.heads, s.ffn, /*causal=*/true, /*pre_norm=*/true});
                          InitTransformerWeights(*block);
                          return torch::nn::AnyModule(block);
                        }});
  }
  z.layers.push_back({"head", [s] {
                        auto head = std::make_shared<LmHeadImpl>(s.hidden, s.vocab);
                        InitTransformerWeights(*head);
                        return torch::nn::AnyModule(head);
                      }});
  m.loss = [](const torch::Tensor& out, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(out.flatten(0, 1), target.flatten());
  };
  m.input_shape = {s.seq};
  m.input_dtype = torch::kInt64;
  m.target_shape = {s.seq};
  m.num_classes = s.vocab;
  m.vocab_size = s.vocab;
  return z;
}

int64_t CountGpt(const OptionReader& o) {
  GptSizes s = ReadGptSizes(o);
  int64_t h = s.hidden;
  return s.vocab * h + s.seq * h + s.layers * BlockParameters(h, s.ffn) + 2 * h + h * s.vocab +
         s.vocab;
}

}  // namespace

ZooEntry GptEntry() {
  ZooEntry e;
  e.description = "GPT-style causal decoder for character-level language modelling";
  e.defaults = {{"hidden", "64"}, {"heads", "4"},   {"layers", "2"},
                {"seq", "64"},    {"vocab", "128"}, {"ffn", "0"}};
  e.presets = {{"char-small", {{"hidden", "128"}, {"heads", "4"}, {"layers", "4"}, {"seq", "128"}}},
               {"gpt2-small",
                {{"hidden", "768"},
                 {"heads", "12"},
                 {"layers", "12"},
                 {"seq", "1024"},
                 {"vocab", "50257"}}}};
  e.build = BuildGpt;
  e.count_parameters = CountGpt;
  return e;
}

}  // namespace dapple::internal
