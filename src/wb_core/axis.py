"""What a sweep axis is: one declaration that the sweep spec, run configs, schema and faces read.

An `Axis` names a setting once: its RunConfig field (one value per point), its SweepSpec field
(the values swept), how typed values are parsed, its help text, label and CLI flag, its default,
whether its values are ordered, what it becomes in the runtime, and the few rules that tie it to
another axis. The workbench's own axes are in axes.py; a backend declares its own settings in
backends/registry.py with the same type. This module imports only the parsers and the errors, so
the registry (a foundation) can use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wb_core.errors import ConfigError
from wb_core.parsing import (
    ints_or_auto,
    parse_bool_list,
    parse_choice,
    parse_positive_ints,
    split_values,
    unique_values,
)

STAGES = ("backend", "variant", "placement", "process", "point")

# What an axis is to the rest of the workbench (`Axis.roles`; an axis has every role unless it says):
ROLES = (
    "serving",  # a setting a deployment carries (the export writes it)
    "compare",  # a column of a comparison of runs
    "identity",  # part of what makes two points the same configuration (planning, the FP32 match)
    "name",  # said in a run's name
)

# Where the dashboard's Sweep tab puts an axis's text box (`Axis.place`), in `name_rank` order there:
PLACES = (
    "main",  # with the sweep's main settings
    "more",  # under "More settings"
    "scenario",  # in the serving scenario
    "",  # no text box: the tab gives it a control of another kind (runtimes, precisions), or none
)


@dataclass(frozen=True)
class Axis:
    """One sweep axis. `parse` turns what a user gives (text, one value or a list) into the checked
    list of values; an error is one sentence naming the axis."""

    name: str  # the RunConfig field: one value per point
    spec: str  # the SweepSpec field: the values swept
    parse: Callable[[Any], list]
    help: str  # shared by the CLI option, the dashboard's tooltip and the schema's description
    label: str  # how the dashboard and messages name it
    flag: str = ""  # the CLI option
    generated_option: bool = True  # False: the CLI declares the option itself, with other duties (--dynamic-size)
    default: Any = None  # RunConfig default: what runs when it is not set; left out of run keys
    sweep_default: tuple = (None,)  # the values a sweep takes when none are given
    text_default: str = "auto"  # the sweep default as the CLI and the dashboard write it
    annotation: str = "int | None"  # the RunConfig field's type
    ordered: bool = False  # values have an order: a search steps to the next one up or down
    choices: tuple = ()  # the values a categorical axis takes (shown by the dashboard)
    becomes: str = ""  # the runtime property or environment variable it sets, in words
    env: tuple[str, ...] = ()  # environment variables a worker sets from it before importing the runtime
    stage: str = "process"  # where it nests: backend, variant (the model file), placement, process, point
    every_backend: bool = False  # read by every backend; otherwise only by those that list it
    searched: bool = True  # a search may move along it (False: a dimension of the workload, measured as given)
    unless: str = ""  # an earlier axis: while that one holds a value, this one stays at its default
    at_most: str = ""  # an earlier axis bounding this one: larger values run as another point, dropped
    at_most_note: str = ""  # the note for a dropped value: {value}, {limit}, {s} (plural of the limit)
    fills_auto: str = ""  # an axis whose auto value (None) takes this axis's value at each point
    unparse: Callable[[Any], Any] | None = None  # a value as a spec file writes it (None: as it is)
    canonical: Callable[[Any], Any] | None = None  # a non-default value as its run key hashes it
    roles: tuple[str, ...] = ROLES  # what it is beyond a key of every point (every axis is one): see ROLES
    column_rank: int | None = None  # its place among the settings every results frame starts with (None: not one)
    legacy_key: bool = False  # hashed by the keys databases written before stable keys used (history: never changes)
    always_shown: bool = False  # a column of every table of runs (else shown only where some run sets it)
    place: str = "more"  # where the dashboard's Sweep tab puts its box: see PLACES
    guide: str = ""  # the line under its box there, in plain words (empty: `help`)
    # How a run's name says a value: {value} (shown as text), {VALUE} (upper case), {s} (plural of the
    # value); empty: the label and the value. `unset_name`: what the name says when the value is unset
    # (empty: nothing); `name_over`: said only above this value; `name_rank`: its place in the name.
    in_name: str = ""
    header: str = ""  # its column's header in tables of results (empty: the label)
    unset_name: str = ""
    name_over: float | None = None
    name_rank: int = 50
    # `words`: a value's words where the name shows it ({value}, {VALUE}); `name_under`: said only
    # below this value; `applies_when`: (an axis, a prefix): it shapes a point only while that axis's
    # value starts so; otherwise it stays at its default and a run's name leaves it out.
    words: tuple[tuple[str, str], ...] = ()
    name_under: float | None = None
    applies_when: tuple[str, str] = ()

    def applies(self, get) -> bool:
        """Whether this axis shapes a point whose settings `get(name)` reads (see `applies_when`)."""
        return not self.applies_when or str(get(self.applies_when[0]) or "").startswith(self.applies_when[1])

    def __post_init__(self):
        if self.stage not in STAGES:
            raise ValueError(f"Axis {self.name}: unknown stage {self.stage!r}; one of {', '.join(STAGES)}.")
        if self.place not in PLACES:
            raise ValueError(f"Axis {self.name}: unknown place {self.place!r}; one of {', '.join(map(repr, PLACES))}.")
        unknown = set(self.roles) - set(ROLES)
        if unknown:
            raise ValueError(f"Axis {self.name}: unknown role {sorted(unknown)[0]!r}; one of {', '.join(ROLES)}.")

    def values(self, given) -> list:
        """The checked values of `given` (the sweep default when None). An error names this axis
        (`ConfigError.field`), so that each face can word it: the CLI as its flag, the dashboard as its label."""
        given = list(self.sweep_default) if given is None else given
        try:
            return self.parse(given)
        except ConfigError as e:
            if e.field:
                raise
            raise ConfigError(e.template, field=self.spec) from None


def whole_numbers(what: str, upper: int, auto: bool = True) -> Callable[[Any], list]:
    """Whole numbers from 1 to `upper` (`1,2,4`); with `auto`, also `auto` for the runtime's choice (None)."""

    def parse(value) -> list:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if auto:
            return ints_or_auto(value, what, upper)
        return parse_positive_ints(value, what, upper)

    return parse


