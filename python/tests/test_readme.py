# SPDX-License-Identifier: Apache-2.0
"""README's "From Python": its Python snippets run as they are (on the GPU when there is one,
else on the CPU), and its build options are the ones CMake defines."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTION = ROOT.joinpath("README.md").read_text().split("## From Python", 1)[1].split("\n## ", 1)[0]
SNIPPETS = re.findall(r"```python\n(.*?)```", SECTION, re.S)


@pytest.mark.parametrize("snippet", range(len(SNIPPETS)))
def test_snippet_runs(snippet):
    pytest.importorskip("torch")
    exec(compile(SNIPPETS[snippet], f"README.md, From Python, snippet {snippet + 1}", "exec"), {})


def test_build_options_exist():
    options = set(re.findall(r"cmake\.define\.(\w+)=", SECTION))
    assert {"REPLAYSSM_ENABLE_CUDA", "REPLAYSSM_PYTHON_CUDA_POLICIES"} <= options
    cmake = ROOT.joinpath("CMakeLists.txt").read_text() + ROOT.joinpath("python", "CMakeLists.txt").read_text()
    for option in options:
        assert re.search(rf"(option|set)\({option}\b", cmake), option
