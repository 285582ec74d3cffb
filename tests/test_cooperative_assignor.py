"""The cooperative-sticky assignor (kproto.groups.cooperative), property-tested.

No Java differential here: Java's ``CooperativeStickyAssignor`` lives in the
kafka-clients jar, which neither PyPI nor Debian ships (only Maven does, out of
reach of this project's machines), and its sources may not be copied into the
suite. The invariants of Java's ``AbstractStickyAssignorTest`` and
``CooperativeStickyAssignorTest`` are checked instead, on Hypothesis-generated
groups driven through whole cooperative rebalances (each member reports what it
owns, revokes what the assignment takes away and rejoins):

- validity: each partition of each subscribed topic at most once, to a member
  subscribed to it; after the follow-up rebalance, every one of them;
- KIP-429's rule (Java's ``validateCooperativeAssignment``): no partition is
  given to a member that does not own it while another member still does;
- stickiness: a member keeps what it owns unless balance needs it; an assignment
  that is already balanced and complete is given back unchanged;
- balance (Java's ``isBalanced``) once the follow-up rebalance is done, and the
  follow-up needs one round when subscriptions are equal.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto import protocol
from kproto.errors import IllegalStateError
from kproto.groups.assignors import (
    ASSIGNORS,
    MemberSubscription,
    StickyAssignor,
    get_assignor,
)
from kproto.groups.classic import GroupCoordinator
from kproto.groups.cooperative import (
    COOPERATIVE,
    EAGER,
    CooperativeStickyAssignor,
    decode_generation,
    encode_generation,
    rebalance_protocol,
    withheld,
)
from kproto.structs import SubscriptionState

from .test_assignors import assert_java_balanced, check_valid, counts, flatten, groups

M = MemberSubscription
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def coop() -> CooperativeStickyAssignor:
    assignor = get_assignor("cooperative-sticky")
    assert isinstance(assignor, CooperativeStickyAssignor)
    return assignor


def owning(members: list[M], owned: dict[str, dict[str, list[int]]], generation: int
           ) -> list[M]:
    """``members`` reporting ``owned`` as their owned_partitions, in ``generation``."""
    return [M(m.member_id, m.topics, encode_generation(generation),
              {t: tuple(ps) for t, ps in owned.get(m.member_id, {}).items()}, generation,
              m.group_instance_id) for m in members]


def check_cooperative(members: list[M], out: dict[str, dict[str, list[int]]]) -> None:
    """No partition goes to a new owner while another member still owns it (Java's
    ``validateCooperativeAssignment``)."""
    claims: dict[tuple[str, int], set[str]] = {}
    for m in members:
        for t, ps in m.owned_partitions.items():
            for p in ps:
                claims.setdefault((t, p), set()).add(m.member_id)
    for tp, owner in flatten(out).items():
        assert owner in claims.get(tp, {owner}), \
            f"{tp} given to {owner} while {claims[tp]} still own it"


def rebalance(members: list[M], ppt: dict[str, int], owned: dict[str, dict[str, list[int]]],
              generation: int) -> tuple[dict[str, dict[str, list[int]]], bool]:
    """One cooperative rebalance: the assignment (checked) and whether a member
    had partitions revoked (so it rejoins at once)."""
    subs = owning(members, owned, generation)
    out = coop().assign(subs, ppt)
    assert set(out) == {m.member_id for m in members}
    flatten(out)                            # at most once each
    check_cooperative(subs, out)
    topics = {m.member_id: set(m.topics) for m in members}
    for mid, by_topic in out.items():
        assert all(t in topics[mid] for t in by_topic)
    revoked = any(set(flatten({mid: owned.get(mid, {})})) - set(flatten({mid: out[mid]}))
                  for mid in out)
    return out, revoked


# --------------------------------------------------------------------------- registry and data


def test_registered_with_its_java_names_and_protocols() -> None:
    assert ASSIGNORS["cooperative-sticky"] is CooperativeStickyAssignor
    for name in ("cooperative-sticky", "CooperativeStickyAssignor",
                 "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"):
        assert isinstance(get_assignor(name), CooperativeStickyAssignor)
    assert coop().supported_protocols == (COOPERATIVE, EAGER)
    assert get_assignor("range").supported_protocols == (EAGER,)


def test_rebalance_protocol_is_cooperative_only_when_every_assignor_supports_it() -> None:
    """Java's upgrade path: ["cooperative-sticky", "range"] is still eager."""
    assert rebalance_protocol([coop()]) == COOPERATIVE
    assert rebalance_protocol([coop(), get_assignor("range")]) == EAGER
    assert rebalance_protocol([get_assignor("sticky")]) == EAGER


def test_generation_user_data_is_an_int32() -> None:
    """Java's COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0: one int32, always sent."""
    assert encode_generation(5) == b"\x00\x00\x00\x05"
    assert encode_generation(-1) == b"\xff\xff\xff\xff"
    assert coop().subscription_user_data({"t"}, {}, -1) == b"\xff\xff\xff\xff"
    assert decode_generation(encode_generation(2**31 - 1)) == 2**31 - 1
    assert decode_generation(None) is None
    assert decode_generation(b"\x01") == -1           # unreadable: DEFAULT_GENERATION


