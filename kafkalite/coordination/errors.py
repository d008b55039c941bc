"""ZooKeeper's error vocabulary, each error naming the path it is about."""

from __future__ import annotations


class CoordinationError(Exception):
    """Base of every coordination-service error; `path` is the znode the operation was about."""

    def __init__(self, path: str, message: str = "") -> None:
        super().__init__(f"{message or type(self).__name__} (path {path!r})")
        self.path = path
        self.index: int | None = None  # the failing op's position inside a multi


class NoNodeError(CoordinationError):
    pass


class NodeExistsError(CoordinationError):
    pass


class BadVersionError(CoordinationError):
    pass


class NotEmptyError(CoordinationError):
    pass


class SessionExpiredError(CoordinationError):
    pass


class ConnectionLossError(CoordinationError):
    pass


class NoChildrenForEphemeralsError(CoordinationError):
    pass


class BadArgumentsError(CoordinationError):
    pass
