#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the code examples of one doc comment of a header to files that a test compiles.

usage: doc_snippets.py HEADER ANCHOR OUT_PREFIX

The doc comment is the block of `///` lines that holds ANCHOR (a text of one of its lines),
or the block right above the declaration whose first line holds it. Its code examples are
its runs of lines indented four spaces past `/// `; example k goes to OUT_PREFIX_k.inc.
Exits 1 where the comment holds no example, so that a test never compiles nothing.
"""
import pathlib
import sys


def comment_block(lines, anchor):
    at = next((i for i, line in enumerate(lines) if anchor in line), None)
    if at is None:
        sys.exit(f"doc_snippets.py: '{anchor}' is not in the header")
    while at > 0 and not lines[at].lstrip().startswith("///"):
        at -= 1  # up the declaration (its template line) to the comment above it
    first = last = at
    while first > 0 and lines[first - 1].lstrip().startswith("///"):
        first -= 1
    while last + 1 < len(lines) and lines[last + 1].lstrip().startswith("///"):
        last += 1
    return [line.lstrip()[3:] for line in lines[first:last + 1]]


def examples(block):
    runs, run = [], []
    for text in block:
        if text.startswith("     "):
            run.append(text[5:])
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    return runs


header, anchor, prefix = sys.argv[1:4]
runs = examples(comment_block(pathlib.Path(header).read_text().splitlines(), anchor))
if not runs:
    sys.exit(f"doc_snippets.py: the comment of '{anchor}' in {header} holds no code example")
for k, run in enumerate(runs, 1):
    out = pathlib.Path(f"{prefix}_{k}.inc")
    text = f"// From {header}, the doc comment of '{anchor}': example {k}.\n" + "\n".join(run) + "\n"
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
