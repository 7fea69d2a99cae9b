"""The one flag vocabulary of ``python -m tffre run``, config files, and argument checks.

Every flag comes from a declaration (:mod:`tffre.hparams`), made once where the
setting belongs:

* the run's settings: :class:`tffre.runner.RunSettings`;
* each task's options: its module in :mod:`tffre.tasks` (datasets, models,
  defaults);
* each algorithm's hyperparameters: its registry row (:mod:`tffre.registry`).

This module adds ``--dataset``, ``--algorithm``, ``--model`` and ``--config``,
and holds no dataset or algorithm list. A name declared by several tasks or
algorithms is one flag (its help lists who takes it); an alias (``--mu``,
``--temperature``: a paper's symbol) sets the setting each algorithm declares
under it. The same names (with ``_`` or ``-``) are the keys of a ``--config``
file (JSON, or YAML when the file ends in .yaml/.yml). Values are taken, lowest
first, from: the declarations' defaults, the task's (some per dataset), an
example's preset, the config file, and the command line.

Nothing here imports TensorFlow: ``--help`` and every argument error answer
at once, in one line, before any data is read.
"""

import argparse
import dataclasses
import functools
import json
import os
import tempfile
from typing import Callable, Tuple

from tffre import registry, tasks
from tffre.errors import ConfigError
from tffre.hparams import (ParamsError, boolean, choice, non_negative_float,  # noqa: F401
                           num_iters, positive_int, same_parser, seed, text, union)
from tffre.jsonio import json_safe, read_json_object
from tffre.runner.run_settings import RunSettings
from tffre.tasks import SAMPLE, RunConfig  # noqa: F401  (SAMPLE re-exported)

RESULT_FILES = ("metrics.csv", "summary.json", "config.json")


def algorithm_list(value):
    """Comma-separated registry names (or a list), each checked against the registry."""
    names = value if isinstance(value, (list, tuple)) else str(value).split(",")
    names = [str(n).strip() for n in names if str(n).strip()]
    if not names:
        raise ValueError("give at least one algorithm name")
    return ",".join(registry.get_spec(n).name for n in names)


@dataclasses.dataclass(frozen=True)
class Flag:
    """One command-line flag and config key, and the declarations behind it.

    ``kind`` is "top" (dataset, algorithm, model), "run", "task", "algorithm" or "alias";
    ``owners`` the tasks or algorithms that declare it; ``fields`` their declarations.
    """
    name: str
    kind: str
    help: str
    parse: Callable = None
    flag: bool = False
    fields: Tuple = ()
    owners: Tuple[str, ...] = ()

    @property
    def cli(self):
        """The flag: ``--name-with-dashes``."""
        return "--" + self.name.replace("_", "-")

    @property
    def choices(self):
        """The values it takes where they are a list (every declaration's), else None."""
        parsers = [f.declaration.parse for f in self.fields] or [self.parse]
        lists = [getattr(p, "choices", None) for p in parsers]
        if any(c is None for c in lists):
            return None
        return tuple(dict.fromkeys(c for choices in lists for c in choices))


def _owners_help(fields, owners, scope):
    """One help text for a setting that several tasks or algorithms (``owners``) declare: each
    distinct help once, the most common default, and the owners whose default differs."""
    helps, defaults = {}, {}
    for f, owner in zip(fields, owners):
        helps.setdefault(f.declaration.describe(), []).append(owner)
        defaults.setdefault(repr(f.default), []).append(owner)
    text_ = next(iter(helps)) if len(helps) == 1 else "; ".join(
        f"{', '.join(dict.fromkeys(o))}: {h}" for h, o in helps.items())
    common = max(defaults, key=lambda d: len(defaults[d]))
    shown = [] if common in ("None", "False") else [common]
    shown += [f"{', '.join(dict.fromkeys(o))} {d}" for d, o in defaults.items() if d != common]
    if shown:
        text_ += f" (default {'; '.join(shown)})"
    return f"{text_} [{scope}]" if scope else text_


