"""The README is executable: its Python examples run as written and its test command is the one CI runs."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import trio
import trio.testing

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_examples() -> None:
    assert python_blocks()


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_example_runs(index: int) -> None:
    namespace: dict[str, object] = {}
    exec(compile(python_blocks()[index], f"README.md example {index + 1}", "exec"), namespace)
    for name, value in namespace.items():
        if name.startswith("test_") and inspect.iscoroutinefunction(value):
            clock = trio.testing.MockClock(autojump_threshold=0)
            arguments = {"autojump_clock": clock} if "autojump_clock" in inspect.signature(value).parameters else {}
            trio.run(lambda: value(**arguments), clock=clock)


def test_quick_start_test_command_is_what_ci_runs() -> None:
    commands = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    assert len(commands) >= 2
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = commands[1].split("&& ", 2)[2]  # after creating and activating the environment
    assert test_command in ci
    assert "kafkalite demo" in commands[0]
