#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots the CSV of precision_study: output relative error against the step, log-log.

    python3 examples/precision_study/plot_precision.py precision_study.csv --out docs/precision.png

One panel per read format (a write-back mode counts its state format as its read format),
then two comparisons: shared NVFP4 against an NVFP4 read copy over an FP16 checkpoint, and
nearest-even against stochastic rounding for FP16 / BF16 checkpoints; the last panel shows
the worst head of the NVFP4 comparison. Needs matplotlib.

The CSV of `precision_study --model gdn` (it has a window_mode column) gives two panels
instead: the output and the checkpoint error of the separate read copies (nearest-even), in
both window modes.
"""
import argparse
import csv
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

READ_FORMATS = ["fp32", "fp16", "bf16", "fp8_e4m3", "nvfp4"]
CHECKPOINT_COLORS = {"fp32": "tab:blue", "fp16": "tab:green", "bf16": "tab:orange",
                     "fp8_e4m3": "tab:purple", "nvfp4": "tab:red"}
MODE_MARKERS = {"writeback": "s", "shared": "o", "separate": "^"}
ROUNDING_STYLES = {"rne": "-", "sr": "--"}

NVFP4_MODES = [("shared", "nvfp4", "nvfp4", "sr"), ("shared", "nvfp4", "nvfp4", "rne"),
               ("separate", "nvfp4", "fp16", "sr"), ("separate", "nvfp4", "fp16", "rne")]
ROUNDING_MODES = [(mode, fmt, fmt, rnd) for fmt in ("fp16", "bf16") for mode in ("writeback", "shared")
                  for rnd in ("rne", "sr")] + [("separate", "bf16", "fp16", "rne"), ("separate", "bf16", "fp16", "sr")]


def load(path):
    """Series keyed by (mode, read, checkpoint, rounding): lists of (step, mean, worst)."""
    series = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["mode"], row["read"], row["checkpoint"], row["rounding"])
            series[key].append((int(row["step"]), float(row["mean_rel_err"]), float(row["worst_head_rel_err"])))
    return series


def label(key):
    mode, read, checkpoint, rounding = key
    formats = f"{read}/{checkpoint}" if mode == "separate" else checkpoint
    return f"{mode} {formats} {rounding}"


def draw(ax, series, keys, column=1, emphasize=()):
    for key in keys:
        if key not in series:
            continue
        points = sorted(series[key])
        wide = key in emphasize
        ax.plot([p[0] for p in points], [p[column] for p in points], label=label(key),
                color=CHECKPOINT_COLORS[key[2]], linestyle=ROUNDING_STYLES[key[3]],
                marker=MODE_MARKERS[key[0]], markersize=4, linewidth=2.4 if wide else 1.2)


def style(ax, title, ylabel="mean over heads of rel. error"):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("step (end of interval)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="best")


WINDOW_STYLES = {"corrected_values": "--", "raw_inputs": "-"}
CHECKPOINT_MARKERS = {"fp32": "o", "fp16": "^", "bf16": "s"}


def plot_gdn(path, out):
    """Gated DeltaNet: output and checkpoint error of the separate modes, per window mode."""
    series = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["mode"] != "separate" or row["rounding"] != "rne":
                continue
            key = (row["read"], row["checkpoint"], row["window_mode"])
            series[key].append((int(row["step"]), float(row["mean_rel_err"]), float(row["mean_ckpt_rel_err"])))
    fig, axes = plt.subplots(1, 2, figsize=(16, 6))
    for ax, column, what in zip(axes, (1, 2), ("output", "checkpoint")):
        for key in sorted(series):
            read, checkpoint, window = key
            points = sorted(series[key])
            ax.plot([p[0] for p in points], [p[column] for p in points], label=f"{read}/{checkpoint} {window}",
                    color=CHECKPOINT_COLORS[read], linestyle=WINDOW_STYLES[window],
                    marker=CHECKPOINT_MARKERS[checkpoint], markersize=4, linewidth=1.2)
        style(ax, f"{what} error", ylabel=f"mean over heads of {what} rel. error")
    fig.suptitle("Gated DeltaNet replay decode (W = 16), separate read copy, nearest-even: error against a float64 "
                 "reference (solid: raw_inputs, dashed: corrected_values; color: read format; marker: checkpoint)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="CSV written by precision_study")
    parser.add_argument("--out", default="precision.png", help="PNG to write")
    args = parser.parse_args()
    with open(args.csv, newline="") as f:
        if "window_mode" in next(csv.reader(f)):
            plot_gdn(args.csv, args.out)
            return
    series = load(args.csv)

    fig, axes = plt.subplots(2, 4, figsize=(22, 10))
    panels = list(axes.flat)
    for ax, read in zip(panels, READ_FORMATS):
        draw(ax, series, sorted(k for k in series if k[1] == read))
        style(ax, f"read format {read}")
    emphasis = (("shared", "nvfp4", "nvfp4", "sr"), ("separate", "nvfp4", "fp16", "sr"))
    draw(panels[5], series, NVFP4_MODES, emphasize=emphasis)
    style(panels[5], "NVFP4: shared vs NVFP4 read + FP16 checkpoint")
    draw(panels[6], series, ROUNDING_MODES)
    style(panels[6], "FP16 / BF16 checkpoints: nearest-even vs stochastic")
    draw(panels[7], series, NVFP4_MODES, column=2, emphasize=emphasis)
    style(panels[7], "NVFP4 comparison, worst head", ylabel="worst head rel. error")
    fig.suptitle("Mamba-2 replay decode (W = 16): output relative error against a float64 reference "
                 "(solid: nearest-even, dashed: stochastic; color: checkpoint format)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