@functools.lru_cache(maxsize=None)
def vocabulary():
    """{name: :class:`Flag`} of every option, built from the declarations."""
    all_tasks = tasks.tasks()
    flags = {
        "dataset": Flag("dataset", "top", "the dataset: " + "; ".join(
            f"{', '.join(t.datasets)} ({t.description})" for t in all_tasks),
            choice(*tasks.datasets())),
        "algorithm": Flag("algorithm", "top", "comma-separated registry names: "
                          + ",".join(registry.valid_algorithm_names()), algorithm_list),
        "model": Flag("model", "top", "the model: " + "; ".join(
            f"{'/'.join(t.models)} ({t.name}, default {t.models[0]})" for t in all_tasks),
            choice(*dict.fromkeys(m for t in all_tasks for m in t.models))),
    }
    for f in RunSettings.declarations():
        flags[f.name] = Flag(f.name, "run", f.declaration.describe() + (
            "" if f.default is None or f.declaration.flag else f" (default {f.default})"),
            f.declaration.parse, f.declaration.flag, (f,))
    # A task option: parsed with the dataset's task's declaration once the dataset is known
    # (tasks may offer different choices under one name: --partition).
    for name, fields in union([t.Options for t in all_tasks], strict=False).items():
        owners = [t for t in all_tasks if name in t.Options.names()]
        datasets = tuple(d for t in owners for d in t.datasets)
        flags[name] = Flag(name, "task", _owners_help(
            fields, [t.name for t in owners], "--dataset " + "/".join(datasets)),
            fields[0].declaration.parse, fields[0].declaration.flag, tuple(fields), datasets)
    # A hyperparameter: one flag for every algorithm declaring it (union checks that they
    # parse alike: its value goes to each of them).
    specs = [registry.get_spec(n) for n in registry.valid_algorithm_names()]
    classes = {spec.name: spec.hparams_class() for spec in specs}
    aliases = {}
    for name, fields in union(classes.values()).items():
        owners = tuple(n for n, cls in classes.items() if name in cls.names())
        per_owner = [next(f for f in classes[n].declarations() if f.name == name)
                     for n in owners]
        scope = "" if len(owners) == len(classes) else "algorithms: " + ", ".join(owners)
        flags[name] = Flag(name, "algorithm", _owners_help(per_owner, owners, scope),
                           fields[0].declaration.parse, fields[0].declaration.flag,
                           tuple(per_owner), owners)
        for alias in fields[0].declaration.aliases:
            aliases.setdefault(alias, {})[name] = owners
    for alias, targets in aliases.items():
        parsers = [flags[t].parse for t in targets]
        if not all(same_parser(parsers[0], p) for p in parsers) or alias in flags:
            raise TypeError(f"alias {alias} stands for settings of different types, or is "
                            f"also a setting's name")
        flags[alias] = Flag(alias, "alias", "the papers' name: sets " + "; ".join(
            f"--{t.replace('_', '-')} of {', '.join(o)}" for t, o in targets.items()),
            parsers[0], False, (), tuple(o for v in targets.values() for o in v))
    return flags


def add_run_arguments(parser):
    """Adds every option to an argparse parser (defaults suppressed, so given flags are known).

    Values stay strings here; :func:`resolve` parses them with their declarations, so
    that an error names the flag in one line.
    """
    parser.add_argument("--config", help="JSON or YAML file whose keys are these option names")
    for flag in vocabulary().values():
        if flag.flag and flag.name.startswith("no_"):
            parser.add_argument(flag.cli, action="store_true", default=argparse.SUPPRESS,
                                help=flag.help)
        elif flag.flag:
            # --x and --no-x: an example's preset may switch a flag on, the user off again.
            parser.add_argument(flag.cli, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=flag.help)
        else:
            choices = flag.choices
            parser.add_argument(flag.cli, default=argparse.SUPPRESS, help=flag.help,
                                metavar=None if choices is None else "{" + ",".join(
                                    map(str, choices)) + "}")


def read_config_file(path):
    """Reads a JSON or YAML config file into {option name: raw value}.

    Raises ConfigError naming the file and the key for an unknown key.
    """
    if not os.path.isfile(path):
        raise ConfigError(f"--config: no such file: {path}")
    with open(path, encoding="utf-8") as f:
        content = f.read()
    try:
        if path.lower().endswith((".yaml", ".yml")):
            import yaml
            raw = yaml.safe_load(content)
        else:
            raw = json.loads(content)
    except Exception as err:  # json and yaml raise their own types
        raise ConfigError(f"{path}: not valid {'YAML' if path.endswith(('yaml', 'yml')) else 'JSON'}: "
                          f"{str(err).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of option names to values")
    known = {n for n in vocabulary() if n not in ("resume", "overwrite")}
    values = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise ConfigError(f"{path}: unknown option {key!r}; valid: {', '.join(sorted(known))}")
        values[name] = value
    return values


class _Layers:
    """The values chosen, and where each came from (for messages)."""

    def __init__(self, preset, config_path, given):
        self.values, self.source = {}, {}
        layers = [("preset", preset or {})]
        if config_path:
            layers.append((config_path, read_config_file(config_path)))
        layers.append(("command line", given))
        vocab = vocabulary()
        for source, layer in layers:
            for key, value in layer.items():
                name = str(key).replace("-", "_")
                if name not in vocab:
                    raise ConfigError(f"{source}: unknown option {key!r}")
                self.values[name], self.source[name] = value, source
        self.given = {k for k, s in self.source.items() if s == "command line"}

    def where(self, name):
        """How a message names option ``name``: its flag, or its file and key."""
        source = self.source.get(name, "command line")
        return f"{source}: {name}" if source not in ("command line", "preset") \
            else vocabulary()[name].cli

    def parse(self, name, parse):
        """The chosen value of ``name`` parsed, or ConfigError naming it."""
        try:
            return parse(self.values[name])
        except ValueError as err:
            raise ConfigError(f"{self.where(name)}: {err}") from None


