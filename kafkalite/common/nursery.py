"""Leaving a nursery that a library opened around its user's code, without changing what that code raised.

A client or a cluster that runs background tasks opens a nursery in `__aenter__` and leaves it in `__aexit__`,
so the body of `async with Producer(...)` runs inside that nursery. Trio wraps whatever leaves a nursery in an
ExceptionGroup, the body's own exception included: `pytest.raises(UnknownTopicOrPartitionError)` around the
body would then see an ExceptionGroup, and `except KafkaError` in the user's code would miss. The nursery is
the library's detail, so the body's exception must come out as itself. A failure of a background task is
another matter: it must surface, and it stays in its group, next to the body's exception if there is one.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any


def _only(raised: BaseException, exc: BaseException) -> bool:
    """Whether `raised` is `exc`, or groups of one member that hold nothing but `exc`."""
    while raised is not exc and isinstance(raised, BaseExceptionGroup) and len(raised.exceptions) == 1:
        raised = raised.exceptions[0]
    return raised is exc


async def leave_nursery(manager: AbstractAsyncContextManager[Any], exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> bool | None:
    """`await manager.__aexit__(...)` for a nursery (or a stack holding one) that a library's `__aenter__` entered.

    When the nursery raises nothing but the body's own exception wrapped in groups, this returns False, so that
    Python re-raises the body's exception unchanged, with its own traceback. Anything else the nursery raises
    (a background task's failure, alone or beside the body's exception) propagates as the nursery raised it.
    """
    try:
        return await manager.__aexit__(exc_type, exc, tb)
    except BaseExceptionGroup as group:
        if exc is not None and _only(group, exc):
            return False
        raise


def unwrap_single(exc: BaseException) -> BaseException:
    """The one real error inside Trio's nested single-member groups; a group of several stays a group.

    For a failure that has a single cause, such as a broker that cannot start: its caller should read that
    cause, not that a nursery failed.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
