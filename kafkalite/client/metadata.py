"""The client's view of the cluster: brokers, the controller, and each partition's leader and leader epoch.

It is refreshed from a MetadataRequest whenever a broker says the client's view is stale (not the leader,
no leader, unknown topic, fenced epoch), a broker cannot be reached, or a partition the application names is
not in it, and never more often than once per retry.backoff.ms: during an election every request fails the
same way, and refreshing in a tight loop would only add load while the controller works. Concurrent refreshes
are coalesced into one request. Nothing goes wrong when a topic grows, so, as in Kafka's clients, the view is
also refreshed once it is metadata.max.age.ms old: that is how a long-lived producer learns of partitions
added since it started and hashes keys over all of them. An answer that leaves a tracked topic incomplete (an
error a retry may cure, such as LEADER_NOT_AVAILABLE for a topic being created or UNKNOWN_TOPIC_OR_PARTITION for
one not created yet, or partitions missing) brings the next refresh forward to retry.backoff.ms, doubling with
each such answer in a row up to a second, as Kafka's clients ask again for metadata they found invalid (up to
their retry.backoff.max.ms). A consumer subscribed to a topic created after it joined sees it within a second.

Which topics a refresh asks for, and the cache keeps, is what the client tracks now, never every topic it once
used: each ask may create the topic (allow_auto_topic_creation), so a topic asked for forever would come back
forever once deleted. As in Kafka's clients: a producer's topics expire once unused for metadata.max.idle.ms
(KIP-526's ProducerMetadata); a consumer's are its subscription, its assignment and, as the group's leader, the
group's topics, each replaced when it changes, and a pattern subscription asks for every topic, which creates none
(ConsumerMetadata); a call looking up partitions tracks their topics only while it runs (the consumer's transient
topics; Kafka's admin client keeps no metadata at all between calls).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import NoReturn

import trio

from kafkalite.common import errors
from kafkalite.common.errors import KafkaError, NetworkExceptionError, UnknownTopicOrPartitionError
from kafkalite.common.types import TopicPartition
from kafkalite.client.transport import ClientTransport
from kafkalite.network.requests import (
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)

log = logging.getLogger(__name__)

INCOMPLETE_REFRESH_MAX_S = 1.0
"""The longest wait before asking again for a tracked topic the last answers left incomplete (Kafka's clients'
default retry.backoff.max.ms)."""

STALE_METADATA_ERRORS: frozenset[int] = frozenset(e.code for e in (
    errors.NOT_LEADER_OR_FOLLOWER, errors.LEADER_NOT_AVAILABLE, errors.UNKNOWN_TOPIC_OR_PARTITION,
    errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH, errors.NETWORK_EXCEPTION, errors.REQUEST_TIMED_OUT,
    errors.NOT_CONTROLLER, errors.REPLICA_NOT_AVAILABLE, errors.LISTENER_NOT_FOUND,
))


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One topic as the last metadata answer listed it.

    Partitions are kept by id, never by position: a broker lists the partitions its metadata cache holds, which
    may leave one out, and a list position would then name another partition's leader. A partition left out
    has no leader here, so nothing is sent for it until an answer lists it.

    `partition_count` is known only when the answer lists partitions 0 to n-1 without a gap. With a gap, or
    with no partition at all, the answer is incomplete: neither the number listed nor the largest id plus one
    is the topic's size, and a keyed record placed by either could land in another partition than it will
    once the answer is whole. A producer waits for a complete answer instead. (Partitions missing at the end
    cannot be told from a smaller topic, which is how a topic still growing looks to Kafka's clients too.)
    """

    name: str
    partitions: Mapping[int, MetadataPartition]
    partition_count: int | None
    is_internal: bool = False

    @classmethod
    def from_response(cls, topic: MetadataTopic) -> TopicMetadata:
        partitions = {p.partition: p for p in topic.partitions}
        complete = bool(partitions) and all(p in partitions for p in range(len(partitions)))
        return cls(topic.name, partitions, len(partitions) if complete else None, topic.is_internal)