def resolve(given, *, preset=None, config_path=None):
    """Merges defaults, a preset, a config file and the given flags; then checks them.

    Args:
      given: {option name: value} from the command line (strings, or values).
      preset: {option name: value} an example sets.
      config_path: a ``--config`` file.

    Returns:
      A :class:`tffre.tasks.RunConfig`.

    Raises:
      ConfigError: a one-line message naming the option (and the file).
    """
    vocab = vocabulary()
    layers = _Layers(preset, config_path, given)
    chosen = layers.values
    dataset = layers.parse("dataset", vocab["dataset"].parse) if "dataset" in chosen \
        else "synthetic"
    task = tasks.task_of(dataset)
    names = tuple((layers.parse("algorithm", algorithm_list) if "algorithm" in chosen
                   else "FedAvg").split(","))
    defaults = task.defaults_for(dataset)
    run_values = {k: v for k, v in defaults.items() if k in RunSettings.names()}
    option_values = {k: v for k, v in defaults.items() if k in task.Options.names()}
    hparam_values = {}
    # Bad values first, then options that do not apply: a value that parses nowhere is
    # reported as such.
    for name in chosen:
        flag = vocab[name]
        if flag.kind == "run":
            run_values[name] = layers.parse(name, flag.parse)
        elif flag.kind in ("algorithm", "alias"):
            hparam_values[name] = layers.parse(name, flag.parse)
    for name in sorted(layers.given):
        flag = vocab[name]
        if flag.kind == "task" and dataset not in flag.owners:
            raise ConfigError(f"{flag.cli} applies to --dataset {'/'.join(flag.owners)}, "
                              f"not {dataset}")
        if flag.kind in ("algorithm", "alias") and not set(names) & set(flag.owners):
            raise ConfigError(f"{flag.cli} applies to --algorithm "
                              f"{','.join(dict.fromkeys(flag.owners))}, not {','.join(names)}")
    for name in chosen:   # a task's options, parsed with its own declarations
        flag = vocab[name]
        if flag.kind == "task" and dataset in flag.owners:
            declared = next(f for f in task.Options.declarations() if f.name == name)
            valid = getattr(declared.declaration.parse, "choices", None)
            if valid is not None and chosen[name] not in valid \
                    and chosen[name] in (flag.choices or ()):
                raise ConfigError(f"{flag.cli} {chosen[name]} does not apply to --dataset "
                                  f"{dataset}; valid: {', '.join(valid)}")
            option_values[name] = layers.parse(name, declared.declaration.parse)
    model = layers.parse("model", vocab["model"].parse) if "model" in chosen else task.models[0]
    if model not in task.models:
        raise ConfigError(f"--model {model} does not apply to --dataset {dataset}; valid: "
                          f"{', '.join(task.models)}")
    if run_values.get("client_fraction") is not None:
        from tffre.data.partition import clients_per_round
        run_values["clients_per_round"] = clients_per_round(
            run_values.get("clients", RunSettings.clients), run_values["client_fraction"])
    try:
        run = RunSettings.resolve(run_values)
        options = task.Options.resolve(option_values)
        hparams = {n: registry.resolve_hparams(n, registry.algorithm_hparams(n, hparam_values),
                                               learning_rates=task.learning_rates)
                   for n in names}
    except ParamsError as err:
        raise ConfigError(str(err)) from None
    if run.out is None:
        raise ConfigError("--out is required (the folder for results)")
    cfg = RunConfig(dataset=dataset, model=model, algorithms=names, run=run, options=options,
                    hparams=hparams, given=tuple(sorted(chosen)))
    cfg = dataclasses.replace(cfg, values=persistent_values(cfg))
    try:
        task.check(cfg)
        check_privacy(cfg)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    check_out_dir(run.out, resume=run.resume, overwrite=run.overwrite)
    return cfg


def check_privacy(cfg):
    """Differential privacy's checks before any work: the task's models, a budget out of
    reach, adaptive clipping that cannot reach sigma (ValueError, one line)."""
    private = [n for n, hp in cfg.hparams.items() if hp.dp_on]
    if not private:
        return
    if cfg.task.dp_refusal:
        raise ValueError(f"{', '.join(private)}: differential privacy is not sound for "
                         f"--dataset {cfg.dataset}: {cfg.task.dp_refusal}")
    from tffre.runner.privacy import check_budget
    for name in private:
        check_budget(cfg.hparams[name], cfg.run, cfg.run.clients)


