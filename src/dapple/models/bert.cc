// BERT-style encoder for sequence classification: "embed" (token + position embedding,
// layer norm), `layers` post-norm encoder blocks "block<i>", and "head" (BERT's pooler:
// dense + tanh on the first token, then a linear classifier). Input: int64 token ids
// [n, seq]; target: a class per sequence. Classification rather than masked-LM keeps the
// head small; the head's vocabulary projection would otherwise dominate small configs.
#include <torch/nn/functional/loss.h>

#include "dapple/common/error.h"
#include "dapple/models/transformer.h"
#include "dapple/models/zoo_internal.h"

namespace dapple::internal {
namespace {

class PoolerHeadImpl : public torch::nn::Module {
 public:
  PoolerHeadImpl(int64_t hidden, int64_t classes)
      : pool_(register_module("pool", torch::nn::Linear(hidden, hidden))),
        out_(register_module("out", torch::nn::Linear(hidden, classes))) {}
  torch::Tensor forward(torch::Tensor x) { return out_(torch::tanh(pool_(x.select(1, 0)))); }

 private:
  torch::nn::Linear pool_, out_;
};

struct BertSizes {
  int64_t hidden, heads, layers, seq, vocab, classes, ffn;
};

BertSizes ReadBertSizes(const OptionReader& o) {
  BertSizes s{o.Int("hidden"), o.Int("heads"),   o.NonNegativeInt("layers"), o.Int("seq"),
              o.Int("vocab"),  o.Int("classes"), o.NonNegativeInt("ffn")};
  if (s.ffn == 0) s.ffn = 4 * s.hidden;
  if (s.hidden % s.heads != 0)
    ThrowInput("model bert: option heads: {} does not divide hidden {}", s.heads, s.hidden);
  return s;
}

// A recipe that builds `Impl(args...)` and initialises it as BERT does.
template <typename Impl, typename... Args>
LayerRecipe Recipe(std::string name, Args... args) {
  return {std::move(name), [=] {
            auto module = std::make_shared<Impl>(args...);
            InitTransformerWeights(*module);
            return torch::nn::AnyModule(module);
          }};
}

ZooModel BuildBert(const OptionReader& o) {
  BertSizes s = ReadBertSizes(o);
  ZooModel z;
  Model& m = z.model;
  z.layers.push_back(Recipe<EmbeddingLayerImpl>("embed", s.vocab, s.seq, s.hidden, true));
  for (int64_t i = 0; i < s.layers; ++i) {
    z.layers.push_back(Recipe<TransformerBlockImpl>(
        "block" + std::to_string(i),
        BlockOptions{s.hidden, s.heads, s.ffn, /*causal=*/false, /*pre_norm=*/false}));
  }
  z.layers.push_back(Recipe<PoolerHeadImpl>("head", s.hidden, s.classes));
  m.loss = [](const torch::Tensor& out, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(out, target);
  };
  m.input_shape = {s.seq};
  m.input_dtype = torch::kInt64;
  m.num_classes = s.classes;
  m.vocab_size = s.vocab;
  return z;
}

int64_t CountBert(const OptionReader& o) {
  BertSizes s = ReadBertSizes(o);
  int64_t h = s.hidden;
  return s.vocab * h + s.seq * h + 2 * h + s.layers * BlockParameters(h, s.ffn) + h * h + h +
         h * s.classes + s.classes;
}

}  // namespace

ZooEntry BertEntry() {
  ZooEntry e;
  e.description = "BERT-style encoder with a sequence-classification head";
  e.defaults = {{"hidden", "64"},  {"heads", "4"},   {"layers", "2"}, {"seq", "32"},
                {"vocab", "1000"}, {"classes", "2"}, {"ffn", "0"}};
  e.presets = {
      {"bert48",
       {{"hidden", "1024"}, {"heads", "16"}, {"layers", "48"}, {"seq", "512"}, {"vocab", "30522"}}},
      {"large",
       {{"hidden", "1024"}, {"heads", "16"}, {"layers", "24"}, {"seq", "512"}, {"vocab", "30522"}}},
      {"base",
       {{"hidden", "768"}, {"heads", "12"}, {"layers", "12"}, {"seq", "512"}, {"vocab", "30522"}}}};
  e.build = BuildBert;
  e.count_parameters = CountBert;
  return e;
}

}  // namespace dapple::internal
