// Transformer building blocks: see transformer.h.
#include "dapple/models/transformer.h"

#include <cmath>
#include <limits>

#include "dapple/common/error.h"

namespace dapple::internal {

EmbeddingLayerImpl::EmbeddingLayerImpl(int64_t vocab, int64_t seq, int64_t hidden, bool norm)
    : tokens_(register_module("tokens", torch::nn::Embedding(vocab, hidden))),
      positions_(register_module("positions", torch::nn::Embedding(seq, hidden))) {
  if (norm)
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})));
}

torch::Tensor EmbeddingLayerImpl::forward(torch::Tensor tokens) {
  int64_t t = tokens.size(1);
  torch::Tensor pos = torch::arange(t, tokens.options().dtype(torch::kLong));
  torch::Tensor x = tokens_(tokens) + positions_(pos).unsqueeze(0);
  return norm_ ? norm_(x) : x;
}

TransformerBlockImpl::TransformerBlockImpl(const BlockOptions& o)
    : o_(o),
      qkv_(register_module("qkv", torch::nn::Linear(o.hidden, 3 * o.hidden))),
      proj_(register_module("proj", torch::nn::Linear(o.hidden, o.hidden))),
      up_(register_module("up", torch::nn::Linear(o.hidden, o.ffn))),
      down_(register_module("down", torch::nn::Linear(o.ffn, o.hidden))),
      norm1_(
          register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.hidden})))),
      norm2_(
          register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.hidden})))) {
  DAPPLE_CHECK(o.heads > 0 && o.hidden % o.heads == 0);
}

torch::Tensor TransformerBlockImpl::Attention(const torch::Tensor& x) {
  int64_t n = x.size(0), t = x.size(1), d = o_.hidden / o_.heads;
  // [n, T, 3h] -> 3 x [n, heads, T, d]
  auto qkv = qkv_(x).view({n, t, 3, o_.heads, d}).permute({2, 0, 3, 1, 4}).unbind(0);
  torch::Tensor scores = torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) / std::sqrt(double(d));
  if (o_.causal) {
    torch::Tensor future = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  torch::Tensor out = torch::matmul(torch::softmax(scores, -1), qkv[2]);  // [n, heads, T, d]
  return proj_(out.transpose(1, 2).reshape({n, t, o_.hidden}));
}

torch::Tensor TransformerBlockImpl::forward(torch::Tensor x) {
  auto ffn = [&](const torch::Tensor& y) { return down_(torch::gelu(up_(y))); };
  if (o_.pre_norm) {
    x = x + Attention(norm1_(x));
    return x + ffn(norm2_(x));
  }
  x = norm1_(x + Attention(x));
  return norm2_(x + ffn(x));
}

int64_t BlockParameters(int64_t h, int64_t f) {
  return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
}

void InitTransformerWeights(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& m : module.modules(/*include_self=*/true)) {
    if (auto* linear = m->as<torch::nn::Linear>()) {
      linear->weight.normal_(0, 0.02);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = m->as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0, 0.02);
    } else if (auto* norm = m->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1);
      norm->bias.zero_();
    }
  }
}

}  // namespace dapple::internal
