"""The seeded generator of a differential run's steps.

It keeps a small model of what the *reference* answered (``model``: sessions, facts, contexts,
handoffs with their revisions, claims and statuses, the writes sent so far) so most steps are
plausible, and mixes in stale revisions, reused command ids with the same and another body, wrong
actors, hostile bodies and queries (some bent from the OpenAPI document's schemas, ``hostile``).
Beside its random steps it follows aims (``aims``: a fresh handoff brought to a state, acted on,
then every mailbox and feed read). Each step carries the record state it met (``state``), which
with the reference's answer makes a coverage pair (``coverage``); a kind of step that keeps
reaching new pairs is drawn more often. Every choice comes from one ``random.Random`` seeded by
the run's seed, and every answer it reads is the reference's, so a seed's stream is the same
against every target.
"""

from __future__ import annotations

import json
import random
import urllib.parse
from collections import deque
from collections.abc import Callable
from typing import Any

from conformance.profiles.aidememo.diff.aims import aims, least_tried, plan
from conformance.profiles.aidememo.diff.coverage import Coverage
from conformance.profiles.aidememo.diff.hostile import bend
from conformance.profiles.aidememo.diff.model import Context, Handoff, Model, state
from conformance.profiles.aidememo.diff.steps import ACTORS, BAD_TOKEN, CLOCK_ROUTE, MCP_ROUTE, NO_TOKEN, P, Step
from conformance.profiles.aidememo.routes import TYPED_WRITES, WriteRoute

__all__ = ["Generator"]


# The byte limits of the typed routes' texts (AM-TYPED-4: topic 512, fact and context content 65536, focus 4096).
TEXT_LIMITS = {"topic": 512, "content": 65_536, "focus": 4096}
NOVELTY_BOOST = 3  # how far a maker whose steps keep reaching new pairs is drawn above its base weight
# Search modes as sent: both names, case and spaces to fold, a control byte str.strip() would also drop, unknown ones.
MODES = ("lexical", "auto", "LEXICAL", "%20lexical%20", "%1Clexical", "", "semantic")
ROUTE_NOTES = frozenset({"raw command", *(route.name for route in TYPED_WRITES)})
TEXTS = ("plan the release", "naïve café ☕ notes", "résumé of the 日本語 spec", "tab\there", "emoji 🚀 deploy")


