#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes docs/benchmarks.md (and docs/speedup.png, and README.md's performance excerpt)
from the JSON of a replayssm_bench run.

After a run on the device, one command regenerates the page:

    ./build/bench/replayssm_bench --benchmark_repetitions=3 \\
        --benchmark_out=docs/data/h200_bench.json --benchmark_out_format=json
    python3 bench/report.py docs/data/h200_bench.json

Several JSON files may be given (runs of different benchmark filters); where two hold the
same benchmark, the newer run's row is taken, and each table names the files its rows come
from. Tables, and rows within them, appear only for benchmarks the JSON holds. The page's
prose lives in this file (PAGE_HEAD and the notes of each table): edit it here, not in
docs/benchmarks.md. README.md's excerpt is the text between its `<!-- bench:begin -->` and
`<!-- bench:end -->` markers; the rest of README.md is left alone.

Standard library only; the plot needs matplotlib and is skipped (the old PNG kept) without it.
"""
import argparse
import json
import os
import re
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
BENCH = "./build/bench/replayssm_bench"

MAMBA2_SHAPES = {"nano": "Nemotron-3-Nano (96 heads, P = 80, N = 128, 8 groups)",
                 "super": "Nemotron-3-Super (128 heads, P = 64, N = 128, 8 groups)"}
GDN_SHAPES = {"qwen3.5-4b": "Qwen3.5-4B (32 value heads, 16 key heads, K = V = 128)",
              "qwen3.5-122b": "Qwen3.5-122B (64 value heads, 16 key heads, K = V = 128)"}
SHORT = {"nano": "Nano", "super": "Super", "qwen3.5-4b": "Qwen3.5-4B", "qwen3.5-122b": "Qwen3.5-122B"}
SHARED_STATES = ("fp32", "fp16", "bf16")
WINDOWS = ("W8", "W16", "W32")
# The write-back against replay table shows 16-bit states from this batch on.
SMALL_BATCH_ROWS_FROM = 32
GDN_MODES = ("corrected_values", "raw_inputs")
# Arguments Google Benchmark appends to a name, and the suffixes of repeated runs.
RUN_ARG = re.compile(r"^(min_time|iterations|repeats|manual_time|real_time|process_time)(:|$)")


class Run:
    """One JSON file: its context and its rows by (name parts without arguments, batch)."""

    def __init__(self, path):
        with open(path) as f:
            data = json.load(f)
        self.path = path
        self.context = data["context"]
        self.date = self.context.get("date", "")
        self.repetitions = 1
        self.rows = {}
        repeated = {b["run_name"] for b in data["benchmarks"] if b.get("aggregate_name") == "median"}
        for b in data["benchmarks"]:
            name = b.get("run_name", b["name"])
            # With --benchmark_repetitions, a benchmark's median stands for it.
            if name in repeated:
                if b.get("aggregate_name") != "median":
                    continue
                self.repetitions = max(self.repetitions, int(b.get("repetitions", 1)))
            key = parse_name(name)
            if key:
                self.rows[key] = dict(b, _run=self)

    def ceiling(self, what):
        value = self.context.get(f"{what}_bandwidth_GBps")
        return None if value is None else float(value)


def parse_name(name):
    """("mamba2" | "gdn" | "cpu", kind, ...parts, {"batch": n, ...}) as a hashable key, or None."""
    parts = [p for p in name.split("/") if not RUN_ARG.match(p)]
    args = tuple((p.split(":", 1)[0], int(p.split(":", 1)[1])) for p in parts if re.match(r"^\w+:\d+$", p))
    path = [p for p in parts if not re.match(r"^\w+:\d+$", p)]
    if not path or "batch" not in dict(args):
        return None
    if path[0].startswith("BM_gdn_"):
        path = ["gdn", path[0][len("BM_gdn_"):]] + path[1:]
    elif path[0] == "cpu":
        pass
    else:
        path = ["mamba2"] + path
    return tuple(path) + args


class Results:
    """The rows of every run given; for a benchmark in several runs, the newest run's."""

    def __init__(self, paths):
        self.runs = sorted((Run(p) for p in paths), key=lambda r: r.date)
        self.rows = {}
        for run in self.runs:  # oldest first: a newer run's row replaces an older one's
            self.rows.update(run.rows)
        self.used = set()

    def get(self, *path, batch, **args):
        row = self.rows.get(tuple(path) + (("batch", batch),) + tuple(args.items()))
        if row is not None:
            self.used.add(row["_run"])
        return row

    def batches(self, *path):
        n = len(path)
        return sorted({dict(k[n:]).get("batch") for k in self.rows
                       if k[:n] == tuple(path) and k[n:] and isinstance(k[n], tuple)})

    def has(self, *prefix):
        n = len(prefix)
        return any(k[:n] == prefix for k in self.rows)

    def values(self, position, *prefix):
        """The distinct name parts at `position` of the rows under `prefix`, in first-seen order."""
        n = len(prefix)
        seen = []
        for k in self.rows:
            if k[:n] == prefix and len(k) > position and isinstance(k[position], str) and k[position] not in seen:
                seen.append(k[position])
        return seen


