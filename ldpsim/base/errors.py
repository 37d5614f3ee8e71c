"""User-facing errors.

Every problem a user can fix (a bad scenario, parameter, data file or plugin)
is an :class:`LdpsimError`. Its message is one line that names the field and
the fix; the CLI prints it and exits with code 2, without a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class LdpsimError(Exception):
    """A problem the user can fix. ``str(err)`` is a one-line explanation."""

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None):
        self.problem = message
        self.field = field
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"{self.field}: {self.problem}" if self.field else self.problem
        if self.hint:
            text = f"{text}; {self.hint}"
        return " ".join(text.split())  # always one line

    def __reduce__(self) -> tuple:
        # Rebuilt from its parts, not from the rendered message: errors cross process boundaries (pool workers).
        return (_rebuild, (type(self), self.problem, self.field, self.hint))

    def at(self, prefix: str) -> LdpsimError:
        """The same error, located under ``prefix`` (e.g. the scenario field)."""
        field = f"{prefix}.{self.field}" if self.field else prefix
        return type(self)(self.problem, field=field, hint=self.hint)


def _rebuild(cls: type[LdpsimError], problem: str, field: str | None, hint: str | None) -> LdpsimError:
    return cls(problem, field=field, hint=hint)


class ParameterError(LdpsimError):
    """A plugin parameter has the wrong type or value."""


class ScenarioError(LdpsimError):
    """A scenario file is malformed or inconsistent."""


class DataError(LdpsimError):
    """A data file is missing, unreadable or does not fit the domain."""


class PluginError(LdpsimError):
    """A plugin is unknown, broken, or clashes with another plugin."""


class ContractError(PluginError, ValueError):
    """A plugin broke its contract: a hook returned something invalid, or raised.

    A ValueError too, so code that checked hooks' results with ``except ValueError`` keeps working.
    """

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None):
        super().__init__(
            message, field=field, hint=hint or "fix the plugin (ldpsim.testing checks its contract) or leave it out"
        )


class EstimationError(LdpsimError):
    """Observations cannot be explained by the declared mechanisms."""


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate most similar to ``word``, if any is close enough."""
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.5)
    return matches[0] if matches else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """A hint naming the closest candidate, or listing the choices."""
    candidates = sorted(candidates)
    best = closest(word, candidates)
    if best is not None:
        return f"did you mean '{best}'?"
    return "choose one of: " + ", ".join(candidates)


def a_or_an(word: str) -> str:
    """``word`` with its indefinite article: "an integers", "a grid"."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
