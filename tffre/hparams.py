"""Declared settings: one declaration per hyperparameter or option, from which everything else comes.

An algorithm's hyperparameters, a task's options and a run's settings are each
a frozen dataclass whose fields are declared with :func:`param`: the default,
the value parser (type and range), the help text, the paper reference and the
aliases. From that one declaration come

* the validation (:meth:`Params.resolve`: unknown names, types and ranges,
  one-line errors naming the setting),
* the command-line flags and config-file keys (:mod:`tffre.config` reads
  :meth:`Params.declarations`),
* and the typed object the code reads (``hparams.learning_rate``).

Aliases keep a paper's own name usable where two papers give one symbol two
meanings: ``mu`` is FedProx's proximal coefficient (FLCMC Eq. 21-22) and
FedCMC's contrastive weight (Eq. 15), so they are ``prox_mu`` and
``contrastive_weight``, and ``mu`` sets whichever of them the algorithm takes.

Nothing here imports TensorFlow: ``--help`` and argument errors answer at once.
"""

import dataclasses
import math
from typing import Any, Callable, Optional, Tuple

KEY = "tffre"   # the dataclass field metadata key of a declaration


# --- value parsers: each takes a string (command line) or a value (config file, Python) ---

def _int(value, minimum):
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"expected a whole number, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a whole number, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"expected a number >= {minimum}, got {number}")
    return number


def positive_int(value):
    """A whole number >= 1."""
    return _int(value, 1)


def non_negative_int(value):
    """A whole number >= 0."""
    return _int(value, 0)


def seed(value, bits=32):
    """A seed: a whole number in [0, 2**bits - 1] (numpy's RandomState range by default)."""
    number = _int(value, 0)
    if number > 2 ** bits - 1:
        raise ValueError(f"expected a number <= {2 ** bits - 1}, got {number}")
    return number


def secret_seed(value):
    """A seed in [0, 2**63 - 1] (differential privacy's)."""
    return seed(value, 63)


def _float(value):
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None


def number(value):
    """Any finite number."""
    out = _float(value)
    if not math.isfinite(out):
        raise ValueError(f"expected a finite number, got {value}")
    return out


def non_negative_float(value):
    """A finite number >= 0."""
    out = _float(value)
    if not (math.isfinite(out) and out >= 0):
        raise ValueError(f"expected a finite number >= 0, got {value}")
    return out


def positive_float(value):
    """A finite number > 0."""
    out = _float(value)
    if not (math.isfinite(out) and out > 0):
        raise ValueError(f"expected a finite number > 0, got {value}")
    return out


def positive_floats(value):
    """A comma-separated list (or a sequence) of distinct finite numbers > 0: a tuple."""
    items = value.split(",") if isinstance(value, str) else list(value)
    items = [i for i in items if str(i).strip()]
    out = tuple(positive_float(i) for i in items)
    if not out or len(set(out)) != len(out):
        raise ValueError(f"expected distinct comma-separated numbers > 0, got {value!r}")
    return out


def _within(value, low_open, high_open):
    """A finite number in the interval between 0 and 1, each end open or closed."""
    out = _float(value)
    ok = math.isfinite(out) and (0 < out if low_open else 0 <= out) and \
        (out < 1 if high_open else out <= 1)
    if not ok:
        raise ValueError(f"expected a number in {'(' if low_open else '['}0, 1"
                         f"{')' if high_open else ']'}, got {value}")
    return out


def fraction(value):
    """A number in [0, 1)."""
    return _within(value, False, True)


def unit_interval(value):
    """A number in (0, 1]."""
    return _within(value, True, False)


def threshold_or_dev(value):
    """A decision threshold in (0, 1), or "dev": tuned on the dev split (document RE, a binary
    relation set)."""
    if str(value).strip().lower() == "dev":
        return "dev"
    return _within(value, True, True)


def probability(value):
    """A number in [0, 1]."""
    return _within(value, False, False)


def open_unit_interval(value):
    """A number in (0, 1)."""
    return _within(value, True, True)


def boolean(value):
    """true/false (config files); a bare flag on the command line."""
    if isinstance(value, bool):
        return value
    text_value = str(value).strip().lower()
    if text_value in ("1", "true", "yes", "on"):
        return True
    if text_value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def text(value):
    """Any non-empty string."""
    if value is None or not str(value).strip():
        raise ValueError("expected a non-empty value")
    return str(value)


def existing_folder(value):
    """The path of a folder that exists."""
    import os
    path = text(value)
    if not os.path.isdir(path):
        raise ValueError(f"no such folder: {path}")
    return path


