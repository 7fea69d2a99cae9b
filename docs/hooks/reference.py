"""MkDocs hook: the generated reference, made from the code at build time so that it cannot drift.

* ``reference/cli.md``: every command of ``python -m tffre`` with a table of its options,
  read off the parser each command really parses with (its flag, value, default and help,
  which the declarations of :mod:`tffre.hparams` give for ``run``'s options: their
  defaults, paper references and who takes them), and the tasks' datasets and models.
  A flag without help text fails the build (:class:`MissingHelp`, naming the command and
  the flag).
* ``reference/algorithms.md``: the registry (:data:`tffre.registry.ALGORITHMS`) as a table:
  local optimizer, server aggregator, paper, whether client-level DP is sound
  (:func:`tffre.registry.dp_refusal`) and whether the row can use SecAgg+ (the deployment's
  own check, :func:`tffre.federation.split_round.sum_refusal`, on each row's round built on a
  small probe model).

Nothing here is committed: the pages are added to the site's files in ``on_files``. A
``docs/reference/cli.md`` or ``algorithms.md`` written by hand is refused.
"""

import argparse
import contextlib
import functools
import html
import inspect
import os
import re
import warnings

PROG = "python -m tffre"
CLI_PAGE = "reference/cli.md"
ALGORITHMS_PAGE = "reference/algorithms.md"

#: The run-option groups of ``run``, by :attr:`tffre.config.Flag.kind`.
RUN_GROUPS = (("top", "what", "What to run"), ("run", "settings", "Run settings"),
              ("task", "task-options",
               "Task options (each applies to the datasets named in its help)"),
              ("algorithm", "hyperparameters", "Algorithm hyperparameters (each applies to the "
                                               "algorithms named in its help, or to all)"),
              ("alias", "aliases", "The papers' names (aliases)"))


class MissingHelp(ValueError):
    """A command-line flag declared without help text."""


# --- Markdown ---

def _escape(text):
    text = html.escape(text, quote=False)
    return re.sub(r"([\\`*_{}\[\]|#])", r"\\\1", text)


def cell(text):
    """``text`` (a help or a docstring line) as one line of Markdown for a table cell: HTML and
    Markdown escaped, its reST literals (````x````, ``:role:`x```) as code spans."""
    parts = re.split(r"``(.+?)``|:[a-z]+:`~?([^`]+)`", " ".join(str(text).split()))
    out = []
    for i, part in enumerate(parts):
        if part is None:
            continue
        out.append(code(part) if i % 3 else _escape(part))
    return "".join(out)


def code(text):
    """``text`` as a code span (it holds no backtick)."""
    return f"`{text}`"


def table(header, rows):
    """Markdown table lines."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def anchor_of(words):
    """The id of a command's section: ``deploy run`` -> ``deploy-run``."""
    return "-".join(words) or "commands"


def option_anchor(words, flag):
    """The id of an option's row: ``run --dp-target-epsilon`` -> ``run--dp-target-epsilon``."""
    return f"{anchor_of(words)}--{flag.lstrip('-')}"


def value_text(value):
    """A default as the page shows it."""
    if value is None or value == () or value == [] or value == "":
        return "—"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (tuple, list)):
        return code(",".join(map(str, value)))
    return code(value)


def option_value(name, value):
    """``--name value`` as code (a switch: ``--name`` or ``--no-name``)."""
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return code(flag if value else "--no-" + flag[2:])
    return code(f"{flag} {','.join(map(str, value)) if isinstance(value, tuple) else value}")


# --- the parsers each command parses with ---

class _Captured(Exception):
    def __init__(self, parser):
        super().__init__(parser.prog)
        self.parser = parser


@contextlib.contextmanager
def _capturing():
    """Within it, any argparse parser raises :class:`_Captured` as it starts parsing
    (``parse_args`` and its kind all go through ``parse_known_args``)."""
    original = argparse.ArgumentParser.parse_known_args

    def capture(self, args=None, namespace=None):
        raise _Captured(self)
    argparse.ArgumentParser.parse_known_args = capture
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_known_args = original


def parser_of(words):
    """The parser ``python -m tffre WORDS ...`` parses its arguments with: ``tffre.cli.main``
    is called with ``words`` and stopped as it starts parsing, so the page shows the
    parser the command really uses (``data check``'s and ``deploy run``'s are built inside
    their functions)."""
    from tffre import cli
    with _capturing():
        try:
            cli.main(list(words))
        except _Captured as captured:
            return captured.parser
    raise RuntimeError(f"{PROG} {' '.join(words)} parsed no arguments")


