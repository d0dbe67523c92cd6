"""The command line's arguments. Every subcommand takes `--tenant SLUG` and, where it prints
objects, `--json`; every argument has a help text (`manage.py jobs list --help`).

A mistake in the arguments (a missing --tenant or id, a state that does not exist) is one line on
stderr and exit status 2: argparse's usage block, printed above the line that matters, buries it
for the operator and for a script reading stderr. Called through call_command, it raises
CommandError as Django's own parser does.
"""

import argparse

from django.core.management.base import CommandError, CommandParser


class CliParser(CommandParser):
    def error(self, message: str):
        if self.called_from_command_line:
            self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
        raise CommandError(f"Error: {message}")


def subcommands(parser: CommandParser, *, title: str) -> argparse._SubParsersAction:
    """The command's subcommands, each parsed by a CliParser."""
    return parser.add_subparsers(
        title=title, dest="subcommand", required=True, metavar="SUBCOMMAND", parser_class=CliParser
    )


def subcommand(subparsers: argparse._SubParsersAction, name: str, *, summary: str, json: bool = True) -> CliParser:
    """A subcommand with the arguments they all share: --tenant, and --json when it prints objects."""
    parser = subparsers.add_parser(name, help=summary, description=summary)
    parser.add_argument(
        "--tenant",
        required=True,
        metavar="SLUG",
        help="the tenant to work in: only its jobs and executions are found (another tenant's id is not)",
    )
    if json:
        parser.add_argument(
            "--json", action="store_true", help="print the API's JSON for the same objects instead of a table"
        )
    return parser


def add_id(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "id",
        metavar="ID",
        help=f"the {what}'s id: whole, or its first 8 characters or more, as the tables and the dashboard show it",
    )


def add_limit(parser: argparse.ArgumentParser, what: str, default: int) -> None:
    parser.add_argument(
        "--limit",
        type=positive,
        default=default,
        metavar="N",
        help=f"print at most N {what}, the newest (default {default}); stderr says when there are more",
    )


def positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"'{value}' is not a whole number of 1 or more")
    return int(value)


def states(choices: list[str]):
    """A --state value, in any case, checked against `choices` with the valid ones named."""

    def state(value: str) -> str:
        if value.upper() not in choices:
            raise argparse.ArgumentTypeError(f"'{value}' is not a state; the states: {', '.join(choices)}")
        return value.upper()

    return state