class ClusterMetadata:
    def __init__(self, transport: ClientTransport, retry_backoff_ms: int, max_age_ms: int = 300000, *,
                 allow_auto_topic_creation: bool = False, max_idle_ms: float = math.inf,
                 on_forget: Callable[[set[str]], None] | None = None) -> None:
        self.transport = transport
        self.allow_auto_topic_creation = allow_auto_topic_creation
        """Whether asking for an unknown topic may create it (the broker's auto.create.topics.enable decides)."""
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.max_age_s = max_age_ms / 1000
        self.max_idle_s = max_idle_ms / 1000
        """How long a topic used (`add_topics`, `use`) stays tracked without being used again: metadata.max.idle.ms."""
        self._on_forget = on_forget
        """Told the topics the client stopped tracking, once their metadata is dropped: the producer drops its
        bookkeeping of them."""
        self.last_failure: KafkaError | None = None
        """Why the last MetadataRequest got no answer (no broker reachable); None once one was answered."""
        self._updated_at = -float("inf")
        self.cluster_id: str | None = None
        self.controller_id: int | None = None
        self.brokers: dict[int, MetadataBroker] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.topic_errors: dict[str, KafkaError] = {}
        self._used: dict[str, float] = {}  # a producer's topics, and when each was last used
        # What replaces its topics as a whole, by name ("subscription", "assignment", "group"); None: every topic.
        self._tracked: dict[str, frozenset[str] | None] = {}
        self._transient: dict[str, int] = {}  # the topics calls under way look up, and how many calls each
        self._last_refresh = -float("inf")
        self._refreshing: trio.Event | None = None
        self._asked: frozenset[str] | None = frozenset()  # the topics the refresh under way asked for; None: all
        self._incomplete_answers = 0  # in a row: answers that left a tracked topic incomplete
        self._sooner = trio.Event()  # set when an answer brings the periodic refresh forward

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track `topics` as used now, until unused for max_idle_s; True if any was new, so a refresh is due."""
        now = trio.current_time()
        new = False
        for topic in topics:
            new = new or not self.tracks(topic)
            self._used[topic] = now
        return new

    def use(self, topic: str, now: float) -> None:
        """`add_topics` for a topic tracked already, at a producer's every batch: the cheapest way to keep it."""
        self._used[topic] = now

    def track(self, source: str, topics: Iterable[str] | None) -> None:
        """Track `topics` (None: every topic) for `source` instead of what it tracked before, which is forgotten
        unless tracked otherwise: a consumer's subscription, assignment or group topics as they change. A topic
        not tracked yet makes the next refresh immediate."""
        tracked = None if topics is None else frozenset(topics)
        if tracked is None and not self.all_topics or tracked is not None and not all(map(self.tracks, tracked)):
            self._last_refresh = -float("inf")
        self._tracked[source] = tracked
        self._forget_untracked()

    @contextlib.contextmanager
    def transient(self, topics: Iterable[str], *, fresh: bool = False) -> Iterator[None]:
        """Track `topics` while one call runs (Kafka's transient topics), then no longer, so that no later refresh
        asks for them (and perhaps creates them again). As Kafka's ConsumerMetadata, what the cache holds of them
        stays until the next refresh, so calls in a row on one topic cost one lookup; a topic the cache lacks makes
        the next refresh immediate. `fresh`: the call looks its topics up again whatever the cache holds, as Kafka's
        admin client, which keeps no metadata between calls, sees a topic as it is now."""
        looked_up = set(topics)
        if fresh:
            self._updated_at = self._last_refresh = -float("inf")
        elif not all(map(self.knows, looked_up)):
            self._last_refresh = -float("inf")
        for topic in looked_up:
            self._transient[topic] = self._transient.get(topic, 0) + 1
        try:
            yield
        finally:
            for topic in looked_up:
                if self._transient[topic] == 1:
                    del self._transient[topic]
                else:
                    self._transient[topic] -= 1

    @property
    def all_topics(self) -> bool:
        """Whether refreshes ask for every topic (a pattern subscription): Kafka's allTopics(), which creates none."""
        return any(topics is None for topics in self._tracked.values())

    def tracks(self, topic: str) -> bool:
        """Whether refreshes ask for `topic` by name."""
        return topic in self._transient or self._kept(topic)

    def _kept(self, topic: str) -> bool:
        """Whether `topic` is tracked beyond the calls looking it up now (`transient`). A call's lookup takes the
        answer as it comes, older leader epochs included, as Kafka's admin client keeps no metadata to compare:
        a topic deleted and created again starts over at epoch 0, and, without topic ids to tell it is a new
        topic, keeping the old topic's leaders sent every lookup to a broker that was no longer its leader."""
        return topic in self._used or any(topics is not None and topic in topics for topics in self._tracked.values())

    def knows(self, topic: str) -> bool:
        """Whether the cache has an answer for `topic`: its partitions, or its error."""
        return topic in self.topics or topic in self.topic_errors

    def _tracked_topics(self) -> list[str] | None:
        """What a refresh asks for: the topics tracked, or None for every topic."""
        if self.all_topics:
            return None
        named = set(self._used) | set(self._transient)
        for topics in self._tracked.values():
            named.update(topics or ())
        return sorted(named)

    def _expire_idle(self) -> None:
        """Stop tracking the topics unused for max_idle_s, as Kafka's ProducerMetadata.retainTopic does."""
        now = trio.current_time()
        idle = [topic for topic, used in self._used.items() if used + self.max_idle_s <= now]  # as the age is reckoned
        for topic in idle:
            del self._used[topic]
        if idle:
            self._forget_untracked(idle)

    def _forget_untracked(self, untracked: Iterable[str] = ()) -> None:
        """Drop what the cache holds of topics no longer tracked, and tell `on_forget` of them and of `untracked`
        (topics just no longer tracked, cached or not). Asking for every topic, the cache keeps every topic."""
        if self.all_topics:
            return
        gone = {topic for topic in (*untracked, *self.topics, *self.topic_errors) if not self.tracks(topic)}
        for topic in gone:
            self.topics.pop(topic, None)
            self.topic_errors.pop(topic, None)
        if gone and self._on_forget is not None:
            self._on_forget(gone)

    def forget(self, topic: str) -> None:
        """Drop what the cache holds of `topic`, tracked or not: the next answer about it is taken as it comes.

        Without topic ids a client cannot tell a topic deleted and created again from the one it knew, whose leader
        epochs (newer than the new topic's) it would keep against every answer (`_no_older_leaders`), its fetches
        refused as from the future until they timed out. A client that has reason to doubt the topic it knew (the
        Spark connector's kept consumers, sent back to offsets they did not stand at) forgets it first."""
        self.topics.pop(topic, None)
        self.topic_errors.pop(topic, None)

    def leader_for(self, tp: TopicPartition) -> MetadataPartition | None:
        """The partition's metadata if it has a leader the client knows how to reach, else None."""
        topic = self.topics.get(tp.topic)
        partition = topic.partitions.get(tp.partition) if topic is not None else None
        if partition is None:
            return None
        return partition if partition.leader >= 0 and partition.leader in self.brokers else None

    def partition_count(self, topic: str) -> int | None:
        """The topic's number of partitions; None while unknown, or while the last answer missed some."""
        found = self.topics.get(topic)
        return found.partition_count if found is not None else None

    def lists(self, tp: TopicPartition) -> bool:
        """Whether the last answer listed the partition, with or without a leader."""
        topic = self.topics.get(tp.topic)
        return topic is not None and tp.partition in topic.partitions

    def expired(self) -> bool:
        """Whether the last answer is metadata.max.age.ms old, or there was none."""
        return trio.current_time() >= self._updated_at + self.max_age_s

    async def refresh_when_old(self) -> NoReturn:
        """Refresh whenever the last answer grows metadata.max.age.ms old; run in a client's nursery.

        Ages are counted from the start for a client that has not asked for metadata yet, so that opening a
        client costs no request. A refresh that fails is tried again after retry.backoff.ms, as `refresh` waits.
        """
        started = trio.current_time()
        while True:
            due = max(self._updated_at, started) + self.max_age_s
            if self._incomplete_answers:
                doublings = min(self._incomplete_answers - 1, 32)  # the count grows for as long as a topic is missing
                due = min(due, self._updated_at + min(self.retry_backoff_s * 2 ** doublings, INCOMPLETE_REFRESH_MAX_S))
            if trio.current_time() < due:
                self._sooner = sooner = trio.Event()
                with trio.move_on_at(due):
                    await sooner.wait()
                continue
            try:
                await self.refresh()
            except KafkaError as exc:  # still due: the next refresh waits out retry.backoff.ms first
                log.info("%s: periodic metadata refresh failed: %s", self.transport.name, exc)

    async def refresh(self, topics: Iterable[str] = ()) -> None:
        """Fetch fresh metadata for the tracked topics (plus `topics`), waiting out the backoff first.

        Raises only when no broker answered (NETWORK_EXCEPTION or REQUEST_TIMED_OUT, both retriable).
        """
        if self.add_topics(topics):
            self._last_refresh = -float("inf")
        if self._refreshing is not None:
            asked = self._asked
            await self._refreshing.wait()
            wanted = self._tracked_topics()
            if asked is None or wanted is not None and asked.issuperset(wanted):
                return
            # Topics tracked since that refresh began, which it did not ask for: the group leader's, say, whose
            # partition counts it needs now.
            return await self.refresh()
        self._refreshing = done = trio.Event()
        self._asked = None  # until it asks after its backoff, for all that is tracked by then
        try:
            await trio.sleep_until(self._last_refresh + self.retry_backoff_s)
            self._last_refresh = trio.current_time()
            self._expire_idle()
            self._forget_untracked()  # what calls looked up for themselves (`transient`) goes now
            topics = self._tracked_topics()
            self._asked = None if topics is None else frozenset(topics)
            await self.fetch(topics)
        finally:
            self._refreshing = None
            done.set()

    async def fetch(self, topics: list[str] | None) -> MetadataResponse:
        """One MetadataRequest now, without backoff (`None`: every topic), applied to the cache and returned.

        The cache takes only the topics tracked: the answer for others is the caller's alone."""
        try:
            response: MetadataResponse = await self.transport.send_to_any(
                MetadataRequest(topics, self.allow_auto_topic_creation and topics is not None))
        except KafkaError as exc:
            self.last_failure = exc
            raise
        self.last_failure = None
        self._apply(response, every_topic=topics is None)
        return response

    def _apply(self, response: MetadataResponse, every_topic: bool = False) -> None:
        """Take the answer into the cache; one listing `every_topic` replaces it, as Kafka's clients take a full
        update: a topic it leaves out was deleted, and a pattern subscription would otherwise keep every topic it
        ever saw."""
        self._updated_at = trio.current_time()
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id if response.controller_id >= 0 else None
        if response.brokers:  # an empty list is a broker without metadata yet, not an empty cluster
            self.brokers = {broker.node_id: broker for broker in response.brokers}
            self.transport.update_brokers(response.brokers)
            if every_topic:
                listed = {topic.name for topic in response.topics}
                for name in [name for name in self.topics if name not in listed]:
                    del self.topics[name]
        incomplete = False
        cache_all = self.all_topics
        for topic in response.topics:
            tracked = self.tracks(topic.name)
            if not (tracked or cache_all):
                continue
            if topic.error_code == errors.NONE.code:
                found = TopicMetadata.from_response(topic)
                if self._kept(topic.name):  # not a call's lookup alone: see _no_older_leaders
                    found = self._no_older_leaders(found)
                self.topics[topic.name] = found
                self.topic_errors.pop(topic.name, None)
                complete = found.partition_count is not None
            else:
                self.topics.pop(topic.name, None)
                error = self.topic_errors[topic.name] = errors.for_code(topic.error_code).exception(topic.error_message)
                complete = not error.retriable  # an illegal name, say: asking again cannot help
            incomplete = incomplete or (not complete and tracked)
        if incomplete:
            self._incomplete_answers += 1
            self._sooner.set()
        else:
            self._incomplete_answers = 0

    def _no_older_leaders(self, fresh: TopicMetadata) -> TopicMetadata:
        """Keep what the client knew of a partition whose answer names an older leader epoch (KIP-320): a broker
        cut off from the controller answers from a stale cache, and believing it would send fetches to a deposed
        leader, whose shorter log answers OFFSET_OUT_OF_RANGE and resets the consumer to the beginning."""
        known = self.topics.get(fresh.name)
        if known is None:
            return fresh
        stale = {p: known.partitions[p] for p, partition in fresh.partitions.items()
                 if p in known.partitions and partition.leader_epoch < known.partitions[p].leader_epoch}
        if not stale:
            return fresh
        return dataclasses.replace(fresh, partitions={**fresh.partitions, **stale})

    async def wait_for_partition_count(self, topic: str, timeout_s: float, partition: int | None = None) -> int:
        """The topic's number of partitions, refreshing until an answer lists them all (and `partition` among them).

        A partition beyond the count known may have been added since the last answer, so it is waited for as
        Kafka's producer waits for it: up to `timeout_s`. Raises the topic's error if it cannot be retried, else,
        after `timeout_s`, UNKNOWN_TOPIC_OR_PARTITION, or NETWORK_EXCEPTION if no broker answered.
        """
        with trio.move_on_after(timeout_s):
            while True:
                count = self.partition_count(topic)
                if count is not None and (partition is None or partition < count):
                    return count
                try:
                    await self.refresh([topic])
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                error = self.topic_errors.get(topic)
                if error is not None and not error.retriable:
                    raise error
        count = self.partition_count(topic)
        if partition is not None and count is not None:
            raise self.missing(f"partition {partition} of topic {topic} (which has {count})", timeout_s)
        raise self.missing(f"some partitions of topic {topic}" if topic in self.topics else f"topic {topic}",
                           timeout_s)

    def missing(self, subject: str, waited_s: float) -> KafkaError:
        """The error for `subject` ("topic t") that metadata still lacks after `waited_s`: UNKNOWN_TOPIC_OR_PARTITION,
        or NETWORK_EXCEPTION when the last MetadataRequest reached no broker, since nobody could then tell whether
        it exists."""
        if self.last_failure is not None:
            error = NetworkExceptionError(f"{self.last_failure.message}; {subject} not known after "
                                          f"{waited_s * 1000:.0f} ms")
            error.__cause__ = self.last_failure
            return error
        return UnknownTopicOrPartitionError(f"{subject[0].upper()}{subject[1:]} not present in metadata after "
                                            f"{waited_s * 1000:.0f} ms")
