"""The command line: `kubectl sits <command> NAME [flags]`, flags as kubectl users write them.

Pure: argv in, an Invocation out (argparse exits with status 2 and a usage line on a
mistake, as kubectl does). kubectl passes everything after `kubectl sits` to the plugin,
so the connection flags are accepted before and after the command.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from sits_kubectl.commands import EFFECTS
from sits_kubectl.connection import Connection
from sits_operator.model.analysis import Command, command_annotation

GET, EXPLAIN = "get", "explain"
OUTPUTS = ("json", "yaml")

DESCRIPTION = """\
Watch and steer SitsDeployment rollouts (sits.dev).

  kubectl sits get chat --watch        the rollout as a tree, redrawn on every change
  kubectl sits explain chat            why the last decision was taken, what the next needs
  kubectl sits abort chat -n prod      roll back now (your own RBAC decides)
"""


@dataclass(frozen=True)
class Invocation:
    command: str  # GET, EXPLAIN, or a Command's value
    name: str
    connection: Connection
    watch: bool = False
    output: str | None = None

    @property
    def manual(self) -> Command | None:
        """The annotation command, for promote | abort | pause | resume | retry."""
        return Command(self.command) if self.command in set(Command) else None


def _connection_flags(parser: argparse.ArgumentParser) -> None:
    """kubectl's flags; SUPPRESS so a flag given before the command is not reset after it."""
    hide = argparse.SUPPRESS
    parser.add_argument(
        "-n",
        "--namespace",
        default=hide,
        help="namespace of the SitsDeployment (default: the context's)",
    )
    parser.add_argument("--context", default=hide, help="kubeconfig context to use")
    parser.add_argument(
        "--kubeconfig",
        default=hide,
        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)",
    )
    parser.add_argument(
        "--as",
        dest="as_user",
        default=hide,
        metavar="USER",
        help="act as this user or service account (impersonation)",
    )
    parser.add_argument(
        "--as-group",
        dest="as_group",
        action="append",
        default=hide,
        metavar="GROUP",
        help="act as this group (impersonation; once)",
    )


def parser() -> argparse.ArgumentParser:
    flags = argparse.ArgumentParser(add_help=False)
    _connection_flags(flags)
    main = argparse.ArgumentParser(
        prog="kubectl sits",
        description=DESCRIPTION,
        parents=[flags],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = main.add_subparsers(dest="command", metavar="COMMAND", required=True)
    get = commands.add_parser(
        GET,
        parents=[flags],
        help="show a rollout: variants, pods, SLIs, decisions",
        description="Show a SitsDeployment as a tree: each variant's role, revision, weight, "
        "ready pods and their MIG slices, its SLIs against the policy's thresholds, and the "
        "last decisions with their reasons.",
    )
    get.add_argument("name", metavar="NAME", help="the SitsDeployment")
    get.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="redraw on every change of the object or its pods (Ctrl-C stops)",
    )
    get.add_argument(
        "-o", "--output", choices=OUTPUTS, help="print the SitsDeployment as kubectl get -o would"
    )
    explain = commands.add_parser(
        EXPLAIN,
        parents=[flags],
        help="why the last decision was taken",
        description="Why the last decision was taken: which rule of which SitsPolicy, the "
        "numbers and the period behind it, and what the next step needs.",
    )
    explain.add_argument("name", metavar="NAME", help="the SitsDeployment")
    for command in Command:
        key = command_annotation(command)
        sub = commands.add_parser(
            command.value,
            parents=[flags],
            help=f"{key}: {EFFECTS[command]}",
            description=f"Set the annotation {key} with your own credentials: {EFFECTS[command]}.",
        )
        sub.add_argument("name", metavar="NAME", help="the SitsDeployment")
    return main


def parse(argv: Sequence[str]) -> Invocation:
    """An Invocation, or SystemExit(2) with kubectl-like usage on stderr."""
    p = parser()
    args = p.parse_args(list(argv))
    groups = getattr(args, "as_group", None) or []
    if len(groups) > 1:
        p.error("--as-group: one group only (the plugin sends one Impersonate-Group header)")
    return Invocation(
        command=args.command,
        name=args.name,
        connection=Connection(
            kubeconfig=getattr(args, "kubeconfig", None),
            context=getattr(args, "context", None),
            namespace=getattr(args, "namespace", None),
            as_user=getattr(args, "as_user", None),
            as_group=groups[0] if groups else None,
        ),
        watch=bool(getattr(args, "watch", False)),
        output=getattr(args, "output", None),
    )
