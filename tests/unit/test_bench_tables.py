"""benchmarks/tables.py: the tables of benchmarks/results that no other tool writes (the ones that need no SimGrid)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import tables  # noqa: E402


def row(size, alg, us, resolved=None, collective="allreduce"):
    r = {"size": size, "algorithm": alg, "time_median_us": us, "collective": collective, "iters": 20}
    if resolved:
        r["resolved"] = resolved
    return r


def test_auto_fastest_leaves_out_auto():
    rows = [row(8, "auto", 1.0, "swing-lat"), row(8, "native", 2.0), row(8, "swing-lat", 1.5),
            row(64, "auto", 9.0, "ring"), row(64, "ring", 4.0), row(64, "native", 3.0)]
    assert tables.auto_fastest(rows) == [(8, "swing-lat"), (64, "native")]


def test_auto_summary_one_launch_gives_the_ratio_and_the_noise():
    rows = [row(8, "auto", 3.0, "swing-lat"), row(8, "native", 2.0), row(8, "swing-lat", 2.5)]
    text = tables.auto_summary([("a.json", rows)])
    line = text.splitlines()[-1]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:5] == ["8", "swing-lat", "3.0", "native", "2.0"]
    assert cells[5] == "1.50" and cells[6] == "1.20"  # auto / fastest, auto / the same algorithm


def test_auto_summary_several_launches_gives_each_ratio_and_their_median():
    launches = [(f"l{i}.json", [row(8, "auto", a, "ring"), row(8, "native", 1.0)])
                for i, a in enumerate((1.1, 0.9, 1.3))]
    line = tables.auto_summary(launches).splitlines()[-1]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3] == "1.10 0.90 1.30" and cells[4] == "1.10"


def test_halves_table_splits_pairs_from_all_runs_and_names_auto_by_its_choice():
    files = [("d/pair-allgather-ring-run1.json", [row(16, "native", 2.0, collective="allgather"),
                                                  row(16, "ring", 1.0, collective="allgather")]),
             ("d/pair-allgather-ring-run2.json", [row(16, "native", 2.0, collective="allgather"),
                                                  row(16, "ring", 3.0, collective="allgather")]),
             ("d/all-allgather-run1.json", [row(16, "native", 4.0, collective="allgather"),
                                            row(16, "ring", 2.0, collective="allgather"),
                                            row(16, "auto", 4.0, "bucket", collective="allgather")])]
    lines = tables.halves_table(files).splitlines()
    by_alg = {c[1]: c for c in ([x.strip() for x in ln.strip("|").split("|")] for ln in lines[3:])}
    assert by_alg["ring"][2:] == ["0.50 1.50", "1.00", "0.50", "0.50"]
    assert by_alg["auto (bucket)"][2:] == ["-", "-", "1.00", "1.00"]


@pytest.mark.parametrize("d, best, circulant", [(3, 2, 2), (5, 5, 5), (7, 10, 10), (9, 12, 13)])
def test_odd_sides_search_finds_the_recorded_minima(d, best, circulant):
    assert tables.best_program(d)[0] == best
    assert tables.circulant_hops(d) == circulant


def test_odd_sides_two_sided_matches_the_recorded_table():
    assert tables.best_two_sided(7)[0] == 8 and tables.two_sided_circulant_hops(7) == 8
    assert tables.best_two_sided(9)[:2] == (10, (1, 1, 2))


def test_odd_sides_refuses_even_sides():
    with pytest.raises(ValueError, match="odd side"):
        tables.odd_sides_table([4])


def test_trivance_sim_table_divides_swing_by_trivance():
    times = (("trivance-bw", 2e-3), ("swing-bw", 3e-3), ("trivance-lat", 4e-6), ("swing-lat", 2e-6))
    points = "\n".join(f'{{"algorithm": "{a}", "bytes": 1024, "time_s": {t}}}' for a, t in times)
    line = tables.trivance_sim_table("9x9", points).splitlines()[-1]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells == ["1 KiB", "2.000 ms", "3.000 ms", "1.50", "4.00 µs", "2.00 µs", "0.50", "0.50"]
