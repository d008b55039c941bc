"""The README is executable: its Python examples run as written and its test command is the one CI runs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def pyproject_configuration() -> str:
    """The pytest configuration the README tells a reader to put in their project, and nothing else."""
    (block,) = re.findall(r"```toml\n(.*?)```", README, flags=re.S)
    return block


def test_readme_has_examples() -> None:
    assert python_blocks()


def needs_spark(block: str) -> bool:
    return "from pyspark" in block or "import pyspark" in block


@pytest.mark.parametrize("index", [pytest.param(index, marks=[pytest.mark.spark] if needs_spark(block) else [])
                                   for index, block in enumerate(python_blocks())])
def test_readme_example_runs(index: int, pytester: pytest.Pytester) -> None:
    """Scripts run as they are, each in a process of its own as a reader would run it; blocks of test functions
    run under pytest in a project configured only as the README says."""
    block = python_blocks()[index]
    tree = ast.parse(block, f"README.md example {index + 1}")
    tests = [node.name for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")]
    if not tests:
        script = pytester.makepyfile(readme_example=block)
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return
    pytester.makepyprojecttoml(pyproject_configuration())
    pytester.makepyfile(test_readme_example=block)
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=len(tests))


def test_quick_start_test_command_is_what_ci_runs() -> None:
    commands = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    assert len(commands) >= 2
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = commands[1].split("&& ", 2)[2]  # after creating and activating the environment
    assert test_command in ci
    assert "kafkalite demo" in commands[0]


def test_readme_lists_the_kafka_apis_and_versions_the_listener_serves() -> None:
    """The README's list of Kafka APIs is the KAFKA listener's own table, so it stays true as APIs are added."""
    from kafkalite.network.kafka.apis import APIS

    listing = README.split("The KAFKA listener serves these APIs (key) and versions", 1)[1].split("\n\n", 1)[0]
    listed = {int(key): (name, int(low), int(high or low))
              for name, key, low, high in re.findall(r"(\w+) \((\d+)\) (\d+)(?:-(\d+))?", listing)}
    assert listed == {key: (api.request.name.removesuffix("Request"), *api.versions) for key, api in APIS.items()}
