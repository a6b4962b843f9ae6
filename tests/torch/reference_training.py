"""PyTorch's own training as dapple's pipeline runs it, shared by the reference scripts
(graph_models.py, export_models.py): every micro-batch, and each replica's slice of it, runs
alone and adds its share of the mean loss's gradient; SGD steps once per global batch."""
import torch


def rows(x, lo, hi):
    """Rows lo..hi of a tensor, or of each tensor of a tuple (a forward's several inputs)."""
    return tuple(v[lo:hi] for v in x) if isinstance(x, tuple) else x[lo:hi]


def train_in_slices(opt, batches, gbs, micro_batch, slices, slice_loss):
    """Trains on `batches` ((x, y) per step); slice_loss(x, y) is a slice's mean loss.
    Returns each step's loss over the global batch."""
    losses = []
    micro_batch = micro_batch or gbs
    for x, y in batches:
        opt.zero_grad()
        total = 0.0
        for mb in range(0, gbs, micro_batch):
            n = micro_batch // slices
            for s in range(slices):
                lo = mb + s * n
                part = slice_loss(rows(x, lo, lo + n), y[lo:lo + n])
                (part * n / gbs).backward()
                total += part.item() * n / gbs
        opt.step()
        losses.append(total)
    return losses


def max_rel_diff(mine, theirs):
    """The largest relative difference of two lists of losses (1e300 when the lengths
    differ)."""
    if len(mine) != len(theirs):
        return 1e300
    return max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(mine, theirs))


def add_check_args(c, positional):
    """The options of a `check` command that trains as dapple did."""
    for name in positional:
        c.add_argument(name)
    c.add_argument("--steps", type=int, required=True)
    c.add_argument("--gbs", type=int, required=True)
    c.add_argument("--micro-batch", type=int, default=0)  # 0: the global batch
    c.add_argument("--slices", type=int, default=1)
    c.add_argument("--seq-len", type=int, default=0)
    c.add_argument("--lr", type=float, default=0.05)
    c.add_argument("--momentum", type=float, default=0.9)
    c.add_argument("--dtype", choices=("float64", "float32"), default="float64")
