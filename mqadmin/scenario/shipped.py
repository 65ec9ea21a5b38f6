"""The scenarios shipped with the project, and finding one by name (``broker-crash``) or by path."""

from __future__ import annotations

from pathlib import Path

from mqadmin.scenario.values import ScenarioError


def shipped_dir() -> Path:
    """The repository's scenarios/ directory."""
    return Path(__file__).resolve().parent.parent.parent / "scenarios"


def resolve(file: str) -> Path:
    """A path as given, else a shipped scenario by name (``broker-crash`` or ``broker-crash.yaml``).

    A bare name that is neither is a :class:`ScenarioError` saying where the names are listed.
    """
    path = Path(file)
    if path.exists() or path.is_absolute() or "/" in file:
        return path
    for candidate in (shipped_dir() / file, shipped_dir() / f"{file}.yaml"):
        if candidate.exists():
            return candidate
    raise ScenarioError(f"no such scenario: {file!r} is neither a file nor a shipped scenario "
                        "(mqadmin scenario list shows the shipped ones)")