def test_ownership_from_the_subscription_generation_or_the_user_data() -> None:
    """Version 2+ subscriptions carry the generation; older ones in user data."""
    owned = {"t": (0, 1)}
    assert CooperativeStickyAssignor.previous_ownership(
        M("a", ("t",), encode_generation(3), owned, 7)) == ({"t": [0, 1]}, 7)
    assert CooperativeStickyAssignor.previous_ownership(
        M("a", ("t",), encode_generation(3), owned, -1)) == ({"t": [0, 1]}, 3)
    assert CooperativeStickyAssignor.previous_ownership(
        M("a", ("t",), None, owned, -1)) == ({"t": [0, 1]}, -1)


# --------------------------------------------------------------------------- Java's cases


def test_a_member_joining_gets_moved_partitions_only_in_the_follow_up() -> None:
    """Java's CooperativeStickyAssignorTest: c1 and c2 own t[0..2] and t[3..5];
    c3 joins. First rebalance: c1 and c2 keep 2 each, the 2 they give up go to
    nobody; follow-up: c3 gets them."""
    members = [M("c1", ("t",)), M("c2", ("t",)), M("c3", ("t",))]
    owned = {"c1": {"t": [0, 1, 2]}, "c2": {"t": [3, 4, 5]}}
    first, revoked = rebalance(members, {"t": 6}, owned, 1)
    assert revoked
    assert first["c3"] == {}
    assert [len(ps) for ps in first["c1"].values()] == [2]
    assert set(first["c1"]["t"]) <= {0, 1, 2} and set(first["c2"]["t"]) <= {3, 4, 5}
    second, revoked = rebalance(members, {"t": 6}, first, 2)
    assert not revoked
    assert counts(second) == {"c1": 2, "c2": 2, "c3": 2}
    for mid in ("c1", "c2"):
        assert second[mid] == first[mid]


def test_a_member_leaving_its_partitions_go_at_once() -> None:
    """Nobody owns the leaver's partitions any more: no follow-up needed."""
    members = [M("c1", ("t",)), M("c2", ("t",))]
    owned = {"c1": {"t": [0, 1]}, "c2": {"t": [2, 3]}}            # c3 owned 4, 5
    out, revoked = rebalance(members, {"t": 6}, owned, 2)
    assert not revoked
    assert counts(out) == {"c1": 3, "c2": 3}
    assert {0, 1} <= set(out["c1"]["t"]) and {2, 3} <= set(out["c2"]["t"])


def test_claims_of_the_same_partition_in_one_generation_cancel() -> None:
    """Two members claiming a partition in the same generation (a zombie): the
    claims cancel (the partition is assigned afresh, as if unowned), but it goes
    to nobody else while they claim it: to one of them, which Java accepts."""
    members = owning([M("a", ("t",)), M("b", ("t",)), M("c", ("t",))],
                     {"a": {"t": [0, 1]}, "b": {"t": [1, 2]}}, 4)
    out = coop().assign(members, {"t": 6})
    check_cooperative(members, out)
    assert ("t", 1) not in flatten({"c": out["c"]})


def test_a_newer_generation_wins_a_claimed_partition() -> None:
    a = M("a", ("t",), encode_generation(5), {"t": (0, 1)}, 5)
    b = M("b", ("t",), encode_generation(3), {"t": (1, 2)}, 3)
    out = coop().assign([a, b], {"t": 4})
    assert 1 in out["a"]["t"] and 1 not in out["b"].get("t", [])


def test_withheld_is_what_java_would_refuse() -> None:
    members = [M("a", ("t",), owned_partitions={"t": (0,)}), M("b", ("t",))]
    assert withheld(members, {"a": {}, "b": {"t": [0, 1]}}) == {("t", 0)}
    assert withheld(members, {"a": {"t": [0]}, "b": {"t": [1]}}) == set()


# --------------------------------------------------------------------------- properties


@st.composite
def histories(draw, same_topics: bool):
    """A group, what each member owns now (a valid assignment of an earlier group,
    members since gone and come left out), and a generation."""
    members, ppt = draw(groups(same_topics=same_topics, static=False, max_members=6))
    earlier = draw(st.lists(st.sampled_from(members), unique_by=lambda m: m.member_id,
                            min_size=1))
    before = StickyAssignor().assign(earlier, ppt)
    present = draw(st.lists(st.sampled_from(members), unique_by=lambda m: m.member_id,
                            min_size=1))
    owned = {m.member_id: before.get(m.member_id, {}) for m in present}
    return present, ppt, owned


def converge(members, ppt, owned, rounds: int) -> tuple[dict, int]:
    """Rebalance until nothing is revoked; the final assignment and the rounds taken."""
    generation = 1
    for n in range(1, rounds + 1):
        owned, revoked = rebalance(members, ppt, owned, generation)
        generation += 1
        if not revoked:
            return owned, n
    raise AssertionError(f"still revoking after {rounds} rebalances")


