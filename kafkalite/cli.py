"""The `kafkalite` command.

Errors print one line and exit non-zero: a traceback tells a user of a command-line tool nothing they can act on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import kafkalite


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkalite",
        description="A real, replicated Kafka cluster in one Python process.",
    )
    parser.add_argument("--version", action="version", version=f"kafkalite {kafkalite.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="start a 3-broker cluster, fail a leader, show that nothing was lost")
    demo.add_argument("--records", type=int, default=1000, help="records to produce (default 1000)")
    demo.add_argument("--seed", type=int, default=None, help="seed for the replica assignment")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    try:
        if args.command == "demo":
            from kafkalite.demo import run_demo

            return run_demo(records=args.records, seed=args.seed)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line, no traceback
        print(f"kafkalite: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
