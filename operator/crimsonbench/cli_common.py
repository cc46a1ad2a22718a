"""What every command shares: the consoles, and one way to end on an expected failure
(a message and an exit code, never a traceback)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from crimsonbench.cli_inputs import BadInput
from crimsonbench.errors import CrimsonBenchError, InvalidSpec
from crimsonbench.results.store import NotAResultsDirectory

# Not a terminal (CI logs, a pipe): one message, one line, never wrapped at 80 characters.
console = Console(stderr=True, soft_wrap=not sys.stderr.isatty())
EXIT_BAD_INPUT = 2


class Output(StrEnum):
    """What `report`/`run` print on stdout: the files written, or the final table."""

    PATHS = "paths"
    MARKDOWN = "markdown"
    CSV = "csv"
    JSON = "json"


@contextmanager
def guard() -> Iterator[None]:
    """Map every expected failure to a message and an exit code."""
    try:
        yield
    except InvalidSpec as exc:
        error(str(exc), EXIT_BAD_INPUT)
    except (BadInput, NotAResultsDirectory) as exc:
        error(str(exc), EXIT_BAD_INPUT)
    except CrimsonBenchError as exc:
        error(str(exc), 1)


def error(message: str, code: int) -> None:
    # The message quotes the user's own text (a name, a value, a path): printed literally,
    # never read as rich markup ("[/bold]" in a value, brackets in a mon_host).
    for i, line in enumerate(message.splitlines() or [message]):
        prefix = Text("error:", style="bold red") + " " if i == 0 else Text("       ")
        console.print(prefix + Text(line), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def stdout() -> Console:
    # Not a terminal (CI logs, `| tee`): never wrap or cut a column at 80 characters.
    return Console() if sys.stdout.isatty() else Console(width=400, soft_wrap=True)


def literal_error(message: str, code: int) -> NoReturn:
    """_error for messages that quote file contents: no markup is read in them."""
    for i, line in enumerate(message.splitlines() or [message]):
        console.print(("error: " if i == 0 else "       ") + line, markup=False,
                      highlight=False, soft_wrap=True)  # fmt: skip
    raise typer.Exit(code)


def kube_api(command: str, kubeconfig: Path | None, context: str | None) -> Any:
    """A kubernetes ApiClient from the kubeconfig (default: $KUBECONFIG or ~/.kube/config);
    BadInput naming the command when the client is not installed or the file unusable."""
    try:
        from kubernetes import config
    except ImportError as exc:
        raise BadInput(f"{command} needs the kubernetes client ({exc.name}): "
                       "pip install 'crimsonbench[operator]'") from exc  # fmt: skip
    try:
        return config.new_client_from_config(
            config_file=str(kubeconfig) if kubeconfig else None, context=context
        )
    except (config.ConfigException, OSError) as exc:
        raise BadInput(f"cannot load the kubeconfig: {exc}") from exc
