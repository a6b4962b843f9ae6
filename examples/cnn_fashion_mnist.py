#!/usr/bin/env python3
"""A CNN for Fashion-MNIST, written as a user of dapple would: a plain PyTorch model saved as
TorchScript, and the data as torch.save files (docs/your-model.md).

  examples/cnn_fashion_mnist.py OUT_DIR
writes OUT_DIR/cnn.pt, OUT_DIR/train.pt and OUT_DIR/test.pt (the Debian package
dataset-fashion-mnist: 60000 + 10000 images of 1x28x28, labels 0-9).
"""
import gzip
import os
import sys

import torch
import torch.nn as nn

SOURCE = "/usr/share/datasets/fashion-mnist"


class ConvBlock(nn.Module):
    """conv 3x3 + ReLU + 2x2 max-pool: one layer of the pipeline."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)

    def forward(self, x):
        return torch.max_pool2d(torch.relu(self.conv(x)), 2)


class Dense(nn.Module):
    """A fully connected layer on the flattened input, with ReLU unless it is the head."""

    def __init__(self, features: int, out: int, relu: bool = True):
        super().__init__()
        self.fc = nn.Linear(features, out)
        self.relu = relu

    def forward(self, x):
        y = self.fc(x.flatten(1))
        return torch.relu(y) if self.relu else y


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return bytearray(f.read())[offset:]


def images(name):
    raw = read_idx(os.path.join(SOURCE, name), 16)
    return torch.frombuffer(raw, dtype=torch.uint8).view(-1, 1, 28, 28).float() / 255.0


def labels(name):
    raw = read_idx(os.path.join(SOURCE, name), 8)
    return torch.frombuffer(raw, dtype=torch.uint8).long()


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("conv1", ConvBlock(1, 16))
    model.add_module("conv2", ConvBlock(16, 32))
    model.add_module("fc1", Dense(32 * 7 * 7, 128))
    model.add_module("head", Dense(128, 10, relu=False))
    torch.jit.script(model).save(os.path.join(out, "cnn.pt"))
    torch.save({"input": images("train-images-idx3-ubyte.gz"),
                "target": labels("train-labels-idx1-ubyte.gz")}, os.path.join(out, "train.pt"))
    torch.save({"input": images("t10k-images-idx3-ubyte.gz"),
                "target": labels("t10k-labels-idx1-ubyte.gz")}, os.path.join(out, "test.pt"))
    print(f"wrote {out}/cnn.pt (layers conv1, conv2, fc1, head), {out}/train.pt, {out}/test.pt")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/cnn")
