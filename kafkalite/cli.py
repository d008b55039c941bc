"""The `kafkalite` command: serve a cluster, manage topics and consumer groups, produce, consume, describe, demo.

Client commands talk to brokers over their NATIVE TCP listeners (`--bootstrap-server`, or the
KAFKALITE_BOOTSTRAP_SERVER environment variable). Errors print one line and exit non-zero: a traceback tells a
user of a command-line tool nothing they can act on.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any, NoReturn

import kafkalite

BOOTSTRAP_ENV = "KAFKALITE_BOOTSTRAP_SERVER"


class UsageError(Exception):
    """A command that cannot run as given; printed as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, except that a command line it cannot parse is an error like any other: one line, status 1.

    argparse's own way (the whole usage block, status 2) buries the one line that says what was wrong, and is
    not what this command promises.
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key, value


MAX_PORT = 65535


def _port(text: str) -> int:
    """A TCP port, or 0 for free ones: the OS would take 70000 as 70000 - 65536 and bind somewhere unasked for."""
    port = int(text) if text.isdigit() else -1
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to {MAX_PORT} (or 0 for free ports), got {text!r}")
    return port


def _offset(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected an offset (a whole number from 0), got {text!r}")
    return int(text)


def _positive(text: str, most: int | None = None) -> int:
    number = int(text) if text.isdigit() else 0
    if number < 1 or (most is not None and number > most):
        expected = "of at least 1" if most is None else f"from 1 to {most}"
        raise argparse.ArgumentTypeError(f"expected a whole number {expected}, got {text!r}")
    return number


MAX_BROKERS = 200
"""The most brokers `serve` starts. Start-up time grows with the square of their number in one process (on two
cores: 100 brokers in 2 s, 200 in 10 s, 300 in 25 s, 1000 not within 5 minutes); beyond this a cluster seems hung."""

_SET_BY_SERVE = {
    "listeners": "serve sets each broker's listeners; choose their ports with --port and --kafka-port",
    "broker.id": "serve numbers its brokers 1..N (N from --brokers)",
}
"""Broker properties serve gives each broker itself, which a --config would silently lose to."""


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kafkalite",
                                     description="A real, replicated Kafka cluster in one Python process.")
    parser.add_argument("--version", action="version", version=f"kafkalite {kafkalite.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser("demo", help="start a 3-broker cluster, fail a leader, show that nothing was lost")
    demo.add_argument("--records", type=_positive, default=1000, help="records to produce (default 1000)")
    demo.add_argument("--seed", type=int, default=None, help="seed for the replica assignment (default: random)")

    serve = commands.add_parser(
        "serve", help="run a cluster in the foreground until Ctrl-C",
        description="Run a cluster in the foreground until Ctrl-C or SIGTERM. Every broker has two listeners on "
                    "127.0.0.1: NATIVE speaks kafkalite's own protocol, for the kafkalite commands and kafkalite's "
                    "clients (printed as 'bootstrap servers'); KAFKA speaks Apache Kafka's, for Kafka's own clients "
                    "(printed as 'Kafka bootstrap servers').")
    serve.add_argument("--brokers", type=partial(_positive, most=MAX_BROKERS), default=3,
                       help=f"how many brokers, numbered 1..N, at most {MAX_BROKERS} (default 3)")
    serve.add_argument("--port", type=_port, default=0,
                       help="broker i's NATIVE listener, kafkalite's own protocol (the 'bootstrap servers' line), on "
                            "PORT+i-1 (default 0: a free port each, printed at start)")
    serve.add_argument("--kafka-port", type=_port, default=0,
                       help="broker i's KAFKA listener, Apache Kafka's protocol for Kafka's own clients (the 'Kafka "
                            "bootstrap servers' line), on KAFKA_PORT+i-1 (default 0: a free port each, printed at "
                            "start)")
    serve.add_argument("--config", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="a broker property, e.g. --config min.insync.replicas=2 (not listeners or broker.id: "
                            "--port, --kafka-port and --brokers set those)")
    serve.add_argument("--control-port", type=_port, default=None,
                       help="serve the HTTP control endpoint (kill, pause, partition, request faults) on this "
                            "port, 0 for a free one (printed at start); default: none")

    def client(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--bootstrap-server", default=os.environ.get(BOOTSTRAP_ENV),
                         help=f"host:port[,host:port...] (default: ${BOOTSTRAP_ENV})")
        sub.add_argument("--api-timeout", type=float, default=15.0, metavar="SECONDS",
                         help="give up on an unreachable or unanswering cluster after this long (default 15)")
        return sub

    topics = client("topics", "create, list, describe or delete topics")
    topics.add_argument("action", choices=["create", "list", "describe", "delete"])
    topics.add_argument("name", nargs="?", help="the topic (create, describe and delete need one)")
    topics.add_argument("--partitions", type=int, default=-1,
                        help="partitions of a new topic (default -1: the brokers' num.partitions)")
    topics.add_argument("--replication-factor", type=int, default=-1,
                        help="replicas of each partition (default -1: the brokers' default.replication.factor)")
    topics.add_argument("--config", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="a topic property of a new topic, e.g. --config retention.ms=60000")

    produce = client("produce", "send the lines of standard input to a topic")
    produce.add_argument("topic")
    produce.add_argument("--key-separator", default=None,
                         help="split each line into key and value at this text (default: no key)")
    produce.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"],
                         help="all (or -1): wait until every in-sync replica has each record; 1: until the leader "
                              "has it; 0: do not wait (default all)")

    consume = client("consume", "print a topic's records, one per line")
    consume.add_argument("topic")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the first record (default: at the end, printing only new records)")
    start.add_argument("--offset", type=_offset, default=None,
                       help="start at this offset of --partition (an out-of-range one is an error)")
    consume.add_argument("--partition", type=int, default=None,
                         help="read only this partition (default: every partition)")
    consume.add_argument("--print-key", action="store_true",
                         help="print each record's key before its value, with a tab between")
    consume.add_argument("--print-offset", action="store_true",
                         help="start each line with the record's PARTITION:OFFSET and a tab")
    consume.add_argument("--skip-undecodable", action="store_true",
                         help="report a record that cannot be decoded on stderr and go on past it (default: stop "
                              "with an error); needs --partition if the topic has several")
    consume.add_argument("--max", type=_positive, default=None,
                         help="stop after this many records (default: no limit)")
    consume.add_argument("--timeout", type=float, default=None,
                         help="stop once no record arrived for this many seconds (default: wait until Ctrl-C)")

    consume.add_argument("--group", default=None,
                         help="consume as a member of this consumer group: partitions come from the group, start at "
                              "its committed offsets, and positions are committed as the consumer goes and on exit")

    groups = client("groups", "list, describe or delete consumer groups, or reset their offsets")
    groups.add_argument("action", choices=["list", "describe", "delete", "reset-offsets"])
    groups.add_argument("group", nargs="?", help="the group (describe, delete and reset-offsets need one)")
    groups.add_argument("--topic", action="append", default=[],
                        help="reset-offsets: a topic whose partitions to reset (repeatable; default: every topic the "
                             "group has offsets for)")
    reset = groups.add_mutually_exclusive_group()
    reset.add_argument("--to-earliest", action="store_true", help="reset-offsets to each partition's first offset")
    reset.add_argument("--to-latest", action="store_true", help="reset-offsets to each partition's end")
    reset.add_argument("--to-offset", type=_offset, default=None, help="reset-offsets to this offset")
    reset.add_argument("--shift-by", type=int, default=None, help="reset-offsets by moving each committed offset "
                                                                  "by this many (negative: back)")
    reset.add_argument("--to-datetime", default=None, metavar="YYYY-MM-DDTHH:MM:SS[.mmm][+00:00]",
                       help="reset-offsets to the first record at or after this time (UTC unless an offset is given)")
    groups.add_argument("--execute", action="store_true",
                        help="reset-offsets: apply the new offsets (default: only show them, as kafka-consumer-groups "
                             "does)")

    describe = client("describe", "brokers, controller and partitions (leader, ISR, high watermark)")
    describe.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        code = _run(parser, parser.parse_args(argv))
        if sys.stdout is not None:  # None if started without one (`>&-`)
            sys.stdout.flush()  # a reader gone away (`| head`) shows here rather than at the interpreter's exit
        return code
    except BaseException as exc:  # one clear line, no traceback
        leaves = list(_leaves(exc))
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            return 130
        if any(isinstance(leaf, BrokenPipeError) for leaf in leaves):
            return _reader_gone()
        if not all(isinstance(leaf, Exception) for leaf in leaves):
            raise
        print(f"kafkalite: error: {'; '.join(str(leaf) or type(leaf).__name__ for leaf in leaves)}",
              file=sys.stderr)
        return 1


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        from kafkalite.demo import run_demo

        return run_demo(records=args.records, seed=args.seed)
    if args.command == "serve":
        return _serve(args)
    if not args.bootstrap_server:
        raise UsageError(f"--bootstrap-server is required (or set {BOOTSTRAP_ENV})")
    import trio

    return trio.run(_CLIENT_COMMANDS[args.command], args)


