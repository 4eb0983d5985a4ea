"""A user's first hour, again (issue 39): the live and sweep commands on a user's own files.

Each test reproduces one finding of that session as it was reported (it failed on the code of
the time) and checks the fix.
"""

from __future__ import annotations

import argparse

import pytest

from rlcurves.cli import build_parser, main


def _commands() -> list[str]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_every_command_has_a_help_page():
    assert {"watch", "race", "report", "fit", "forecast", "compare"} <= set(_commands())


@pytest.mark.parametrize("command", [None, *_commands()])
def test_regression_every_commands_help_runs(command, capsys):
    """`rlcurves watch --help` crashed (`%o format`: a bare % in a help string); every
    command's --help prints its usage and exits 0."""
    argv = ["--help"] if command is None else [command, "--help"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    assert out.out.startswith("usage: rlcurves") and "Traceback" not in out.err
    if command == "watch":
        assert "10% of the budget" in out.out  # the measured schedule, its % printed once
