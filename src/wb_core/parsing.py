"""Parsers of the values users type for sweep settings (CLI flags, widgets, YAML).

Each turns text or a list into checked values, or raises one ConfigError sentence naming the
setting. The sweep axes (axes.py) and the backends' own settings (backends/registry.py) are built
from these, so this module imports nothing but the errors.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from wb_core.errors import ConfigError, setting
from wb_core.precisions import NAMES as PRECISIONS  # noqa: F401 - declared there, read here by the parsers

MAX_BATCH = 65536
MAX_THREADS = 4096
MAX_POINTS = 20000  # configurations one sweep may plan
MAX_SPEC_BYTES = 1 << 20  # a sweep spec file larger than this is refused unread
MAX_YAML_ALIASES = 100  # YAML aliases (*name) one spec may use: an alias bomb stops here
MAX_TIMEOUT_S = 7 * 24 * 3600.0
INT64 = (-(2**63), 2**63 - 1)


def check_number(value, name: str, low: float, high: float, *, integer: bool = False,
                 low_open: bool = False) -> float | int:
    """`value` as a finite number in [low, high] (or (low, high] with `low_open`), else a ConfigError.

    Booleans, strings, NaN and infinities are refused: every numeric setting a user gives passes here.
    """
    import math

    def fmt(x) -> str:
        return str(x) if isinstance(x, int) else f"{x:g}"

    kind = "a whole number" if integer else "a number"
    bound = f"{'above' if low_open else 'at least'} {fmt(low)} and at most {fmt(high)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be {kind} {bound}; got {value!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number {bound}; got {value!r}.")
    if integer and not isinstance(value, int):
        if not float(value).is_integer():
            raise ConfigError(f"{name} must be a whole number {bound}; got {value!r}.")
        value = int(value)
    if value < low or (low_open and value == low) or value > high:
        raise ConfigError(f"{name} must be {kind} {bound}; got {fmt(value)}.")
    return value


def check_timeout(timeout_s, name: str = setting("timeout_s", "The worker timeout")) -> float | None:
    """A worker inactivity timeout in seconds (None: the default); NaN and infinity are refused."""
    if timeout_s is None:
        return None
    return float(check_number(timeout_s, f"{name} (seconds a silent worker is given)", 0, MAX_TIMEOUT_S,
                              low_open=True))


def split_values(text: str | Iterable | None) -> list[str]:
    """Split a sweep flag into values: `a,b` or, when a value holds commas itself, `a;b`."""
    if text is None:
        return []
    if not isinstance(text, str):
        return [str(v).strip() for v in text if str(v).strip()]
    sep = ";" if ";" in text else ","
    return [v.strip() for v in text.split(sep) if v.strip()]


# Suffixes users type for large counts and rates: 1k, 2.5M, 1G (m is left out: milli or mega?).
NUMBER_SUFFIXES = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
NUMBER_FORMS = "a number such as 1000, 1e3, 1k or 2.5M"


def parse_number(text, name: str) -> float:
    """A number as users type it: `1000`, `1_000`, `1e3`, `1k`, `2.5M`; anything else is one sentence."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    t = str(text).strip().replace("_", "")
    scale = 1.0
    if t and t[-1] in NUMBER_SUFFIXES:
        t, scale = t[:-1], NUMBER_SUFFIXES[t[-1]]
    try:
        return float(t) * scale
    except ValueError:
        raise ConfigError(f"{name} must be {NUMBER_FORMS}; got '{text}'.") from None


def parse_choice(text, name: str, choices: Iterable[str]) -> list[str]:
    choices = tuple(choices)
    values = [v.lower() for v in split_values(text)]
    if not values:
        raise ConfigError(f"{name} needs at least one value; choose from {', '.join(choices)}.")
    for v in values:
        if v not in choices:
            raise ConfigError(f"Unknown {name} '{v}'; choose from {', '.join(choices)}.")
    return unique_values(values)


