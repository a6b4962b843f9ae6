// Transformer building blocks shared by the BERT and GPT layer lists: token + position
// embedding, and one encoder/decoder block (multi-head self-attention and a GELU
// feed-forward, each with a residual connection and layer norm). No dropout, so a model
// run whole and its layer list run stage by stage compute the same thing.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>

namespace dapple::internal {

// int64 token ids [n, T] -> [n, T, hidden]: token + learned position embedding, then
// (when `norm`) layer norm, as BERT does; GPT leaves the norm to its blocks.
class EmbeddingLayerImpl : public torch::nn::Module {
 public:
  EmbeddingLayerImpl(int64_t vocab, int64_t seq, int64_t hidden, bool norm);
  torch::Tensor forward(torch::Tensor tokens);

 private:
  torch::nn::Embedding tokens_, positions_;
  torch::nn::LayerNorm norm_{nullptr};
};

struct BlockOptions {
  int64_t hidden = 0, heads = 0, ffn = 0;
  bool causal = false;    // GPT: position t attends to positions <= t only
  bool pre_norm = false;  // GPT: x + f(LN(x)); BERT: LN(x + f(x))
};

// [n, T, hidden] -> [n, T, hidden].
class TransformerBlockImpl : public torch::nn::Module {
 public:
  explicit TransformerBlockImpl(const BlockOptions& o);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::Tensor Attention(const torch::Tensor& x);
  BlockOptions o_;
  torch::nn::Linear qkv_, proj_, up_, down_;
  torch::nn::LayerNorm norm1_, norm2_;
};

// Parameters of one block: 4h^2 + 4h (attention) + 2hf + f + h (feed-forward) + 4h (norms).
int64_t BlockParameters(int64_t hidden, int64_t ffn);

// GPT-2/BERT initialisation: Linear and Embedding weights ~ N(0, 0.02), biases 0, layer
// norms weight 1, bias 0. Draws from the global generator (seeded by BuildModel).
void InitTransformerWeights(torch::nn::Module& module);

}  // namespace dapple::internal