class Generator:
    """Draws steps one at a time; ``observe`` feeds it the reference's answer to the last one."""

    def __init__(self, rng: random.Random, *, clock: bool, mcp: bool, coverage: Coverage | None = None,
                 steps: int = 10**9) -> None:
        self.rng = rng
        self.clock = clock
        self.mcp = mcp
        self.model = Model()
        self.coverage = coverage if coverage is not None else Coverage()
        self.state = "-"  # the record state the last step met (``coverage``)
        # The schema's bends draw from a Random of their own (seeded from this one's state, drawing
        # nothing from it), so the rest of a seed's stream is the same with them as without.
        self.schema_rng = random.Random(repr(rng.getstate()[1][:8]))
        # The same for what leaves a correct server's status and error code as they were (the
        # coverage steers the rest): a raw command's resource as an object or as its fields in an
        # array, a search's at_least_seq at or below the head, a one-byte search query.
        self.shape_rng = random.Random(repr(rng.getstate()[1][8:16]))
        self._n = 0
        self._next_handoff: str | None = None
        self._plan: deque[Callable[[], Step | None]] = deque()
        self._pending: Callable[[int, Any], None] | None = None
        self._last: Step | None = None
        weighted: list[tuple[int, Callable[[], Step]]] = [
            (6, self._session), (5, self._fact), (5, self._context), (6, self._send), (6, self._accept),
            (4, self._heartbeat), (5, self._return), (5, self._raw), (5, self._reuse), (3, self._resource),
            (2, self._snapshot), (3, self._changes), (4, self._mailbox), (3, self._status), (4, self._search),
            (2, self._identity), (1, self._health), (3, self._hostile), (2, self._auth), (6, self._aim),
        ]
        if clock:
            weighted.append((2, self._advance))
        if mcp:
            weighted.append((4, self._mcp))
        self._makers = [maker for _, maker in weighted]
        self._weights = [weight for weight, _ in weighted]
        self._aims = aims(clock)
        self._maker = ""  # the maker of the last step ("_aim" for a plan's steps), credited with what it reached
        self._first = True  # an episode opens with an aim, so that its plan has the episode's steps to run
        self._dense = False  # the plan fills most of the episode: no random step comes between its steps
        self._left = steps  # steps the episode will still draw: a plan that cannot finish is not started

    @property
    def weights(self) -> list[float]:
        """The makers' weights, each raised by the share of its steps that reached a pair new to the run."""
        stats = self.coverage.makers
        return [weight * (1 + NOVELTY_BOOST * stats.get(maker.__name__, (0, 0))[1]
                          / (stats.get(maker.__name__, (0, 0))[0] + 10))
                for maker, weight in zip(self._makers, self._weights)]

    # -- the loop's interface ------------------------------------------------------------------
    def next(self) -> Step:
        self._left -= 1
        self._pending = None
        self.state = "-"
        # An aim's plan goes on mostly uninterrupted; now and then a random step comes between.
        if self._plan and (self._dense or self.rng.random() < 0.9):
            step = self._planned()
            if step is not None:
                self._last, self._maker = step, "_aim"
                return step
        maker = self._aim if self._first else self.rng.choices(self._makers, self.weights)[0]
        self._maker = maker.__name__
        self._last = maker()
        self._first = False
        return self._last

    def observe(self, status: int, data: Any, code: str | None = None) -> None:
        """The reference's answer to the step just drawn (its status, JSON body and error code)."""
        if self._last is not None:
            new = self.coverage.add(self._last.route, status, code, self.state)
            tries, found = self.coverage.makers.get(self._maker, (0, 0))
            self.coverage.makers[self._maker] = (tries + 1, found + new)
        if isinstance(data, dict):
            seq = data.get("project_seq")
            if isinstance(seq, int):
                self.model.max_seq = max(self.model.max_seq, seq)
        last = self._last
        if status == 200 and last is not None and last.method == "POST" and _route_name(last) in ROUTE_NOTES:
            self.model.committed.append(last)
        if self._pending is not None and status == 200:
            self._pending(status, data)
        self._pending = None

    def _planned(self) -> Step | None:
        """The next step of the current plan; steps that no longer apply (a send the reference refused) are dropped."""
        while self._plan:
            self._pending = None
            self.state = "-"
            step = self._plan.popleft()()
            if step is not None:
                return step
        return None

    def _aim(self) -> Step:
        """The first step of a plan toward the least tried aim (``aims``). An aim at pages past a
        read's default needs most of an episode: it only opens one, from the run's second episode
        on (the first stays as it was), and opens those until each was tried, as a server's page
        sizes are cheap to tell apart this way."""
        pages = [aim for aim in self._aims if aim.startswith("pages / ")]
        opening = self._first and bool(self.coverage.aims)
        untried = [aim for aim in pages if not self.coverage.aims.get(aim)]
        aim = self.rng.choice(untried) if opening and untried else least_tried(
            self.rng, self.coverage.aims, self._aims if opening else [a for a in self._aims if a not in pages])
        steps = plan(self, aim)
        if self._plan or len(steps) > self._left:
            return self._mailbox()
        self._dense = aim in pages
        self.coverage.aims[aim] = self.coverage.aims.get(aim, 0) + 1
        self._plan.extend(steps)
        return self._planned() or self._session()

    # -- helpers -------------------------------------------------------------------------------
    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}-{self._n}"

    def fresh(self, prefix: str) -> str:
        """An id this episode never used (``prefix-N``)."""
        return self._id(prefix)

    def _command_id(self) -> str:
        # Command ids carry the episode's namespace: a server may key receipts by command id alone.
        return self._id("cmd-$ns")

    def _pick(self, pool: list[str] | dict[str, Any], fresh: str) -> str:
        """Mostly a known id, sometimes an unknown one."""
        known = list(pool)
        if known and self.rng.random() < 0.92:
            return str(self.rng.choice(known))
        return self._id(fresh)

    def _writer(self, usual: str) -> str:
        roll = self.rng.random()
        if roll < 0.8:
            return usual
        return self.rng.choice(["sender", "receiver", "outsider", "reader", "other_project", "other_tenant"])

    def _text(self) -> str:
        return self.rng.choice(TEXTS) + f" {self.rng.randrange(100)}"

    def _sized(self, field: str) -> str:
        """Mostly a short text; now and then one exactly at the field's byte limit or one past it."""
        roll = self.rng.random()
        if roll >= 0.1:
            return self._text()
        return "é" * (TEXT_LIMITS[field] // 2) + ("" if roll < 0.05 else "z")

    def _typed(self, route: WriteRoute, actor: str, payload: dict[str, Any], *, handoff: str | None = None,
               expected: int | None = None, note: str = "") -> Step:
        body: dict[str, Any] = {"command_id": self._command_id(), "payload": payload}
        if route.transition and expected is not None:
            body["expected_revision"] = expected
        path = f"/v1/projects/$project/{route.path.replace('{handoff_id}', handoff or '')}"
        step = Step(actor, "POST", f"POST {P}/{route.path.replace('{handoff_id}', '{handoff}')}", path, body=body,
                    note=note or route.name)
        self.model.writes.append(step)
        return step

    def _expected(self, current: int) -> int:
        roll = self.rng.random()
        if roll < 0.8:
            return current
        if roll < 0.97:
            return current - 1 if current > 1 else current + 1
        return 0  # not a revision at all

    # -- writes --------------------------------------------------------------------------------
    def _session(self) -> Step:
        sid = self._id("s") if self.rng.random() < 0.9 or not self.model.sessions else self._pick(self.model.sessions, "s")
        return self.session_as(self._writer("sender"), sid, self.rng.choice(["src", "src", "src-b", None]))

    def session_as(self, actor: str, sid: str, source: str | None, note: str = "") -> Step:
        def seen(status: int, data: Any) -> None:
            if sid not in self.model.sessions:
                self.model.sessions[sid], self.model.sources[sid] = actor, source

        step = self._typed(_route("sessions"), actor, {"session_id": sid, "source_id": source,
                                                        "topic": self._sized("topic")}, note=note)
        self._pending = seen
        return step

    def _fact(self) -> Step:
        if not self.model.sessions and self.rng.random() < 0.9:
            return self._session()
        session = self._pick(self.model.sessions, "s")
        actor = self._writer(self.rng.choice(["sender", "receiver"]))
        content = self._text() if self.rng.random() < 0.95 else "x" * self.rng.choice([4096, 16_384, 70_000])
        return self.fact_as(actor, session, self._id("f"), content)

    def fact_as(self, actor: str, session: str, fid: str, content: str | None = None, note: str = "") -> Step:
        content = content or self._sized("content")
        self.model.texts.append(content[:200])
        step = self._typed(_route("facts"), actor, {"fact_id": fid, "session_id": session, "content": content},
                           note=note)
        self._pending = lambda status, data: self.model.facts.__setitem__(fid, (session, actor))
        return step

    def upcoming(self) -> str:
        """The id the next random send will use, drawn ahead so that a context can be written for it."""
        if self._next_handoff is None:
            self._next_handoff = self._id("h")
        return self._next_handoff

    def _context(self) -> Step:
        session = self._pick(self.model.sessions, "s")
        roll = self.rng.random()
        handoff = self.upcoming() if roll < 0.35 else self._pick(self.model.handoffs, "h") if roll < 0.7 \
            else self._id("h")
        author = self._writer(self.rng.choice(["sender"] * 3 + ["outsider"]))
        to = self.rng.choice(["receiver"] * 5 + ["outsider", "sender"])
        content = self._text() if self.rng.random() < 0.9 else "y" * self.rng.choice([8192, 70_000])
        return self.context_as(author, self._id("c"), handoff, session, to, content)

    def context_as(self, author: str, cid: str, handoff: str, session: str, to: str, content: str | None = None,
                   note: str = "") -> Step:
        payload = {"context_id": cid, "handoff_id": handoff, "session_id": session, "to_actor": to,
                   "content": content or self._sized("content")}
        step = self._typed(_route("handoff-contexts"), author, payload, note=note)
        self.state = ("for the next send" if handoff == self._next_handoff else
                      "for a sent handoff" if handoff in self.model.handoffs else "for no handoff yet")
        self._pending = lambda status, data: self.model.contexts.__setitem__(cid, Context(handoff, session, author, to))
        return step

    def _send(self) -> Step:
        if not self.model.sessions and self.rng.random() < 0.9:
            return self._session()
        hid, self._next_handoff = self.upcoming(), None
        written = [cid for cid, context in self.model.contexts.items() if context.handoff == hid]
        context = None
        session = self._pick(self.model.sessions, "s")
        if written and self.rng.random() < 0.85:  # the context written for this very send, mostly in its session
            context = self.rng.choice(written)
            session = self.model.contexts[context].session if self.rng.random() < 0.85 else session
        elif self.model.contexts and self.rng.random() < 0.3:
            context = self.rng.choice(list(self.model.contexts))
        actor = self._writer("sender")
        to = self.rng.choice(["receiver"] * 6 + ["reader", "outsider", "nobody", actor])
        return self.send_as(actor, hid, session, to, context, focus=self.rng.random() < 0.7)

    def send_as(self, actor: str, hid: str, session: str, to: str, context: str | None, *, focus: bool = True,
                note: str = "") -> Step:
        payload = {"handoff_id": hid, "session_id": session, "to_actor": to,
                   "focus": self._sized("focus") if focus else None, "done_when": None, "context_id": context}
        step = self._typed(_route("handoffs"), actor, payload, note=note)
        self.state = self._context_relation(context, hid, session, actor, to)
        self._pending = lambda status, data: self.model.handoffs.__setitem__(hid, Handoff(session, to, actor))
        return step

    def _context_relation(self, cid: str | None, hid: str, session: str, actor: str, to: str) -> str:
        """How a send's context fits it: the first mismatch in the order upstream checks them."""
        if cid is None:
            return "no context"
        context = self.model.contexts.get(cid)
        if context is None:
            return "context: unknown"
        for differs, label in ((context.handoff != hid, "another handoff's"), (context.session != session,
                               "another session's"), (context.author != actor, "by another sender"),
                               (context.to != to, "to another receiver")):
            if differs:
                return f"context: {label}"
        return "context: written for it"

    def _live(self, claimed: bool = False) -> tuple[str, Handoff | None]:
        """A handoff to act on (with ``claimed``, mostly one that was accepted)."""
        accepted = [hid for hid, record in self.model.handoffs.items() if record.claim]
        hid = self.rng.choice(accepted) if claimed and accepted and self.rng.random() < 0.85 else \
            self._pick(self.model.handoffs, "h")
        return hid, self.model.handoffs.get(hid)

    def _revise(self, hid: str, data: Any) -> Handoff | None:
        """The model's record of ``hid`` at the revision a 200 answer gave, or None."""
        record = self.model.handoffs.get(hid)
        if record is None or not isinstance(data, dict) or not isinstance(data.get("revision"), int):
            return None
        record.revision = data["revision"]
        return record

    def _on(self, hid: str, actor: str, claim: str | None, expected: int | None, *extra: str) -> str:
        """The record state a transition meets, with what the step brings that is not the record's."""
        record = self.model.handoffs.get(hid)
        if record is None:
            return "unknown"
        tags = ["no token"] if actor in (NO_TOKEN, BAD_TOKEN) else ["not the receiver"] if actor != record.to else []
        tags += ["stale revision"] if expected != record.revision else []
        tags += [("own claim" if claim == record.claim else "new claim")] if claim is not None else []
        return f"{state(record, self.model.now_ms)}: {', '.join([*tags, *extra])}"

    def _accept(self) -> Step:
        if not self.model.handoffs and self.rng.random() < 0.9:
            return self._send()
        hid, record = self._live()
        actor = self._writer(record.to if record and record.to in ACTORS else "receiver")
        claim = record.claim if record and record.claim and self.rng.random() < 0.3 else self._id("claim")
        return self.accept_as(hid, actor, claim, self._expected(record.revision if record else 1))

    def accept_as(self, hid: str, actor: str, claim: str, expected: int, note: str = "") -> Step:
        step = self._typed(_route("accept"), actor, {"claim_id": claim}, handoff=hid, expected=expected, note=note)
        self.state = self._on(hid, actor, claim, expected)
        self._pending = self._accepted(hid, claim)
        return step

    def _accepted(self, hid: str, claim: str) -> Callable[[int, Any], None]:
        def seen(status: int, data: Any) -> None:
            record = self._revise(hid, data)
            # The same live claim again is confirmed unchanged; anything else that succeeds is a new claim.
            if record is not None and (record.status != "accepted" or record.claim != claim):
                record.status, record.claim, record.evidence = "accepted", claim, None
                record.claimed_ms = self.model.now_ms
        return seen

    def _heartbeat(self) -> Step:
        if not any(h.claim for h in self.model.handoffs.values()) and self.rng.random() < 0.9:
            return self._accept()
        hid, record = self._live(claimed=True)
        claim = record.claim if record and record.claim and self.rng.random() < 0.85 else self._id("claim")
        actor = self._writer(record.to if record and record.to in ACTORS else "receiver")
        return self.heartbeat_as(hid, actor, claim, self._expected(record.revision if record else 1))

    def heartbeat_as(self, hid: str, actor: str, claim: str, expected: int, note: str = "") -> Step:
        step = self._typed(_route("heartbeat"), actor, {"claim_id": claim}, handoff=hid, expected=expected, note=note)
        self.state = self._on(hid, actor, claim, expected)

        def seen(status: int, data: Any) -> None:
            record = self._revise(hid, data)
            if record is not None:
                record.claimed_ms = self.model.now_ms

        self._pending = seen
        return step

    def _return(self) -> Step:
        if not any(h.claim for h in self.model.handoffs.values()) and self.rng.random() < 0.9:
            return self._accept()
        hid, record = self._live(claimed=True)
        claim = record.claim if record and record.claim and self.rng.random() < 0.85 else self._id("claim")
        actor = self._writer(record.to if record and record.to in ACTORS else "receiver")
        own = [f for f, (session, author) in self.model.facts.items()
               if record is None or (session == record.session and author == actor)]
        if not own and record is not None and record.to in ACTORS and self.rng.random() < 0.8:
            return self.fact_as(record.to, record.session, self._id("f"), note="facts (result fact)")
        fact = self.rng.choice(own) if own and self.rng.random() < 0.85 else self._pick(self.model.facts, "f")
        outcome = self.rng.choice(["succeeded"] * 6 + ["failed"] * 3 + ["blocked", "SUCCEEDED"])
        return self.return_as(hid, actor, claim, fact, outcome, self._expected(record.revision if record else 1))

    def return_as(self, hid: str, actor: str, claim: str, fact: str, outcome: str, expected: int,
                  note: str = "") -> Step:
        payload = {"claim_id": claim, "result_fact_id": fact, "outcome": outcome}
        step = self._typed(_route("return"), actor, payload, handoff=hid, expected=expected, note=note)
        self.state = self._on(hid, actor, claim, expected, self._evidence(hid, fact, outcome))

        def seen(status: int, data: Any) -> None:
            record = self._revise(hid, data)
            if record is not None and record.status != "completed":
                record.status = "completed" if outcome == "succeeded" else "failed"
                record.evidence = fact, outcome

        self._pending = seen
        return step

    def _evidence(self, hid: str, fact: str, outcome: str) -> str:
        """How a return's result fact fits the handoff (the first misfit in upstream's order), and its outcome."""
        record, known = self.model.handoffs.get(hid), self.model.facts.get(fact)
        if record is not None and record.evidence == (fact, outcome):
            return f"the same evidence, {outcome}"
        if known is None or record is None:
            return f"unknown fact, {outcome}"
        session, author = known
        if session != record.session:
            other = self.model.sources.get(session) != self.model.sources.get(record.session)
            return f"fact of another {'source' if other else 'session'}, {outcome}"
        return f"{'own fact' if author == record.to else 'fact by another actor'}, {outcome}"

    def _raw(self) -> Step:
        rid = self._pick(self.model.notes, "n") if self.rng.random() < 0.5 else self._id("n")
        current = self.model.notes.get(rid)
        delete = current is not None and self.rng.random() < 0.25
        kind = self.rng.choice(["custom.note"] * 12 + ["custom.other", "session", "note"])
        operation, change = ("resource.delete", "delete") if delete else ("resource.put", "upsert")
        if self.rng.random() < 0.08:
            operation, change = self.rng.choice([("resource.put", "delete"), ("resource.delete", "upsert")])
        if current is None:
            expected = None if self.rng.random() < 0.9 else self.rng.choice([0, 1, 7])
        else:
            expected = current if self.rng.random() < 0.8 else self.rng.choice([None, current + 1, current - 1 or 7])
        resource: Any = {"kind": kind, "id": rid}
        if self.shape_rng.random() < 0.05:  # [kind, id]: a struct as its fields in order is valid too (ERRATA 2)
            resource = [kind, rid]
        body = {"command_id": self._command_id(), "project_id": "$project", "expected_revision": expected,
                "operation": operation, "payload": None if delete else {"text": self._text()},
                "resource": resource, "change": change}
        step = Step(self._writer("sender"), "POST", "POST /v1/commands", "/v1/commands", body=body, note="raw command")
        self.model.writes.append(step)

        def seen(status: int, data: Any) -> None:
            if isinstance(data, dict) and isinstance(data.get("revision"), int):
                self.model.notes[rid] = data["revision"]

        self._pending = seen
        return step

    def _reuse(self) -> Step:
        """A write sent before, again: the same body (a replay) or another body under its command id."""
        if not self.model.writes:
            return self._session()
        recent = self.model.committed[-4:]
        earlier = self.rng.choice(recent if recent and self.rng.random() < 0.7 else self.model.writes)
        if self.rng.random() < 0.5:
            return Step(self.rng.choice([earlier.actor] * 4 + ["outsider"]), "POST", earlier.route, earlier.path,
                        body=json.loads(json.dumps(earlier.body)), note="same command id, same body")
        return self._another_body(earlier)

    def _another_body(self, earlier: Step) -> Step:
        """``earlier`` under its command id with one field changed (mostly the one ``routes`` names for its route)."""
        body = json.loads(json.dumps(earlier.body))
        route = next((r for r in TYPED_WRITES if r.name == _route_name(earlier)), None)
        varied = route.varied if route is not None and self.rng.random() < 0.7 else \
            self.rng.choice(sorted(body.get("payload") or {"payload": 0}))
        payload = body.get("payload")
        if varied == "expected_revision" and isinstance(body.get("expected_revision"), int):
            body["expected_revision"] += 1
        elif isinstance(payload, dict) and varied in payload:
            value = payload[varied]
            payload[varied] = ({"succeeded": "failed", "failed": "succeeded"}.get(value, f"{value}-other")
                               if varied not in ("topic", "content", "focus", "text") else self._text())
        else:
            body["payload"] = {"text": self._text()}
        return Step(earlier.actor, "POST", earlier.route, earlier.path, body=body, note="same command id, another body")

    # -- reads ---------------------------------------------------------------------------------
    def _read(self, actor: str, route: str, path: str, query: str = "", note: str = "") -> Step:
        return Step(actor, "GET", route, path, query=query, note=note or route.split()[-1])

    def _reader(self) -> str:
        return self.rng.choice(["sender"] * 3 + ["receiver"] * 3 + ["outsider", "reader", "other_project",
                                                                     "other_tenant", NO_TOKEN])

    def _resource(self) -> Step:
        choices: list[tuple[str, str]] = [("session", s) for s in self.model.sessions]
        choices += [("fact", f) for f in self.model.facts] + [("handoff", h) for h in self.model.handoffs]
        choices += [("handoff_context", c) for c in self.model.contexts]
        choices += [("custom.note", n) for n in self.model.notes]
        kind, rid = self.rng.choice(choices) if choices and self.rng.random() < 0.85 else ("session", self._id("s"))
        return self.resource_read(self._reader(), kind, rid)

    def resource_read(self, actor: str, kind: str, rid: str) -> Step:
        record = self.model.handoffs.get(rid) if kind == "handoff" else None
        self.state = f"{kind}: {state(record, self.model.now_ms)}" if kind == "handoff" else kind
        return self._read(actor, f"GET {P}/resources/{{kind}}/{{id}}", f"/v1/projects/$project/resources/{kind}/{rid}")

    def _snapshot(self) -> Step:
        self.state = self.model.present()
        return self._read(self._reader(), f"GET {P}/snapshot", "/v1/projects/$project/snapshot")

    def _changes(self) -> Step:
        materialized = self.rng.random() < 0.5
        after = self.rng.choice([0, 0, self.model.max_seq, max(0, self.model.max_seq - 2), self.model.max_seq + 3])
        parts = [f"project_epoch={self.rng.choice(['$epoch'] * 9 + ['01ARZ3NDEKTSV4RRFFQ69G5FAV'])}",
                 f"after_seq={after}"]
        if self.rng.random() < 0.5:
            parts.append(f"limit={self.rng.choice([1, 2, 5, 0, 1001])}")
        return self.feed_read(self._reader(), materialized, "&".join(parts))

    def feed_read(self, actor: str, materialized: bool, query: str = "project_epoch=$epoch&after_seq=0") -> Step:
        suffix = "/materialized" if materialized else ""
        self.state = self.model.present()
        return self._read(actor, f"GET {P}/changes{suffix}", f"/v1/projects/$project/changes{suffix}", query)

    def _mailbox(self) -> Step:
        parts = [f"box={self.rng.choice(['inbox', 'inbox', 'outbox', 'outbox', 'both'])}"]
        if self.rng.random() < 0.3:
            parts.append(f"source_id={self.rng.choice(['src', 'src-b', 'sr'])}")
        if self.rng.random() < 0.3:
            parts.append(f"include_completed={self.rng.choice(['true', 'false', 'yes'])}")
        if self.rng.random() < 0.4:
            parts.append(f"limit={self.rng.choice(['1', '2', '', '0', '201'])}")
        if self.rng.random() < 0.2:
            parts.append(f"before_seq={self.rng.choice([self.model.max_seq, 1, 2**63 - 1, 2**63])}")
        return self.mailbox_read(self._reader(), "&".join(parts))

    def mailbox_read(self, actor: str, query: str) -> Step:
        self.state = self.model.present()
        return self._read(actor, f"GET {P}/handoffs", "/v1/projects/$project/handoffs", query)

    def _status(self) -> Step:
        return self.status_read(self._reader(), self._live()[0])

    def status_read(self, actor: str, hid: str) -> Step:
        self.state = state(self.model.handoffs.get(hid), self.model.now_ms)
        return self._read(actor, f"GET {P}/handoffs/{{handoff}}", f"/v1/projects/$project/handoffs/{hid}")

    def _search(self) -> Step:
        text = self.rng.choice(self.model.texts or list(TEXTS))
        words = [w for w in text.split() if w.isalpha()] or ["plan"]
        parts = [f"q={urllib.parse.quote(self.rng.choice(words + ['zzz']))}"]
        if self.shape_rng.random() < 0.05:  # a query of one byte, the shortest there is
            parts = ["q=a"]
        if self.rng.random() < 0.4:
            parts.append(f"mode={self.rng.choice(MODES)}")
        if self.rng.random() < 0.3:
            parts.append(f"source_id={self.rng.choice(['src', 'sr', 'src-b'])}")
        if self.rng.random() < 0.3:
            parts.append(f"limit={self.rng.choice(['1', '3', ''])}")
        if self.model.max_seq and self.shape_rng.random() < 0.2:  # at or below the head: the same answer
            parts.append(f"at_least_seq={self.shape_rng.choice([self.model.max_seq, max(1, self.model.max_seq - 1), 1])}")
        return self._read(self._reader(), f"GET {P}/search", "/v1/projects/$project/search", "&".join(parts))

    def search_read(self, actor: str) -> Step:
        """A search for a word of the latest fact written, half the time filtered by a source or a prefix of one."""
        text = self.model.texts[-1] if self.model.texts else TEXTS[0]
        words = [word for word in text.split() if word.isalpha() and len(word) <= 40] or ["plan"]
        parts = [f"q={urllib.parse.quote(self.rng.choice(words))}"]
        if self.rng.random() < 0.5:
            parts.append(f"source_id={self.rng.choice(['src', 'sr', 'src-b'])}")
        if self.rng.random() < 0.5:
            parts.append(f"mode={self.rng.choice(MODES)}")
        return self._read(actor, f"GET {P}/search", "/v1/projects/$project/search", "&".join(parts))

    def search_as(self, actor: str, query: str) -> Step:
        self.state = f"{len(self.model.facts)} facts"
        return self._read(actor, f"GET {P}/search", "/v1/projects/$project/search", query)

    def _identity(self) -> Step:
        return self._read(self._reader(), f"GET {P}/identity", "/v1/projects/$project/identity")

    def _health(self) -> Step:
        return self._read(NO_TOKEN, "GET /health", "/health")

    # -- hostile input and auth ------------------------------------------------------------------
    def _hostile(self) -> Step:
        base = self.rng.choice([self._session, self._fact, self._send, self._accept, self._return, self._raw])()
        body = json.loads(json.dumps(base.body))
        self.model.writes.pop()  # a hostile variant is no write to reuse
        self._pending = None
        step = self._hand_bent(base, body)
        self.state = "bent body"  # refused before any record is read
        bent = bend(self.schema_rng, base.path, base.body) if self.schema_rng.random() < 0.6 else None
        return step if bent is None else Step(base.actor, "POST", base.route, base.path, body=bent[0], note=bent[1])

    def _hand_bent(self, base: Step, body: Any) -> Step:
        roll = self.rng.randrange(6)
        if roll == 0:
            return Step(base.actor, "POST", base.route, base.path, raw_body='{"command_id": "cmd", "payload": {',
                        note="malformed JSON")
        if roll == 1:
            body[self.rng.choice(["actor_id", "tenant_id", "extra"])] = "x"
            note = "unknown top-level field"
        elif roll == 2 and isinstance(body.get("payload"), dict):
            body["payload"]["unexpected"] = 1
            note = "unknown payload field"
        elif roll == 3:
            body["command_id"] = self.rng.choice(["", "c" * 129, "bad id", 7, None])
            note = "bad command id"
        elif roll == 4 and isinstance(body.get("payload"), dict) and body["payload"]:
            key = self.rng.choice(sorted(body["payload"]))
            body["payload"][key] = self.rng.choice([12, [], {}, True, "z" * 300, ""])
            note = f"wrong type or length of payload.{key}"
        else:
            body = self.rng.choice([[], "text", 3, {}])
            note = "body of the wrong type"
        return Step(base.actor, "POST", base.route, base.path, body=body, note=note)

    def _auth(self) -> Step:
        if self.rng.random() < 0.4:  # a write without a usable token: refused before any lookup
            write = self.rng.choice([self._heartbeat, self._return, self._accept, self._session, self._raw])()
            self.model.writes.pop()
            self._pending = None
            who = self.rng.choice([NO_TOKEN, BAD_TOKEN])
            self.state = "no usable token"
            return Step(who, "POST", write.route, write.path, body=write.body, note=f"{write.note} without a token")
        read = self._identity() if self.rng.random() < 0.5 else self._status()
        who = self.rng.choice([NO_TOKEN, BAD_TOKEN, "scheme"])
        self.state = "no usable token"
        if who == "scheme":
            scheme = self.rng.choice(["bearer", "BEARER", "Bearer  ", "Basic"])
            return Step("sender", read.method, read.route, read.path, headers=(("authorization-scheme", scheme),),
                        note=f"scheme {scheme!r}")
        return Step(who, read.method, read.route, read.path, note="no token" if who == NO_TOKEN else "unknown token")

    def mcp_call(self, actor: str, name: str | None, arguments: dict[str, Any] | None = None) -> Step:
        """A well-formed MCP tools/call of ``name`` (None: tools/list)."""
        self.state = self.model.present()
        meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
        params = meta if name is None else {"name": name, "arguments": arguments or {}, **meta}
        method = "tools/list" if name is None else "tools/call"
        body = {"jsonrpc": "2.0", "id": self.rng.randrange(1, 1000), "method": method, "params": params}
        headers = (("Mcp-Protocol-Version", "2026-07-28"), ("Mcp-Method", method),
                   *((("Mcp-Name", name),) if name is not None else ()))
        return Step(actor, "POST", MCP_ROUTE, "/v1/projects/$project/mcp", body=body, headers=headers,
                    note=f"MCP {method}{f' {name}' if name else ''}")

    def retry(self) -> Step | None:
        """The last write sent again under its command id: as it was (a client whose answer was lost),
        or a third of the time with another body (a client that reused the id)."""
        if not self.model.writes:
            return None
        earlier = self.model.writes[-1]
        if self.rng.random() < 1 / 3:
            self.state = f"another body under the command id of {_route_name(earlier)}"
            return self._another_body(earlier)
        self.state = f"a retry of {_route_name(earlier)}"
        return Step(earlier.actor, "POST", earlier.route, earlier.path, body=json.loads(json.dumps(earlier.body)),
                    note="same command id, same body (a retry)")

    def _advance(self) -> Step:
        return self.advance(self.rng.choice([30_000, 70_000, 130_000]))

    def advance(self, ms: int) -> Step:
        self.state = self.model.present()
        self._pending = lambda status, data: setattr(self.model, "now_ms", self.model.now_ms + ms)
        return Step(NO_TOKEN, "POST", CLOCK_ROUTE, "/__test__/clock", body={"advance_ms": ms},
                    note=f"both clocks move {ms // 1000} s")

    def _mcp(self) -> Step:
        method = self.rng.choice(["tools/list", "tools/call", "tools/call", "tools/call", "initialize"])
        params: dict[str, Any] = {}
        headers = [("Mcp-Protocol-Version", self.rng.choice(["2026-07-28"] * 8 + ["2024-11-05", ""])),
                   ("Mcp-Method", method)]
        actor = self.rng.choice(["sender", "sender", "receiver", "receiver", "reader", "other_tenant", NO_TOKEN])
        if method == "tools/call":
            name = self.rng.choice(["handoff_list", "handoff_list", "handoff_status", "search", "resource_get",
                                    "handoff_accept", "nope"])
            hid, record = self._live()
            claim = self._id("claim")
            revision = self._expected(record.revision if record else 1)
            tools: dict[str, dict[str, Any]] = {
                "handoff_list": {"box": self.rng.choice(["inbox", "outbox"])}, "handoff_status": {"handoff_id": hid},
                "search": {"q": "plan"}, "nope": {},
                "resource_get": {"kind": "session", "id": self._pick(self.model.sessions, "s")},
                "handoff_accept": {"operation_id": self._command_id(), "handoff_id": hid, "expected_revision": revision,
                                   "claim_id": claim}}
            arguments = tools[name]
            params = {"name": name, "arguments": arguments}
            headers.append(("Mcp-Name", name))
            if name == "handoff_accept":
                self._pending = self._accepted(hid, claim)
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
        body = {"jsonrpc": "2.0", "id": self.rng.randrange(1, 1000), "method": method, "params": params}
        return Step(actor, "POST", MCP_ROUTE, "/v1/projects/$project/mcp", body=body,
                    headers=tuple(h for h in headers if h[1]), note=f"MCP {method}")


def _route_name(step: Step) -> str:
    """The write route a step's note names (plans add what they aim at in parentheses)."""
    return step.note.split(" (", 1)[0]


def _route(name: str) -> WriteRoute:
    return next(route for route in TYPED_WRITES if route.name == name)
