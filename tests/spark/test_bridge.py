"""Handing a Trio async generator's items to Spark's synchronous reader thread."""

from __future__ import annotations

import gc
import itertools
import os
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator

import pytest
import trio

from kafkalite.spark import bridge

pytestmark = pytest.mark.spark


def test_a_read_left_early_closes_its_generator_in_its_own_run() -> None:
    """Spark stops pulling a reader early (`limit()`, a cancelled task). The generator was left to Trio's finalizer,
    whose close runs cancelled: the reader's consumer could not close its fetch session and connections, and Trio
    logged "Exception ignored during finalization" tracebacks into the task's log for every such read."""
    cleaned_up = threading.Event()
    kept = bridge.KeptOpen(lambda: Resource([]))

    async def source(resource: Resource) -> AsyncGenerator[int, None]:
        try:
            for number in itertools.count():
                yield number
        finally:
            await trio.sleep(0)  # async clean-up, as a consumer's read leaving it where it stopped
            cleaned_up.set()

    items = kept.iterate(source)
    assert [next(items), next(items)] == [0, 1]
    items.close()
    assert cleaned_up.wait(30)
    kept.close()


def test_a_read_left_early_with_its_queue_full_ends_its_thread() -> None:
    """Stopping took one item off a full queue; the producer's last put filled it again, and handing over its end
    then waited for ever: a thread and its queued batches kept for every read Spark stopped early."""
    filled = threading.Event()
    kept = bridge.KeptOpen(lambda: Resource([]))

    async def source(resource: Resource) -> AsyncGenerator[int, None]:
        for number in itertools.count():
            if number > bridge._AHEAD:  # 1 to _AHEAD fill the queue: this one waits for Spark
                filled.set()
            yield number

    before = set(threading.enumerate())
    items = kept.iterate(source)
    assert next(items) == 0
    assert filled.wait(30)
    items.close()
    (reader,) = [thread for thread in set(threading.enumerate()) - before if thread.name == "kafkalite-spark-read"]
    reader.join(30)
    assert not reader.is_alive()
    kept.close()


class Resource:
    """An async context manager that records its entries and exits, as an admin client would open and close."""

    def __init__(self, log: list[str], *, fail_entering: bool = False) -> None:
        self.log = log
        self.fail_entering = fail_entering
        self.exited = threading.Event()

    async def __aenter__(self) -> Resource:
        await trio.sleep(0)
        if self.fail_entering:
            raise ConnectionRefusedError("no broker at the bootstrap address")
        self.log.append("entered")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.log.append("exited")
        self.exited.set()


def test_kept_open_enters_once_for_many_calls_and_exits_when_closed() -> None:
    """Planning asks several times per micro-batch: one client for them all, in one loop, not one per question."""
    log: list[str] = []
    made: list[Resource] = []
    kept = bridge.KeptOpen(lambda: made.append(Resource(log)) or made[-1])

    async def where(resource: Resource) -> tuple[Resource, int]:
        await trio.sleep(0)
        return resource, id(trio.lowlevel.current_trio_token())

    answers = [kept.run(where) for _ in range(3)]
    assert len(made) == 1 and log == ["entered"]
    assert answers == [(made[0], answers[0][1])] * 3  # the same resource, on the same loop each time
    assert threading.current_thread().name != "kafkalite-spark-kept"
    kept.close()
    assert made[0].exited.wait(30) and log == ["entered", "exited"]
    kept.close()  # twice is harmless


def test_a_failed_call_raises_its_error_and_the_next_opens_afresh() -> None:
    """Whatever broke is not kept: the client that failed a question is closed, and the next question gets a new one,
    as each question did when every one opened its own."""
    log: list[str] = []
    made: list[Resource] = []
    kept = bridge.KeptOpen(lambda: made.append(Resource(log)) or made[-1])

    async def fail(resource: Resource) -> None:
        async with trio.open_nursery() as nursery:  # raised from a nursery: the caller gets the error itself
            nursery.start_soon(trio.sleep, 0)
            raise LookupError("no leader for orders-0")

    with pytest.raises(LookupError, match="no leader for orders-0"):
        kept.run(fail)
    assert made[0].exited.wait(30)

    async def identity(resource: Resource) -> Resource:
        return resource

    assert kept.run(identity) is made[1]
    assert log == ["entered", "exited", "entered"]
    kept.close()


def test_a_resource_that_cannot_be_entered_fails_the_call() -> None:
    log: list[str] = []
    kept = bridge.KeptOpen(lambda: Resource(log, fail_entering=True))

    async def never(resource: Resource) -> None:
        raise AssertionError("called without a resource")

    for _ in range(2):  # and again, not a call left waiting for a loop that never started
        with pytest.raises(ConnectionRefusedError, match="no broker at the bootstrap address"):
            kept.run(never)
    assert log == []


