"""The follower's truncation by leader epoch (KIP-279), round by round, on real logs and epoch caches.

ReplicaFetcher's fetches carry the follower's latest epoch; the leader answers where that epoch ends on it when
the logs diverge (KIP-595's diverging epoch, the answer OffsetsForLeaderEpoch gives), and the follower truncates
and asks again while `truncation_offset` says the answer was not final. These tests drive the same rounds
without brokers, to pin down the one property the fetcher relies on: every round that does not finish removes
the follower's latest epoch, so the same question is never asked twice and the rounds end.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.common import errors
from kafkalite.common.records import Record, RecordBatch
from kafkalite.log import Log, LogConfig
from kafkalite.network.requests import EpochEndOffset
from kafkalite.server.fetcher import truncation_offset


@dataclass
class FollowerReplica:
    """What `truncation_offset` reads of a Partition: its log and its high watermark."""

    log: Log
    high_watermark: int


def new_log() -> Log:
    return Log(LogConfig(), clock_ms=lambda: 0, name="t-0")


def lead(log: Log, epoch: int, batches: int, owner: str) -> None:
    """A term of `epoch` led by this replica: Partition.make_leader's epoch entry, then `batches` appends."""
    log.leader_epoch_cache.assign(epoch, log.log_end_offset)
    for i in range(batches):
        log.append_as_leader(RecordBatch.from_records([Record(None, f"{owner}-{epoch}-{i}".encode())]), epoch)


def truncate(follower: Log, leader: Log, high_watermark: int) -> list[int]:
    """Run the fetcher's truncation rounds to the end; the epochs the follower asked about, in order."""
    replica = FollowerReplica(follower, high_watermark)
    asked: list[int] = []
    while (epoch := follower.latest_epoch) is not None:
        assert epoch not in asked, f"the follower asks about epoch {epoch} again: {follower.leader_epoch_cache}"
        asked.append(epoch)
        answer_epoch, end_offset = leader.leader_epoch_cache.end_offset_for(epoch, leader.log_end_offset)
        offset, complete = truncation_offset(
            replica, EpochEndOffset("t", 0, errors.NONE.code, answer_epoch, end_offset))  # type: ignore[arg-type]
        follower.truncate_to(offset)
        if complete:
            return asked
    follower.truncate_to(high_watermark)  # a log without epochs truncates to its high watermark
    return asked


def batches(log: Log) -> list[tuple[int, int, bytes]]:
    return [(b.base_offset, b.partition_leader_epoch, b.payload) for b in log.read(log.log_start_offset, 1 << 30)]


def test_a_trailing_epoch_without_records_does_not_make_the_follower_ask_forever() -> None:
    """The state an admin's unclean elections reach: the follower led epoch 2 from offset 1 and appended
    nothing; the leader wrote offset 1 in epoch 1, which the follower never saw, and leads epoch 3. The
    leader's answer for epoch 2 is (1, 2); the follower's epoch 1 is its epoch 0, ending at its log end."""
    leader, follower = new_log(), new_log()
    for log in (leader, follower):
        lead(log, 0, 1, "shared")
    lead(leader, 1, 1, "leader")
    lead(follower, 2, 0, "follower")
    lead(leader, 3, 0, "leader")
    assert follower.leader_epoch_cache.epoch_entries() == [(0, 0), (2, 1)]
    assert leader.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 1), (3, 2)]
    assert truncate(follower, leader, high_watermark=1) == [2, 0]
    assert follower.log_end_offset == 1
    assert batches(follower) == batches(leader)[:1]


# A term: (led by the follower rather than the leader, epoch increment, batches appended in it).
terms = st.lists(st.tuples(st.booleans(), st.integers(1, 2), st.integers(0, 3)), max_size=8)


@settings(max_examples=300, deadline=None)
@given(shared=terms, diverged=terms)
def test_truncation_rounds_end_with_the_follower_on_a_prefix_of_the_leader(
        shared: list[tuple[bool, int, int]], diverged: list[tuple[bool, int, int]]) -> None:
    """Both replicas share some terms, then each leads terms the other never hears of (epochs are unique to
    their leader, as the controller makes them). Whatever the histories, including terms in which a leader
    appended nothing, the follower asks about ever smaller epochs and ends on a prefix of the leader's log."""
    leader, follower = new_log(), new_log()
    epoch = -1
    for _, step, count in shared:
        epoch += step
        for log in (leader, follower):
            lead(log, epoch, count, "shared")
    high_watermark = leader.log_end_offset
    for by_follower, step, count in diverged:
        epoch += step
        if by_follower:
            lead(follower, epoch, count, "follower")
        else:
            lead(leader, epoch, count, "leader")
    asked = truncate(follower, leader, high_watermark)
    assert asked == sorted(asked, reverse=True)
    mine = batches(follower)
    assert mine == batches(leader)[:len(mine)]