def us(row):
    """A decode step's median microseconds (median_us), else Google Benchmark's time."""
    if row is None:
        return None
    return row.get("median_us", row["real_time"])


def num(value, spec=".1f", suffix=""):
    return "-" if value is None else format(value, spec) + suffix


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def counter(row, name):
    return None if row is None else row.get(name)


class Page:
    """The Markdown being written, with each table's command and the runs its rows came from."""

    def __init__(self, results, out_dir):
        self.results = results
        self.out_dir = out_dir
        self.lines = []

    def add(self, *text):
        self.lines.extend(text)

    def table(self, title, note, header, rows, filter_regex):
        """A table under `title`, or nothing when it has no rows."""
        sources = sorted(self.results.used, key=lambda r: r.date)
        self.results.used = set()
        if not rows:
            return
        # A column the run has no figure for at all is left out.
        keep = [i for i in range(len(header)) if any(cells[i] != "-" for cells in rows)]
        header = [header[i] for i in keep]
        rows = [[cells[i] for i in keep] for cells in rows]
        self.add(f"### {title}", "")
        if note:
            self.add(textwrap.fill(note, 92), "")
        reps = max((r.repetitions for r in sources), default=1)
        repeat = f" --benchmark_repetitions={reps}" if reps > 1 else ""
        self.add("```sh", f"{BENCH}{repeat} --benchmark_filter='{filter_regex}'", "```", "")
        if len(self.results.runs) > 1:
            self.add("Rows from " + ", ".join(f"[{os.path.basename(r.path)}]({self.link(r.path)})" for r in sources)
                     + ".", "")
        self.add("| " + " | ".join(header) + " |",
                 "|" + "|".join("---" if i < self.text_columns(header) else "---:" for i in range(len(header))) + "|")
        for cells in rows:
            self.add("| " + " | ".join(cells) + " |")
        self.add("")

    @staticmethod
    def text_columns(header):
        """Leading columns that hold names (left-aligned); the rest are numbers."""
        count = 0
        for h in header:
            if h in ("shape", "state", "window mode", "read copy / checkpoint"):
                count += 1
            else:
                break
        return count

    def link(self, path):
        return os.path.relpath(os.path.abspath(path), self.out_dir).replace(os.sep, "/")

    def text(self):
        return "\n".join(self.lines).rstrip() + "\n"


def repo_path(path):
    return os.path.relpath(os.path.abspath(path), ROOT).replace(os.sep, "/")