def test_a_kept_resource_is_exited_when_its_owner_is_collected() -> None:
    """Spark never says when a query's planning is done: a lookup dropped (or its process ending) closes its client."""
    made: list[Resource] = []
    kept = bridge.KeptOpen(lambda: made.append(Resource([])) or made[-1])

    async def nothing(resource: Resource) -> None:
        pass

    kept.run(nothing)
    del kept
    gc.collect()
    assert made[0].exited.wait(30)


def test_a_loop_that_ended_between_calls_is_opened_again() -> None:
    made: list[Resource] = []
    kept = bridge.KeptOpen(lambda: made.append(Resource([])) or made[-1])

    async def identity(resource: Resource) -> Resource:
        return resource

    before = set(threading.enumerate())
    first = kept.run(identity)
    (loop_thread,) = set(threading.enumerate()) - before
    assert kept._loop is not None
    kept._loop._end()  # as if the loop ended on its own (its resource failed), unseen by its owner
    loop_thread.join(30)
    assert first.exited.is_set() and not loop_thread.is_alive()
    assert kept.run(identity) is made[1]
    kept.close()


def test_a_kept_resource_hands_over_a_generator_of_it_and_never_hands_an_item_out_twice() -> None:
    """The Spark reader's consumers, kept between reads: each read's records come from the kept resource, and a loop
    ending under a read that had handed items out fails the read rather than making it again from the start."""
    made: list[Resource] = []
    kept = bridge.KeptOpen(lambda: made.append(Resource([])) or made[-1])

    async def numbers(resource: Resource) -> AsyncGenerator[tuple[Resource, int], None]:
        for number in range(3):
            yield resource, number

    assert list(kept.iterate(numbers)) == [(made[0], 0), (made[0], 1), (made[0], 2)]
    assert list(kept.iterate(numbers)) == [(made[0], 0), (made[0], 1), (made[0], 2)]
    assert len(made) == 1

    async def broken(resource: Resource) -> AsyncGenerator[str, None]:
        yield "first"
        assert kept._loop is not None
        kept._loop._end()  # as if the loop ended on its own (its resource failed) in the middle of the read
        await trio.sleep_forever()

    items = kept.iterate(broken)
    assert next(items) == "first"
    with pytest.raises(RuntimeError, match="ended during a read that had handed out items"):
        next(items)
    assert made[0].exited.wait(30)
    kept.close()


def test_a_question_failing_in_one_thread_leaves_another_threads_call_answered() -> None:
    """A failed question closes the loop it used, but only once the calls other threads made on it are answered:
    cancelled, they raised Trio's Cancelled, which no `except Exception` catches."""
    made: list[Resource] = []
    kept = bridge.KeptOpen(lambda: made.append(Resource([])) or made[-1])
    slow_started, failures_done = threading.Event(), threading.Event()

    async def slow(resource: Resource) -> str:
        slow_started.set()
        await trio.to_thread.run_sync(failures_done.wait)  # under way until the other thread's questions failed
        return "answered"

    async def fail(resource: Resource) -> None:
        raise LookupError("no leader")

    answers: list[object] = []

    def ask_slowly() -> None:
        try:
            answers.append(kept.run(slow))
        except BaseException as exc:  # noqa: B036  # whatever comes out is what the test is about
            answers.append(exc)

    asker = threading.Thread(target=ask_slowly)
    asker.start()
    assert slow_started.wait(30)
    for _ in range(3):
        with pytest.raises(LookupError):
            kept.run(fail)
    assert not made[0].exited.is_set()  # the slow call is still under way on the first loop
    failures_done.set()
    asker.join(30)
    assert answers == ["answered"]
    assert made[0].exited.wait(30)  # closed after the slow call was answered
    kept.close()


FORKED = """
import os, sys, time, warnings
import trio
from kafkalite.spark import bridge

class Resource:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info):
        pass

async def pid(resource):
    return os.getpid()

kept = bridge.KeptOpen(Resource)
assert kept.run(pid) == os.getpid()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+ warns of forking with threads
    child = os.fork()
if child == 0:
    os._exit(0 if kept.run(pid) == os.getpid() else 1)
deadline = time.monotonic() + 30
while (status := os.waitpid(child, os.WNOHANG))[0] == 0:
    if time.monotonic() > deadline:
        os.kill(child, 9)
        sys.exit("the forked child's call never returned")
    time.sleep(0.01)
print(os.waitstatus_to_exitcode(status[1]), kept.run(pid) == os.getpid())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_copy_opens_its_own_loop() -> None:
    """The loop's thread stays in the parent: a forked child that called on the parent's loop waited for ever.
    Run in a process of its own: forking this one, with every test's threads, could deadlock the child."""
    done = subprocess.run([sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split() == ["0", "True"]  # the child answered; the parent's loop still serves it
