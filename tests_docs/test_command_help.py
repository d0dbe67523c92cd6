"""Every argument of every management command Tickwork ships says what it is in `--help`: an
operator learns a command from its help (run_standalone's --host, --port and --concurrency, the
tenants' commands' SLUG and --name said nothing), and the command line's subcommands are held to
it too."""

import argparse

from django.core.management import get_commands, load_command_class

# The product's apps (pyproject.toml's layers); Django's and the libraries' commands are theirs.
PRODUCT = {
    "tenants",
    "jobs",
    "pools",
    "executions",
    "events",
    "audit",
    "background",
    "dispatcher",
    "worker",
    "maintenance",
    "standalone",
    "alerts",
    "web",
    "dashboard",
}
# What Django adds to every command, with its own help.
_SKIPPED = (argparse._HelpAction, argparse._VersionAction)


def _without_help(parser: argparse.ArgumentParser, prog: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions if choice.help}
            missing += [f"{prog} {name} (its summary)" for name in action.choices if name not in helped]
            for name, subparser in action.choices.items():
                missing += _without_help(subparser, f"{prog} {name}")
        elif not isinstance(action, _SKIPPED) and not action.help:
            missing.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_the_product_has_the_commands_this_test_reads():
    ours = {name for name, app in get_commands().items() if app in PRODUCT}
    assert {"run_standalone", "create_tenant", "jobs", "executions", "import_beat"} <= ours


def test_every_argument_of_every_product_command_has_a_help_text():
    missing = []
    for name, app in sorted(get_commands().items()):
        if app in PRODUCT:
            parser = load_command_class(app, name).create_parser("manage.py", name)
            missing += _without_help(parser, name)

    assert missing == []
