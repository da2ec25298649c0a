#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the layering of include/replayssm/ that the README's architecture table states:
each folder includes only the folders below it, a recurrence folder never includes another
recurrence, and every recurrence folder holds the same files (gated_deltanet/ may add its
input normalization). Exits 1 naming each violation.

usage: python3 test/layout/check_layers.py [include/replayssm]
"""
import pathlib
import re
import sys

# Layer of each top-level entry; a recurrence folder is any folder not named here.
LAYERS = {"config.hpp": 1, "numeric": 2, "policy": 3, "replay": 4,
          "warp": 5, "runtime": 6, "diagnostics": 8}
RECURRENCE = 7
UMBRELLAS = {"replayssm.hpp", "cuda.cuh"}
# The files every recurrence folder holds; extras must be listed here.
RECURRENCE_FILES = {"recurrence.hpp", "head_step.hpp", "params.hpp", "validate.hpp", "snapshot.hpp",
                    "buffers.hpp", "state_io.hpp", "cpu.hpp", "cuda.cuh", "warp_step.cuh"}
RECURRENCE_EXTRAS = {"gated_deltanet": {"inputs.hpp"}}
INCLUDE = re.compile(r'^#include "replayssm/([^"]+)"', re.M)


def entry(path: str) -> str:
    """The top-level entry a header path (relative to include/replayssm/) belongs to; a
    folder's umbrella header (numeric.hpp, mamba2.hpp) belongs to its folder."""
    top = path.split("/")[0]
    return top.removesuffix(".hpp") if (root / top.removesuffix(".hpp")).is_dir() else top


def layer(name: str) -> int:
    return LAYERS.get(name, RECURRENCE if name in recurrences else -1)


root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "include/replayssm")
recurrences = {p.name for p in root.iterdir() if p.is_dir() and p.name not in LAYERS}
errors = []
for name in sorted(recurrences):
    files = {p.name for p in (root / name).iterdir()}
    expected = RECURRENCE_FILES | RECURRENCE_EXTRAS.get(name, set())
    if files != expected:
        errors.append(f"{name}/: files {sorted(files ^ expected)} differ from the recurrence folder's set")
    if not (root / f"{name}.hpp").is_file():
        errors.append(f"{name}/: no umbrella header {name}.hpp")
for header in sorted(root.rglob("*")):
    if not header.is_file():
        continue
    rel = header.relative_to(root).as_posix()
    if rel in UMBRELLAS:
        continue
    own = entry(rel)
    for target in INCLUDE.findall(header.read_text()):
        other = entry(target)
        if other == own:
            continue
        if layer(own) == RECURRENCE and layer(other) == RECURRENCE:
            errors.append(f"{rel}: includes {target}, another recurrence")
        elif layer(other) >= layer(own) or layer(other) < 0:
            errors.append(f"{rel} (layer {layer(own)}): includes {target} (layer {layer(other)})")
for e in errors:
    print("layering:", e)
print(f"{len(recurrences)} recurrence folders, {len(errors)} layering violations")
sys.exit(1 if errors else 0)
