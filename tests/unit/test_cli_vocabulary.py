"""One command-line vocabulary: units, old spellings, one message per job, plain help, ``--version``, docs/cli.md."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import swing_mpi
from swing_mpi import cliargs
from swing_mpi.cli import SUBCOMMANDS, build_parser, main
from swing_mpi.units import format_dims, parse_rate, parse_time, plural

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"
MARKUP = re.compile(r"``|`[^`\s]+`|:(?:mod|func|class|meth|attr|data|envvar|ref):|\*\*")
RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_RANK", "SLURM_PROCID")


@pytest.fixture(autouse=True)
def _rank0(monkeypatch):
    """Run every test as rank 0 of no job, whatever launched pytest."""
    for var in RANK_VARS:
        monkeypatch.delenv(var, raising=False)


def subparser(name: str) -> argparse.ArgumentParser:
    """Return the parser of ``swing-mpi NAME``."""
    parser = build_parser([name])
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


# -- units ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, bps", [("400G", 400e9), ("40M", 40e6), ("100Gbps", 100e9), ("2.5Gbit/s", 2.5e9),
                                       ("9600bps", 9600.0), ("1.5e9bps", 1.5e9), ("1T", 1e12), (" 40 M ", 40e6),
                                       ("10k", 1e4)])
def test_parse_rate(text, bps):
    assert parse_rate(text) == pytest.approx(bps)


def test_a_bare_rate_is_refused_with_the_forms_it_could_mean():
    with pytest.raises(ValueError, match=r"--link: '400' has no unit: write 400G .* 400M .* 400bps"):
        parse_rate("400", "--link")
    for bad in ("0G", "abc", "-1M", "inf", "nan", "", "40Q"):
        with pytest.raises(ValueError, match="--link"):
            parse_rate(bad, "--link")


@pytest.mark.parametrize("text, seconds", [("1.5us", 1.5e-6), ("1.5µs", 1.5e-6), ("2ms", 2e-3), ("100ns", 1e-7),
                                           ("0.5s", 0.5), ("0", 0.0), ("3e2us", 3e-4)])
def test_parse_time(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)


def test_a_bare_time_is_refused_unless_its_unit_is_stated():
    with pytest.raises(ValueError, match=r"--alpha: '1.5' has no unit: .* e.g. 1.5us"):
        parse_time("1.5", "--alpha")
    assert parse_time("2", "--latency", bare="s") == 2.0  # an option whose help states seconds
    assert parse_time("2", "--x", bare="us") == pytest.approx(2e-6)
    for bad in ("-1us", "inf", "1.5 parsecs", "us"):
        with pytest.raises(ValueError, match="--alpha"):
            parse_time(bad, "--alpha")


def test_dims_and_plurals_in_one_form():
    assert format_dims((2, 2)) == "2x2" and format_dims((16,)) == "16" and format_dims([4, 4, 4]) == "4x4x4"
    assert plural(1, "lane") == "1 lane" and plural(4, "lane") == "4 lanes" and plural(0, "size") == "0 sizes"


# -- cliargs ----------------------------------------------------------------------------------

def _toy(prog: str = "toy") -> cliargs.Parser:
    p = cliargs.Parser(prog=prog)
    p.add_argument("--link", default="40M")
    cliargs.deprecated(p, "--rate-mbit", dest="link", new="--link", convert=lambda v: f"{float(v):g}M")
    cliargs.add_collective(p, help="the collective")
    return p


def test_an_old_spelling_works_and_says_its_new_one_once(capsys):
    args = _toy().parse_args(["--rate-mbit", "20"])
    assert args.link == "20M" and parse_rate(args.link) == 20e6
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err == ("toy: warning: --rate-mbit is deprecated and will be removed in the next release; "
                   "use --link 20M\n")
    assert _toy().parse_args([]).link == "40M" and capsys.readouterr().err == ""
    assert "--rate-mbit" not in _toy().format_help()  # not advertised


def test_an_old_spelling_with_a_bad_value_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        _toy().parse_args(["--rate-mbit", "fast"])
    assert e.value.code == 2 and "argument --rate-mbit" in capsys.readouterr().err


@pytest.mark.parametrize("var", RANK_VARS)
def test_job_rank_from_the_launcher(var, monkeypatch):
    assert cliargs.job_rank() == 0
    monkeypatch.setenv(var, "3")
    assert cliargs.job_rank() == 3


def test_errors_and_notices_once_per_job(monkeypatch, capsys):
    with pytest.raises(SystemExit) as e:
        _toy().parse_args(["--nope"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("usage: toy") and "toy: error: unrecognized arguments: --nope" in err
    monkeypatch.setenv("PMI_RANK", "1")  # any other rank of the job: the same exit, no words
    with pytest.raises(SystemExit) as e:
        _toy().parse_args(["--nope"])
    assert e.value.code == 2 and capsys.readouterr().err == ""
    assert _toy().parse_args(["--rate-mbit", "20"]).link == "20M" and capsys.readouterr().err == ""
    cliargs.say("hello")
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("PMI_RANK", "0")
    cliargs.say("hello")
    assert capsys.readouterr().err == "hello\n"


def test_collective_has_one_spelling_and_accepts_mpis():
    p = _toy()
    assert p.parse_args([]).collective == "allreduce"
    assert p.parse_args(["--collective", "reduce_scatter"]).collective == "reduce_scatter"
    assert p.parse_args(["--collective", "reduce_scatter_block"]).collective == "reduce_scatter"
    assert cliargs.collective_name(" allgather ") == "allgather"
    with pytest.raises(argparse.ArgumentTypeError, match="reduce_scatter_block is accepted"):
        cliargs.collective_name("reduce-scatter")
    q = cliargs.Parser(prog="q")
    cliargs.add_collective(q, help="h", choices=("allreduce",))
    with pytest.raises(SystemExit):
        q.parse_args(["--collective", "allgather"])


def test_time_options_take_a_unit_or_state_theirs(capsys):
    from swing_mpi.bench.cli import Config
    from swing_mpi.bench.cli import build_parser as bench_parser

    assert Config(bench_parser().parse_args(["--max-time", "500ms"])).max_time == pytest.approx(0.5)
    assert Config(bench_parser().parse_args(["--max-time", "5"])).max_time == 5.0  # its help: seconds
    assert Config(bench_parser().parse_args(["--max-time", "0"])).max_time == 0.0
    with pytest.raises(SystemExit):
        bench_parser().parse_args(["--max-time", "5 parsecs"])
    assert "argument --max-time: --max-time: cannot parse '5 parsecs'" in capsys.readouterr().err
    calibrate = subparser("calibrate")
    assert calibrate.parse_args(["--point-time", "300ms"]).point_time == pytest.approx(0.3)
    assert calibrate.parse_args(["--point-time", "2"]).point_time == 2.0
    assert calibrate.parse_args([]).point_time == 1.0


def test_split_names():
    assert cliargs.split_names(None) == []
    assert cliargs.split_names("a, b,a") == ["a", "b"]
    assert cliargs.split_names(["a,b", "c", "b"]) == ["a", "b", "c"]


# -- every command ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_help_is_plain_text_for_every_option(name):
    sub = subparser(name)
    assert sub.get_default("_broken") is None, sub.get_default("_broken")
    text = sub.format_help()
    assert not MARKUP.findall(text), (name, MARKUP.findall(text))
    missing = [a.option_strings or a.dest for a in sub._actions if not a.help]
    assert not missing, (name, missing)


def test_top_level_help_is_plain_text():
    text = build_parser().format_help()
    assert not MARKUP.findall(text) and "--version" in text and "docs/cli.md" in text


def _section(name: str) -> str:
    text = DOC.read_text()
    start = text.index(f"### swing-mpi {name}\n")
    end = text.find("\n### ", start + 1)
    return text[start:end if end >= 0 else len(text)]


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_docs_list_every_option_of_every_command(name):
    section = _section(name)
    old = DOC.read_text().split("## Old spellings", 1)[1].split("\n## ", 1)[0]
    for action in subparser(name)._actions:
        if action.dest == "help" or not action.option_strings:
            continue
        if hasattr(action, "new"):  # an old spelling, hidden from --help (cliargs.deprecated)
            assert f"`{action.option_strings[0]}" in old and f"`{name}`" in old, (name, action.option_strings)
        elif action.help != argparse.SUPPRESS:
            for opt in action.option_strings:
                assert f"`{opt}`" in section, (name, opt)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"swing-mpi {swing_mpi.__version__}"
    r = subprocess.run([sys.executable, "-m", "swing_mpi", "--version"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("swing-mpi ") and not r.stderr


def test_a_subcommands_unknown_option_is_told_by_its_own_parser(capsys):
    with pytest.raises(SystemExit) as e:
        main(["model", "--dims", "4x4", "--nope"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("usage: swing-mpi model") and "--nope" in err


@pytest.mark.parametrize("argv, flag", [
    (["model", "--dims", "4x4", "--size", "4M", "--link", "400"], "--link"),
    (["model", "--dims", "4x4", "--size", "4M", "--alpha", "1.5"], "--alpha"),
    (["simulate", "--dims", "2x2", "--sizes", "1K", "--link", "400"], "--link"),
    (["simulate", "--dims", "2x2", "--sizes", "1K", "--alpha", "2"], "--alpha"),
    (["lab", "--dims", "2x2", "--link", "40", "--plan"], "--link"),
])
def test_a_bare_number_is_refused_by_every_command(argv, flag, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag}: " in err and "has no unit" in err and err.count("\n") == 1


def test_the_old_spellings_of_the_commands_still_work(capsys, tmp_path):
    assert main(["schedule", "--size", "4", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["p"] == 4 and "use --ranks 4" in out.err
    assert main(["schedule", "-p", "4", "--json"]) == 0
    new = json.loads(capsys.readouterr().out)
    assert new["p"] == new["size"] == 4 and new["dims"] == "4"
    assert main(["model", "--dims", "4x4", "--size", "4M", "-a", "swing-bw", "--link-gbps", "400", "--alpha-us",
                 "1.5", "--json"]) == 0
    old = capsys.readouterr()
    assert "use --link 400G" in old.err and "use --alpha 1.5us" in old.err
    assert main(["model", "--dims", "4x4", "--size", "4M", "-a", "swing-bw", "--link", "400G", "--alpha", "1.5us",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_s"] == json.loads(old.out)["time_s"]
    assert main(["lab", "--dims", "2x2", "--rate-mbit", "20", "--plan"]) == 0
    lab = capsys.readouterr()
    assert "use --link 20M" in lab.err and "20" in lab.out