def existing_file(value):
    """The path of a file that exists."""
    import os
    path = text(value)
    if not os.path.isfile(path):
        raise ValueError(f"no such file: {path}")
    return path


def choice(*choices):
    """A parser accepting one of ``choices``."""
    def parse(value):
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(map(str, choices))}, got {value!r}")
        return value
    parse.choices = choices
    parse.__name__ = "one of " + "/".join(map(str, choices))
    return parse


def subset_of(*choices):
    """A parser of a comma-separated list (or a sequence) of distinct ``choices``: a tuple."""
    def parse(value):
        items = value.split(",") if isinstance(value, str) else list(value)
        items = tuple(str(i).strip() for i in items if str(i).strip())
        wrong = [i for i in items if i not in choices]
        if wrong or not items or len(set(items)) != len(items):
            raise ValueError(f"expected distinct comma-separated names among "
                             f"{', '.join(choices)}, got {value!r}")
        return items
    parse.__name__ = "names among " + "/".join(choices)
    return parse


def optional(parser, none_words=("none",)):
    """``parser``, or None for None or one of ``none_words`` (e.g. ``--clip-norm none``)."""
    def parse(value):
        if value is None or str(value).strip().lower() in none_words:
            return None
        return parser(value)
    parse.choices = getattr(parser, "choices", None)
    parse.__name__ = getattr(parser, "__name__", "value")
    return parse


def num_iters(value):
    """A cap on local steps: a whole number >= 1, or 0 / "none" for no cap (None)."""
    if value is None or str(value).strip().lower() in ("0", "none"):
        return None
    return _int(value, 1)


# --- declarations ---

@dataclasses.dataclass(frozen=True)
class Declaration:
    """What one setting is, besides its name and default (see :func:`param`)."""
    parse: Callable[[Any], Any]
    help: str
    paper: str = ""
    aliases: Tuple[str, ...] = ()
    flag: bool = False            # a switch on the command line (--x / --no-x)
    persistent: bool = True       # part of a run's identity (saved, compared on --resume)
    resumable: bool = False       # may change on --resume (does not alter what a round computes)
    cli: bool = True              # offered as a flag and config key

    def describe(self):
        """The help text with the paper reference."""
        return f"{self.help} ({self.paper})" if self.paper else self.help


def param(default, parse, help, *, paper="", aliases=(), flag=False, persistent=True,
          resumable=False, cli=True):
    """A dataclass field declaring one setting: its default, parser, help and paper reference.

    ``parse`` turns a command-line string or a Python value into the setting's
    value, raising ValueError for a bad one (see the parsers above). ``aliases``
    are other names the setting answers to (a paper's symbol, e.g. ``mu``).
    """
    return dataclasses.field(default=default, metadata={KEY: Declaration(
        parse, help, paper, tuple(aliases), flag, persistent, resumable, cli)})


def redefault(base, name, default):
    """A field redeclaring ``base``'s setting ``name`` with another ``default`` (in a subclass)."""
    return dataclasses.field(default=default, metadata=base.__dataclass_fields__[name].metadata)


@dataclasses.dataclass(frozen=True)
class Field:
    """One declared setting of a :class:`Params` class: name, default and declaration."""
    name: str
    default: Any
    declaration: Declaration
    owner: str = ""

    @property
    def cli(self):
        """The command-line flag: ``--name-with-dashes``."""
        return "--" + self.name.replace("_", "-")


class ParamsError(ValueError):
    """A setting that does not exist or has a bad value; the message names it."""