PAGE_HEAD = """\
# Benchmarks

<!-- Generated by bench/report.py: edit the prose there, not here. -->

The current figures of the GPU decode benchmarks, `replayssm_bench`, on one NVIDIA H200, from its JSON:

```sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release        # sm_90 unless CMAKE_CUDA_ARCHITECTURES says otherwise
cmake --build build --target replayssm_bench
{bench} --benchmark_repetitions=3 \\
    --benchmark_out=docs/data/h200_bench.json --benchmark_out_format=json
python3 bench/report.py docs/data/h200_bench.json
```

This page was generated by `{command}`.
Each table below gives the `--benchmark_filter` that runs its rows alone; add
`--benchmark_out=run.json` and `python3 bench/report.py run.json --out -` prints that run's
tables. Why each step takes the time it does is in [kernels.md](kernels.md); what the
storage formats cost in accuracy, in [precision.md](precision.md).
{runs_note}
## Method

- **Shapes.** One layer, BF16 activations. Mamba-2: Nano (Nemotron-3-Nano: 96 heads,
  P = 80, N = 128, 8 groups) and Super (Nemotron-3-Super: 128 heads, P = 64, N = 128, 8
  groups). Gated DeltaNet: Qwen3.5-4B (32 value heads, 16 key heads, K = V = 128) and
  Qwen3.5-122B (64 value heads, 16 key heads, K = V = 128). The state format is named in
  each benchmark: `fp32`, `fp16`, `bf16` for one state that is both read and checkpointed,
  `read_X_ckpt_Y[_sr]` for a read copy in X beside a checkpoint in Y (`_sr`: stochastic
  rounding at the flush).
- **Timing.** CUDA events around a CUDA graph; Google Benchmark's manual time. A replay
  step's time is the mean over whole flush periods (one graph holds every step from one
  flush to the next, the flush included), a write-back step's the mean over a graph of 16
  steps; each figure is the median over the iterations, and over the repetitions when the
  run repeats.
- **Memory.** State pools are at least four times the 60 MB L2, with more slots than
  requests; requests map to a random permutation of slots, so that a step's state comes
  from HBM (at the smallest batches the touched state can stay in L2 between launches).
- **Bandwidth.** The binary measures three ceilings of the device once per run: a copy
  (the better of `cudaMemcpy` device to device and a `float4` copy kernel over 2 GiB, read +
  write counted), a read-only `float4` reduction, and an in-place `float4` read + write of
  the same bytes (the pattern of a write-back step). `% copy`, `% read` and `% in-place`
  are a step's modelled bytes (`mamba2_bytes_per_step`, `gdn_bytes_per_step`: the policy's
  state traffic plus activations and window) over its time, against these.
- **Flush and read steps alone** (`flush_and_read`): every request in the same phase, the
  flush step, the read step at the start of a window (the token its only entry) and at its
  end (W - 1 entries before the token), each timed on its own.
- **Staggered phases**: slot i flushes at phase i mod W, so that every step has 1/W of the
  requests flushing. `staggered` times consecutive steps one by one (mean and 99th
  percentile); `replay_staggered` times whole flush periods as above.
- **Speculative decoding** (`spec_replay`, `spec_snapshot`): a graph of 12 rounds, each a
  verify step of T = 4 drafts per request and a commit, with a fixed acceptance pattern
  (request b in round r accepts 1, 2, 3, 4, 2, 3 drafts for (b + r) mod 6 = 0..5). Replay
  verifies from checkpoint + window and commits by moving the cursors; the snapshot
  baseline writes each draft's state to a slot of its own and commits by swapping the
  accepted draft's slot in. Accepted tokens/s = batch x mean accepted / time per round.
"""

PAGE_TAIL = """\
## CPU benchmark

`cpu_decode_bench` runs the CPU Mamba-2 steps (8 heads x 64 x 128, 2 groups, FP32; an
iteration is a window of 16 steps) on one thread and on two; the test suite runs it briefly.
Its figures depend on the host, so none are kept here (`report.py` tabulates its JSON):

```sh
cmake --build build --target cpu_decode_bench && ./build/bench/cpu_decode_bench
```

## Python call overhead

`bench/python_overhead.py` measures a decode step's host time called from Python (the API,
the engine wrappers, the torch op) against the C++ launcher, and a CUDA graph captured from
Python against one captured from C++; its docstring says what each row is. None are kept here.

```sh
pip install . && python -m pytest -q python/tests
python bench/python_overhead.py --model nemotron-nano   # and --model qwen3.5-4b
```
"""


def ceilings(page):
    res = page.results
    page.add("## Measured ceilings", "",
             textwrap.fill("The device's bandwidths as each run measured them (see Method); every `%` column "
                           "below is against its own run's.", 92), "",
             "| run | measured | copy GB/s | read GB/s | in-place read + write GB/s |", "|---|---|---:|---:|---:|")
    for run in res.runs:
        page.add(f"| [{os.path.basename(run.path)}]({page.link(run.path)}) | {run_date(run)} | "
                 f"{num(run.ceiling('copy'), '.0f')} | "
                 f"{num(run.ceiling('read'), '.0f')} | {num(run.ceiling('inplace'), '.0f')} |")
    page.add("")


def run_date(run):
    """The run's start as Google Benchmark recorded it, to the minute."""
    m = re.match(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)", run.date)
    return f"{m[1]} {m[2]}" + (" UTC" if run.date.endswith(("+00:00", "Z")) else "") if m else "-"