def _reader_gone() -> int:
    """The reader of our output went away (`kafkalite demo | head -3`): nothing to report, so stop quietly.

    The status is 1, as Python's own advice has it (and as `rich`, which does the same, exits).
    """
    _stdout_to_devnull()
    return 1


def _stdout_to_devnull() -> None:
    """Point standard output at /dev/null once its reader is gone, as Python's note on SIGPIPE advises: what is
    still buffered for it, and the interpreter's last flush, then go nowhere instead of failing again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The errors themselves: Trio hands a task's failure up wrapped in an ExceptionGroup per nursery."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


# -- serve ----------------------------------------------------------------------------------------------------------

def _serve(args: argparse.Namespace) -> int:
    from kafkalite.embedded import EmbeddedCluster

    config = dict(args.config)
    for key, instead in _SET_BY_SERVE.items():
        if key in config:
            raise UsageError(f"--config {key}: {instead}")
    for option, first in (("--port", args.port), ("--kafka-port", args.kafka_port)):
        if first and first + args.brokers - 1 > MAX_PORT:
            raise UsageError(f"{option} {first} with {args.brokers} brokers would need ports up to "
                             f"{first + args.brokers - 1}; the highest is {MAX_PORT}")

    def port(first: int, broker: int) -> int:
        return first + broker - 1 if first else 0

    brokers = {b: {"listeners": f"NATIVE://127.0.0.1:{port(args.port, b)},KAFKA://127.0.0.1:{port(args.kafka_port, b)}"}
               for b in range(1, args.brokers + 1)}
    stop = threading.Event()
    console = _serve_console()
    try:
        cluster = EmbeddedCluster(args.brokers, config, broker_configs=brokers).start()
    except OSError as exc:
        asked = [f"{option} {first} to {first + args.brokers - 1}" for option, first in
                 (("--port", args.port), ("--kafka-port", args.kafka_port)) if first]
        raise UsageError(f"cannot listen on the ports asked for ({', '.join(asked) or 'free ones'}): "
                         f"{exc.strerror or exc}") from None
    try:
        # Ctrl-C asks for a clean stop rather than a KeyboardInterrupt wherever the main thread happens to be;
        # the previous handlers come back so that an in-process caller (a test) keeps its own.
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            control = None if args.control_port is None else _serve_control(cluster, args.control_port)
            console.out(f"bootstrap servers: {cluster.bootstrap_servers}")
            console.out(f"Kafka bootstrap servers: {cluster.kafka_bootstrap_servers}")
            console.out(f"cluster id: {cluster.cluster_id}")
            if control is not None:
                console.out(f"control: {control}")
            console.print(_brokers_table(_served_brokers(cluster)))
            console.print("Press Ctrl-C to stop.")
            stop.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        cluster.close()
    console.print("stopped")
    return 0


def _serve_console() -> Any:
    """Where serve prints, for as long as it serves: its reader may go, its clients stay.

    `kafkalite serve | grep -m1 "Kafka bootstrap"`, or a harness that reads the bootstrap line and closes the pipe:
    the reader has what it came for, and clients use the cluster. rich stops the program at a broken pipe, as
    `_reader_gone` does for commands whose output is their point; here the output goes to /dev/null instead and
    the cluster serves on until Ctrl-C or SIGTERM.
    """
    from rich.console import Console

    class ServeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            _stdout_to_devnull()

    return ServeConsole(highlight=False)


def _served_brokers(cluster: Any) -> list[dict[str, Any]]:
    """The live brokers as `describe_brokers` has them (their NATIVE port), each with its KAFKA port beside.

    Read in one call in the cluster's loop: a broker killed over the control endpoint between two calls, as soon as
    its URL is printed, would otherwise be listed by the first and unknown to the second."""
    def described(inner: Any) -> list[dict[str, Any]]:
        return [{**broker, "kafka_port": next(ep.port for ep in inner.broker(broker["node_id"]).endpoints
                                              if ep.listener == "KAFKA")} for broker in inner.describe_brokers()]

    brokers: list[dict[str, Any]] = cluster.call(described, cluster.cluster)
    return brokers


def _serve_control(cluster: Any, port: int) -> str:
    try:
        return str(cluster.serve_control(port))
    except OSError as exc:
        raise UsageError(f"--control-port {port}: cannot listen there: {exc.strerror or exc}") from None


# -- client commands ------------------------------------------------------------------------------------------------

async def _topics(args: argparse.Namespace) -> int:
    from kafkalite.client import Admin, NewTopic

    async with Admin(args.bootstrap_server, _admin_config(args)) as admin:
        if args.action == "list":
            for name in sorted(await admin.list_topics()):
                print(name)
            return 0
        if not args.name:
            raise UsageError(f"topics {args.action} needs a topic name")
        if args.action == "create":
            await admin.create_topics([NewTopic(args.name, args.partitions, args.replication_factor,
                                                dict(args.config))])
            print(f"created topic {args.name}")
        elif args.action == "delete":
            await admin.delete_topics([args.name])
            print(f"deleted topic {args.name}")
        else:
            partitions = (await _describe_partitions(admin, [args.name]))[args.name]
            configs = (await admin.describe_configs(topics=[args.name]))[("topic", args.name)]
            topic_id = (await admin.describe_topics([args.name]))[args.name].topic_id
            overrides = {name: entry.value for name, entry in sorted(configs.items())
                         if not entry.is_default and not entry.from_broker}
            from rich.console import Console

            console = Console()
            console.print(_partitions_table(args.name, partitions))
            console.print(f"topic id: {topic_id}", highlight=False)  # as kafka-topics --describe shows TopicId
            console.print("configs: " + (", ".join(f"{k}={v}" for k, v in overrides.items()) or "(defaults)"))
    return 0


async def _produce(args: argparse.Namespace) -> int:
    from kafkalite.client import Producer

    count = 0
    timeout_ms = int(args.api_timeout * 1000)  # no lingering, so one request may take the whole delivery timeout
    async with Producer(args.bootstrap_server, {"acks": args.acks, "max.block.ms": timeout_ms, "linger.ms": 0,
                                                "request.timeout.ms": timeout_ms,
                                                "delivery.timeout.ms": timeout_ms}) as producer:
        handles = []
        for line in sys.stdin:
            line = line.rstrip("\n")
            key = None
            if args.key_separator is not None and args.key_separator in line:
                key_text, line = line.split(args.key_separator, 1)
                key = key_text.encode()
            handles.append(await producer.send(args.topic, line.encode(), key=key))
        await producer.flush()
        for handle in handles:
            await handle
            count += 1
    print(f"produced {count} records to {args.topic}", file=sys.stderr)
    return 0


async def _consume(args: argparse.Namespace) -> int:
    if args.group is not None:
        return await _consume_in_group(args)
    from kafkalite.client import Admin, Consumer, TopicPartition
    from kafkalite.common.errors import CorruptMessageError

    async with Admin(args.bootstrap_server, _admin_config(args)) as admin:
        description = (await admin.describe_topics([args.topic]))[args.topic]
    numbers = [p.partition for p in description.partitions]
    if args.partition is not None and args.partition not in numbers:
        raise UsageError(f"topic {args.topic} has no partition {args.partition} (its partitions: 0-{len(numbers) - 1})")
    if args.partition is None and len(numbers) > 1 and (args.offset is not None or args.skip_undecodable):
        # An offset belongs to one partition; the consumer's CORRUPT_MESSAGE names its partition only in words.
        raise UsageError(f"--{'offset' if args.offset is not None else 'skip-undecodable'} needs --partition: "
                         f"topic {args.topic} has {len(numbers)} partitions")
    partitions = [TopicPartition(args.topic, p) for p in ([args.partition] if args.partition is not None else numbers)]
    # With --offset an offset out of range is an error, not a silent jump to one end of the log.
    reset = "none" if args.offset is not None else "earliest" if args.from_beginning else "latest"
    printed = 0
    async with Consumer(args.bootstrap_server, auto_offset_reset=reset) as consumer:
        consumer.assign(partitions)
        if args.offset is not None:
            consumer.seek(partitions[0], args.offset)
        while args.max is None or printed < args.max:
            try:
                records = await consumer.poll(args.timeout if args.timeout is not None else 1.0)
            except CorruptMessageError as error:
                if not args.skip_undecodable:
                    how = "--skip-undecodable" if len(partitions) == 1 else "--skip-undecodable with --partition"
                    raise CorruptMessageError(f"{error.message} ({how} goes on past it)") from None
                (tp,) = partitions
                offset = await consumer.position(tp)  # where the consumer is stuck: the record it cannot decode
                print(f"kafkalite: skipped record {offset} of {tp}: it cannot be decoded", file=sys.stderr,
                      flush=True)
                consumer.seek(tp, offset + 1)
                continue
            if not records and args.timeout is not None:
                break
            for record in records[: None if args.max is None else args.max - printed]:
                print(_record_line(record, args), flush=True)
                printed += 1
    return 0


async def _consume_in_group(args: argparse.Namespace) -> int:
    """`consume --group`: subscribe, print, and commit what was printed (every poll, and on the way out)."""
    from kafkalite.client import Consumer

    if args.partition is not None or args.offset is not None or args.skip_undecodable:
        raise UsageError("--group takes its partitions and offsets from the group: leave out --partition, --offset "
                         "and --skip-undecodable")
    printed = 0
    async with Consumer(args.bootstrap_server, {"group.id": args.group, "enable.auto.commit": False,
                                                "auto.offset.reset": "earliest" if args.from_beginning else "latest",
                                                "default.api.timeout.ms": int(args.api_timeout * 1000)}) as consumer:
        consumer.subscribe([args.topic])
        while args.max is None or printed < args.max:
            records = await consumer.poll(args.timeout if args.timeout is not None else 1.0)
            if not records and args.timeout is not None:
                break
            shown = records[: None if args.max is None else args.max - printed]
            for record in shown:
                print(_record_line(record, args), flush=True)
            printed += len(shown)
            if shown:
                await consumer.commit({_tp(r): r.offset + 1 for r in shown})
    return 0


def _tp(record: Any) -> Any:
    from kafkalite.client import TopicPartition

    return TopicPartition(record.topic, record.partition)


async def _groups(args: argparse.Namespace) -> int:
    from rich.console import Console

    from kafkalite.client import Admin

    console = Console()
    async with Admin(args.bootstrap_server, _admin_config(args)) as admin:
        if args.action == "list":
            for listing in await admin.list_groups():
                print(f"{listing.group_id}\t{listing.state}")
            return 0
        if not args.group:
            raise UsageError(f"groups {args.action} needs a group id")
        if args.action == "delete":
            await admin.delete_groups([args.group])
            print(f"deleted group {args.group}")
        elif args.action == "describe":
            description = (await admin.describe_groups([args.group]))[args.group]
            offsets = await admin.list_group_offsets(args.group)
            uncommitted = {tp for member in description.members for tp in member.assignment} - set(offsets)
            ends = await admin.list_offsets({tp: "latest" for tp in uncommitted}) if uncommitted else {}
            console.print(_group_table(description, offsets, {tp: end.offset for tp, end in ends.items()}))
        else:
            return await _reset_offsets(admin, args, console)
    return 0


async def _reset_offsets(admin: Any, args: argparse.Namespace, console: Any) -> int:
    import datetime

    from kafkalite.client import TopicPartition

    spec, value = ("earliest", 0) if args.to_earliest else ("latest", 0) if args.to_latest else \
        ("offset", args.to_offset) if args.to_offset is not None else \
        ("shift", args.shift_by) if args.shift_by is not None else (None, 0)
    if args.to_datetime is not None:
        try:
            moment = datetime.datetime.fromisoformat(args.to_datetime)
        except ValueError:
            raise UsageError(f"--to-datetime {args.to_datetime!r} is not an ISO date and time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.timezone.utc)
        spec, value = "datetime", int(moment.timestamp() * 1000)
    if spec is None:
        raise UsageError("reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --shift-by, "
                         "--to-datetime")
    if args.topic:
        described = await admin.describe_topics(args.topic)
        partitions = [TopicPartition(t, p.partition) for t, d in described.items() for p in d.partitions]
    else:
        partitions = sorted(await admin.list_group_offsets(args.group))
    # asked even with no partitions: a group with members is refused first, as Kafka's tool refuses it
    new = await admin.reset_group_offsets(args.group, partitions, spec, value, dry_run=not args.execute)
    if not partitions:
        raise UsageError(f"group {args.group} has no offsets; name the topics with --topic")
    from rich.table import Table

    table = Table(title=f"{args.group}: new offsets" + ("" if args.execute else " (dry run: add --execute)"))
    for column in ("topic", "partition", "new offset"):
        table.add_column(column)
    for tp, offset in sorted(new.items()):
        table.add_row(tp.topic, str(tp.partition), str(offset))
    console.print(table)
    return 0


def _group_table(description: Any, offsets: dict[Any, Any], ends: dict[Any, int]) -> Any:
    """kafka-consumer-groups --describe: per partition the committed offset, the end, the lag and the owner. A
    partition owned without a committed offset shows its end from `ends`, as Kafka's does, so that what the
    group has yet to read is seen."""
    from rich.table import Table

    owners = {tp: member for member in description.members for tp in member.assignment}
    table = Table(title=f"{description.group_id} ({description.state}, {description.protocol or 'no assignor'}, "
                        f"coordinator {description.coordinator})")
    for column in ("topic", "partition", "current offset", "log end offset", "lag", "consumer id", "host",
                   "client id"):
        table.add_column(column)
    for tp in sorted(set(offsets) | set(owners)):
        found, member = offsets.get(tp), owners.get(tp)
        end = found.log_end_offset if found is not None else ends.get(tp)
        table.add_row(tp.topic, str(tp.partition), "-" if found is None else str(found.committed),
                      "-" if end is None else str(end), "-" if found is None else str(found.lag),
                      member.member_id if member else "-", member.host if member else "-",
                      member.client_id if member else "-")
    return table


def _record_line(record: Any, args: argparse.Namespace) -> str:
    fields = [f"{record.partition}:{record.offset}"] if args.print_offset else []
    if args.print_key:
        fields.append(_text(record.key))
    fields.append(_text(record.value))
    return "\t".join(fields)


def _text(data: bytes | None) -> str:
    """A key or value as text; a null one is empty, and bytes that are not UTF-8 print as U+FFFD."""
    return "" if data is None else data.decode(errors="replace")


async def _describe(args: argparse.Namespace) -> int:
    from kafkalite.client import Admin

    async with Admin(args.bootstrap_server, _admin_config(args)) as admin:
        cluster = await admin.describe_cluster()
        names = await admin.list_topics()
        topics = await _describe_partitions(admin, names) if names else {}
    described: dict[str, Any] = {
        "controller": cluster.controller_id,
        "brokers": [b._asdict() for b in cluster.brokers],
        "topics": topics,
    }
    if args.json:
        print(json.dumps(described, indent=2))
        return 0
    from rich.console import Console

    console = Console()
    console.print(_brokers_table([{**b, "controller": b["node_id"] == cluster.controller_id}
                                  for b in described["brokers"]]))
    for name, partitions in described["topics"].items():
        console.print(_partitions_table(name, partitions))
    return 0


async def _describe_partitions(admin: Any, names: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each partition as the brokers' metadata has it, with `offline` and the high watermark its leader reports.

    A description is wanted most while something is wrong, so nothing wrong with one partition may fail it: a
    partition without a leader is offline, and one whose leader does not answer (it crashed a moment ago and the
    controller does not know yet) has no high watermark (None) once --api-timeout has passed.
    """
    import trio

    from kafkalite.client import TopicPartition
    from kafkalite.common.errors import KafkaError

    topics = await admin.describe_topics(names)
    by_leader: dict[int, list[TopicPartition]] = {}
    for name, description in topics.items():
        for p in description.partitions:
            if p.leader >= 0:
                by_leader.setdefault(p.leader, []).append(TopicPartition(name, p.partition))
    high_watermarks: dict[TopicPartition, int] = {}

    async def ask(partitions: list[TopicPartition]) -> None:
        try:
            offsets = await admin.list_offsets({tp: "latest" for tp in partitions})  # "latest" is the HW
        except KafkaError:
            return
        high_watermarks.update((tp, info.offset) for tp, info in offsets.items())

    async with trio.open_nursery() as nursery:  # one leader that does not answer costs one timeout, not one each
        for partitions in by_leader.values():
            nursery.start_soon(ask, partitions)
    return {name: [{**p._asdict(), "offline": p.leader < 0,
                    "high_watermark": high_watermarks.get(TopicPartition(name, p.partition))}
                   for p in description.partitions] for name, description in sorted(topics.items())}