def parse_positive_ints(text, name: str, upper: int, allow_auto: bool = False) -> list[int | None]:
    """Parse `1,2,4` (or `auto` for the runtime's default when allowed) into a list."""
    out: list[int | None] = []
    values = split_values(text)
    if not values:
        raise ConfigError(f"{name} needs at least one value.")
    for v in values:
        if allow_auto and v.lower() in ("auto", "default", "none"):
            out.append(None)
            continue
        try:
            n = int(v)
        except ValueError:
            hint = " or 'auto'" if allow_auto else ""
            raise ConfigError(f"{name} must be whole numbers{hint}; got '{v}'.") from None
        if n < 1:
            raise ConfigError(f"{name} must be at least 1; got {n}.")
        if n > upper:
            raise ConfigError(f"{name} of {n} is beyond the supported maximum of {upper}.")
        out.append(n)
    return unique_values(out)


def parse_bool_list(text, name: str) -> list[bool | None]:
    table = {"on": True, "true": True, "yes": True, "1": True,
             "off": False, "false": False, "no": False, "0": False,
             "auto": None, "default": None}
    out = []
    for v in split_values(text):
        if v.lower() not in table:
            raise ConfigError(f"{name} takes on, off or auto; got '{v}'.")
        out.append(table[v.lower()])
    return unique_values(out) or [None]


def available_cpus() -> list[int]:
    """CPUs this process may run on (respects an affinity set by a container or taskset)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def parse_cores(text: str, cpus: list[int] | None = None) -> tuple[int, ...] | None:
    """Parse one pinning value: `none`, `all`, `firstK`, or a list like `0`, `0-3`, `0+2`, `0-1+4`.

    Returns None for no pinning, else the sorted CPU ids. Raises ConfigError for CPUs that the
    machine does not have.
    """
    cpus = available_cpus() if cpus is None else cpus
    t = str(text).strip().lower().replace(" ", "")
    if t in ("none", "", "no", "off"):
        return None
    if t == "all":
        return tuple(cpus)
    m = re.fullmatch(r"first:?(\d+)", t)
    if m:
        k = int(m.group(1))
        if k < 1:
            raise ConfigError(f"Cores '{text}': the number of cores must be at least 1.")
        if k > len(cpus):
            raise ConfigError(
                f"Cores '{text}' asks for {k} cores but this machine offers {len(cpus)} "
                f"(CPUs {fmt_cpus(cpus)})."
            )
        return tuple(cpus[:k])
    ids: set[int] = set()
    for part in re.split(r"[+,]", t):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ConfigError(
                f"Cores '{text}' is not a core list; use none, all, firstK, or ids like 0, 0-3, 0+2."
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ConfigError(f"Cores '{text}': the range {lo}-{hi} runs backwards.")
        if hi - lo > 100000:
            raise ConfigError(f"Cores '{text}': the range {lo}-{hi} is absurdly large.")
        ids.update(range(lo, hi + 1))
    missing = sorted(ids - set(cpus))
    if missing:
        raise ConfigError(
            f"Cores '{text}' names CPU {fmt_cpus(missing)}, which this machine does not offer "
            f"(available: {fmt_cpus(cpus)})."
        )
    return tuple(sorted(ids))


def format_cores(cores: tuple[int, ...] | None) -> str:
    """Inverse of parse_cores for display and storage: `none`, `0`, `0-3`, `0+2`."""
    if not cores:
        return "none"
    return fmt_cpus(list(cores), sep="+")


def fmt_cpus(ids: list[int], sep: str = ",") -> str:
    ids = sorted(ids)
    parts, start = [], None
    for i, c in enumerate(ids):
        if start is None:
            start = c
        if i + 1 == len(ids) or ids[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return sep.join(parts)


def unique_values(values: list) -> list:
    seen, out = set(), []
    for v in values:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out



def parse_shape_map(text) -> dict[str, tuple[int, ...]]:
    """`image=1x3x224x224` (several inputs joined by ';') as {name: shape}; a mapping passes through, checked."""
    if isinstance(text, dict):
        items = [(str(k), v) for k, v in text.items()]
    else:
        items = []
        for part in str(text).split(";"):
            if not part.strip():
                continue
            name, eq, dims = part.strip().partition("=")
            if not eq or not name.strip():
                raise ConfigError(f"Shape '{part.strip()}' must look like NAME=1x3x224x224.")
            try:
                items.append((name.strip(), tuple(int(d) for d in dims.lower().split("x") if d.strip())))
            except ValueError:
                raise ConfigError(f"Shape '{part.strip()}' must list whole numbers, like NAME=1x3x224x224.") from None
    if not items:
        raise ConfigError("A shape of the shape axis names no input; give NAME=1x3x224x224.")
    out = {}
    for name, dims in items:
        dims = tuple(dims)
        if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d == 0 or d < -1 or d > 10**7
                           for d in dims):
            raise ConfigError(f"Shape {name}={'x'.join(map(str, dims))} has a dimension that is zero, negative or "
                              f"absurd.")
        out[name] = dims
    return out


def format_shape_map(shapes: dict[str, tuple[int, ...]]) -> str:
    return ";".join(f"{k}={'x'.join(map(str, v))}" for k, v in sorted(shapes.items()))



def parse_seq_lens(text) -> list[int | None]:
    """`--dynamic-size 32,128,384`: sizes of the dynamic (sequence) dimensions, one sweep axis."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return [None]
    if isinstance(text, int):
        text = str(text)
    return parse_positive_ints(text, setting("seq_lens", "Sequence length"), 10**7)