def mamba2_steps(page, shapes):
    res = page.results
    rows = []
    for shape in shapes:
        for state in SHARED_STATES:
            batches = sorted(set(res.batches("mamba2", "writeback", shape, state))
                             | {b for w in WINDOWS for b in res.batches("mamba2", "replay", shape, state, w)})
            for n in batches:
                if state != "fp32" and n < SMALL_BATCH_ROWS_FROM:
                    continue
                wb = res.get("mamba2", "writeback", shape, state, batch=n)
                rep = {w: res.get("mamba2", "replay", shape, state, w, batch=n) for w in WINDOWS}
                rows.append([SHORT[shape], state, str(n), num(us(wb)), num(counter(wb, "pct_inplace_bw"))]
                            + [num(us(rep[w])) for w in WINDOWS]
                            + [num(ratio(us(wb), us(rep[w])), ".2f", "x") for w in WINDOWS]
                            + [num(counter(rep["W16"], "pct_read_bw"))])
    page.table("Write-back against replay",
               "Microseconds per decode step. Replay reads its state from checkpoint + window and "
               "writes it back once per window (the flush); write-back reads and writes the whole "
               "state every step. Speedup = write-back time over replay time, same state format. "
               f"16-bit states from batch {SMALL_BATCH_ROWS_FROM} (below it a step's latency, not its "
               "bytes, sets its time, as the FP32 rows show; the JSON holds those rows too).",
               ["shape", "state", "batch", "write-back us", "write-back % in-place"]
               + [f"replay W={w[1:]} us" for w in WINDOWS] + [f"speedup W={w[1:]}" for w in WINDOWS]
               + ["replay W=16 % read"],
               rows, "^(writeback|replay)/(nano|super)/(fp32|fp16|bf16)/")


def mamba2_window(page, shapes):
    res = page.results
    rows = []
    for shape in shapes:
        for state in SHARED_STATES:
            windows = sorted((w for w in res.values(4, "mamba2", "flush_and_read", shape, state) if w.startswith("W")),
                             key=lambda w: int(w[1:]))
            for w in windows:
                for n in res.batches("mamba2", "flush_and_read", shape, state, w):
                    f = res.get("mamba2", "flush_and_read", shape, state, w, batch=n)
                    wb = res.get("mamba2", "writeback", shape, state, batch=n)
                    rep = res.get("mamba2", "replay", shape, state, w, batch=n)
                    rows.append([SHORT[shape], state, w[1:], str(n), num(us(rep)), num(counter(f, "read_us")),
                                 num(counter(f, "late_read_us")), num(counter(f, "flush_us")), num(us(wb)),
                                 num(ratio(counter(f, "flush_us"), us(wb)), ".2f", "x")])
    page.table("Read steps and flush per window length",
               "Each step timed alone, every request in the same phase: the read step at the start of "
               "a window (the token alone) and at its end (W - 1 entries before it), and the flush, "
               "against the write-back step of the same state format. The replay mean is the whole "
               "flush period's mean step, for comparison.",
               ["shape", "state", "W", "batch", "replay mean us", "read step, window start us",
                "read step, window end us", "flush us", "write-back us", "flush / write-back"],
               rows, "^(writeback/(nano|super)/(fp32|fp16|bf16)/|(replay|flush_and_read)/(nano|super)/(fp32|fp16|bf16)/W)")


def mamba2_staggered(page, shapes):
    res = page.results
    rows = []
    for shape in shapes:
        batches = sorted(set(res.batches("mamba2", "staggered", shape, "fp32", "W16"))
                         | set(res.batches("mamba2", "replay_staggered", shape, "fp32", "W16")))
        for n in batches:
            wb = res.get("mamba2", "writeback", shape, "fp32", batch=n)
            rep = res.get("mamba2", "replay", shape, "fp32", "W16", batch=n)
            whole = res.get("mamba2", "replay_staggered", shape, "fp32", "W16", batch=n)
            s = res.get("mamba2", "staggered", shape, "fp32", "W16", batch=n)
            rows.append([SHORT[shape], str(n), num(us(wb)), num(us(rep)), num(us(whole)),
                         num(ratio(us(wb), us(whole)), ".2f", "x"), num(counter(s, "mean_us")),
                         num(ratio(us(wb), counter(s, "mean_us")), ".2f", "x"), num(counter(s, "p99_us")),
                         num(counter(s, "p99_over_mean"), ".3f")])
    page.table("Staggered flushes, FP32 state, W = 16",
               "With staggered phases every step carries 1/W of the flushes: the mean step over whole "
               "flush periods (`replay_staggered`) and step-by-step times (`staggered`: mean, 99th "
               "percentile), each with its speedup over write-back.",
               ["shape", "batch", "write-back us", "replay, same phase us", "replay, staggered us",
                "speedup, staggered", "step mean us", "speedup, step mean", "step p99 us", "p99 / mean"],
               rows, "^(writeback/(nano|super)/fp32/|(replay|replay_staggered|staggered)/(nano|super)/fp32/W16/)")


