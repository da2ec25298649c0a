#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the code examples of one doc comment of a header, or of one section of a Markdown
page, to files that a test compiles.

usage: doc_snippets.py FILE ANCHOR OUT_PREFIX

In a header, the doc comment is the block of `///` lines that holds ANCHOR (a text of one of
its lines), or the block right above the declaration whose first line holds it; its code
examples are its runs of lines indented four spaces past `/// `. In a Markdown page, the
section is the one whose heading holds ANCHOR, and its examples are its fenced code blocks.
Example k goes to OUT_PREFIX_k.inc. Exits 1 where there is no example, so that a test never
compiles nothing. Build tools pass ANCHOR through a shell: plain words, no quotes or '#'.
"""
import pathlib
import sys


def anchor_line(lines, anchor, prefix=""):
    at = next((i for i, line in enumerate(lines) if line.startswith(prefix) and anchor in line), None)
    if at is None:
        sys.exit(f"doc_snippets.py: '{anchor}' is not in the file")
    return at


def header_examples(lines, anchor):
    at = anchor_line(lines, anchor)
    while at > 0 and not lines[at].lstrip().startswith("///"):
        at -= 1  # up the declaration (its template line) to the comment above it
    first = last = at
    while first > 0 and lines[first - 1].lstrip().startswith("///"):
        first -= 1
    while last + 1 < len(lines) and lines[last + 1].lstrip().startswith("///"):
        last += 1
    runs, run = [], []
    for text in (line.lstrip()[3:] for line in lines[first:last + 1]):
        if text.startswith("     "):
            run.append(text[5:])
        elif run:
            runs.append(run)
            run = []
    return runs + ([run] if run else [])


def markdown_examples(lines, anchor):
    at = anchor_line(lines, anchor, "#")
    level = len(lines[at]) - len(lines[at].lstrip("#"))
    runs, run = [], None
    for line in lines[at + 1:]:
        if run is None and line.startswith("#") and len(line) - len(line.lstrip("#")) <= level:
            break  # the next section
        if line.startswith("```"):
            if run is None:
                run = []
            else:
                runs.append(run)
                run = None
        elif run is not None:
            run.append(line)
    return runs


path, anchor, prefix = sys.argv[1:4]
lines = pathlib.Path(path).read_text().splitlines()
runs = (markdown_examples if path.endswith(".md") else header_examples)(lines, anchor)
if not runs:
    sys.exit(f"doc_snippets.py: '{anchor}' in {path} has no code example")
for k, run in enumerate(runs, 1):
    out = pathlib.Path(f"{prefix}_{k}.inc")
    text = f"// From {path}, '{anchor}': example {k}.\n" + "\n".join(run) + "\n"
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
