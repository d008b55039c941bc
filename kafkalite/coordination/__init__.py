"""The ZooKeeper replacement: a znode tree with versions, sessions, ephemeral nodes, watches and multi."""

from kafkalite.coordination.errors import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLossError,
    CoordinationError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kafkalite.coordination.service import (
    CheckOp,
    CoordinationService,
    CreateOp,
    DeleteOp,
    EventType,
    Op,
    Session,
    SetDataOp,
    WatchedEvent,
    ZnodeStat,
)

__all__ = [
    "BadArgumentsError", "BadVersionError", "CheckOp", "ConnectionLossError", "CoordinationError",
    "CoordinationService", "CreateOp", "DeleteOp", "EventType", "NoChildrenForEphemeralsError", "NoNodeError",
    "NodeExistsError", "NotEmptyError", "Op", "Session", "SessionExpiredError", "SetDataOp", "WatchedEvent",
    "ZnodeStat",
]
