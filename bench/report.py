#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tables and the speedup plot of docs/benchmarks.md, from replayssm_bench's JSON
(decode steps, split precision, speculative decoding; Mamba-2, then Gated DeltaNet when the
run has BM_gdn_* results).

usage: python3 bench/report.py RESULTS.json [--plot docs/speedup.png]
Prints Markdown tables to stdout; with --plot writes a PNG of speedup against batch size.
"""
import argparse
import json
import re
from collections import defaultdict

NAME = re.compile(r"^(?P<kind>[a-z_]+)/(?P<shape>nano|super)/(?P<mode>[a-z0-9_]+)(?:/(?P<window>W\d+))?/batch:(?P<batch>\d+)")
SPEC = re.compile(r"^spec_(?P<kind>replay|snapshot)/(?P<shape>nano|super)/fp32/W16/T(?P<drafts>\d+)/batch:(?P<batch>\d+)/")
GDN_NAME = re.compile(r"^BM_gdn_(?P<kind>writeback|replay|flush_and_read|staggered)/(?P<shape>[^/]+)/(?P<state>[a-z0-9_]+)"
                      r"(?:/(?P<mode>corrected_values|raw_inputs))?(?:/(?P<window>W\d+))?/batch:(?P<batch>\d+)(?:/|$)")
GDN_SPEC = re.compile(r"^BM_gdn_spec_(?P<kind>replay|snapshot)/(?P<shape>[^/]+)/fp32/W16/T(?P<drafts>\d+)/batch:(?P<batch>\d+)(?:/|$)")
# Gated DeltaNet shapes of the benchmark: value heads, key heads, key and value head dims.
GDN_SHAPES = {"qwen3.5-4b": "Qwen3.5-4B, 32 value heads, 16 key heads, K = V = 128",
              "qwen3.5-122b": "Qwen3.5-122B, 64 value heads, 16 key heads, K = V = 128"}


def load(path):
    """Context, Mamba-2 decode rows and spec rows, Gated DeltaNet decode rows and spec rows."""
    with open(path) as f:
        data = json.load(f)
    rows, spec, gdn, gdn_spec = {}, {}, {}, {}
    # With --benchmark_repetitions, a benchmark's median stands for it.
    repeated = {b["run_name"] for b in data["benchmarks"] if b.get("aggregate_name") == "median"}
    for b in data["benchmarks"]:
        if b.get("run_name") in repeated:
            if b.get("aggregate_name") != "median":
                continue
            b["name"] = b["run_name"]
        # Runs before 2026-11-30 named the write-back step "naive".
        b["name"] = re.sub(r"(^|_)naive/", r"\1writeback/", b["name"])
        m = NAME.match(b["name"])
        if m:
            key = (m["kind"], m["shape"], m["mode"], m["window"] or "", int(m["batch"]))
            rows[key] = b
        m = SPEC.match(b["name"])
        if m:
            spec[(m["kind"], m["shape"], int(m["drafts"]), int(m["batch"]))] = b
        m = GDN_NAME.match(b["name"])
        if m:
            gdn[(m["kind"], m["shape"], m["state"], m["mode"] or "", int(m["batch"]))] = b
        m = GDN_SPEC.match(b["name"])
        if m:
            gdn_spec[(m["kind"], m["shape"], int(m["drafts"]), int(m["batch"]))] = b
    return data["context"], rows, spec, gdn, gdn_spec


def us(b):
    return b.get("median_us", b["real_time"])


def step_tables(rows, shape, mode):
    batches = sorted({k[4] for k in rows if k[1] == shape and k[2] == mode and k[0] == "writeback"})
    out = [f"\n**{shape}, state {mode}, BF16 inputs** (median us per step; replay = mean over whole flush periods: W steps)\n",
           "| batch | writeback us | writeback % copy | writeback % in-place | W8 us | W16 us | W16 GB/s | W16 % copy | W16 % read | W32 us | speedup W8 | speedup W16 | speedup W32 |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in batches:
        writeback = rows[("writeback", shape, mode, "", n)]
        rep = {w: rows.get(("replay", shape, mode, w, n)) for w in ("W8", "W16", "W32")}
        time = {w: r and us(r) for w, r in rep.items()}
        speedup = {w: t and us(writeback) / t for w, t in time.items()}
        w16 = rep["W16"] or {}
        out.append(f"| {n} | {us(writeback):.1f} | {writeback['pct_copy_bw']:.1f} | "
                   f"{fmt(writeback.get('pct_inplace_bw'), '.1f')} | {fmt(time['W8'], '.1f')} | "
                   f"{fmt(time['W16'], '.1f')} | {fmt(w16.get('GBps'), '.0f')} | {fmt(w16.get('pct_copy_bw'), '.1f')} | "
                   f"{fmt(w16.get('pct_read_bw'), '.1f')} | {fmt(time['W32'], '.1f')} | {fmt(speedup['W8'], '.2f')} | "
                   f"{fmt(speedup['W16'], '.2f')} | {fmt(speedup['W32'], '.2f')} |")
    return "\n".join(out)


def flush_table(rows, shape):
    out = [f"\n**{shape}, FP32 state, W=16: flush and read steps alone, and staggered flushes**\n",
           "| batch | writeback us | flush us | flush / writeback | read step us (k=1) | read step us (k=W-1) | staggered mean us | staggered p99 us | p99 / mean |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sorted({k[4] for k in rows if k[0] == "flush_and_read" and k[1] == shape and k[2] == "fp32"}):
        f = rows[("flush_and_read", shape, "fp32", "W16", n)]
        s = rows[("staggered", shape, "fp32", "W16", n)]
        writeback = us(rows[("writeback", shape, "fp32", "", n)])
        out.append(f"| {n} | {writeback:.1f} | {f['flush_us']:.1f} | {f['flush_us'] / writeback:.2f} | {f['read_us']:.1f} | "
                   f"{fmt(f.get('late_read_us'), '.1f')} | "
                   f"{s['mean_us']:.1f} | {s['p99_us']:.1f} | {s['p99_over_mean']:.3f} |")
    return "\n".join(out)


def split_table(rows, shape):
    modes = sorted({k[2] for k in rows if k[1] == shape and k[2].startswith("read_")})
    out = [f"\n**{shape}, separate read copy and checkpoint, W=16, stochastic rounding**\n",
           "| mode | batch | us per step | GB/s (own byte model) | % copy | speedup vs writeback FP32 | flush us | read step us (k=1) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in modes:
        for n in sorted({k[4] for k in rows if k[2] == mode}):
            r = rows[("replay", shape, mode, "W16", n)]
            writeback = us(rows[("writeback", shape, "fp32", "", n)])
            f = rows.get(("flush_and_read", shape, mode, "W16", n))
            alone = f"{f['flush_us']:.1f} | {f['read_us']:.1f}" if f else "- | -"
            out.append(f"| {mode} | {n} | {us(r):.1f} | {r['GBps']:.0f} | {r['pct_copy_bw']:.1f} | {writeback / us(r):.2f} | {alone} |")
    return "\n".join(out)


def spec_table(spec, shape, title=None):
    out = [f"\n**{title or shape}, speculative decoding, FP32 state, W=16, T=4 drafts, mean 2.5 accepted** "
           "(median us per verify + commit round)\n",
           "| batch | replay us | snapshot us | replay accepted tok/s | snapshot accepted tok/s | speedup | "
           "snapshot memory (GB per layer) | replay window ring extra (MB per layer) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (kind, s, drafts, n) in sorted(k for k in spec if k[0] == "replay" and k[1] == shape):
        r, b = spec[("replay", shape, drafts, n)], spec[("snapshot", shape, drafts, n)]
        out.append(f"| {n} | {r['round_us']:.1f} | {b['round_us']:.1f} | {r['accepted_tokens_per_s'] / 1e3:.0f}k | "
                   f"{b['accepted_tokens_per_s'] / 1e3:.0f}k | {b['round_us'] / r['round_us']:.2f} | "
                   f"{r['snapshot_bytes'] / 1e9:.2f} | {r['window_extra_bytes'] / 1e6:.2f} |")
    return "\n".join(out)


def fmt(value, spec):
    """`value` formatted, or "-" where the run has no such result."""
    return "-" if value is None else format(value, spec)


def gdn_step_table(gdn, shape):
    """Gated DeltaNet, FP32 state: writeback against replay in both window modes."""
    batches = sorted({k[4] for k in gdn if k[0] == "writeback" and k[1] == shape and k[2] == "fp32"})
    out = [f"\n**Gated DeltaNet {GDN_SHAPES.get(shape, shape)}: state fp32, W=16, BF16 inputs** "
           "(median us per step; replay = mean over whole flush periods: W - 1 steps)\n",
           "| batch | writeback us | writeback GB/s | writeback % copy | replay us | replay GB/s | replay % copy | speedup | "
           "raw-inputs us | raw-inputs % copy | raw-inputs speedup |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in batches:
        writeback = gdn[("writeback", shape, "fp32", "", n)]
        cells = [f"{n}", fmt(us(writeback), ".1f"), fmt(writeback["GBps"], ".0f"), fmt(writeback["pct_copy_bw"], ".1f")]
        for mode, full in (("corrected_values", True), ("raw_inputs", False)):
            r = gdn.get(("replay", shape, "fp32", mode, n))
            cells.append(fmt(r and us(r), ".1f"))
            if full:
                cells.append(fmt(r and r["GBps"], ".0f"))
            cells += [fmt(r and r["pct_copy_bw"], ".1f"), fmt(r and us(writeback) / us(r), ".2f")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def gdn_flush_table(gdn, shape):
    """Gated DeltaNet, FP32 state: the flush and read steps alone per window mode, and staggered phases."""
    out = [f"\n**Gated DeltaNet {GDN_SHAPES.get(shape, shape)}, FP32 state, W=16: flush and read steps alone, "
           "and staggered flushes**\n",
           "| window mode | batch | writeback us | writeback % in-place | flush us | flush / writeback | read step us (k=1) | "
           "read step us (k=W-1) | staggered mean us | staggered speedup | staggered p99 / mean |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in ("corrected_values", "raw_inputs"):
        for n in sorted({k[4] for k in gdn if k[0] == "flush_and_read" and k[1] == shape and k[3] == mode}):
            f = gdn[("flush_and_read", shape, "fp32", mode, n)]
            s = gdn.get(("staggered", shape, "fp32", mode, n)) or {}
            writeback = gdn.get(("writeback", shape, "fp32", "", n))
            w = writeback and us(writeback)
            out.append(f"| {mode} | {n} | {fmt(w, '.1f')} | {fmt(writeback and writeback.get('pct_inplace_bw'), '.1f')} | "
                       f"{f['flush_us']:.1f} | {fmt(w and f['flush_us'] / w, '.2f')} | {f['read_us']:.1f} | "
                       f"{f['late_read_us']:.1f} | {fmt(s.get('mean_us'), '.1f')} | "
                       f"{fmt(w and s.get('mean_us') and w / s['mean_us'], '.2f')} | {fmt(s.get('p99_over_mean'), '.3f')} |")
    return "\n".join(out)


def gdn_split_table(gdn, shape):
    """Gated DeltaNet, separate read copy and checkpoint, against writeback FP32 and FP32 replay."""
    states = sorted({k[2] for k in gdn if k[1] == shape and k[2].startswith("read_")})
    out = [f"\n**Gated DeltaNet {GDN_SHAPES.get(shape, shape)}: separate read copy and checkpoint, W=16**\n",
           "| state | window mode | batch | us per step | GB/s (own byte model) | % copy | speedup vs writeback FP32 | "
           "speedup vs replay FP32 (same mode) |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for state in states:
        for mode in ("corrected_values", "raw_inputs"):
            for n in sorted({k[4] for k in gdn if k[1] == shape and k[2] == state and k[3] == mode}):
                r = gdn[("replay", shape, state, mode, n)]
                writeback = gdn.get(("writeback", shape, "fp32", "", n))
                fp32 = gdn.get(("replay", shape, "fp32", mode, n))
                out.append(f"| {state} | {mode} | {n} | {us(r):.1f} | {r['GBps']:.0f} | {r['pct_copy_bw']:.1f} | "
                           f"{fmt(writeback and us(writeback) / us(r), '.2f')} | {fmt(fp32 and us(fp32) / us(r), '.2f')} |")
    return "\n".join(out)


def print_gdn(gdn, gdn_spec):
    """The Gated DeltaNet tables, for the shapes the run has."""
    shapes = sorted({k[1] for k in gdn}, key=lambda s: list(GDN_SHAPES).index(s) if s in GDN_SHAPES else len(GDN_SHAPES))
    for shape in shapes:
        print(gdn_step_table(gdn, shape))
        if any(k[0] == "flush_and_read" and k[1] == shape for k in gdn):
            print(gdn_flush_table(gdn, shape))
        if any(k[1] == shape and k[2].startswith("read_") for k in gdn):
            print(gdn_split_table(gdn, shape))
    for shape in sorted({k[1] for k in gdn_spec if k[0] == "replay"}):
        print(spec_table(gdn_spec, shape, f"Gated DeltaNet {GDN_SHAPES.get(shape, shape)}"))


def plot(rows, gdn, path):
    """Replay's speedup over write-back per batch: Mamba-2 shapes and states, and Gated DeltaNet shapes."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for shape in ("nano", "super"):
        for mode in ("fp32", "bf16"):
            batches = sorted(k[4] for k in rows if k[:3] == ("writeback", shape, mode)
                             and ("replay", shape, mode, "W16", k[4]) in rows)
            if not batches:
                continue
            speed = [us(rows[("writeback", shape, mode, "", n)]) / us(rows[("replay", shape, mode, "W16", n)]) for n in batches]
            ax.plot(batches, speed, marker="o", label=f"Mamba-2 {shape}, {mode} state, W=16")
    for shape in GDN_SHAPES:
        batches = sorted(k[4] for k in gdn if k[:3] == ("writeback", shape, "fp32")
                         and ("replay", shape, "fp32", "corrected_values", k[4]) in gdn)
        if batches:
            speed = [us(gdn[("writeback", shape, "fp32", "", n)]) / us(gdn[("replay", shape, "fp32", "corrected_values", n)])
                     for n in batches]
            ax.plot(batches, speed, marker="s", linestyle="--", label=f"Gated DeltaNet {shape}, fp32 state, W=16")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (requests)")
    ax.set_ylabel("replay speedup over write-back")
    ax.set_title("Decode step on one H200, BF16 inputs")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results")
    parser.add_argument("--plot")
    args = parser.parse_args()
    context, rows, spec, gdn, gdn_spec = load(args.results)
    # Runs before 2026-11-30 18:00 UTC measured no in-place ceiling.
    inplace = context.get("inplace_bandwidth_GBps")
    inplace = f", in-place read + write {float(inplace):.0f} GB/s" if inplace else ""
    print(f"Device copy bandwidth {float(context['copy_bandwidth_GBps']):.0f} GB/s, "
          f"read bandwidth {float(context['read_bandwidth_GBps']):.0f} GB/s{inplace} (measured by the benchmark); "
          f"run {context['date']}.")
    # A run filtered to some benchmarks prints the tables it has data for.
    for shape in ("nano", "super"):
        for mode in ("fp32", "fp16", "bf16"):
            if any(k[:3] == ("replay", shape, mode) for k in rows):
                print(step_tables(rows, shape, mode))
        if any(k[:3] == ("staggered", shape, "fp32") for k in rows):
            print(flush_table(rows, shape))
    if any(k[2].startswith("read_") for k in rows):
        print(split_table(rows, "nano"))
    for shape in ("nano", "super"):
        if any(k[1] == shape for k in spec):
            print(spec_table(spec, shape))
    if gdn or gdn_spec:
        print_gdn(gdn, gdn_spec)
    if args.plot:
        plot(rows, gdn, args.plot)


if __name__ == "__main__":
    main()