def one_of(what: str, choices: tuple[str, ...] | Callable[[], tuple[str, ...]]) -> Callable[[Any], list]:
    """Names from a fixed list (or a callable giving it), lower-cased, at least one."""

    def parse(value) -> list:
        return parse_choice(value, what, choices() if callable(choices) else choices)

    return parse


def one_of_or_none(what: str, choices: tuple[str, ...], none: str = "none") -> Callable[[Any], list]:
    """Names from a list where `none` (or None) leaves the setting to the runtime."""

    def parse(value) -> list:
        items = split_values(value) if isinstance(value, str) else list(value)
        words = [(none if v is None else str(v).strip().lower()) for v in items] or [none]
        for w in words:
            if w not in (none, *choices):
                raise ConfigError(f"Unknown {what} '{w}'; choose from {', '.join((none, *choices))}.")
        return unique_values([None if w == none else w for w in words])

    return parse


def on_off(what: str) -> Callable[[Any], list]:
    """on, off or auto (True, False or None), from text or a list."""

    def parse(value) -> list:
        if isinstance(value, str):
            return parse_bool_list(value, what)
        out = []
        for v in value if isinstance(value, (list, tuple)) else [value]:
            out += [v] if v is None or isinstance(v, bool) else parse_bool_list(str(v), what)
        return unique_values(out) or [None]

    return parse
