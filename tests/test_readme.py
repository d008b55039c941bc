"""The README is executable: its Python examples run as written and its test command is the one CI runs."""

from __future__ import annotations

import re
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


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_example_runs(index: int, pytester: pytest.Pytester) -> None:
    """Scripts run as they are; blocks of test functions run under pytest in a project configured only as the
    README says, as a reader would run them."""
    block = python_blocks()[index]
    namespace: dict[str, object] = {}
    exec(compile(block, f"README.md example {index + 1}", "exec"), namespace)
    tests = [name for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    if tests:
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
