"""Every subcommand's ``--help`` teaches: examples that parse, defaults with their values, exit
codes, no reStructuredText markup."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest
from _helpers import neardup
from neardup.cli import build_parser

COMMANDS = [
    ("dedup",),
    ("fingerprint",),
    ("index",),
    ("index", "build"),
    ("index", "query"),
    ("calibrate",),
    ("serve",),
    ("repair",),
]


def _subparser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _examples(text: str) -> list[str]:
    block = text.split("examples:\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_shows_examples_defaults_and_exit_codes(path: tuple[str, ...]) -> None:
    r = neardup(*path, "--help")
    assert r.returncode == 0
    text = r.stdout
    for markup in ("``", ":class:", ":meth:", ":func:"):
        assert markup not in text, markup
    assert "exit codes:\n  0  " in text
    examples = _examples(text)
    assert 2 <= len(examples) <= 3, examples
    # every example is a command line the parser takes
    for example in examples:
        words = shlex.split(example)
        words = words[[w.startswith("neardup") for w in words].index(True) + 1 :]
        words = words[: next((i for i, w in enumerate(words) if w in (">", "|")), len(words))]
        try:
            build_parser().parse_args(words)
        except SystemExit as e:  # pragma: no cover (the message is the failure)
            raise AssertionError(f"the example does not parse: {example}") from e
    # every option with a default says what it is
    for action in _subparser(path)._actions:
        if not action.option_strings or action.help in (None, argparse.SUPPRESS):
            continue
        if action.default in (None, False, [], argparse.SUPPRESS) and action.nargs != 0:
            continue
        if isinstance(action, (argparse._HelpAction, argparse._StoreTrueAction)):
            continue
        assert "default" in action.help.lower(), (action.option_strings, action.help)
        assert "the policy's)" not in action.help or re.search(r"\d", action.help), action.help


def test_choices_are_listed() -> None:
    for path in (("dedup",), ("fingerprint",), ("serve",), ("index", "build")):
        text = neardup(*path, "--help").stdout
        assert "{default,seed000,seed002," in text, path