def mamba2_split(page, shapes):
    res = page.results
    rows = []
    for shape in shapes:
        modes = [m for m in res.values(3, "mamba2", "replay", shape) if m.startswith("read_")]
        if not modes:
            continue
        for mode in ["fp32"] + modes:
            for n in res.batches("mamba2", "replay", shape, mode, "W16"):
                if mode == "fp32" and not any(res.rows.get(("mamba2", "replay", shape, m, "W16", ("batch", n)))
                                              for m in modes):
                    continue
                r = res.get("mamba2", "replay", shape, mode, "W16", batch=n)
                f = res.get("mamba2", "flush_and_read", shape, mode, "W16", batch=n)
                wb = res.get("mamba2", "writeback", shape, "fp32", batch=n)
                fp32 = res.get("mamba2", "replay", shape, "fp32", "W16", batch=n)
                rows.append([SHORT[shape], split_label(mode), str(n), num(us(r)), num(counter(r, "GBps"), ".0f"),
                             num(counter(r, "pct_read_bw")), num(ratio(us(wb), us(r)), ".2f", "x"),
                             num(ratio(us(fp32), us(r)), ".2f", "x"), num(counter(f, "read_us")),
                             num(counter(f, "late_read_us")), num(counter(f, "flush_us"))])
    page.table("Separate read copy and checkpoint, W = 16",
               "The read steps read a narrow read copy; the flush decodes the checkpoint and encodes "
               "both. Speedups are over the FP32 write-back step and over FP32 replay (one shared "
               "state, the first rows); the last three columns are the steps timed alone.",
               ["shape", "read copy / checkpoint", "batch", "us per step", "GB/s", "% read",
                "speedup vs write-back FP32", "speedup vs replay FP32", "read step, window start us",
                "read step, window end us", "flush us"],
               rows, "^(writeback/(nano|super)/fp32/|(replay|flush_and_read)/(nano|super)/(fp32|read_[a-z0-9_]+)/W16/)")


def mamba2_fused(page, shapes):
    res = page.results
    rows = []
    for shape in shapes:
        head = ("mamba2", "fused", shape, "fp32", "W16")
        for n in res.batches(*head, "ready_made"):
            ready, ready_norm, engine, fused = (res.get(*head, v, batch=n) for v in (
                "ready_made", "ready_made_then_norm", "engine_step", "engine_step_with_norm"))
            rows.append([SHORT[shape], str(n), num(us(ready)), num(us(ready_norm)), num(us(engine)), num(us(fused)),
                         num(ratio(us(ready_norm), us(fused)), ".2f", "x"), num(ratio(us(engine), us(ready)), ".3f")])
    page.table("An engine's fused kernel, FP32 state, W = 16",
               "examples/fused_kernel's kernel (one warp per head on the warp primitive "
               "`warp::mamba2_warp_step`, or, where a batch's heads fit the device at once, a block per "
               "head in tiles on `warp::mamba2_tile_step`, reading or flushing as the head's plan says) "
               "with the RMSNorm of the gated output fused "
               "after the step (the outputs kept in shared memory and stored once, normalized), against "
               "the ready-made step followed by a norm kernel; and the engine kernel's step alone against "
               "the ready-made step. Mean step over whole windows, every request in the same phase.",
               ["shape", "batch", "ready-made us", "ready-made + norm us", "engine step us",
                "engine step + fused norm us", "fused speedup", "engine step / ready-made"],
               rows, "^fused/(nano|super)/fp32/W16/")


def split_label(mode):
    m = re.match(r"^read_([a-z0-9_]+?)_ckpt_([a-z0-9]+)(_sr)?$", mode)
    if not m:
        return f"`{mode}` (one shared state)"
    return f"`{mode}`: {m[1].upper()} / {m[2].upper()}" + (", stochastic" if m[3] else "")


def spec(page, recurrence, shapes, prefix):
    res = page.results
    rows = []
    for shape in shapes:
        batches = sorted(set(res.batches(recurrence, "spec_replay", shape, "fp32", "W16", "T4"))
                         | set(res.batches(recurrence, "spec_snapshot", shape, "fp32", "W16", "T4")))
        for n in batches:
            r = res.get(recurrence, "spec_replay", shape, "fp32", "W16", "T4", batch=n)
            s = res.get(recurrence, "spec_snapshot", shape, "fp32", "W16", "T4", batch=n)
            rt, st = counter(r, "round_us"), counter(s, "round_us")
            tokens = [None if row is None else row["accepted_tokens_per_s"] / 1e3 for row in (r, s)]
            snapshot_gb = counter(r or s, "snapshot_bytes")
            window_mb = counter(r, "window_extra_bytes")
            rows.append([SHORT[shape], str(n), num(rt), num(st), num(ratio(st, rt), ".2f", "x"),
                         num(tokens[0], ".0f", "k"), num(tokens[1], ".0f", "k"),
                         num(counter(r or s, "mean_accepted"), ".2f"), num(counter(s, "pct_copy_bw")),
                         num(None if snapshot_gb is None else snapshot_gb / 1e9, ".2f"),
                         num(None if window_mb is None else window_mb / 1e6, ".2f")])
    page.table("Speculative decoding, FP32 state, W = 16, T = 4 drafts",
               "Microseconds per round (a verify step of 4 drafts per request and a commit). Speedup = "
               "snapshot time over replay time, the ratio of their accepted tokens/s. The snapshot "
               "baseline keeps a state per draft (its memory per layer, and its state traffic as % of "
               "the copy bandwidth); replay keeps the drafts in its window ring (the extra memory).",
               ["shape", "batch", "replay us per round", "snapshot us per round", "speedup", "replay accepted tok/s",
                "snapshot accepted tok/s", "mean accepted", "snapshot % copy", "snapshot memory GB",
                "replay window extra MB"],
               rows, f"^{prefix}spec_(replay|snapshot)/")


