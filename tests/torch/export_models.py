#!/usr/bin/env python3
"""Programs saved by torch.export for dapple's tests, and PyTorch's own training of the modules.

  export_models.py write DIR
      exports the test models in training mode with a dynamic batch dimension: mlp.pt2 (the
      MLP of script_models.py), nano_gpt.pt2 (the ModuleList GPT of graph_models.py with SDPA
      attention, a tied head and forward(idx, targets) returning (logits, loss)), bn.pt2 (a
      convolution, BatchNorm and a residual), gpt2.pt2 (Hugging Face's GPT2LMHeadModel, a small
      configuration at random initialisation, forward(input_ids=, labels=) returning its
      loss, dropout 0), bert.pt2 (Hugging Face's BertForSequenceClassification, forward(
      input_ids=, attention_mask=, labels=), with bert_data.pt and bert_nomask.pt),
      resnet18.pt2 and vit.pt2 (timm's, with image_data.pt); mlp_twin.pt and
      nano_gpt_twin.pt: the MLP and the GPT exported, scripted and traced (the TorchScript
      door, the same weights); bad ones: eval.pt2 (BatchNorm exported in evaluation mode),
      custom_op.pt2 (an operator outside ATen); and the data files of script_models.py and
      graph_models.py.
  export_models.py check MODEL.pt2 DATA STATE_DICT LOSSES --steps N --gbs G --micro-batch M
      [--slices S] [--seq-len T] [--loss cross-entropy|own] [--dtype float64|float32]
      trains the Python module the program was exported from (its class by the file's name,
      the program's own initial values) in --dtype with SGD on the same micro-batches and
      slices as dapple, and prints one JSON line: the largest relative difference of the
      per-step losses against LOSSES (dapple's) and of the final parameters and buffers
      against STATE_DICT (dapple's --save-model output, read with torch.load into the module
      by load_state_dict). --program P.pt2: also the largest relative difference of P's weights
      (`dapple export -o P.pt2`, read with torch.export.load, in the original dtype) from
      PyTorch's, and whether P's module runs on 3 samples. --eval-data D: also the trained
      module's held-out loss and accuracy on D in eval() mode.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from graph_models import NanoGpt, slice_loss  # noqa: E402
from reference_training import add_check_args, max_rel_diff, train_in_slices  # noqa: E402
from script_models import Mlp, batches  # noqa: E402
from script_models import write as write_script_data  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


class ConvBn(nn.Module):
    """A convolution, BatchNorm (running statistics trained as buffers) and a residual."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        h = h + self.conv2(h)
        return self.fc(h.flatten(1))


class CustomOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.ops.dapple_test.twice(self.fc(x))


def hf_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=16, n_positions=8, n_embd=16, n_layer=2, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg)


def hf_causal_lm_loss(model, x, y):
    """What model(input_ids=x, labels=y).loss computes (ForCausalLMLoss: the labels shifted by
    one, the last position ignored), without its upcast `logits.float()`: that cast is to
    float32, which would round this float64 reference, while dapple reads the graph's float32
    dtypes as the model's dtype (Note [Float dtypes follow the model])."""
    logits = model(input_ids=x).logits
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.size(-1)), y[:, 1:].reshape(-1))


def hf_bert():
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, num_labels=3)
    return BertForSequenceClassification(cfg)


def timm_model(name, **kw):
    import timm
    return lambda: timm.create_model(name, pretrained=False, num_classes=10, **kw)


MODELS = {"mlp": Mlp, "nano_gpt": NanoGpt, "bn": ConvBn, "gpt2": hf_gpt2, "bert": hf_bert,
          "resnet18": timm_model("resnet18"),
          "vit": timm_model("vit_tiny_patch16_224", img_size=32, patch_size=8, depth=2)}


def bert_batches(data, gbs, steps):
    """((input_ids, attention_mask), labels) of each step, in file order as dapple's
    --no-shuffle."""
    d = torch.load(data)
    n = d["input"].size(0)
    for s in range(steps):
        idx = torch.tensor([(s * gbs + i) % n for i in range(gbs)])
        yield (d["input"][idx], d["attention_mask"][idx]), d["target"][idx]