def parse_repeats(value) -> int:
    """Rounds per configuration: a whole number of at least 1."""
    try:
        n = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        n = None
    if n is None or n < 1 or str(value).strip() not in (str(n), f"+{n}"):
        raise ConfigError(f"Repeats must be a whole number of at least 1 (rounds per configuration); got {value!r}.")
    if n > 1000:
        raise ConfigError(f"Repeats of {n} is beyond the supported maximum of 1000.")
    return n



MIN_RATE = 0.01  # requests/s: slower arrivals send too few requests to measure within any time limit


def parse_rates(values) -> list[float | None]:
    """Arrival rates in requests/s for the server scenario; `none` is the closed loop."""
    out: list[float | None] = []
    for v in (split_values(values) if isinstance(values, str) else (values or [None])):
        if v is None or str(v).lower() in ("none", "closed", ""):
            out.append(None)
            continue
        r = parse_number(v, "Rate (requests per second)")
        if not (MIN_RATE <= r < 1e7):
            raise ConfigError(f"Rate must be at least {MIN_RATE:g} and below 10 million requests/s; got {v}.")
        out.append(r)
    return unique_values(out) or [None]


def ints_or_auto(values, name, upper) -> list[int | None]:
    if isinstance(values, str):
        return parse_positive_ints(values, name, upper, allow_auto=True)
    out = []
    for v in values:
        if v is None:
            out.append(None)
        else:
            out.extend(parse_positive_ints(str(v), name, upper, allow_auto=True))
    return unique_values(out) or [None]



def parse_hosts(hosts) -> list[str] | None:
    """The hosts a fleet study is limited to, from `host-a,host-b` or a list; None (not given) is every host.

    A list given but empty (`--hosts ''`, `hosts=[]`) is refused: read as "every host" it would run
    the study on hosts the user meant to leave out."""
    if hosts is None:
        return None
    if isinstance(hosts, str):
        names = [h.strip() for h in hosts.split(",")]
    elif isinstance(hosts, (list, tuple)) and all(isinstance(h, str) for h in hosts):
        names = [h.strip() for h in hosts]
    else:
        raise ConfigError(f"The hosts ({setting('hosts', 'Hosts')}) must be names separated by commas, e.g. "
                          f"host-a,host-b, or a list of names; got {hosts!r}.")
    names = [n for n in names if n]
    if not names:
        raise ConfigError(f"The host list ({setting('hosts', 'Hosts')}) is empty; name at least one host, e.g. "
                          f"host-a,host-b, or leave it out to use every host of the cluster.")
    return list(dict.fromkeys(names))