@SETTINGS
@given(histories(same_topics=True))
def test_equal_subscriptions_settle_in_the_follow_up(hist) -> None:
    members, ppt, owned = hist
    final, rounds = converge(members, ppt, owned, 2)
    check_valid(members, ppt, final)
    assert_java_balanced(members, ppt, final)
    # sticky: a member keeps all it owned up to its share
    quota = -(-sum(counts(final).values()) // len(members))
    for mid, by_topic in owned.items():
        had = set(flatten({mid: by_topic}))
        kept = had & set(flatten({mid: final[mid]}))
        assert len(kept) >= min(len(had), quota - 1), (mid, had, final[mid])


@SETTINGS
@given(histories(same_topics=False))
def test_any_subscriptions_settle_valid_and_balanced(hist) -> None:
    members, ppt, owned = hist
    final, _ = converge(members, ppt, owned, 4)
    check_valid(members, ppt, final)
    assert_java_balanced(members, ppt, final)


@SETTINGS
@given(histories(same_topics=False))
def test_a_settled_assignment_is_given_back_unchanged(hist) -> None:
    members, ppt, owned = hist
    final, _ = converge(members, ppt, owned, 4)
    again, revoked = rebalance(members, ppt, final, 99)
    assert again == final and not revoked


@SETTINGS
@given(histories(same_topics=False), st.data())
def test_members_joining_and_leaving_never_share_a_partition(hist, data) -> None:
    """A run of rebalances with members joining and leaving between them (each
    round checked by ``rebalance``): the group ends valid and balanced."""
    members, ppt, owned = hist
    everyone = {m.member_id: m for m in members}
    for generation in range(1, 6):
        present = data.draw(st.lists(st.sampled_from(members), unique_by=lambda m: m.member_id,
                                     min_size=1), label=f"members of generation {generation}")
        owned = {m.member_id: owned.get(m.member_id, {}) for m in present}
        owned, _ = rebalance(present, ppt, owned, generation)
    final, _ = converge([everyone[mid] for mid in owned], ppt, owned, 4)
    present = [everyone[mid] for mid in final]
    check_valid(present, ppt, final)
    assert_java_balanced(present, ppt, final)


# --------------------------------------------------------------------------- the leader's check


class _Metadata:
    def partitions(self, topic: str) -> list[int]:
        return [0, 1]


class _Cluster:
    """What the leader's assignment asks of the cluster: partition counts."""

    request_timeout = 1.0
    metrics = None
    metadata = _Metadata()

    def wait_for_topics(self, topics, timeout):
        return self.metadata


class TakesEverything:
    """A custom cooperative assignor that breaks KIP-429's rule: it gives every
    partition to the first member, whoever owns it."""

    name = "takes-everything"
    supported_protocols = (COOPERATIVE,)

    def subscription_user_data(self, topics, owned, generation):
        return None

    def assignment_user_data(self, member_id):
        return None

    def assign(self, members, partitions_per_topic):
        first = min(m.member_id for m in members)
        return {m.member_id: ({t: list(range(n)) for t, n in partitions_per_topic.items()}
                              if m.member_id == first else {}) for m in members}


def _leader(strategy) -> GroupCoordinator:
    from kproto.config import resolve

    config = resolve("consumer", bootstrap_servers="127.0.0.1:9", group_id="g",
                     partition_assignment_strategy=[strategy])
    return GroupCoordinator(SubscriptionState(), _Cluster(), config)  # type: ignore[arg-type]


def _joined(protocol_name: str, owned: dict[str, dict[str, list[int]]]) -> dict:
    return {"protocol_name": protocol_name, "members": [
        {"member_id": mid, "group_instance_id": None,
         "metadata": protocol.encode_subscription({
             "topics": ["t"], "user_data": None, "generation_id": 3, "rack_id": None,
             "owned_partitions": [{"topic": t, "partitions": ps} for t, ps in by.items()]})}
        for mid, by in owned.items()]}


def test_the_leader_refuses_a_cooperative_assignment_that_moves_owned_partitions() -> None:
    """Java's validateCooperativeAssignment: a custom cooperative assignor that
    gives b's partition to a in the same rebalance is an IllegalStateError
    naming it; a valid one (nothing owned elsewhere) passes."""
    leader = _leader(TakesEverything)
    assert leader.protocol == COOPERATIVE
    with pytest.raises(IllegalStateError, match=r"takes-everything.*t\[1\]"):
        leader._assign(_joined("takes-everything", {"a": {"t": [0]}, "b": {"t": [1]}}))
    assert len(leader._assign(_joined("takes-everything", {"a": {"t": [0, 1]}, "b": {}}))) == 2
    # the built-in one withholds such partitions itself (not checked, as in Java)
    assert len(_leader("cooperative-sticky")._assign(
        _joined("cooperative-sticky", {"a": {"t": [0]}, "b": {"t": [1]}}))) == 2
