#!/usr/bin/env python3
"""Draws the training loss of `dapple train --log-json` runs as one SVG line chart.

  loss_curves_svg.py OUT.svg LABEL=LOG [LABEL=LOG ...] [--title T] [--smooth K] [--ymax Y]

Each LOG is a run's stdout (one JSON object per step); its curve is the moving average of
the last K steps' losses (default 10). Losses above --ymax (default: 1.5 x the lowest
average) are drawn at the top edge, so that the first steps of a run from a random start do
not flatten the rest.
"""
import argparse
import json
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
W, H, LEFT, RIGHT, TOP, BOTTOM = 720, 420, 60, 190, 40, 50


def smoothed(path, k):
    losses = [json.loads(line)["loss"] for line in open(path)
              if line.startswith("{") and '"step"' in line and '"loss"' in line]
    return [sum(losses[max(0, i - k + 1):i + 1]) / (i + 1 - max(0, i - k + 1))
            for i in range(len(losses))]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("runs", nargs="+")
    p.add_argument("--title", default="training loss")
    p.add_argument("--smooth", type=int, default=10)
    p.add_argument("--ymax", type=float)
    a = p.parse_args()
    curves = [(r.split("=", 1)[0], smoothed(r.split("=", 1)[1], a.smooth)) for r in a.runs]
    steps = max(len(c) for _, c in curves)
    ymin = min(min(c) for _, c in curves)
    ymax = a.ymax or 1.5 * ymin
    ymin = 0.95 * ymin
    x = lambda i: LEFT + (W - LEFT - RIGHT) * i / max(1, steps - 1)  # noqa: E731
    y = lambda v: TOP + (H - TOP - BOTTOM) * (1 - (min(v, ymax) - ymin) / (ymax - ymin))  # noqa: E731
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{a.title}</text>']
    for t in range(5):  # horizontal grid and loss labels
        v = ymin + (ymax - ymin) * t / 4
        svg.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   'stroke="#ddd"/>')
        svg.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    for t in range(6):  # step labels
        i = round((steps - 1) * t / 5)
        svg.append(f'<text x="{x(i):.1f}" y="{H - BOTTOM + 18}" text-anchor="middle">{i + 1}</text>')
    svg.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 10}" text-anchor="middle">step</text>')
    svg.append(f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})">loss (mean of {a.smooth} steps)</text>')
    for k, (label, c) in enumerate(curves):
        colour = COLOURS[k % len(COLOURS)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(c))
        svg.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        ly = TOP + 10 + 20 * k
        svg.append(f'<line x1="{W - RIGHT + 10}" x2="{W - RIGHT + 30}" y1="{ly}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        svg.append(f'<text x="{W - RIGHT + 36}" y="{ly + 4}">{label}</text>')
    svg.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    sys.exit(main())