def subcommands(parser):
    """{name: subparser} of ``parser`` (empty without subcommands)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def subcommand_helps(parser):
    """{name: help} of ``parser``'s subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help for a in action._choices_actions}
    return {}


def options(parser):
    """``parser``'s options, without ``--help`` and the subcommands."""
    return [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def commands(words=()):
    """[(words, parser)]: every command of ``python -m tffre`` (``words`` after it) and the
    parser it parses with, walking the subcommands each parser declares."""
    parser = parser_of(words)
    want = " ".join((PROG,) + tuple(words))
    if parser.prog != want:
        # The command parses with its parent's parser (deploy certs, ...): its entry among
        # the parent's subcommands.
        parser = subcommands(parser).get(words[-1]) if words else None
        if parser is None or parser.prog != want:
            raise RuntimeError(f"{want}: the hook cannot find the parser of this command")
    out = [(tuple(words), parser)]
    for name in subcommands(parser):
        out += commands(tuple(words) + (name,))
    return out


# --- one command's options ---

def check_help(words, parser):
    """Raises :class:`MissingHelp` for an option of ``parser`` without help text."""
    for action in options(parser):
        if action.help is None or (action.help != argparse.SUPPRESS
                                   and not str(action.help).strip()):
            flag = "/".join(action.option_strings) or action.dest
            raise MissingHelp(f"{' '.join((PROG,) + tuple(words))}: {flag} has no help text; "
                              f"give it help= (the command-line reference is made from it)")


def flag_cell(words, action):
    """The option's flags as code, the first carrying the row's anchor."""
    flags = action.option_strings or [action.dest]
    first = f"{code(flags[0])}{{#{option_anchor(words, flags[0])}}}"
    return ", ".join([first] + [code(f) for f in flags[1:]])


def value_of(action, flag=None):
    """What the option takes: a switch, its choices, or its metavar and declared type."""
    if action.nargs == 0:
        return "switch"
    choices = action.choices if action.choices is not None else \
        (flag.choices if flag is not None else None)
    if choices:
        return "one of " + ", ".join(code(c) for c in choices)
    parse = flag.parse if flag is not None else action.type
    described = declared_type(parse)
    if described:
        return described
    if isinstance(action.metavar, str):
        return code(action.metavar)
    if isinstance(parse, type):
        return {int: "integer", float: "number"}.get(parse, parse.__name__)
    return code(action.dest.upper())


def declared_type(parse):
    """What a declaration's parser (:mod:`tffre.hparams`) accepts, from its docstring, or None."""
    if parse is None or isinstance(parse, type) or \
            getattr(parse, "__module__", None) not in ("tffre.hparams", "tffre.config"):
        return None
    doc = inspect.getdoc(parse)
    if doc:
        return cell(doc.splitlines()[0].rstrip("."))
    from tffre import hparams
    name = getattr(parse, "__name__", "")
    if name.startswith(("one of", "names among")):
        return cell(name.replace("/", ", "))
    inner = getattr(hparams, name, None)   # optional(parser): the parser's, or none
    if inner is not None and inspect.getdoc(inner):
        return cell(inspect.getdoc(inner).splitlines()[0].rstrip(".") + ", or none")
    return None


def declared_default(flag):
    """The default of a :class:`tffre.config.Flag` from its declarations, or None."""
    if not flag.fields:
        return None
    defaults = {repr(f.default) for f in flag.fields}
    if len(defaults) > 1:
        return "per " + ("dataset" if flag.kind == "task" else "algorithm") + \
            " (see the help)"
    return value_text(flag.fields[0].default)


def default_of(parser, action, declared):
    """The option's default: required, declared (``declared``: {dest: text}), or argparse's."""
    if action.required:
        return "required"
    for group in parser._mutually_exclusive_groups:
        if group.required and action in group._group_actions:
            return "one of " + ", ".join(code(a.option_strings[0])
                                         for a in group._group_actions) + " required"
    if action.dest in declared:   # an option parsed by its declaration
        return declared[action.dest] or "—"
    if action.default is argparse.SUPPRESS:
        return "—"
    if action.nargs == 0:
        return "off" if not action.default else "on"
    return value_text(action.default)


def help_text(parser, action):
    """The help as ``--help`` prints it (``%(default)s`` expanded)."""
    return cell(argparse.HelpFormatter(parser.prog)._expand_help(action))


def option_rows(words, parser, actions, declared, flags):
    """The table rows of ``actions``. An option whose argparse default is suppressed keeps its
    value a string for a declaration to parse (:func:`tffre.config.add_run_arguments`): its
    type and default are the declaration's (``flags``, ``declared``: by name); any other
    option is argparse's own."""
    rows = []
    for a in actions:
        if a.help == argparse.SUPPRESS:
            continue
        declaration = a.default is argparse.SUPPRESS and a.dest in flags
        rows.append([flag_cell(words, a), value_of(a, flags[a.dest] if declaration else None),
                     default_of(parser, a, declared if declaration else {}),
                     help_text(parser, a)])
    return rows


HEADER = ("Option", "Value", "Default", "Description")


def run_vocabulary():
    """{dest: :class:`tffre.config.Flag`} of ``run``'s options and {dest: default text}."""
    from tffre import config
    flags = config.vocabulary()
    return flags, {name: declared_default(flag) for name, flag in flags.items()}


def deploy_declared():
    """{dest: default text} and {dest: declaration-like} of the deployment's own settings."""
    import types
    from tffre.deploy.flower_config import DeploySettings
    fields = DeploySettings.declarations()
    return ({f.name: value_text(f.default) for f in fields},
            {f.name: types.SimpleNamespace(parse=f.declaration.parse,
                                           choices=getattr(f.declaration.parse, "choices", None))
             for f in fields})


def section(words, parser, run_parser):
    """The Markdown of one command's section."""
    title = " ".join((PROG,) + tuple(words))
    out = [f"## {code(title)} {{#{anchor_of(words)}}}", ""]
    if parser.description:
        out += [cell(parser.description), ""]
    subs = subcommand_helps(parser)
    if subs:
        rows = []
        for name, text in subs.items():
            target = tuple(words) + (name,)
            rows.append([f"[{code(name)}](#{anchor_of(target)})",
                         cell(text or "")])
        out += table(("Command", "What it does"), rows) + [""]
    flags, declared = run_vocabulary()
    if words == ("deploy", "run"):   # run's options and the deployment's own settings
        deploy_defaults, deploy_flags = deploy_declared()
        flags, declared = {**flags, **deploy_flags}, {**declared, **deploy_defaults}
    actions = options(parser)
    if words == ("run",):
        out += run_sections(words, parser, actions, flags, declared)
    elif words == ("deploy", "run"):
        shared = {a.dest for a in options(run_parser)}
        own = [a for a in actions if a.dest not in shared]
        out += table(HEADER, option_rows(words, parser, own, declared, flags)) + [""]
        out += deploy_run_note(parser, shared, actions)
    elif actions:
        out += table(HEADER, option_rows(words, parser, actions, declared, flags)) + [""]
    if parser.epilog:
        out += ["Examples:", "", "```text", parser.epilog.strip("\n"), "```", ""]
    return out


def run_sections(words, parser, actions, flags, declared):
    """``run``'s options in groups (what to run, run settings, task options, ...)."""
    out = []
    grouped = {kind: [] for kind, _, _ in RUN_GROUPS}
    for action in actions:
        flag = flags.get(action.dest)
        grouped["top" if flag is None else flag.kind].append(action)
    for kind, anchor, title in RUN_GROUPS:
        if grouped[kind]:
            out += [f"### {title} {{#run-{anchor}}}", ""]
            out += table(HEADER, option_rows(words, parser, grouped[kind], declared, flags))
            out += [""]
    out += tasks_section()
    return out


def deploy_run_note(parser, shared, actions):
    """What ``deploy run`` takes of ``run``'s options."""
    from tffre.deploy import flower_config as settings
    taken = [a for a in actions if a.dest in shared]
    # run_config_file reads --config itself; the others are not used by a deployment.
    ignored = [n for n in settings.IGNORED if n != "config" and n in {a.dest for a in taken}]
    return [f"It takes every option of [{code(PROG + ' run')}](#run) too "
            f"({len(taken)} of them); a deployment ignores "
            + ", ".join(code("--" + n.replace("_", "-")) for n in ignored)
            + " (the sites are its clients, and their data is their own).", ""]


def tasks_section():
    """The tasks: their datasets, models, defaults, embedded samples and DP."""
    from tffre import tasks
    rows = []
    for task in tasks.tasks():
        defaults = [option_value(k, v) for k, v in task.defaults.items()]
        for dataset, values in task.dataset_defaults.items():
            defaults += [f"{code(dataset)}: " + ", ".join(
                option_value(k, v) for k, v in values.items())]
        rows.append([
            code(task.name), ", ".join(code(d) for d in task.datasets),
            ", ".join(code(m) for m in task.models) + " (first: the default)",
            ", ".join(code(d) for d in task.samples) or "—",
            "; ".join(defaults) or "—",
            "yes" if task.dp_refusal is None else "no: " + cell(task.dp_refusal),
            "yes" if task.checks_data else "no"])
    return ["### Datasets and tasks {#run-tasks}", "",
            f"{code('--dataset')} picks the task ({code('tffre.tasks')}); the task's defaults "
            "replace the declarations' (a run's `config.json` records every value used).", ""] \
        + table(("Task", "Datasets", "Models", "Embedded sample", "Task defaults",
                 "Client-level DP", "data check"), rows) + [""]


def cli_page():
    """The Markdown of ``reference/cli.md``; :class:`MissingHelp` for a flag without help."""
    found = commands()
    for words, parser in found:
        check_help(words, parser)
    run_parser = dict(found)[("run",)]
    out = ["# Command line", "",
           "Generated when the site is built, from the parsers the commands parse with and the "
           f"declarations behind them ({code('tffre/hparams.py')}, {code('tffre/config.py')}, "
           f"the tasks and the registry), so it cannot drift from {code('--help')}. Every "
           f"option of {code('run')} is also a key of a {code('--config')} file (JSON or "
           "YAML, with `_` or `-`). Each row has an anchor: "
           f"{code('cli.md#run--dp-target-epsilon')}.", ""]
    for words, parser in found:
        out += section(words, parser, run_parser)
    return "\n".join(out) + "\n"


# --- the algorithm registry ---

def _quiet_tensorflow():
    """TensorFlow, imported without its log lines and its dependencies' DeprecationWarnings
    (which MkDocs would print)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow as tf
        import tensorflow_federated  # noqa: F401  (the builder's)
    tf.get_logger().setLevel("ERROR")
    return tf


def _probe_model_fn():
    """A small Keras model with every named output an algorithm reads (``features``,
    ``context``, ``logits`` from a layer named ``classifier``)."""
    tf = _quiet_tensorflow()

    def model_fn():
        inputs = tf.keras.Input((4,))
        features = tf.keras.layers.Dense(3, activation="tanh", name="features")(inputs)
        logits = tf.keras.layers.Dense(2, name="classifier")(features)
        return tf.keras.Model(inputs, {"features": features, "context": features,
                                       "logits": logits})
    return model_fn


@functools.lru_cache(maxsize=None)
def secagg_refusal(name):
    """Why registry row ``name`` cannot use SecAgg+ with its default hyperparameters, or None:
    :func:`tffre.federation.split_round.sum_refusal` (what ``deploy run --secagg`` checks
    before round 1) on the row's round, built on a probe model."""
    tf = _quiet_tensorflow()
    from tffre import builder, registry
    from tffre.definition import TaskContext
    from tffre.federation.split_round import SplitRound, sum_refusal
    spec = registry.get_spec(name)
    server = None
    if spec.load_definition().needs_server_data:
        server = tf.data.Dataset.from_tensor_slices(
            (tf.zeros([2, 4]), tf.zeros([2], tf.int32))).batch(2)
    input_spec = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None,), tf.int32))
    try:
        recipe = builder.ModelRecipe(
            _probe_model_fn(), input_spec=input_spec,
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        built = builder.build(spec, registry.resolve_hparams(spec.name), recipe,
                              TaskContext(num_clients=2, clients_per_round=2, server_data=server))
        round_ = SplitRound(built.factory).round
    except Exception as err:
        raise RuntimeError(f"{spec.name}: its round cannot be built on the docs' probe model "
                           f"(docs/hooks/reference.py, _probe_model_fn), so the page cannot "
                           f"say whether it can use SecAgg+: {err}") from err
    why = sum_refusal(round_, spec.name)
    prefix = f"{spec.name} cannot use secure aggregation (SecAgg+ only adds): "
    return why[len(prefix):] if why and why.startswith(prefix) else why


def paper_of(spec):
    """The paper or source of a registry row: its definition module's first docstring line,
    or the FLCMC family's tables for a row of an optimizer and an aggregator only."""
    if spec.definition is None and dict(spec.defaults).get("server_optimizer"):
        return ("Reddi et al. 2021 (FedAvgM: Hsu et al. 2019): FedAvg with a "
                "[server optimizer](#server-optimizers)")
    if spec.definition is None:
        return "FLCMC Tables 5-6: a local optimizer and a server aggregator"
    definition = spec.load_definition()
    summary = (inspect.getdoc(inspect.getmodule(definition)) or "").split("\n\n")[0]
    if not summary.startswith(definition.__name__):   # not the module's own algorithm (FedETF)
        summary = (inspect.getdoc(definition) or "").split("\n\n")[0]
    path = f"{definition.__module__}.{definition.__qualname__}"
    return f"{cell(summary)} ([{code(definition.__name__)}](api/algorithms.md#{path}))"


def hparams_cell(spec, common):
    """The row's own hyperparameters (beyond every algorithm's), linked to the CLI page, and
    the defaults the row changes."""
    names = [n for n in spec.hparams_class().names() if n not in common]
    links = [f"[{code('--' + n.replace('_', '-'))}](cli.md#run--{n.replace('_', '-')})"
             for n in names]
    changed = [option_value(k, v) for k, v in spec.defaults]
    return ", ".join(links) + (" (this row: " + ", ".join(changed) + ")" if changed else "") \
        or "—"


def settings_table(params):
    """The Markdown table of a declared settings class: each flag (linked to the CLI page),
    its default and its help."""
    return table(("Setting", "Default", "Meaning"),
                 [[f"[{code(f.cli)}](cli.md#run--{f.name.replace('_', '-')})",
                   code(f.default), cell(f.declaration.describe())]
                  for f in params.declarations()])


def algorithms_page():
    """The Markdown of ``reference/algorithms.md``."""
    from tffre import registry
    from tffre.definition import OPTIMIZER_FAMILIES, Hparams
    from tffre.privacy.dp_settings import DPHparams
    from tffre.server_optimizers import SERVER_OPTIMIZERS, ServerOptimizerHparams
    from tffre.robust.robust_settings import RobustHparams
    common = set(Hparams.names()) | set(DPHparams.names()) | \
        set(ServerOptimizerHparams.names()) | set(RobustHparams.names())
    rows, refusals = [], []
    for name in registry.valid_algorithm_names():
        spec = registry.get_spec(name)
        hp = registry.resolve_hparams(name)
        dp = registry.dp_refusal(spec, hp)
        secagg = secagg_refusal(name)
        local = registry.CLIENT_OPTIMIZERS[spec.client_optimizer]
        server = registry.SERVER_AGGREGATORS[spec.aggregator]
        rows.append([f"{code(spec.name)}{{#{spec.name.lower()}}}",
                     f"{cell(local.description)} ({code(spec.client_optimizer)})",
                     f"{cell(server.description)} ({code(spec.aggregator)})",
                     paper_of(spec),
                     "yes" if dp is None else "[no](#why-" + spec.name.lower() + ")",
                     "yes" if secagg is None else "[no](#why-" + spec.name.lower() + ")",
                     hparams_cell(spec, common)])
        if dp or secagg:
            refusals.append([f"{code(spec.name)}{{#why-{spec.name.lower()}}}",
                             cell(dp) if dp else "—", cell(secagg) if secagg else "—"])
    local_rows = [[code(key), cell(o.description), code(o.default_learning_rate), code(o.kind),
                   ", ".join(code("--" + n.replace("_", "-")) for n in o.hparams.names()) or "—"]
                  for key, o in registry.CLIENT_OPTIMIZERS.items()]
    server_rows = [[code(key), cell(a.description),
                    ", ".join(code("--" + n.replace("_", "-")) for n in a.hparams.names()) or "—",
                    "sound" if a.dp_refusal is None else "not sound: " + cell(a.dp_refusal)]
                   for key, a in registry.SERVER_AGGREGATORS.items()]
    family_rows = [[code(family), ", ".join(f"{code(key)} → {code(o.forms[family])}"
                                            for key, o in registry.CLIENT_OPTIMIZERS.items()
                                            if family in o.forms)]
                   for family in OPTIMIZER_FAMILIES]
    out = ["# Algorithm registry", "",
           f"Generated when the site is built from {code('tffre/registry.py')} "
           f"({code('tffre.registry.ALGORITHMS')}): one row per name "
           f"{code('--algorithm')} takes (case-insensitive). **DP** says whether client-level "
           f"differential privacy is sound for the row ({code('tffre.registry.dp_refusal')}, "
           "with the row's default hyperparameters; the task may refuse it too, see "
           "[the tasks](cli.md#run-tasks)). **SecAgg+** says whether a deployment can sum its "
           "uploads securely: the check `deploy run --secagg` makes before round 1 "
           f"({code('tffre.federation.split_round.sum_refusal')}), on the row's round built "
           "with its default hyperparameters.", "",
           "Every algorithm also takes FedAvg's hyperparameters and the differential-privacy "
           "ones ([Algorithm hyperparameters](cli.md#run-hyperparameters)); the last column lists "
           "the row's own.", ""]
    out += table(("Algorithm", "Client optimizer", "Server aggregator", "Paper", "DP",
                  "SecAgg+", "Its own hyperparameters"), rows) + [""]
    out += ["## Why DP or SecAgg+ is refused {#why}", ""]
    out += table(("Algorithm", "Client-level DP", "SecAgg+"), refusals) + [""]
    out += ["## Client optimizers {#client-optimizers}", "",
            f"{code('tffre.registry.CLIENT_OPTIMIZERS')}: a row's client optimizer (the "
            f"papers' local optimizer); {code('--learning-rate')} defaults to the task's rate for "
            "the optimizer's kind, else to this one.", ""]
    out += table(("Key", "Optimizer", "Default learning rate", "Kind", "Hyperparameters"),
                 local_rows) + [""]
    out += ["## Server aggregators {#server-aggregators}", "",
            f"{code('tffre.registry.SERVER_AGGREGATORS')}.", ""]
    out += table(("Key", "Aggregator", "Hyperparameters", "Client-level DP"), server_rows)
    out += ["", "## Server optimizers {#server-optimizers}", "",
            f"Every row ends its round with the server's step on the aggregated delta: "
            f"{code('--server-optimizer')} {' / '.join(code(k) for k in SERVER_OPTIMIZERS)} "
            f"({code('tffre.server_optimizers')}; Reddi et al. 2021, Algorithm 2). The default, "
            f"{code('sgd')}, is the aggregator's own step (1 for the mean, Eq. 6; λ for "
            "attention, Eq. 14); FedAvgM, FedAdam, FedYogi and FedAdagrad are FedAvg with "
            f"another. {code('--server-optimizer-form tff')} gives TFF's form (bias correction, "
            "TFF's initial preconditioners) instead of the paper's. A server optimizer is "
            "post-processing of the aggregate: it keeps client-level DP and SecAgg+ as the row "
            "has them.", ""]
    out += settings_table(ServerOptimizerHparams)
    out += ["", "## Robust aggregation {#robust-aggregation}", "",
            f"{code('--robust')} replaces a row's weighted mean of the model deltas by a "
            f"Byzantine-robust rule ({code('tffre.robust')}: coordinate median and trimmed "
            "mean, Yin et al. 2018; Krum and multi-Krum, Blanchard et al. 2017; Bulyan, "
            "El Mhamdi et al. 2018; norm bounding, Sun et al. 2019), with any server "
            "optimizer. Every rule but norm-bound keeps every upload of the round at the "
            "server (the clients per round times the model's size, where the mean keeps one "
            "model), so SecAgg+ refuses it; client-level DP is refused too, and so are the "
            "attention rows and the rows that upload no model delta.", ""]
    out += settings_table(RobustHparams)
    out += ["", "## Optimizer families {#optimizer-families}", "",
            f"{code('--local-optimizer')} replaces a row's client optimizer by the same kind "
            f"of step in another family ({code('tffre.definition.OPTIMIZER_FAMILIES')}; each "
            f"optimizer's {code('forms')} say by which).", ""]
    out += table(("Family", "Replacements"), family_rows) + [""]
    return "\n".join(out)


# --- MkDocs ---

def pages():
    """{path under docs/: Markdown} of the generated pages."""
    with warnings.catch_warnings():
        # The task modules' and TensorFlow's dependencies warn on import (pkg_resources...),
        # which MkDocs would print.
        warnings.simplefilter("ignore", DeprecationWarning)
        return {CLI_PAGE: cli_page(), ALGORITHMS_PAGE: algorithms_page()}


def on_files(files, config):
    """Adds the generated pages (refusing a hand-written file of the same path)."""
    from mkdocs.structure.files import File
    for path, content in pages().items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs/{path} is generated by docs/hooks/reference.py: delete "
                               f"the file")
        files.append(File.generated(config, path, content=content))
    return files
