"""The tabular duel control (:mod:`agon.controls.tabular`): run through the project's own
rewards, advantages and loss, the contest must turn the drafter adversarial and, through it,
teach the reader to verify; and without the rival term it must not.

The directions, over seeds 0-4 (start: subtle share 0.2, verify rate 0.2; verifying pays for
the reader above a subtle share of 0.43):

- ``agon`` and ``zero_sum`` (the contest): in every seed the subtle share and the verify rate
  end at least ``RISE`` above their start ("rise clearly");
- ``independent``: on average over the seeds neither ends ``RISE`` above its start, the line
  every contest seed clears. The tolerance is that wide because the drafter's style earns
  nothing there, so its subtle share random-walks: AdamW steps a logit by about the learning
  rate whatever the size of its noisy gradient (over 64 seeds the logit moved by +0.07 on
  average, with a standard deviation of 1.04). A seed that wanders above 0.43 makes verifying
  pay and the reader follows it; otherwise the reader learns to copy *more*, as copying pays
  at the start;
- ``cooperative``: in every seed the subtle share ends at ``FALLEN`` (half its start) or below;
- robustness: against a fixed drafter that is always subtle when wrong, the ``agon`` reader's
  mean accuracy beats the ``independent`` reader's by ``ROBUST_GAP`` at least.

Margins, measured over seeds 0-63 (every scheme at the defaults of ``TabularDuel``; "any 5
seeds" is every window of 5 consecutive seeds, what a change of the test's seeds could give):

- contest, per seed (threshold 0.60): the subtle share ended >= 0.87 under ``agon`` and >= 0.91
  under ``zero_sum`` (margin 0.27); the verify rate >= 0.97 under both (margin 0.37);
- ``independent``, mean (threshold 0.60): the subtle share 0.22 on seeds 0-4 and at most 0.54
  over any 5 seeds (margin 0.06); the verify rate 0.02 on seeds 0-4, at most 0.39 over any 5;
- ``cooperative``, per seed (threshold 0.10): the subtle share ended <= 0.01 (margin 0.09);
- robustness (threshold 0.05): the gap was 0.19 on seeds 0-4 and at least 0.12 over any 5
  seeds (margin 0.07); ``agon``'s reader scored 0.70 and ``independent``'s 0.50-0.69.

``test_the_control_fails_without_the_rival_term`` removes the rival term from the project's
``duel_rewards`` (every scheme then pays its own correctness only) and shows that the contest's
directions fail: the suite itself shows that the control can fail.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from agon.controls import tabular
from agon.controls.tabular import Row, TabularDuel, reader_accuracy, run_control, train

SEEDS = range(5)
RISE = 0.4  # contest: every seed ends >= start + RISE; independent: the mean ends below that
FALLEN = 0.1  # cooperative: every seed's subtle share ends <= FALLEN (half its start)
ROBUST_GAP = 0.05  # mean accuracy against the adversarial drafter: agon >= independent + this
CONTEST = ("agon", "zero_sum")


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    """Every scheme over the test's seeds, once for the module."""
    return run_control(seeds=SEEDS)


def of(rows: list[Row], scheme: str) -> list[Row]:
    """The rows of one scheme."""
    return [r for r in rows if r.scheme == scheme]


def contest_failures(rows: list[Row]) -> list[str]:
    """Where ``agon`` / ``zero_sum`` did not make the drafter subtle and the reader verify."""
    return [
        f"{r.scheme} seed {r.seed}: {name} {start:.2f} -> {end:.2f}, not up by {RISE}"
        for scheme in CONTEST
        for r in of(rows, scheme)
        for name, start, end in (
            ("subtle share", r.subtle_start, r.subtle_end),
            ("verify rate", r.verify_start, r.verify_end),
        )
        if end < start + RISE
    ]


def test_the_premise_copying_pays_first_verifying_later():
    """The environment poses the problem the control needs: at the start copying beats
    verifying for the reader's own correctness; once drafts are all subtle, verifying wins."""
    env = TabularDuel()
    assert reader_accuracy(env, env.subtle_start, 0.0) > reader_accuracy(env, env.subtle_start, 1.0)
    assert reader_accuracy(env, 1.0, 1.0) > reader_accuracy(env, 1.0, 0.0)
    assert env.subtle_start < env.verify_pays_above < 1.0


def test_a_seed_gives_the_same_run():
    env = TabularDuel(steps=5)
    assert train(env, "agon", 3) == train(env, "agon", 3)
    assert train(env, "agon", 3) != train(env, "agon", 4)


def test_the_contest_makes_the_drafter_subtle_and_the_reader_verify(rows):
    assert contest_failures(rows) == []


def test_without_the_contest_neither_rises(rows):
    ind = of(rows, "independent")
    subtle = np.mean([r.subtle_end for r in ind])
    verify = np.mean([r.verify_end for r in ind])
    assert subtle < ind[0].subtle_start + RISE, f"independent: mean subtle share {subtle:.2f}"
    assert verify < ind[0].verify_start + RISE, f"independent: mean verify rate {verify:.2f}"


def test_a_cooperative_drafter_stops_misleading(rows):
    ends = [r.subtle_end for r in of(rows, "cooperative")]
    assert max(ends) <= FALLEN, f"cooperative: subtle share ends {ends}"


def test_the_contest_reader_is_robust_to_an_adversarial_drafter(rows):
    agon = np.mean([r.adversarial for r in of(rows, "agon")])
    ind = np.mean([r.adversarial for r in of(rows, "independent")])
    assert agon >= ind + ROBUST_GAP, f"against always-subtle drafts: agon {agon:.2f}, ind {ind:.2f}"


def no_rival(c_self, c_rival, scheme="agon", lam=1.0, role="drafter"):
    """``duel_rewards`` with the rival term removed: every scheme pays own correctness only."""
    return np.asarray(c_self, dtype=np.float64).copy()


def test_the_control_fails_without_the_rival_term(rows, monkeypatch):
    # patch the name where the project's role_rewards looks it up, wherever that module is
    names = tabular.role_rewards.__globals__
    assert "duel_rewards" in names, "role_rewards no longer calls duel_rewards: update this test"
    monkeypatch.setitem(names, "duel_rewards", no_rival)
    # zero_sum (and cooperative) without the term run the very same computation: agon stands for all
    patched = run_control(["agon"], SEEDS)
    # agon without its rival term pays what independent pays: the same runs, bit for bit
    assert [replace(r, scheme="independent") for r in patched] == of(rows, "independent")
    failed = contest_failures(patched)
    assert any("subtle share" in f for f in failed), failed
    mean = np.mean([r.subtle_end for r in patched])
    assert mean < patched[0].subtle_start + RISE, f"agon without its rival term: {mean:.2f}"
