"""Incremental fetch sessions between a follower and its leader (KIP-227), as the leader keeps them.

Without a session a follower names every partition it follows in every fetch, and the leader reads all of them
and registers a wake-up with each while the fetch is parked: with thousands of partitions on one link, every
round costs thousands of reads, and each leadership change (a new fetch with the new set) costs a full round.

With a session the leader remembers, per follower, each partition's fetch position and what it last told the
follower of its high watermark and log start. A fetch names only what changed on the follower's side (a
partition added or moved on, one forgotten); the leader marks a partition dirty when something changes on its
side (an append, a high watermark or ISR change, a change of role), reads only the dirty ones, answers only
those with news, and wakes a parked fetch only on an append to one of its own partitions. Kafka's leader still
iterates every partition of a session on each fetch; here a fetch costs what changed.

`session_epoch` counts the responses of the session the follower has received. A leader that built more than
that knows one was lost on the way (a link cut after the leader answered) and sends everything again, since it
had cleared what that response carried; a follower that abandons a parked fetch (to add partitions) loses no
response, because the leader builds one only when it returns. A session the leader does not know (it restarted)
is answered FETCH_SESSION_ID_NOT_FOUND and the follower starts a new one with a full fetch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import trio

from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import FetchPartition, ForgottenPartition

NEW_SESSION_ID = 0  # a fetch with this id opens a session: a full fetch
SESSIONLESS_EPOCH = -1  # a fetch with this epoch has no session (consumers, and tests that fetch by hand)


class SessionPartition:
    """One partition of a session: the follower's last fetch of it, field by field, and what the leader last answered.

    It reads as the FetchPartition it was made from (the leader's reads take either): holding the follower's request
    object instead cost the leader a tracked object more per follower and partition, all of them in the cyclic GC's
    oldest generation (20,000 at 10,000 partitions and RF=3)."""

    __slots__ = ("topic", "partition", "fetch_offset", "partition_max_bytes", "current_leader_epoch",
                 "log_start_offset", "last_fetched_epoch", "sent_high_watermark", "sent_log_start_offset")

    def __init__(self, fetch: FetchPartition) -> None:
        self.topic = fetch.topic
        self.partition = fetch.partition
        self.update(fetch)
        # What the follower knows already: its own log start, and, with an empty log, its high watermark, which
        # lies between the two. So a new partition with nothing in it on either side needs no answer at all.
        empty = fetch.fetch_offset == fetch.log_start_offset
        self.sent_high_watermark = fetch.fetch_offset if empty else -1
        self.sent_log_start_offset = fetch.log_start_offset

    def update(self, fetch: FetchPartition) -> None:
        """The follower's newer fetch of the partition: where it is, and what it asks."""
        self.fetch_offset = fetch.fetch_offset
        self.partition_max_bytes = fetch.partition_max_bytes
        self.current_leader_epoch = fetch.current_leader_epoch
        self.log_start_offset = fetch.log_start_offset
        self.last_fetched_epoch = fetch.last_fetched_epoch


class FetchSession:
    """One follower's session on this leader."""

    __slots__ = ("id", "replica_id", "partitions", "dirty", "responses", "last_fetch_ms", "wake")

    def __init__(self, session_id: int, replica_id: int) -> None:
        self.id = session_id
        self.replica_id = replica_id
        self.partitions: dict[TopicPartition, SessionPartition] = {}
        self.dirty: dict[TopicPartition, None] = {}  # ordered, so that answers come in a reproducible order
        self.responses = 0
        self.last_fetch_ms = 0
        self.wake: trio.Event | None = None  # the parked fetch's, while one is parked

    def mark(self, tp: TopicPartition, appended: bool) -> None:
        self.dirty[tp] = None
        if appended and self.wake is not None:
            self.wake.set()

    def resend_all(self, received: int) -> None:
        """A response was lost: what it carried must go again, and so must everything it cleared. The count
        starts again from the `received` ones, or every later fetch would look one response short and be
        answered with everything again."""
        self.responses = received
        for tp, cached in self.partitions.items():
            cached.sent_high_watermark = cached.sent_log_start_offset = -1
            self.dirty[tp] = None


class FetchSessionCache:
    """The sessions of one leader, one per follower, and which sessions hear of which partition's changes."""

    def __init__(self, on_leave: Callable[[TopicPartition], None] | None = None,
                 hosted: Callable[[TopicPartition], TopicPartition] | None = None) -> None:
        self._on_leave = on_leave  # a partition left a session: its follower no longer fetches it there
        # The leader's own key of a partition a follower names: the sessions keep that one object rather than one
        # per session parsed from the followers' requests, a tracked object fewer per follower and partition.
        self._hosted = hosted
        self._sessions: dict[int, FetchSession] = {}
        # Per partition, the sessions that hold it: a tuple, as there are at most replication factor - 1 of them
        # and they change only when a follower adds or forgets the partition, while a dict each would cost a
        # leader hundreds of bytes per partition.
        self._watching: dict[TopicPartition, tuple[FetchSession, ...]] = {}
        self._ids = itertools.count(1)

    def open(self, replica_id: int) -> FetchSession:
        """A new session for the follower, replacing the one it had (a full fetch starts over)."""
        old = self._sessions.get(replica_id)
        if old is not None:
            for tp in old.partitions:
                self._unwatch(tp, replica_id)
        session = self._sessions[replica_id] = FetchSession(next(self._ids), replica_id)
        return session

    def get(self, replica_id: int, session_id: int) -> FetchSession | None:
        session = self._sessions.get(replica_id)
        return session if session is not None and session.id == session_id else None

    def apply(self, session: FetchSession, partitions: list[FetchPartition],
              forgotten: list[ForgottenPartition]) -> None:
        """The follower's changes: forgotten partitions leave, named ones join or move, and are read next."""
        for gone in forgotten:
            tp = TopicPartition(gone.topic, gone.partition)
            if session.partitions.pop(tp, None) is not None:
                session.dirty.pop(tp, None)
                self._unwatch(tp, session.replica_id)
        for fetch in partitions:
            tp = TopicPartition(fetch.topic, fetch.partition)
            cached = session.partitions.get(tp)
            if cached is None:
                if self._hosted is not None:
                    tp = self._hosted(tp)
                session.partitions[tp] = SessionPartition(fetch)
                self._watching[tp] = self._watching.get(tp, ()) + (session,)
            else:
                cached.update(fetch)
            session.dirty[tp] = None

    def on_partition_change(self, tp: TopicPartition, appended: bool) -> None:
        """A partition this leader hosts changed: every session with it reads it next, and an append wakes them."""
        for session in self._watching.get(tp, ()):
            session.mark(tp, appended)

    def last_fetch_ms(self, replica_id: int, tp: TopicPartition) -> int | None:
        """When the follower last fetched in a session that holds `tp`, if it has one."""
        for session in self._watching.get(tp, ()):
            if session.replica_id == replica_id:
                return session.last_fetch_ms
        return None

    def silent_since(self, since_ms: int) -> Iterator[FetchSession]:
        """The sessions whose follower has not fetched since `since_ms`."""
        return (session for session in self._sessions.values() if session.last_fetch_ms < since_ms)

    def _unwatch(self, tp: TopicPartition, replica_id: int) -> None:
        remaining = tuple(session for session in self._watching.get(tp, ()) if session.replica_id != replica_id)
        if remaining:
            self._watching[tp] = remaining
        else:
            self._watching.pop(tp, None)
        if self._on_leave is not None:
            self._on_leave(tp)
