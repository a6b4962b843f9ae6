#!/usr/bin/env python3
"""torchvision's ResNet-18 as shipped (random weights, 10 classes), scripted without changes,
and Fashion-MNIST as 3-channel 32x32 images (the Debian package dataset-fashion-mnist):
OUT/resnet18.pt, OUT/train.pt, OUT/test.pt. dapple cuts the model from its forward graph:
its layers are conv1, bn1, layer1.0 .. layer4.1 (the basic blocks) and fc (docs/your-model.md).

  examples/resnet18_fashion_mnist.py OUT [--train-samples N]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnn_fashion_mnist import images, labels  # noqa: E402  (the Debian package's files)


def rgb32(x):
    """[N, 1, 28, 28] -> [N, 3, 32, 32]: padded to ResNet's smallest comfortable size."""
    return F.pad(x, (2, 2, 2, 2)).expand(-1, 3, -1, -1).contiguous()


def arguments(default_out):
    """OUT and --train-samples; OUT is made and the seed set."""
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?", default=default_out)
    p.add_argument("--train-samples", type=int, default=10000)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    return a


def write_images(out, n):
    """OUT/train.pt (the first n training images) and OUT/test.pt (2000 test images)."""
    torch.save({"input": rgb32(images("train-images-idx3-ubyte.gz")[:n]),
                "target": labels("train-labels-idx1-ubyte.gz")[:n]},
               os.path.join(out, "train.pt"))
    torch.save({"input": rgb32(images("t10k-images-idx3-ubyte.gz")[:2000]),
                "target": labels("t10k-labels-idx1-ubyte.gz")[:2000]},
               os.path.join(out, "test.pt"))


def main():
    a = arguments("out/resnet18")
    model = torchvision.models.resnet18(num_classes=10)
    torch.jit.script(model).save(os.path.join(a.out, "resnet18.pt"))
    n = a.train_samples
    write_images(a.out, n)
    print(f"wrote {a.out}/resnet18.pt (torchvision resnet18, scripted as shipped), "
          f"{a.out}/train.pt ({n} images), {a.out}/test.pt")


if __name__ == "__main__":
    main()