def gdn_steps(page, shapes):
    res = page.results
    rows = []
    for shape in shapes:
        batches = sorted(set(res.batches("gdn", "writeback", shape, "fp32"))
                         | {b for m in GDN_MODES for b in res.batches("gdn", "replay", shape, "fp32", m, "W16")})
        for n in batches:
            wb = res.get("gdn", "writeback", shape, "fp32", batch=n)
            rep = {m: res.get("gdn", "replay", shape, "fp32", m, "W16", batch=n) for m in GDN_MODES}
            rows.append([SHORT.get(shape, shape), str(n), num(us(wb)), num(counter(wb, "pct_inplace_bw"))]
                        + [c for m in GDN_MODES for c in (num(us(rep[m])), num(ratio(us(wb), us(rep[m])), ".2f", "x"))]
                        + [num(counter(rep["corrected_values"], "pct_read_bw"))])
    page.table("Write-back against replay, FP32 state, W = 16",
               "Microseconds per decode step, in both window modes: `corrected_values` keeps each "
               "token's corrected value in the window, `raw_inputs` the token's own inputs (the flush "
               "recomputes the corrections). A replay flush leaves its token open, so a flush period "
               "is W - 1 steps.",
               ["shape", "batch", "write-back us", "write-back % in-place", "replay us", "speedup",
                "raw-inputs replay us", "raw-inputs speedup", "replay % read"],
               rows, "^BM_gdn_(writeback|replay)/[^/]+/fp32/")


def gdn_flush(page, shapes):
    res = page.results
    rows = []
    for shape in shapes:
        for mode in GDN_MODES:
            batches = sorted(set(res.batches("gdn", "flush_and_read", shape, "fp32", mode, "W16"))
                             | set(res.batches("gdn", "staggered", shape, "fp32", mode, "W16")))
            for n in batches:
                f = res.get("gdn", "flush_and_read", shape, "fp32", mode, "W16", batch=n)
                s = res.get("gdn", "staggered", shape, "fp32", mode, "W16", batch=n)
                wb = res.get("gdn", "writeback", shape, "fp32", batch=n)
                rows.append([SHORT.get(shape, shape), f"`{mode}`", str(n), num(counter(f, "read_us")),
                             num(counter(f, "late_read_us")), num(counter(f, "flush_us")), num(us(wb)),
                             num(ratio(counter(f, "flush_us"), us(wb)), ".2f", "x"), num(counter(s, "mean_us")),
                             num(ratio(us(wb), counter(s, "mean_us")), ".2f", "x"), num(counter(s, "p99_us")),
                             num(counter(s, "p99_over_mean"), ".3f")])
    page.table("Read steps, flush and staggered flushes, FP32 state, W = 16",
               "The read step at the window's start and end and the flush, each timed alone (every "
               "request in the same phase); then staggered phases, step by step (mean, its speedup "
               "over write-back, 99th percentile).",
               ["shape", "window mode", "batch", "read step, window start us", "read step, window end us",
                "flush us", "write-back us", "flush / write-back", "staggered step mean us", "staggered speedup",
                "staggered p99 us", "p99 / mean"],
               rows, "^BM_gdn_(writeback/[^/]+/fp32/|(flush_and_read|staggered)/[^/]+/fp32/)")