def write_bert(out):
    """bert.pt2 (input_ids, attention_mask and labels, the loss its own) and its data: 32
    sequences of 8 tokens, the last 0-3 of each padding (mask 0); bert_nomask.pt lacks the
    mask."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(1, 32, (32, 8), generator=g)
    mask = (torch.arange(8) < 8 - torch.randint(0, 4, (32, 1), generator=g)).long()
    labels = torch.randint(0, 3, (32,), generator=g)
    torch.save({"input": ids * mask, "attention_mask": mask, "target": labels},
               os.path.join(out, "bert_data.pt"))
    torch.save({"input": ids, "target": labels}, os.path.join(out, "bert_nomask.pt"))
    batch = torch.export.Dim("batch")
    kw = {"input_ids": ids[:4], "attention_mask": mask[:4], "labels": labels[:4]}
    ep = torch.export.export(hf_bert().train(), (), kw,
                             dynamic_shapes={k: {0: batch} for k in kw})
    torch.export.save(ep, os.path.join(out, "bert.pt2"))


def write_timm(out):
    """resnet18.pt2 and vit.pt2 (timm, random initialisation, 10 classes) on 32x32 images."""
    for name in ("resnet18", "vit"):
        export(MODELS[name]().train(), (torch.randn(4, 3, 32, 32),),
               os.path.join(out, name + ".pt2"))
    g = torch.Generator().manual_seed(4)
    torch.save({"input": torch.randn(16, 3, 32, 32, generator=g),
                "target": torch.randint(0, 10, (16,), generator=g)},
               os.path.join(out, "image_data.pt"))


def export(model, args, path, dynamic=True):
    batch = torch.export.Dim("batch")
    shapes = tuple({0: batch} for _ in args) if dynamic else None
    torch.export.save(torch.export.export(model, args, dynamic_shapes=shapes), path)


def write(out):
    os.makedirs(out, exist_ok=True)
    write_script_data(out)  # mlp_data.pt, tokens.bin, ... and the TorchScript models
    torch.manual_seed(0)
    mlp, nano = Mlp().train(), NanoGpt().train()
    export(mlp, (torch.randn(4, 8),), os.path.join(out, "mlp.pt2"))
    # Two tensors: export would take one tensor passed twice as one input.
    idx, targets = torch.randint(0, 16, (2, 4, 8))
    export(nano, (idx, targets), os.path.join(out, "nano_gpt.pt2"))
    # The same modules through the TorchScript door.
    torch.jit.script(mlp).save(os.path.join(out, "mlp_twin.pt"))
    torch.jit.trace(nano, (idx, targets)).save(os.path.join(out, "nano_gpt_twin.pt"))
    export(ConvBn().train(), (torch.randn(4, 3, 8, 8),), os.path.join(out, "bn.pt2"))
    export(ConvBn().eval(), (torch.randn(4, 3, 8, 8),), os.path.join(out, "eval.pt2"))
    batch = torch.export.Dim("batch")
    ep = torch.export.export(hf_gpt2().train(), (), {"input_ids": idx, "labels": targets},
                             dynamic_shapes={"input_ids": {0: batch}, "labels": {0: batch}})
    torch.export.save(ep, os.path.join(out, "gpt2.pt2"))

    @torch.library.custom_op("dapple_test::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x):
        return torch.empty_like(x)

    export(CustomOp().train(), (torch.randn(4, 8),), os.path.join(out, "custom_op.pt2"),
           dynamic=False)
    g = torch.Generator().manual_seed(3)
    torch.save({"input": torch.randn(32, 3, 8, 8, generator=g),
                "target": torch.randint(0, 10, (32,), generator=g)},
               os.path.join(out, "bn_data.pt"))
    write_bert(out)
    write_timm(out)


def slice_loss_of(model, name, loss):
    if name == "gpt2":
        return lambda x, y: hf_causal_lm_loss(model, x, y)
    if name == "bert":
        return lambda x, y: model(input_ids=x[0], attention_mask=x[1], labels=y).loss
    return lambda x, y: slice_loss(model, x, y, loss)


def check(a):
    name = os.path.basename(a.model)[:-len(".pt2")]
    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    model = MODELS[name]()
    model.load_state_dict(torch.export.load(a.model).state_dict)
    model.to(dtype).train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    steps = bert_batches(a.data, a.gbs, a.steps) if name == "bert" else \
        ((x.to(dtype) if x.is_floating_point() else x, y)
         for x, y in batches(a.data, a.gbs, a.steps, a.seq_len))
    losses = train_in_slices(opt, steps, a.gbs, a.micro_batch, a.slices,
                             slice_loss_of(model, name, a.loss))
    theirs = [float(v) for v in open(a.losses).read().split()]
    trained = MODELS[name]().to(dtype)
    trained.load_state_dict(torch.load(a.state_dict))  # the user's way back
    mine = model.state_dict()
    worst = 0.0
    for key, p in trained.state_dict().items():
        q = mine[key].to(torch.float64)
        diff = (p.to(torch.float64) - q).abs().max() / q.abs().max().clamp(min=1e-12)
        worst = max(worst, diff.item())
    result = {}
    if a.program:
        ep = torch.export.load(a.program)
        program_worst = 0.0
        for key, p in ep.state_dict.items():
            q = mine[key].to(torch.float64)
            diff = (p.to(torch.float64) - q).abs().max() / q.abs().max().clamp(min=1e-12)
            program_worst = max(program_worst, diff.item())
        x, y = next(batches(a.data, 3, 1, a.seq_len))
        x = x.float() if x.is_floating_point() else x
        out = ep.module()(x, y) if a.loss == "own" else ep.module()(x)
        result = {"max_program_rel_diff": program_worst, "program_runs": out is not None}
    if a.eval_data:  # the trained model's held-out loss and accuracy, as dapple's --eval
        d = torch.load(a.eval_data)
        x = d["input"].to(dtype) if d["input"].is_floating_point() else d["input"]
        model.eval()
        with torch.no_grad():
            out = model(x)
        result["eval_loss"] = torch.nn.functional.cross_entropy(out, d["target"]).item()
        result["eval_accuracy"] = out.argmax(-1).eq(d["target"]).double().mean().item()
    loss_diff = max_rel_diff(losses, theirs)
    print(json.dumps({"steps": len(losses), "dapple_steps": len(theirs),
                      "max_loss_rel_diff": loss_diff, "max_state_rel_diff": worst,
                      "final_loss": losses[-1], **result}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    c = sub.add_parser("check")
    add_check_args(c, ("model", "data", "state_dict", "losses"))
    c.add_argument("--loss", choices=("cross-entropy", "own"), default="cross-entropy")
    c.add_argument("--program", default="")
    c.add_argument("--eval-data", default="")
    a = p.parse_args()
    torch.set_num_threads(1)
    write(a.dir) if a.cmd == "write" else check(a)


if __name__ == "__main__":
    main()
