"""``swing-mpi schedule``: one rank's schedule as a table or JSON, and clear errors for bad input."""

from __future__ import annotations

import json

import pytest

from swing_mpi.cli import main
from swing_mpi.schedule import ALGORITHMS, build_schedule


@pytest.mark.parametrize("alg", sorted(ALGORITHMS))
def test_json_matches_the_schedule(alg, capsys):
    assert main(["schedule", "--dims", "3x4", "--rank", "5", "-a", alg, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = build_schedule(alg, (3, 4), 5, 2 * 2 * 12)
    assert out["algorithm"] == alg and out["summary"] == ALGORITHMS[alg].summary
    assert out["coords"] == [1, 1] and out["steps"] == s.nsteps and out["count"] == 48
    sent = sum(r["send_count"] for r in out["transfers"] if r["peer"] is not None)
    assert sent == s.sent_elements()


def test_table(capsys):
    assert main(["schedule", "--dims", "4x4", "-a", "hamiltonian"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# hamiltonian on 4x4 torus, rank 0 (0, 0), count 64, 30 steps, 4 lanes")
    assert "cycle-0+" in out and "cycle-1-" in out


BAD = [[], ["--dims", "4x4", "--rank", "16"], ["--dims", "4y4"], ["--size", "4", "-c", "-1"]]


@pytest.mark.parametrize("argv", BAD)
def test_bad_input(argv, capsys):
    assert main(["schedule", *argv]) == 2
    assert capsys.readouterr().err.startswith("swing-mpi schedule: ")
