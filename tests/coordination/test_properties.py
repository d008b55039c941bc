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
    st.builds(lambda p, d, e: CreateOp(p, d, ephemeral=e), st.sampled_from(PATHS), st.binary(max_size=3),
              st.booleans()),
    st.builds(lambda p, d, v: SetDataOp(p, d, v), st.sampled_from(PATHS), st.binary(max_size=3),
              st.integers(-1, 2)),
    st.builds(lambda p, v: DeleteOp(p, v), st.sampled_from(PATHS), st.integers(-1, 2)),
    st.builds(lambda p, v: CheckOp(p, v), st.sampled_from(PATHS), st.integers(-1, 2)),
)
action = st.one_of(
    st.tuples(st.just("op"), st.integers(0, 1), single_op),
    st.tuples(st.just("multi"), st.integers(0, 1), st.lists(single_op, min_size=1, max_size=3)),
    st.tuples(st.just("close"), st.integers(0, 1), st.none()),
)


def apply_to_model(model: dict, owners: dict, op, session_id: int) -> None:
    """The reference semantics on plain dicts; raises KeyError/ValueError where the service must fail."""
    parent = op.path.rpartition("/")[0] or "/"
    if isinstance(op, CreateOp):
        if op.path in model or parent not in model or owners.get(parent):
            raise ValueError
        model[op.path] = (op.data, 0)
        owners[op.path] = session_id if op.ephemeral else 0
    elif isinstance(op, (SetDataOp, CheckOp, DeleteOp)):
        data, version = model[op.path]
        if op.version not in (-1, version):
            raise ValueError
        if isinstance(op, SetDataOp):
            model[op.path] = (op.data, version + 1)
        elif isinstance(op, DeleteOp):
            if any(p.rpartition("/")[0] == op.path for p in model):
                raise ValueError
            del model[op.path]
            del owners[op.path]


@settings(deadline=None, max_examples=150)
@given(st.lists(action, max_size=40))
def test_random_operations_keep_invariants(actions) -> None:
    async def scenario() -> None:
        service = CoordinationService()
        sessions = [service.connect(60_000), service.connect(60_000)]
        model: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        owners: dict[str, int] = {"/": 0}
        versions: dict[tuple[str, int], int] = {}
        for kind, who, payload in actions:
            session = sessions[who]
            if kind == "close":
                session.close()
                for path in [p for p, o in owners.items() if o == session.session_id]:
                    del model[path], owners[path]
                sessions[who] = service.connect(60_000)
                continue
            ops = [payload] if kind == "op" else payload
            trial, trial_owners = dict(model), dict(owners)
            try:
                for op in ops:
                    apply_to_model(trial, trial_owners, op, session.session_id)
                expected_ok = True
            except (KeyError, ValueError):
                expected_ok = False
            try:
                session.multi(ops)
                ok = True
            except CoordinationError:
                ok = False
            assert ok == expected_ok, (ops, model)
            if ok:
                model, owners = trial, trial_owners

            tree = service.dump()
            assert {p: (d, s.version) for p, (d, s) in tree.items() if p != "/"} == \
                {p: v for p, v in model.items() if p != "/"}
            live = {s.session_id for s in sessions}
            for path, (_, stat) in tree.items():
                if path != "/":
                    assert (path.rpartition("/")[0] or "/") in tree
                children = [p for p in tree if p != "/" and (p.rpartition("/")[0] or "/") == path]
                assert stat.num_children == len(children)
                if stat.ephemeral_owner:
                    assert stat.num_children == 0 and stat.ephemeral_owner in live
                assert stat.version >= versions.get((path, stat.czxid), 0)
                versions[(path, stat.czxid)] = stat.version

    trio.run(scenario)
