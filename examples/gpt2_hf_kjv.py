#!/usr/bin/env python3
"""Hugging Face's GPT2LMHeadModel (a small configuration, random initialisation: no download)
exported with torch.export for dapple, and the King James Bible as character tokens.

  gpt2_hf_kjv.py OUT [--layers 4] [--hidden 64] [--seq 64]

writes OUT/gpt2.pt2 (exported in training mode, forward(input_ids=, labels=) returning its
loss, the batch dimension dynamic), OUT/train.bin and OUT/eval.bin. Then (docs/torch-export.md):

  dapple profile --model OUT/gpt2.pt2 --data OUT/train.bin --seq-len 64 --layer-depth 2 \\
    --batch 8 -o OUT/profile.json
  dapple plan --profile OUT/profile.json --cluster local --global-batch 32 -o OUT/plan.json
  dapple train --model OUT/gpt2.pt2 --plan OUT/plan.json --data OUT/train.bin --seq-len 64 \\
    --layer-depth 2 --steps 100 --nproc 2 --save-model OUT/trained.pt2

and in Python (the output dataclass is registered with pytree when its module is imported):

  import torch, transformers.modeling_outputs
  out = torch.export.load("OUT/trained.pt2").module()(input_ids=ids, labels=ids)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_kjv import write_kjv_splits  # noqa: E402
import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?", default="out/gpt2-hf")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seq", type=int, default=64)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=128, n_positions=a.seq, n_embd=a.hidden, n_layer=a.layers,
                        n_head=4, use_cache=False, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).train()
    idx, labels = torch.randint(0, 128, (2, 2, a.seq))
    batch = torch.export.Dim("batch")
    ep = torch.export.export(model, (), {"input_ids": idx, "labels": labels},
                             dynamic_shapes={"input_ids": {0: batch}, "labels": {0: batch}})
    torch.export.save(ep, os.path.join(a.out, "gpt2.pt2"))
    cut = write_kjv_splits(a.out)
    print(f"wrote {a.out}/gpt2.pt2 (Hugging Face GPT2LMHeadModel, {a.layers} blocks), "
          f"{a.out}/train.bin ({cut} tokens), {a.out}/eval.bin")


if __name__ == "__main__":
    main()
