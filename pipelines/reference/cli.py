"""reference/cli.md: every `fleet` subcommand with its usage and options, read from the argparse parser the
command itself uses (argparse keeps a parser's arguments and subcommand help only in its private fields)."""

from __future__ import annotations

import argparse
import functools

from pipelines.cli.parser import build_parser
from pipelines.reference.md import cell, code, page, prose, table

USAGE_WIDTH = 100  # usage lines wrapped alike wherever the site is built, not to the builder's terminal
HEADER = ("option", "value", "default", "description")
INTRO = """\
Every subcommand of `fleet` and every option it takes, as `fleet SUBCOMMAND --help` prints them. Every
subcommand also takes `-h`/`--help`. Exit statuses: [Exit codes](exit-codes.md); the settings the
environment may give instead of a flag: [Settings](settings.md). Generated from the command's parser, which
collects what each subcommand's module declares (its `COMMANDS`), when the site is built
(`pipelines/reference/cli.py`)."""


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Subcommand name -> (its one-line help, its parser), in the order the parser declares them."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help or "" for c in action._choices_actions}
    return {name: (helps.get(name, ""), sub) for name, sub in action.choices.items()}


def options(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    """The subcommand's arguments but -h/--help (the page says once that every subcommand has it)."""
    return [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]


def expanded_help(action: argparse.Action, prog: str) -> str:
    """The help text as --help prints it (argparse fills %(default)s and the like, and turns %% into %)."""
    text = action.help or ""
    if "%" not in text:
        return text
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params = {k: getattr(v, "__name__", v) for k, v in params.items()} | {"prog": prog}
    if action.choices is not None:
        params["choices"] = ", ".join(map(str, action.choices))
    return text % params


def _name(action: argparse.Action) -> str:
    if action.option_strings:
        return ", ".join(code(o) for o in action.option_strings)
    optional = ", may be left out" if action.nargs == "?" else ""
    return f"{code(action.metavar or action.dest.upper())} (positional{optional})"


def _value(action: argparse.Action) -> str:
    """What follows the option: its metavar, or one of its choices; nothing for a flag or a positional."""
    if not action.option_strings or action.nargs == 0:
        return ""
    if action.choices and action.metavar is None:
        return "one of " + ", ".join(code(c) for c in action.choices)
    return code(action.metavar or action.dest.upper())


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS):
        return ""
    return code(action.default)


def _description(action: argparse.Action, prog: str) -> str:
    text = expanded_help(action, prog)
    if action.required and action.option_strings:
        text += " (required)"
    if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
        text += " (repeatable)"
    return cell(text)


def _row(action: argparse.Action, prog: str) -> list[str]:
    return [_name(action), _value(action), _default(action), _description(action, prog)]


def usage(sub: argparse.ArgumentParser) -> str:
    """The usage line(s) argparse prints, at a fixed width."""
    sub.formatter_class = functools.partial(argparse.HelpFormatter, width=USAGE_WIDTH)
    return sub.format_usage().strip()


def section(name: str, summary: str, sub: argparse.ArgumentParser) -> str:
    rows = [_row(a, sub.prog) for a in options(sub)]
    return "\n\n".join(
        [
            f"## `fleet {name}` {{#{name}}}",
            prose(summary[:1].upper() + summary[1:] + "."),
            f"```text\n{usage(sub)}\n```",
            table(HEADER, rows) if rows else "No options.",
        ]
    )


def markdown() -> str:
    parser = build_parser()
    subs = subcommands(parser)
    index = table(("subcommand", "what it does"), ([f"[`{n}`](#{n})", cell(h)] for n, (h, _) in subs.items()))
    return page(
        "CLI",
        INTRO,
        prose(parser.description or ""),
        index,
        *(section(n, h, s) for n, (h, s) in subs.items()),
    )
