"""The coordination service keeps ZooKeeper's promises: versions, ephemerals, sessions, one-shot ordered watches,
atomic multi."""

from __future__ import annotations

import pytest
import trio

from kafkalite.coordination import (
    BadArgumentsError,
    BadVersionError,
    CheckOp,
    ConnectionLossError,
    CoordinationService,
    CreateOp,
    DeleteOp,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SetDataOp,
    WatchedEvent,
)


def drain(session) -> list[WatchedEvent]:
    events = []
    while True:
        try:
            events.append(session.events.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return events


@pytest.fixture
async def service():
    service = CoordinationService()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        yield service
        nursery.cancel_scope.cancel()


async def test_versions_and_conditional_writes(service, autojump_clock) -> None:
    s = service.connect(10_000)
    s.create("/a", b"1")
    data, stat = s.get("/a")
    assert (data, stat.version) == (b"1", 0)
    assert s.set("/a", b"2", version=0).version == 1
    with pytest.raises(BadVersionError) as info:
        s.set("/a", b"3", version=0)
    assert info.value.path == "/a"
    assert s.get("/a")[0] == b"2"
    with pytest.raises(BadVersionError):
        s.delete("/a", version=0)
    assert s.exists("/a") is not None
    s.delete("/a", version=1)
    assert s.exists("/a") is None
    with pytest.raises(NoNodeError):
        s.get("/a")
    with pytest.raises(NodeExistsError):
        s.create("/b")
        s.create("/b")


async def test_zxids_and_cversion(service, autojump_clock) -> None:
    s = service.connect(10_000)
    first = s.create("/p")
    s.create("/p/x")
    s.create("/p/y")
    s.delete("/p/x")
    stat = s.exists("/p")
    assert stat.cversion == 3
    assert stat.num_children == 1
    assert s.exists("/p/y").czxid > s.exists(first).czxid
    assert service.zxid == s.exists("/p").pzxid


async def test_make_parents_and_path_validation(service, autojump_clock) -> None:
    s = service.connect(10_000)
    s.create("/a/b/c", b"x", make_parents=True)
    assert s.get_children("/a") == ["b"]
    with pytest.raises(NoNodeError):
        s.create("/q/r")
    for bad in ("a", "/a/", "/a//b", "/a/./b", "/a/../b"):
        with pytest.raises(BadArgumentsError):
            s.create(bad)
    with pytest.raises(NotEmptyError):
        s.delete("/a")


async def test_ephemerals_go_when_the_session_is_closed(service, autojump_clock) -> None:
    owner, watcher = service.connect(10_000), service.connect(10_000)
    owner.create("/e", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        owner.create("/e/child")
    assert watcher.exists("/e", watch=True).ephemeral_owner == owner.session_id
    owner.close()
    assert watcher.exists("/e") is None
    assert drain(watcher) == [WatchedEvent(EventType.NODE_DELETED, "/e")]
    with pytest.raises(SessionExpiredError):
        owner.get("/")
    owner.close()  # harmless


async def test_session_expires_when_heartbeats_stop_not_before(service, autojump_clock) -> None:
    owner, watcher = service.connect(6_000), service.connect(600_000)
    owner.create("/brokers", make_parents=True)
    owner.create("/brokers/1", ephemeral=True)
    watcher.get_children("/brokers", watch=True)
    async with trio.open_nursery() as nursery:
        cancel = trio.CancelScope()

        async def keep() -> None:
            with cancel:
                await owner.keep_alive()

        nursery.start_soon(keep)
        await trio.sleep(60)  # ten timeouts, kept alive
        assert not owner.expired and watcher.exists("/brokers/1") is not None
        cancel.cancel()
    owner.heartbeat()  # the last heartbeat: from here the session has 6 s
    await trio.sleep(5.9)
    assert not owner.expired
    await trio.sleep(0.2)
    assert owner.expired
    assert watcher.get_children("/brokers") == []
    assert drain(watcher) == [WatchedEvent(EventType.NODE_CHILDREN_CHANGED, "/brokers")]
    assert drain(owner) == [WatchedEvent(EventType.SESSION_EXPIRED, "")]
    with pytest.raises(trio.EndOfChannel):
        owner.events.receive_nowait()  # the session's events end with it
    with pytest.raises(SessionExpiredError):
        owner.heartbeat()


async def test_watches_fire_once_in_order_to_the_session_that_set_them(service, autojump_clock) -> None:
    writer, a, b = service.connect(60_000), service.connect(60_000), service.connect(60_000)
    writer.create("/x", b"0")
    writer.create("/y", b"0")
    a.get("/x", watch=True)
    a.get("/x", watch=True)  # the same watch twice is still one event
    a.get_children("/y", watch=True)
    a.exists("/z", watch=True)
    b.get("/y", watch=True)
    writer.set("/x", b"1")
    writer.create("/y/c")
    writer.create("/z")
    writer.set("/y", b"1")
    writer.set("/x", b"2")  # a's watch on /x already fired
    assert drain(a) == [WatchedEvent(EventType.NODE_DATA_CHANGED, "/x"),
                        WatchedEvent(EventType.NODE_CHILDREN_CHANGED, "/y"),
                        WatchedEvent(EventType.NODE_CREATED, "/z")]
    assert drain(b) == [WatchedEvent(EventType.NODE_DATA_CHANGED, "/y")]
    assert drain(writer) == []


async def test_listener_sees_the_write_complete_and_writes_from_listeners_queue_behind(service, autojump_clock) -> None:
    s = service.connect(60_000)
    seen = []

    def listener(event: WatchedEvent) -> None:
        seen.append((event, s.exists(event.path) is not None))
        if event.path == "/a":
            s.get_children("/", watch=True)
            s.create("/b")

    s.add_listener(listener)
    s.exists("/a", watch=True)
    s.create("/a")
    assert seen == [(WatchedEvent(EventType.NODE_CREATED, "/a"), True),
                    (WatchedEvent(EventType.NODE_CHILDREN_CHANGED, "/"), True)]


async def test_multi_is_all_or_nothing(service, autojump_clock) -> None:
    s, watcher = service.connect(60_000), service.connect(60_000)
    s.create("/epoch", b"1")
    s.create("/state", b"old")
    watcher.get("/state", watch=True)
    watcher.get_children("/", watch=True)
    before, zxid = service.dump(), service.zxid
    for ops, failing in [
        ([CheckOp("/epoch", 5), SetDataOp("/state", b"new")], 0),
        ([CheckOp("/epoch", 0), SetDataOp("/state", b"new"), CreateOp("/new"), DeleteOp("/missing")], 3),
        ([CreateOp("/new"), CreateOp("/new")], 1),
    ]:
        with pytest.raises((BadVersionError, NoNodeError, NodeExistsError)) as info:
            s.multi(ops)
        assert info.value.index == failing
        assert service.dump() == before
        assert service.zxid == zxid
        assert drain(watcher) == []
    results = s.multi([CheckOp("/epoch", 0), SetDataOp("/state", b"new", 0), CreateOp("/new")])
    assert results[1].version == 1 and results[2] == "/new"
    assert service.zxid == zxid + 1
    assert s.exists("/new").czxid == s.exists("/state").mzxid == zxid + 1
    assert drain(watcher) == [WatchedEvent(EventType.NODE_DATA_CHANGED, "/state"),
                              WatchedEvent(EventType.NODE_CHILDREN_CHANGED, "/")]


async def test_a_failed_multi_gives_back_ephemerals_and_children_as_they_were(service, autojump_clock) -> None:
    """Rolled back: created nodes leave their parent's children and their session's ephemerals, deleted ones come
    back to both, in a small directory and in one large enough to be kept sorted."""
    s, other = service.connect(60_000), service.connect(60_000)
    for directory, count in (("/few", 2), ("/many", 40)):
        s.create(directory)
        for i in range(count):
            s.create(f"{directory}/e{i:02d}", ephemeral=True)
    before = service.dump()
    with pytest.raises(NodeExistsError):
        s.multi([DeleteOp("/few/e00"), DeleteOp("/many/e00"), CreateOp("/few/new", ephemeral=True),
                 CreateOp("/many/new", ephemeral=True), SetDataOp("/few", b"x"), CreateOp("/few/e01")])
    assert service.dump() == before
    assert s.get_children("/few") == ["e00", "e01"]
    assert s.get_children("/many") == [f"e{i:02d}" for i in range(40)]
    s.close()  # every ephemeral it owned before the multi goes, and nothing else
    assert other.get_children("/few") == [] and other.get_children("/many") == []


async def test_sequential_names_come_from_the_parent_cversion(service, autojump_clock) -> None:
    s = service.connect(60_000)
    s.create("/seq")
    first = s.create("/seq/n-", sequential=True)
    second = s.create("/seq/n-", sequential=True)
    s.delete(first)
    third = s.create("/seq/n-", sequential=True)
    assert (first, second, third) == ("/seq/n-0000000000", "/seq/n-0000000001", "/seq/n-0000000003")
    assert s.get_children("/seq") == ["n-0000000001", "n-0000000003"]


async def test_unreachable_owner_gets_connection_loss_and_expires(service, autojump_clock) -> None:
    s = service.connect(6_000, owner="broker-1")
    s.create("/e", ephemeral=True)
    service.set_reachable("broker-1", False)
    with pytest.raises(ConnectionLossError):
        s.create("/f")
    with pytest.raises(ConnectionLossError):
        s.heartbeat()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(s.keep_alive)
        await trio.sleep(7)
        assert s.expired  # heartbeats did not get through
    service.set_reachable("broker-1", True)
    assert service.connect(6_000, owner="broker-1").exists("/e") is None


async def test_explicit_expiry(service, autojump_clock) -> None:
    s, other = service.connect(60_000), service.connect(60_000)
    s.create("/controller", ephemeral=True)
    other.exists("/controller", watch=True)
    service.expire(s.session_id)
    assert s.expired
    assert drain(other) == [WatchedEvent(EventType.NODE_DELETED, "/controller")]


async def test_ten_thousand_children(service, autojump_clock) -> None:
    s = service.connect(60_000)
    s.create("/many")
    names = [f"c{i:05d}" for i in range(10_000)]
    for name in reversed(names):
        s.create(f"/many/{name}")
    assert s.get_children("/many") == names
    assert s.exists("/many").num_children == 10_000


async def test_a_watch_fires_once_and_again_only_when_set_again(service, autojump_clock) -> None:
    writer, watcher = service.connect(60_000), service.connect(60_000)
    writer.create("/w", b"0")
    watcher.get("/w", watch=True)
    writer.set("/w", b"1")
    writer.set("/w", b"2")
    assert drain(watcher) == [WatchedEvent(EventType.NODE_DATA_CHANGED, "/w")]
    watcher.exists("/w", watch=True)
    writer.delete("/w")
    writer.create("/w")
    assert drain(watcher) == [WatchedEvent(EventType.NODE_DELETED, "/w")]


async def test_child_watches(service, autojump_clock) -> None:
    writer, watcher = service.connect(60_000), service.connect(60_000)
    writer.create("/topics")
    writer.create("/topics/t")
    assert watcher.get_children("/topics", watch=True) == ["t"]
    writer.set("/topics", b"data")  # data changes are not child changes
    writer.create("/topics/t/p")  # nor are grandchildren
    writer.delete("/topics/t/p")
    writer.delete("/topics/t")
    assert drain(watcher) == [WatchedEvent(EventType.NODE_CHILDREN_CHANGED, "/topics")]
    watcher.get_children("/topics", watch=True)
    watcher.get("/topics", watch=True)
    writer.delete("/topics")  # both watches of the session fire, as one event
    assert drain(watcher) == [WatchedEvent(EventType.NODE_DELETED, "/topics")]
    with pytest.raises(NoNodeError):
        watcher.get_children("/topics", watch=True)  # a failed read leaves no watch behind
    writer.create("/topics")
    assert drain(watcher) == []


async def test_an_ended_session_leaves_no_watches_and_only_its_own_ephemerals_go(service, autojump_clock) -> None:
    a, b, writer = service.connect(60_000), service.connect(60_000), service.connect(60_000)
    a.create("/a", ephemeral=True)
    b.create("/b", ephemeral=True)
    a.exists("/b", watch=True)
    a.get_children("/", watch=True)
    service.expire(a.session_id)
    service.expire(a.session_id)  # harmless
    assert drain(a) == [WatchedEvent(EventType.SESSION_EXPIRED, "")]
    writer.delete("/b")
    assert drain(a) == []
    assert sorted(service.dump()) == ["/"]
    with pytest.raises(SessionExpiredError, match="expired"):
        a.exists("/")


async def test_the_deadline_holds_even_before_the_background_task_runs(autojump_clock) -> None:
    service = CoordinationService()  # no `run` task: the deadline alone decides
    owner, watcher = service.connect(1_000), service.connect(60_000)
    owner.create("/e", ephemeral=True)
    await trio.sleep(0.9)
    owner.heartbeat()
    await trio.sleep(0.9)
    assert owner.exists("/e") is not None
    await trio.sleep(1.1)
    with pytest.raises(SessionExpiredError):
        owner.heartbeat()
    assert owner.expired and watcher.exists("/e") is None


async def test_background_task_sleeps_until_the_earliest_deadline(service, autojump_clock) -> None:
    slow = service.connect(60_000)
    await trio.sleep(1)
    fast = service.connect(2_000)  # earlier than the deadline the task is sleeping towards
    await trio.sleep(2.01)
    assert fast.expired and not slow.expired
    await trio.sleep(57)
    assert slow.expired


async def test_a_process_that_stood_still_costs_no_session_its_life(service, autojump_clock) -> None:
    """The service, the owners and their heartbeats share one thread. A computation that holds it up for longer
    than a session timeout (the clock jumping while no task runs: a controller event over tens of thousands of
    partitions on the real clock) must not expire the sessions of owners that heartbeat as soon as they can run,
    or every controller would lose its session doing the same work. A silent owner still expires: after its
    timeout of time in which it could have heartbeated."""
    alive, silent = service.connect(6_000), service.connect(6_000)
    alive.create("/e", ephemeral=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(alive.keep_alive)
        await trio.sleep(3)
        started = trio.current_time()
        autojump_clock.jump(30)  # nothing runs for 30 s
        newcomer = service.connect(6_000)  # opened as the stall ends: it did not wait through it
        await trio.sleep(0.1)
        assert not alive.expired and not silent.expired and alive.exists("/e") is not None
        await trio.sleep(6)  # it had 3 s left, and gets them (counted from when the service was due to look)
        assert silent.expired and newcomer.expired and not alive.expired
        assert trio.current_time() - started < 37
        nursery.cancel_scope.cancel()


async def test_stat_fields(service, autojump_clock) -> None:
    s = service.connect(60_000)
    await trio.sleep(5)
    s.create("/n", b"abc", ephemeral=True)
    created = trio.current_time()
    await trio.sleep(1)
    stat = s.set("/n", b"abcdef")
    assert (stat.ctime, stat.mtime) == (created, created + 1)
    assert (stat.data_length, stat.version, stat.ephemeral_owner, stat.num_children) == (6, 1, s.session_id, 0)
    assert stat.czxid < stat.mzxid == service.zxid


async def test_recreated_node_gets_a_larger_czxid(service, autojump_clock) -> None:
    # Kafka's broker epoch is the czxid of /brokers/ids/<id>: a re-registered broker must get a larger one.
    first, second = service.connect(6_000), service.connect(6_000)
    first.create("/brokers/ids/1", ephemeral=True, make_parents=True)
    epoch = first.exists("/brokers/ids/1").czxid
    first.close()
    second.create("/brokers/ids/1", ephemeral=True)
    assert second.exists("/brokers/ids/1").czxid > epoch


async def test_make_parents_is_part_of_the_create(service, autojump_clock) -> None:
    s = service.connect(60_000)
    s.create("/e", ephemeral=True)
    zxid = service.zxid
    with pytest.raises(NoChildrenForEphemeralsError):
        s.create("/e/x/y", make_parents=True)
    with pytest.raises(NodeExistsError):
        s.create("/e", make_parents=True)
    assert sorted(service.dump()) == ["/", "/e"] and service.zxid == zxid
    assert s.create("/q/r/n-", sequential=True, make_parents=True) == "/q/r/n-0000000000"
    assert s.exists("/q/r").ephemeral_owner == 0


async def test_errors_name_the_path(service, autojump_clock) -> None:
    s = service.connect(60_000)
    with pytest.raises(NoNodeError, match="/missing/path") as info:
        s.get("/missing/path")
    assert info.value.path == "/missing/path"
    with pytest.raises(BadArgumentsError, match="'/x/'"):
        s.exists("/x/")
    with pytest.raises(BadArgumentsError):
        s.delete("/")


async def test_multi_edge_cases(service, autojump_clock) -> None:
    s = service.connect(60_000)
    s.create("/c")
    zxid = service.zxid
    assert s.multi([]) == []
    assert s.multi([CheckOp("/c", 0), CheckOp("/c", -1)]) == [None, None]
    assert service.zxid == zxid + 2  # a multi is one transaction, even of checks only
    before = service.dump()
    with pytest.raises(TypeError):
        s.multi([SetDataOp("/c", b"x"), "not an op"])
    assert service.dump() == before
    ops = [CreateOp("/c/s-", sequential=True), CreateOp("/c/s-", sequential=True), DeleteOp("/c/s-0000000000")]
    assert s.multi(ops) == ["/c/s-0000000000", "/c/s-0000000001", None]
    s.close()
    with pytest.raises(SessionExpiredError, match="closed"):
        s.multi([])


async def test_listeners_replace_the_channel_and_a_failing_one_fails_nobody_else(service, autojump_clock,
                                                                                  caplog) -> None:
    writer, watcher = service.connect(60_000), service.connect(60_000)
    seen = []

    def broken(event: WatchedEvent) -> None:
        raise RuntimeError("listener bug")

    watcher.add_listener(broken)
    watcher.add_listener(seen.append)
    watcher.exists("/a", watch=True)
    watcher.exists("/b", watch=True)
    writer.create("/a")  # does not raise although a listener did
    writer.create("/b")
    assert seen == [WatchedEvent(EventType.NODE_CREATED, "/a"), WatchedEvent(EventType.NODE_CREATED, "/b")]
    assert drain(watcher) == []
    assert "listener bug" in caplog.text


async def test_unreachable_owner_changes_nothing_until_it_heals(service, autojump_clock) -> None:
    s, other = service.connect(6_000, owner="broker-2"), service.connect(60_000, owner="broker-3")
    s.create("/data", b"v")
    service.set_reachable("broker-2", False)
    zxid = service.zxid
    for call in (lambda: s.set("/data", b"w"), lambda: s.delete("/data"), lambda: s.get("/data"),
                 lambda: s.multi([CheckOp("/data", 0)]), lambda: s.get_children("/", watch=True)):
        with pytest.raises(ConnectionLossError):
            call()
    with pytest.raises(ConnectionLossError):
        service.connect(6_000, owner="broker-2")
    assert service.zxid == zxid and other.get("/data")[0] == b"v"
    await trio.sleep(6.1)
    assert s.expired
    with pytest.raises(ConnectionLossError):
        s.get("/data")  # the owner cannot tell yet that its session is gone
    service.set_reachable("broker-2", True)
    with pytest.raises(SessionExpiredError):
        s.get("/data")


async def test_a_cut_off_session_hears_nothing_until_the_link_heals_then_everything_in_order(
        service, autojump_clock) -> None:
    """As a disconnected ZooKeeper client: no watch event while cut off (acting on one would only fail), then
    CONNECTED and the held events in the order the changes happened."""
    cut, writer = service.connect(60_000, owner="broker-1"), service.connect(60_000, owner="broker-2")
    writer.create("/a")
    cut.exists("/a", watch=True)
    cut.get_children("/", watch=True)
    service.set_reachable("broker-1", False)
    writer.set("/a", b"changed")
    writer.create("/b")
    assert drain(cut) == []
    service.set_reachable("broker-1", False)  # cutting again changes nothing
    service.set_reachable("broker-1", True)
    assert drain(cut) == [WatchedEvent(EventType.CONNECTED, ""), WatchedEvent(EventType.NODE_DATA_CHANGED, "/a"),
                          WatchedEvent(EventType.NODE_CHILDREN_CHANGED, "/")]
    service.set_reachable("broker-1", True)  # healing a healthy link is no event
    assert drain(cut) == []


async def test_a_session_that_expired_while_cut_off_learns_only_that_when_the_link_heals(
        service, autojump_clock) -> None:
    cut, writer = service.connect(6_000, owner="broker-1"), service.connect(60_000, owner="broker-2")
    writer.create("/a")
    cut.exists("/a", watch=True)
    service.set_reachable("broker-1", False)
    await trio.sleep(7)
    assert cut.expired and drain(cut) == []
    service.set_reachable("broker-1", True)
    assert drain(cut) == [WatchedEvent(EventType.SESSION_EXPIRED, "")]


async def test_a_multi_takes_its_ops_as_they_are_made(service, autojump_clock) -> None:
    """A generator of ops is one transaction like a list: each op made as it is applied, the first failure's
    index counted over what was taken, and an error raised while making an op undoes what was applied."""
    s = service.connect(60_000)
    s.create("/a", b"0")
    made = []

    def ops(failing: BaseException | None = None):
        for name in ("/a", "/b"):
            made.append(name)
            yield SetDataOp("/a", b"1") if name == "/a" else CreateOp(name)
        if failing is not None:
            raise failing
        made.append("/a")
        yield SetDataOp("/a", b"2", version=0)  # /a is at version 1 by now

    before, zxid = service.dump(), service.zxid
    with pytest.raises(BadVersionError) as info:
        s.multi(ops())
    assert info.value.index == 2 and made == ["/a", "/b", "/a"]
    assert service.dump() == before and service.zxid == zxid
    with pytest.raises(RuntimeError, match="encoding failed"):
        s.multi(ops(RuntimeError("encoding failed")))
    assert service.dump() == before and service.zxid == zxid
    assert s.multi(iter(())) == [] and service.zxid == zxid + 1
    results = s.multi(op for op in [SetDataOp("/a", b"1", version=0), CreateOp("/b")])
    assert results[0].version == 1 and results[1] == "/b" and s.get("/a")[0] == b"1"