def _admin_config(args: argparse.Namespace) -> dict[str, Any]:
    return {"default.api.timeout.ms": int(args.api_timeout * 1000)}


_CLIENT_COMMANDS = {"topics": _topics, "produce": _produce, "consume": _consume, "describe": _describe,
                    "groups": _groups}


def _brokers_table(brokers: list[dict[str, Any]]) -> Any:
    """`port` is each broker's NATIVE listener, the one `describe` asks over; serve also knows its KAFKA listener's
    (`kafka_port`), the port Kafka's own clients need. Both named by listener: a bare "port" sent Kafka clients to
    the wrong one."""
    from rich.table import Table

    kafka = any("kafka_port" in broker for broker in brokers)
    table = Table(title="Brokers")
    for column in ("id", "host", "NATIVE port", *(("KAFKA port",) if kafka else ()), "rack", "controller"):
        table.add_column(column)
    for broker in brokers:
        table.add_row(str(broker["node_id"]), broker["host"], str(broker["port"]),
                      *((str(broker["kafka_port"]),) if kafka else ()), str(broker.get("rack") or ""),
                      "yes" if broker.get("controller") else "")
    return table


def _partitions_table(topic: str, partitions: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title=topic)
    for column in ("partition", "leader", "epoch", "replicas", "isr", "high watermark"):
        table.add_column(column)
    for p in partitions:
        high_watermark = "[red]offline[/]" if p["offline"] else \
            "no answer" if p["high_watermark"] is None else str(p["high_watermark"])
        table.add_row(str(p["partition"]), "none" if p["offline"] else str(p["leader"]), str(p["leader_epoch"]),
                      ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])), high_watermark)
    return table


if __name__ == "__main__":
    sys.exit(main())
