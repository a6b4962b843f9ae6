#!/usr/bin/env python3
"""timm's resnet18 (random initialisation, 10 classes) exported with torch.export for dapple,
and Fashion-MNIST as 3-channel 32x32 images (the Debian package dataset-fashion-mnist).

  timm_resnet_fashion_mnist.py OUT [--train-samples N]

writes OUT/resnet18.pt2 (exported in training mode, the batch dimension dynamic),
OUT/train.pt and OUT/test.pt. Then (docs/torch-export.md):

  dapple profile --model OUT/resnet18.pt2 --data OUT/train.pt --loss cross-entropy \\
    --batch 8 --batches 4,8,16 -o OUT/profile.json
  dapple plan --profile OUT/profile.json --cluster local --global-batch 32 --micro-batch 8 \\
    -o OUT/plan.json
  dapple train --model OUT/resnet18.pt2 --plan OUT/plan.json --data OUT/train.pt \\
    --eval-data OUT/test.pt --eval --loss cross-entropy --steps 40 --nproc 2 --lr 0.05 \\
    --save-model OUT/trained.pt2

and in Python: torch.export.load("OUT/trained.pt2").module()(images).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet18_fashion_mnist import arguments, write_images  # noqa: E402  (Fashion-MNIST)
import timm  # noqa: E402
import torch  # noqa: E402


def main():
    a = arguments("out/timm_resnet18")
    model = timm.create_model("resnet18", pretrained=False, num_classes=10).train()
    batch = torch.export.Dim("batch")
    ep = torch.export.export(model, (torch.randn(4, 3, 32, 32),), dynamic_shapes=({0: batch},))
    torch.export.save(ep, os.path.join(a.out, "resnet18.pt2"))
    n = a.train_samples
    write_images(a.out, n)
    print(f"wrote {a.out}/resnet18.pt2 (timm resnet18, exported in training mode), "
          f"{a.out}/train.pt ({n} images), {a.out}/test.pt")


if __name__ == "__main__":
    main()
