"""Lexical search over visible facts (wire §1.6, §5.5).

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo.actors import setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_status


@isolation.PROJECT
@pytest.mark.fresh_project  # exact heads or feed contents: a shared project would race
@reads("AM-SEARCH-1", "head", "source", "at-least")
def test_lexical_search_finds_facts_at_the_head(world: World) -> None:
    """Isolation: project: search results and the index head."""
    project = world.project(writers=("writer",), readers=("reader",))
    writer = project.writer
    word = f"zq{world.rng.getrandbits(40):x}"
    # "alpha.beta" starts with "alpha": a filter by prefix, not by equality, would find both.
    alpha, beta = writer.setup_session("alpha"), writer.setup_session("alpha.beta")
    hit = writer.new_id("fact")
    setup_ok(writer.create_fact(alpha, hit, content=f"{word} cluster timeout decision"), "fact alpha")
    other = writer.new_id("fact")
    last = setup_ok(writer.create_fact(beta, other, content=f"{word} cache fallback"), "fact beta")
    body = expect_status(project.reader.search(word, mode="lexical"), 200)
    found = [r["fact_id"] for r in body["results"]]
    assert sorted(found) == sorted([hit, other]), f"search for {word} found {found}"
    assert body["index_seq"] == last["project_seq"], f"index_seq {body['index_seq']} != head {last['project_seq']}"
    filtered = expect_status(project.reader.search(word, source_id="alpha", mode="lexical"), 200)
    assert [r["fact_id"] for r in filtered["results"]] == [hit], f"source_id=alpha found {filtered['results']!r}"
    expect_error(project.reader.search(word, at_least_seq=last["project_seq"] + 1), 409, "cursor_out_of_range")


@isolation.PROJECT
@pytest.mark.fresh_project  # exact heads: a shared project would race
@reads("AM-SEARCH-1", "at-least-served")
def test_search_at_least_seq_at_or_below_the_head_is_served(world: World) -> None:
    """Isolation: project: search results and the index head."""
    # Upstream refuses only a cursor past the snapshot's head (wire §5.5): at or below it, no wait.
    project = world.project()
    writer = project.writer
    word = f"zq{world.rng.getrandbits(40):x}"
    session = writer.setup_session()
    first = setup_ok(writer.create_fact(session, content=f"{word} first"), "fact 1")["project_seq"]
    head = setup_ok(writer.create_fact(session, content=f"{word} second"), "fact 2")["project_seq"]
    plain = expect_status(writer.search(word, mode="lexical"), 200)
    for at_least in sorted({head, head - 1, first, 1}, reverse=True):
        body = expect_status(writer.search(word, mode="lexical", at_least_seq=at_least), 200)
        assert body.get("index_seq") == head and body.get("results") == plain["results"], (
            f"at_least_seq={at_least} (head {head}) answered {body!r}, not the search without it {plain!r}")


@isolation.PROJECT
@reads("AM-SEARCH-1", "source")
def test_search_source_filter_refuses_sources_on_either_side(world: World) -> None:
    """Isolation: project: search results (for a word only its own facts hold)."""
    # "alpha" sorts before "alpha.beta" and "alpha.gamma" after it: an ordered comparison in
    # place of equality keeps one of them; a fact without a source is no match either.
    project = world.project()
    writer = project.writer
    word = f"zq{world.rng.getrandbits(40):x}"
    facts = {}
    for source in ("alpha", "alpha.beta", "alpha.gamma", None):
        fact_id = writer.new_id("fact")
        setup_ok(writer.create_fact(writer.setup_session(source), fact_id, content=f"{word} {source}"), f"fact {source}")
        facts[source] = fact_id
    body = expect_status(writer.search(word, source_id="alpha.beta", mode="lexical"), 200)
    found = [hit.get("fact_id") for hit in body.get("results", [])]
    assert found == [facts["alpha.beta"]], f"source_id=alpha.beta found {found}, expected only {facts['alpha.beta']}"


@isolation.PROJECT
@reads("AM-SEARCH-1", "order")
def test_search_ranks_by_score_then_fact_id(world: World) -> None:
    """Isolation: project: search results (for a word only its own facts hold)."""
    # W §5.5: BM25, sort by score descending, then fact_id ascending. A short fact that repeats the
    # word outranks the rest, a long one ranks last; two equal facts tie and go by fact_id, the one
    # written second first.
    project = world.project()
    writer = project.writer
    word = f"zq{world.rng.getrandbits(40):x}"
    session = writer.setup_session()
    tie = world.new_id("tie")
    facts = [(f"{tie}-b", f"{word} tie"), (f"{tie}-a", f"{word} tie"), (world.new_id("top"), f"{word} {word} {word}"),
             (world.new_id("low"), f"{word} and a good many other words after it")]
    for fact_id, content in facts:
        setup_ok(writer.create_fact(session, fact_id, content=content), f"fact {fact_id}")
    results = expect_status(writer.search(word, mode="lexical"), 200)["results"]
    found = [hit.get("fact_id") for hit in results]
    expected = [facts[2][0], facts[1][0], facts[0][0], facts[3][0]]
    assert found == expected, f"search for {word} ranked {found}, expected {expected} (score down, then fact_id up)"
    scores = [hit.get("score") for hit in results]
    assert scores[0] > scores[1] == scores[2] > scores[3], f"scores {scores}: the equal facts must tie, between the others"
    # A tie across two query words: each fact holds one of them (written in the words' order, the
    # second fact_id first), and they score alike; fact_id still decides.
    first, second, pair = f"zq{world.rng.getrandbits(40):x}", f"zq{world.rng.getrandbits(40):x}", world.new_id("pair")
    for fact_id, content in ((f"{pair}-b", f"{first} pad"), (f"{pair}-a", f"{second} pad")):
        setup_ok(writer.create_fact(session, fact_id, content=content), f"fact {fact_id}")
    found = [hit.get("fact_id") for hit in expect_status(writer.search(f"{first} {second}", mode="lexical"), 200)["results"]]
    assert found == [f"{pair}-a", f"{pair}-b"], f"search for two words, one in each fact, ranked {found}"


@isolation.READS
@pytest.mark.requirement("AM-SEARCH-2")
@pytest.mark.parametrize("params", [{"q": "   "}, {"q": "x", "limit": 0}, {"q": "x", "limit": 101},
                                    {"q": "x", "mode": "fuzzy"}], ids=["blank-q", "limit-0", "limit-101", "bad-mode"])
def test_bad_search_parameters_are_invalid(world: World, params: dict[str, object]) -> None:
    """Isolation: reads: only searches, and writes nothing."""
    project = world.project()
    q = str(params.pop("q"))
    expect_error(project.writer.search(q, **params), 400, "invalid_command")


@isolation.READS
@pytest.mark.requirement("AM-SEARCH-3")
@pytest.mark.parametrize(("mode", "accepted"), [
    ("LEXICAL", True), ("Auto", True), ("%20lexical%20", True), ("%09auto%0A", True), ("%C2%A0lexical%E3%80%80", True),
    ("", False), ("%20", False), ("lex%20ical", False), ("lexical%1F", False), ("lexicalx", False),
    ("%EF%BD%8C%EF%BD%85%EF%BD%98%EF%BD%89%EF%BD%83%EF%BD%81%EF%BD%8C", False),
], ids=["upper", "title", "spaces", "tab-newline", "unicode-spaces", "empty", "blank", "inner-space",
        "unit-separator", "suffix", "fullwidth"])
def test_search_mode_is_trimmed_and_ascii_lowercased(world: World, mode: str, accepted: bool) -> None:
    """Isolation: reads: only searches, and writes nothing."""
    # Upstream: mode.unwrap_or("auto").trim().to_ascii_lowercase(), then one of four words (wire §1.6).
    # U+001F is not Unicode White_Space, so Rust's trim keeps it; fullwidth letters are not ASCII.
    project = world.project()
    exchange = project.writer.request("GET", f"{project.writer.base}/search", raw_query=f"q=probe&mode={mode}")
    if accepted:
        body = expect_status(exchange, 200)
        assert isinstance(body, dict) and body.get("mode") == "lexical", f"mode={mode} answered mode {body!r}"
    else:
        expect_error(exchange, 400, "invalid_command")