def check_out_dir(out, *, resume=False, overwrite=False):
    """Refuses an unusable ``--out``, or one holding results without --resume/--overwrite.

    Creates nothing: the folder is made only once every check has passed.
    """
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"--out {out} exists and is not a folder")
    existing = os.path.isdir(out) and any(os.path.exists(os.path.join(out, f))
                                          for f in RESULT_FILES)
    if resume and not existing:
        raise ConfigError(f"--resume: {out} holds no run to resume (no {RESULT_FILES[0]})")
    if existing and not (resume or overwrite):
        raise ConfigError(f"--out {out} already holds results; add --resume to continue that "
                          f"run or --overwrite to replace it")
    parent = os.path.abspath(out)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    try:  # a real probe: permissions alone miss read-only and virtual filesystems
        os.rmdir(tempfile.mkdtemp(prefix=".tffre-probe-", dir=parent))
    except OSError as err:
        raise ConfigError(f"--out {out}: cannot create folders in {parent} "
                          f"({err.strerror})") from None


def persistent_values(cfg):
    """What defines a run (saved in config.json, compared on --resume): the dataset, model
    and algorithms, the run settings and task options that are part of a run's identity,
    and each algorithm's resolved hyperparameters."""
    values = {"dataset": cfg.dataset, "model": cfg.model, "algorithm": ",".join(cfg.algorithms)}
    values.update({f.name: getattr(cfg.run, f.name) for f in RunSettings.declarations()
                   if f.declaration.persistent})
    values.update(cfg.options.asdict())
    values["hparams"] = {name: {f.name: getattr(hp, f.name) for f in hp.declarations()
                                if f.declaration.persistent}
                         for name, hp in cfg.hparams.items()}
    return values


def check_resume(cfg):
    """Refuses to resume a run whose saved configuration differs from ``cfg``."""
    path = os.path.join(cfg.run.out, "config.json")
    if not os.path.isfile(path):
        raise ConfigError(f"--resume: {path} is missing, so the run cannot be checked; use "
                          f"--overwrite")
    changed = differences(read_json_object(path, ConfigError), cfg, skip=resumable)
    if changed:
        raise ConfigError("--resume: options differ from the saved run: " + ", ".join(changed))


#: Options that say how or where a run is carried out, not what it computes: a finished run
#: made with other values of these still answers for the same settings (tffre.sweep).
OPERATIONAL = ("out", "checkpoint_every", "executor", "max_parallel_clients", "client_workers",
               "loop", "prefix_cache", "no_train_loss")


def differences(saved, cfg, skip=lambda name: name in OPERATIONAL):
    """The settings of ``cfg`` that differ from ``saved`` (a run's config.json), as
    "--name saved -> now" (or "Algorithm key saved -> now"); none named by ``skip``. The
    hyperparameters are compared only where the other settings agree."""
    # Compared as config.json holds them: a tuple option (--lora-targets) was saved as a list.
    now = json_safe(cfg.values)
    # An option the saved run predates (the text task's --lora-targets, --faulty-clients, a
    # row's --server-optimizer) ran as its default: absent from config.json, it is compared
    # as that.
    absent = _defaults(cfg.options, saved) | _defaults(cfg.run, saved)
    changed = [f"--{k.replace('_', '-')} {saved.get(k, absent.get(k))!r} -> {now[k]!r}"
               for k in now if k != "hparams" and not skip(k)
               and saved.get(k, absent.get(k)) != now[k]]
    if not changed:   # the hyperparameters only matter where the algorithms are the same
        old = saved.get("hparams") or {}
        changed = []
        for name, hp in now["hparams"].items():
            before = old.get(name, {})
            before = dict(_defaults(cfg.hparams[name], before), **before) if name in old \
                else before
            changed += [f"{name} {k} {before.get(k)!r} -> {v!r}" for k, v in hp.items()
                        if before.get(k) != v]
    return changed


def _defaults(declared, saved):
    """{name: default} (as config.json holds it) of the fields of the dataclass instance
    ``declared`` that ``saved`` lacks."""
    if not dataclasses.is_dataclass(declared):
        return {}
    return json_safe({f.name: f.default for f in dataclasses.fields(declared)
                      if f.name not in saved and f.default is not dataclasses.MISSING})


def resumable(name):
    """True for an option a resumed run may change (it does not alter what a round computes)."""
    flag = vocabulary().get(name)
    return flag is not None and flag.kind == "run" and flag.fields[0].declaration.resumable
