"""Random operation sequences keep the tree's invariants and agree with a plain dict model."""

from __future__ import annotations

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.coordination import (
    CheckOp,
    CoordinationError,
    CoordinationService,
    CreateOp,
    DeleteOp,
    SetDataOp,
)

PATHS = ["/a", "/b", "/a/x", "/a/y", "/b/x", "/a/x/deep"]

single_op = st.one_of(
    st.builds(CreateOp, st.sampled_from(PATHS), st.binary(max_size=3), st.booleans()),
    st.builds(lambda e: CreateOp("/b/s-", b"", e, sequential=True), st.booleans()),
    st.builds(SetDataOp, st.sampled_from(PATHS), st.binary(max_size=3), st.integers(-1, 2)),
    st.builds(DeleteOp, st.sampled_from(PATHS), st.integers(-1, 2)),
    st.builds(CheckOp, st.sampled_from(PATHS), st.integers(-1, 2)),
)
action = st.one_of(
    st.tuples(st.just("op"), st.integers(0, 1), single_op),
    st.tuples(st.just("multi"), st.integers(0, 1), st.lists(single_op, min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["close", "expire"]), st.integers(0, 1), st.none()),
)


def parent_of(path: str) -> str:
    return path.rpartition("/")[0] or "/"


class Model:
    """The reference semantics on plain dicts; `apply` raises LookupError/ValueError where the service must fail."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}  # path -> (data, version)
        self.owners: dict[str, int] = {"/": 0}
        self.cversions: dict[str, int] = {"/": 0}

    def copy(self) -> Model:
        other = Model()
        other.nodes, other.owners, other.cversions = dict(self.nodes), dict(self.owners), dict(self.cversions)
        return other

    def apply(self, op, session_id: int) -> None:
        if isinstance(op, CreateOp):
            parent = parent_of(op.path)
            path = f"{op.path}{self.cversions.get(parent, 0):010d}" if op.sequential else op.path
            if path in self.nodes or parent not in self.nodes or self.owners[parent]:
                raise ValueError
            self.nodes[path], self.owners[path], self.cversions[path] = (op.data, 0), \
                session_id if op.ephemeral else 0, 0
            self.cversions[parent] += 1
            return
        _, version = self.nodes[op.path]
        if op.version not in (-1, version):
            raise ValueError
        if isinstance(op, SetDataOp):
            self.nodes[op.path] = (op.data, version + 1)
        elif isinstance(op, DeleteOp):
            if any(parent_of(p) == op.path for p in self.nodes if p != "/"):
                raise ValueError
            self.remove(op.path)

    def remove(self, path: str) -> None:
        del self.nodes[path], self.owners[path], self.cversions[path]
        self.cversions[parent_of(path)] += 1


@settings(deadline=None, max_examples=200)
@given(st.lists(action, max_size=40))
def test_random_operations_keep_invariants(actions) -> None:
    async def scenario() -> None:
        service = CoordinationService()
        sessions = [service.connect(60_000), service.connect(60_000)]
        model = Model()
        seen: dict[tuple[str, int], tuple[int, int]] = {}  # (path, czxid) -> (version, cversion)
        for kind, who, payload in actions:
            session = sessions[who]
            zxid = service.zxid
            if kind in ("close", "expire"):
                if kind == "close":
                    session.close()
                else:
                    service.expire(session.session_id)
                for path in sorted(p for p, o in model.owners.items() if o == session.session_id):
                    model.remove(path)
                sessions[who] = service.connect(60_000)
            else:
                ops = [payload] if kind == "op" else payload
                trial = model.copy()
                try:
                    for op in ops:
                        trial.apply(op, session.session_id)
                    expected_ok = True
                except (LookupError, ValueError):
                    expected_ok = False
                try:
                    session.multi(ops)
                    ok = True
                except CoordinationError:
                    ok = False
                assert ok == expected_ok, (ops, model.nodes)
                assert service.zxid == zxid + ok
                if ok:
                    model = trial

            tree = service.dump()
            assert {p: (d, s.version) for p, (d, s) in tree.items()} == model.nodes
            live = {s.session_id for s in sessions}
            for path, (data, stat) in tree.items():
                if path != "/":
                    assert parent_of(path) in tree
                children = [p for p in tree if p != "/" and parent_of(p) == path]
                assert stat.num_children == len(children)
                assert stat.data_length == len(data)
                assert stat.cversion == model.cversions[path]
                assert stat.ephemeral_owner == model.owners[path]
                if stat.ephemeral_owner:
                    assert stat.num_children == 0 and stat.ephemeral_owner in live
                previous = seen.get((path, stat.czxid), (0, 0))
                assert stat.version >= previous[0] and stat.cversion >= previous[1]
                seen[(path, stat.czxid)] = (stat.version, stat.cversion)
            assert sessions[0].get_children("/") == sorted(p[1:] for p in tree if p != "/" and parent_of(p) == "/")

    trio.run(scenario)