def gdn_split(page, shapes):
    res = page.results
    rows = []
    for shape in shapes:
        for state in [s for s in res.values(3, "gdn", "replay", shape) if s.startswith("read_")]:
            for mode in GDN_MODES:
                for n in res.batches("gdn", "replay", shape, state, mode, "W16"):
                    r = res.get("gdn", "replay", shape, state, mode, "W16", batch=n)
                    wb = res.get("gdn", "writeback", shape, "fp32", batch=n)
                    fp32 = res.get("gdn", "replay", shape, "fp32", mode, "W16", batch=n)
                    rows.append([SHORT.get(shape, shape), split_label(state), f"`{mode}`", str(n), num(us(r)),
                                 num(counter(r, "GBps"), ".0f"), num(counter(r, "pct_read_bw")),
                                 num(ratio(us(wb), us(r)), ".2f", "x"), num(ratio(us(fp32), us(r)), ".2f", "x")])
    page.table("Separate read copy and checkpoint, W = 16",
               "Speedups over the FP32 write-back step and over FP32 replay in the same window mode.",
               ["shape", "read copy / checkpoint", "window mode", "batch", "us per step", "GB/s", "% read",
                "speedup vs write-back FP32", "speedup vs replay FP32"],
               rows, "^BM_gdn_(writeback/[^/]+/fp32/|replay/[^/]+/(fp32|read_[a-z0-9_]+)/)")


def cpu(page):
    res = page.results
    rows = []
    threads = sorted({dict(k[3:]).get("threads") for k in res.rows if k[:3] == ("cpu", "writeback", "fp32")})
    step = lambda row: None if row is None or "time_per_step" not in row else row["time_per_step"] * 1e6
    for n in res.batches("cpu", "writeback", "fp32"):
        for t in threads:
            wb = res.get("cpu", "writeback", "fp32", batch=n, threads=t)
            rep = res.get("cpu", "replay", "fp32", "W16", batch=n, threads=t)
            rows.append([str(n), str(t), num(step(wb)), num(step(rep)), num(ratio(step(wb), step(rep)), ".2f", "x")])
    page.table("CPU steps (Mamba-2, 8 heads x 64 x 128, FP32)", "Microseconds per step on the host that ran it.",
               ["batch", "threads", "write-back us", "replay W=16 us", "speedup"], rows, "^cpu/")


def mamba2_section(page):
    res = page.results
    if not res.has("mamba2"):
        return
    page.add("## Mamba-2", "")
    shapes = list(MAMBA2_SHAPES)
    for table in (mamba2_steps, mamba2_window, mamba2_staggered, mamba2_split, mamba2_fused):
        table(page, shapes)
    spec(page, "mamba2", shapes, "")


def gdn_section(page):
    res = page.results
    if not res.has("gdn"):
        return
    page.add("## Gated DeltaNet", "")
    shapes = list(GDN_SHAPES) + [s for s in res.values(2, "gdn") if s not in GDN_SHAPES]
    for table in (gdn_steps, gdn_flush, gdn_split):
        table(page, shapes)
    spec(page, "gdn", shapes, "BM_gdn_")


def speedup_series(res):
    """(label, batches, replay speedup over write-back) at W = 16 for each shape and FP32 state."""
    series = []
    for shape in MAMBA2_SHAPES:
        for state in SHARED_STATES:
            pts = [(n, ratio(us(res.rows.get(("mamba2", "writeback", shape, state, ("batch", n)))),
                             us(res.rows.get(("mamba2", "replay", shape, state, "W16", ("batch", n))))))
                   for n in res.batches("mamba2", "replay", shape, state, "W16")]
            pts = [(n, s) for n, s in pts if s is not None]
            if pts:
                series.append((f"Mamba-2 {shape}, {state} state", pts))
    for shape in GDN_SHAPES:
        pts = [(n, ratio(us(res.rows.get(("gdn", "writeback", shape, "fp32", ("batch", n)))),
                         us(res.rows.get(("gdn", "replay", shape, "fp32", "corrected_values", "W16", ("batch", n))))))
               for n in res.batches("gdn", "replay", shape, "fp32", "corrected_values", "W16")]
        pts = [(n, s) for n, s in pts if s is not None]
        if pts:
            series.append((f"Gated DeltaNet {shape}, fp32 state", pts))
    return series


