"""Hypothesis over the one decision (the core engine behind Deduplicator, CorpusDeduper and the
service): any text, any sequence of operations; checked against what must hold whatever the
candidates are. Bounded budget (derandomized, a fixed number of examples) so that CI time is
fixed.

- every match names a stored id whose text passes the verifier (exact Jaccard, computed here);
- a stored non-empty text is always found by a check of the same text (Jaccard 1 shares every
  band), and an empty text matches nothing and is matched by nothing;
- check_and_add adds exactly when it finds no match; what it adds is stored and found;
- a removed or replaced text is never a match again;
- the batch engine's kept set equals the online one's for the same texts.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neardup.corpus import CorpusDeduper
from neardup.dedup import Deduplicator, Policy
from neardup.verify import jaccard

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Texts from a small alphabet and a few words, so that near-copies are common; any other
# characters (CJK, combining marks, surrogates, controls) now and then.
WORDS = ["alpha ", "beta ", "gamma ", "delta ", "码 ", "编号", "12", " ", "Ünï ", "\u0301"]
text = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=30).map("".join),
    st.text(max_size=60),
)
op = st.tuples(
    st.sampled_from(["check_and_add", "add", "remove", "check"]), st.integers(0, 7), text
)


def _check_matches(d: Deduplicator, policy: Policy, stored: dict[int, str], query: str) -> None:
    norm = policy.prepare(query)
    matches = d.check(query)
    for m in matches:
        assert m.id in stored, (m, stored)
        assert m.similarity is not None
        other = policy.prepare(stored[m.id])
        assert jaccard(norm, other) >= policy.threshold - 1e-9
        assert abs(jaccard(norm, other) - m.similarity) < 1e-9
    if not norm:
        assert matches == []
    for i, t in stored.items():
        if t == query and norm:
            assert i in {m.id for m in matches}, (i, query)


@FUZZ
@given(st.lists(op, max_size=25))
def test_online_operations_keep_their_promises(ops: list[tuple[str, int, str]]) -> None:
    policy = Policy.default()
    d = Deduplicator(policy=policy)
    stored: dict[int, str] = {}
    seen: list[str] = []
    for name, i, t in ops:
        seen.append(t)
        if name == "check_and_add":
            added, matches = d.check_and_add(i, t)
            assert added == (not matches)
            for m in matches:
                assert m.id in stored
            if added:
                stored[i] = t
        elif name == "add":
            d.add(i, t)
            stored[i] = t
        elif name == "remove":
            if i in stored:
                d.remove(i)
                del stored[i]
        for query in seen[-8:]:  # (removed and replaced texts among them)
            _check_matches(d, policy, stored, query)
        assert len(d) == len(stored)
        for j, s in stored.items():
            assert d.get(j) == s


@FUZZ
@given(st.lists(text, max_size=40))
def test_batch_and_online_keep_the_same_texts(texts: list[str]) -> None:
    policy = Policy.default()
    batch = CorpusDeduper(policy)
    batch.feed(texts)
    want = batch.result().kept.tolist()
    online = Deduplicator(policy=policy)
    got = [online.check_and_add(i, t)[0] for i, t in enumerate(texts)]
    assert got == want
    many = Deduplicator(policy=policy).check_and_add_many(list(range(len(texts))), texts)
    assert [a for a, _ in many] == want