@dataclasses.dataclass(frozen=True)
class Params:
    """Base of every declared-settings dataclass (frozen; fields made with :func:`param`).

    Subclass it with ``@dataclasses.dataclass(frozen=True)``; override :meth:`check` for
    checks across fields.
    """

    @classmethod
    def declarations(cls):
        """The :class:`Field` of each declared setting, in declaration order."""
        out = []
        for f in dataclasses.fields(cls):
            if KEY in f.metadata:
                out.append(Field(f.name, f.default, f.metadata[KEY], cls.__name__))
        return out

    @classmethod
    def names(cls):
        """The declared setting names."""
        return tuple(f.name for f in cls.declarations())

    @classmethod
    def aliases(cls):
        """{alias: [setting names]} of this class."""
        out = {}
        for f in cls.declarations():
            for alias in f.declaration.aliases:
                out.setdefault(alias, []).append(f.name)
        return out

    @classmethod
    def resolve(cls, values=None, *, owner=None, **kwargs):
        """An instance from ``values`` (names or aliases; unset or None: the default).

        Each value is parsed by its declaration; unknown names raise
        :class:`ParamsError` listing the valid ones, an alias that would set two
        settings raises too, and :meth:`check` runs last. ``owner`` names the
        algorithm or task in the messages.
        """
        given = dict(values or {}, **kwargs)
        label = f"{owner}: " if owner else ""
        fields = {f.name: f for f in cls.declarations()}
        aliases = cls.aliases()
        chosen = {}
        for key, value in given.items():
            name = key
            if key not in fields:
                targets = aliases.get(key)
                if targets is None:
                    raise ParamsError(f"{label}unknown setting {key!r}; valid: "
                                      f"{', '.join(fields)}")
                if len(targets) > 1:
                    raise ParamsError(f"{label}{key} is ambiguous here: give "
                                      f"{' or '.join(targets)}")
                name = targets[0]
                if name in given and given[name] is not None and value is not None:
                    raise ParamsError(f"{label}give {key} or {name}, not both")
            if value is None and name in chosen:
                continue
            chosen[name] = value
        parsed = {}
        for name, value in chosen.items():
            parse = fields[name].declaration.parse
            if value is None:
                # None is the value of a setting that takes it (num_iters: no cap), else the
                # default (callers may pass None for "unset").
                try:
                    parsed[name] = parse(None)
                except (TypeError, ValueError):
                    pass
                continue
            try:
                parsed[name] = parse(value)
            except ValueError as err:
                raise ParamsError(f"{label}{name}: {err}") from None
        instance = cls(**parsed)
        try:
            instance.check()
        except ValueError as err:
            raise ParamsError(f"{label}{err}") from None
        return instance

    @classmethod
    def subset(cls, values):
        """The items of ``values`` this class declares (by name or alias)."""
        known = set(cls.names()) | set(cls.aliases())
        return {k: v for k, v in values.items() if k in known}

    def check(self):
        """Checks across fields; raise ValueError with a one-line message. Default: none."""

    def replace(self, **changes):
        """A copy with ``changes`` applied (parsed and checked)."""
        return type(self).resolve({**self.asdict(), **changes})

    def asdict(self):
        """{name: value} of every field."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def compose(name, *classes, defaults=None):
    """A frozen :class:`Params` dataclass with the fields of ``classes`` and new ``defaults``.

    A registry row's hyperparameters are its definition's, its local optimizer's
    and its aggregator's; a row may change their defaults (FedCMC-minor:
    ``vectors="minor"``). A name declared by two classes must be declared alike.
    """
    seen = {}
    for cls in classes:
        for f in cls.declarations():
            if f.name in seen and not same_parser(seen[f.name].declaration.parse,
                                                  f.declaration.parse):
                raise TypeError(f"{name}: {f.name} is declared differently by "
                                f"{seen[f.name].owner} and {f.owner}")
            seen.setdefault(f.name, f)
    bases = tuple(dict.fromkeys(classes))
    composed = dataclasses.make_dataclass(name, [], bases=bases[::-1], frozen=True)
    unknown = sorted(set(defaults or {}) - set(seen))
    if unknown:
        raise TypeError(f"{name}: defaults for undeclared settings {', '.join(unknown)}")
    if defaults:
        fields = []
        for key, value in defaults.items():
            f = seen[key]
            fields.append((key, Any, dataclasses.field(default=value,
                                                       metadata={KEY: f.declaration})))
        composed = dataclasses.make_dataclass(name, fields, bases=(composed,), frozen=True)

    def check(self):
        for cls in bases:   # every part's own checks, whatever the method resolution order
            cls.check(self)
    composed.check = check
    composed.__doc__ = f"The hyperparameters of {name}: " + ", ".join(
        f.name for f in composed.declarations())
    return composed


def same_parser(a, b):
    """True when two declarations parse alike (the same parser, or choices of the same values)."""
    choices = getattr(a, "choices", None)
    return a is b or (choices is not None and choices == getattr(b, "choices", None))


def union(groups, *, strict=True):
    """{name: [Field, ...]}: every declared setting of ``groups`` (Params classes), by name.

    The command line offers each name once. With ``strict`` (hyperparameters: one
    flag's value goes to every algorithm of a run) one name must parse alike
    wherever it is declared, else TypeError; defaults and helps may differ.
    """
    out = {}
    for cls in groups:
        for f in cls.declarations():
            fields = out.setdefault(f.name, [])
            if strict and fields and not same_parser(fields[0].declaration.parse,
                                                     f.declaration.parse):
                raise TypeError(f"{f.name} is declared with different types by "
                                f"{fields[0].owner} and {f.owner}")
            fields.append(f)
    return out