def plot(res, path):
    """Replay's speedup over write-back per batch; False when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, pts in speedup_series(res):
        ax.plot([n for n, _ in pts], [s for _, s in pts], marker="s" if "DeltaNet" in label else "o",
                linestyle="--" if "DeltaNet" in label else "-", label=label)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (requests)")
    ax.set_ylabel("replay speedup over write-back (W = 16)")
    ax.set_title("Decode step on one H200, one layer, BF16 inputs")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def readme_excerpt(res, page_link, plot_link):
    """README.md's performance excerpt: replay's speedup at W = 16 at batches of 128 and more
    (or whichever the run has), FP32 state, and the plot."""
    layers = [("mamba2", s, MAMBA2_SHAPES[s].split(" (")[0] + " (Mamba-2)", ("fp32", "W16")) for s in MAMBA2_SHAPES]
    layers += [("gdn", s, SHORT[s] + " (Gated DeltaNet)", ("fp32", "corrected_values", "W16")) for s in GDN_SHAPES]
    rows = []
    for rec, shape, label, replay_parts in layers:
        batches = res.batches(rec, "replay", shape, *replay_parts)
        for n in [b for b in batches if b >= 128] or batches:
            wb = res.rows.get((rec, "writeback", shape, "fp32", ("batch", n)))
            rep = res.rows.get((rec, "replay", shape) + replay_parts + (("batch", n),))
            r = res.rows.get((rec, "spec_replay", shape, "fp32", "W16", "T4", ("batch", n)))
            s = res.rows.get((rec, "spec_snapshot", shape, "fp32", "W16", "T4", ("batch", n)))
            if wb is not None and rep is not None:
                rows.append(f"| {label} | {n} | {num(us(wb))} | {num(us(rep))} | "
                            f"{num(ratio(us(wb), us(rep)), '.2f', 'x')} | "
                            f"{num(ratio(counter(s, 'round_us'), counter(r, 'round_us')), '.2f', 'x')} |")
    if not rows:
        return [f"Every table, and the command that reproduces it: [{page_link}]({page_link}).", "",
                f"![Replay speedup over write-back per batch]({plot_link})"]
    intro = ("Replay's speedup over the write-back step on one H200 (W = 16, FP32 state, BF16 inputs; "
             "speculative: accepted tokens/s over the snapshot baseline's, 4 drafts per round), from "
             f"[{page_link}]({page_link}), which has every table and the command that reproduces it:")
    return (textwrap.wrap(intro, 92) + ["", "| layer | batch | write-back us | replay us | speedup | speculative speedup |",
                                        "|---|---:|---:|---:|---:|---:|"]
            + rows + ["", f"![Replay speedup over write-back per batch]({plot_link})"])


def update_readme(path, lines):
    """Replaces the text between README's bench markers; False when it has none."""
    with open(path) as f:
        text = f.read()
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSON written by replayssm_bench --benchmark_out (or cpu_decode_bench)")
    parser.add_argument("--out", default=os.path.join(DOCS, "benchmarks.md"),
                        help="the page to write (default: docs/benchmarks.md; '-': stdout, nothing else written)")
    parser.add_argument("--plot", default=os.path.join(DOCS, "speedup.png"),
                        help="the speedup plot to write when matplotlib is installed (default: docs/speedup.png)")
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"),
                        help="the README whose bench markers get the excerpt (default: README.md)")
    parser.add_argument("--no-plot", action="store_true", help="leave the plot alone")
    parser.add_argument("--no-readme", action="store_true", help="leave the README alone")
    args = parser.parse_args()

    res = Results(args.results)
    to_stdout = args.out == "-"
    out_dir = DOCS if to_stdout else os.path.dirname(os.path.abspath(args.out))
    page = Page(res, out_dir)
    command = "python3 bench/report.py " + " ".join(repo_path(p) for p in args.results)
    runs_note = ""
    if len(res.runs) > 1:
        runs_note = (f"\nIts rows come from {len(res.runs)} runs (the newer run's row where two hold one; each table\n"
                     "names its runs); a run of every benchmark as `docs/data/h200_bench.json` replaces them all.\n")
    page.add(PAGE_HEAD.format(bench=BENCH, command=command, runs_note=runs_note))
    ceilings(page)
    mamba2_section(page)
    gdn_section(page)
    cpu(page)
    page.add(PAGE_TAIL)
    text = page.text()
    if to_stdout:
        sys.stdout.write(text)
        return
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {repo_path(args.out)} ({text.count(chr(10))} lines)", file=sys.stderr)
    if not args.no_plot:
        if plot(res, args.plot):
            print(f"wrote {repo_path(args.plot)}", file=sys.stderr)
        else:
            print("matplotlib not installed: the plot is left as it was", file=sys.stderr)
    if not args.no_readme:
        page_link = os.path.relpath(os.path.abspath(args.out), os.path.dirname(os.path.abspath(args.readme)))
        plot_link = os.path.relpath(os.path.abspath(args.plot), os.path.dirname(os.path.abspath(args.readme)))
        if update_readme(args.readme, readme_excerpt(res, page_link, plot_link)):
            print(f"updated the excerpt in {repo_path(args.readme)}", file=sys.stderr)


if __name__ == "__main__":
    main()
