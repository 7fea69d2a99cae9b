"""One task, one recipe: a typed declaration from which both the simulation and every site of
a deployment are derived (issue 68 item 1).

A recipe task is a module of :mod:`tffre.tasks` whose ``RECIPE`` is a :class:`Recipe`
subclass instance; :class:`tffre.tasks.Task` then finds ``prepare``, ``check``,
``check_data`` and ``SITES`` through it, so the module writes neither a ``prepare`` nor a
:class:`tffre.tasks.sites.Sites` class. The protocol (each method gets typed objects, never
a dict of options):

* :attr:`Recipe.TASK`: the :class:`tffre.tasks.Task` (names, ``Options``, defaults);
  :attr:`Recipe.EVALUATION`: the evaluation kind (a key of
  :data:`tffre.evaluation.EVALUATORS`); :attr:`Recipe.PREDICTS`: the bundle encoder's kind
  that ``python -m tffre predict`` reads (``"text"``: JSON lines with ``"text"``);
  :attr:`Recipe.TABLES`: the paper tables it reproduces; :attr:`Recipe.LOCAL_OPTIONS`: the
  options naming a side's own files (never in the deployment's job); :attr:`Recipe.AGREED`:
  the facts every side must report alike besides the labels.
* :meth:`Recipe.load` ``(path, options, seed, notes, site) -> Loaded``: the data of one path (a
  run's ``--data``, a site's ``data``), checked, every error one line naming file, record
  and field; :meth:`Recipe.check_data`: what ``data check`` reports; :meth:`Recipe.check`
  (optional): the options' checks that need no data.
* :meth:`Recipe.load_run` ``(cfg, path, notes) -> Loaded`` (optional): the simulation's data
  when it depends on the run's settings (synthetic's, generated for ``--clients``);
  :attr:`Loaded.name` (optional): the data's name in titles; a :attr:`Recipe.AGREED` fact may
  come from :attr:`Loaded.facts` (a site's own setting) as well as from its resources;
  ``check_site(site, dataset)`` (optional): a site's start-up check when its ``data`` is not a
  path ``data check`` reads.
* :meth:`Recipe.refusal` ``(options) -> str | None`` (optional): why a deployment cannot
  honour the options (IMCS's ``--w2v-from-clients``): the agreement, the model and the site
  data refuse it in one line.
* :meth:`Recipe.run_resources` ``(cfg, loaded)`` (optional): the simulation's resources when
  they may read its data (IMCS's ``--w2v-from-clients``); :meth:`Recipe.simulate` ``(cfg,
  loaded, resources, built) -> Simulated`` (optional): the simulation's clients, info and
  ``write_extras`` where the generic encode-then-partition does not fit (IMCS encodes and
  splits whole dialogues); :meth:`Loaded.examples`: a subclass whose records hold several
  examples each counts them; ``"labels"`` in :attr:`Recipe.AGREED`: the sites' labels must be
  alike (a task's fixed names), not united; :attr:`Resources.files`: the file behind each
  fact, named when a side's differs.
* **Encoders, D_v, evaluation** (optional; sentence- and document-level RE):
  :meth:`Recipe.load` gets ``dataset`` (the ``--dataset``, the job's: a task of several
  formats); :attr:`Recipe.UNITED`: facts of :attr:`Loaded.facts` (``entity_types``) every site
  reports and the job holds as their sorted union, given to :meth:`Recipe.build` as
  :attr:`ModelSpec.facts` (the simulation: the loaded data's); :attr:`Built.prefix`, a
  :class:`FrozenPrefix` (a split encoder, ``--trainable-layers``/``--lora-rank``): each side
  builds the frozen prefix from its own encoder and the seed, each client's activations are
  computed once (``--prefix-cache``, a site's ``prefix-cache``: :mod:`tffre.models.partial`), the
  prefix's fingerprint is the site model's ``identity`` (agreed across sides) and a bundle
  saves the whole model (:func:`tffre.models.partial.exporter`); :meth:`Recipe.server_split`
  ``(cfg, loaded) -> ServerSet | None`` and :meth:`Recipe.read_server_data`: FedED's labelled
  set D_v at the server (:attr:`Loaded.server` in the simulation, ``server-data`` in a
  deployment, encoded as the sites encode); :meth:`Recipe.evaluation` ``(options, labels) ->
  Evaluation``: the kind, its options, the negative label (relation F1) or FedCB's macro-F1,
  for the simulation and the sites alike; :meth:`Loaded.ids` also reads a DataFrame's
  ``label`` column.
* **Data-shaped inputs, annotations** (optional; document-level RE): :attr:`Recipe.JOB_FACTS`:
  facts :meth:`Recipe.build` reads as :attr:`ModelSpec.facts` besides the united ones (the
  simulation's from :attr:`Loaded.facts`, a deployment's from ``job.facts``);
  :meth:`Recipe.survey` ``(loaded, options, resources) -> dict``: what a site reports beyond
  its labels (row limits fitted to its documents); :meth:`Recipe.agree` ``(job, sites, log)
  -> job``: the job completed from the surveys (the limits' maxima; a site refused);
  :meth:`Recipe.encode` ``(built, loaded, labels, site) -> (arrays, annotations)``: a site's
  splits encoded, with what the evaluation reads beside them (:attr:`SiteData.annotations`);
  :attr:`Built.y_spec`: y's spec when it is not one int32 label per example.
* **Images** (optional): :attr:`Recipe.PROMPTS`: FedCB's prompt set for the class concepts
  (``"image"``), the simulation's and the sites' alike; a site's ``data="sample"`` reads the
  task's embedded sample of the job's dataset, as ``--data sample`` does.
* :meth:`Recipe.resources` ``(options, side) -> Resources``: the public files a side uses
  (word vectors, a dictionary, an encoder folder; ``side`` holds its own paths, dashed as in
  a node configuration) and their fingerprints (:attr:`Resources.facts`);
  :meth:`Recipe.model_resources` ``(model, options, side)`` (optional): those of one
  ``--model`` where a task's models read different files (text's LSTM and encoder).
* :meth:`Recipe.build` ``(ModelSpec) -> Built``: the model and loss from the typed options,
  the labels and the resources, with the encoding of a split's records into model inputs.
* :meth:`Recipe.partition` ``(Loaded, options, clients, seed) -> {client: {split: rows}}``:
  the simulation's clients.

The adapters, written once: :func:`prepare` (recipe -> :class:`tffre.runner.PreparedTask`) and
:class:`RecipeSites` (recipe -> the deployment's survey, agreement, model and site data).
A site parses the job's options into ``Options`` once per job (:meth:`RecipeSites.options`).
"""

import collections
import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple

from tffre.tasks.sites import SiteData, SiteDataError, Sites, check_any_site, \
    check_report_line, site_path


@dataclasses.dataclass
class Loaded:
    """A path's data: ``splits`` {split: [record]} (each record a dict with at least
    ``label``), ``labels`` (the class names in index order), ``notes`` (what the user should
    know) and ``facts`` (what else the data says, e.g. its site values)."""
    splits: Dict[str, list]
    labels: Tuple[str, ...]
    notes: list = dataclasses.field(default_factory=list)
    facts: Dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The federated data's name in titles and the summary (default: the dataset and path).
    name: Optional[str] = None
    #: The simulation's labelled set D_v (:meth:`Recipe.server_split`), held out of train.
    server: Optional["ServerSet"] = None

    def label_ids(self, split, labels=None):
        """The int32 label indices of ``split``'s records over ``labels`` (default this
        data's); a label outside them is a :class:`ValueError`."""
        return self.ids(self.splits[split], labels)

    def ids(self, records, labels=None):
        """The int32 label indices of ``records`` (a list of dicts, or a DataFrame with a
        ``label`` column) over ``labels`` (default this data's); a label outside them is a
        :class:`ValueError`."""
        import numpy as np
        index = {label: i for i, label in enumerate(labels or self.labels)}
        values = records["label"] if hasattr(records, "columns") else \
            [r["label"] for r in records]
        try:
            return np.asarray([index[v] for v in values], np.int32)
        except KeyError as err:
            raise ValueError(f"label {err.args[0]!r} is not among the run's labels "
                             f"{', '.join(labels or self.labels)}") from None

    def examples(self, split):
        """The number of examples of ``split`` (a site's survey): one per record here."""
        return len(self.splits[split])


@dataclasses.dataclass
class Resources:
    """A side's public files as loaded (:meth:`Recipe.resources`): ``value`` whatever the
    recipe's :meth:`Recipe.build` reads, ``facts`` {name: fingerprint} the sides compare,
    ``description`` what they are (for the logs)."""
    value: Any
    facts: Dict[str, Any] = dataclasses.field(default_factory=dict)
    description: str = ""
    #: {fact: the file behind it, e.g. "w2v /site/vectors.txt"}: named when a side's differs.
    files: Dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """What :meth:`Recipe.build` is given: the ``--model`` name, the typed ``options``, the
    ``labels``, the side's :class:`Resources`, the run's ``seed`` and its ``algorithms``
    (registry names: FedCB and the like want a model with named outputs)."""
    model: str
    options: Any
    labels: Tuple[str, ...]
    resources: Resources
    seed: int
    algorithms: Tuple[str, ...]
    #: The :attr:`Recipe.UNITED` facts ({"entity_types": [...]}): the loaded data's in the
    #: simulation, the sites' union in a deployment.
    facts: Dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Built:
    """The model a recipe builds: ``model_fn`` and ``loss``; ``encode`` (a split's records ->
    the model's inputs x); ``x_spec`` (x's ``tf.TensorSpec``); ``load_pretrained``
    (word vectors, an encoder's weights into a model, at the server); ``encoder`` (what a
    bundle saves and ``predict`` reads); ``description`` (the model in a title)."""
    model_fn: Callable[[], Any]
    loss: Any
    encode: Callable[[list], Any]
    x_spec: Any
    load_pretrained: Optional[Callable[[Any], None]] = None
    encoder: Any = None
    description: str = ""
    #: A split encoder's :class:`FrozenPrefix` (model_fn is then the trained top), or None.
    prefix: Optional["FrozenPrefix"] = None
    #: y's ``tf.TensorSpec`` when it is not one int32 label per example (document RE's
    #: packed relation targets and pair mask), or None.
    y_spec: Any = None


@dataclasses.dataclass
class FrozenPrefix:
    """A split encoder (:attr:`Built.prefix`): ``config`` (the model config; its ``partial``
    says what trains), ``build`` (callable() -> the frozen prefix's Keras model; its
    pretrained weights are :attr:`Built.load_pretrained`'s) and ``full_model_fn`` (the
    unsplit model a bundle saves, the prefix's weights grafted in). Its activations are the
    ``hidden`` input beside the encoded ``inputs`` (:func:`tffre.models.partial.with_hidden`)."""
    config: Any
    build: Callable[[], Any]
    full_model_fn: Callable[[], Any]


@dataclasses.dataclass
class ServerSet:
    """FedED's labelled set D_v in the simulation (:meth:`Recipe.server_split`): ``records``
    (as a split's: a list or a DataFrame) and ``source`` (what it is, for the summary)."""
    records: Any
    source: str


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """How a run scores its model (:meth:`Recipe.evaluation`): ``kind`` (a key of
    :data:`tffre.evaluation.EVALUATORS`), its ``options`` (a threshold), ``negative_label``
    (the "no relation" index: relation F1) and ``macro_f1`` (FedCB's macro-F1)."""
    kind: str = "classification"
    options: Dict[str, Any] = dataclasses.field(default_factory=dict)
    negative_label: Optional[int] = None
    macro_f1: bool = False


@dataclasses.dataclass
class Simulated:
    """The simulation's clients (:meth:`Recipe.simulate`): ``data`` (the
    :class:`tffre.data.FederatedData`), ``info`` (the run's summary fields) and
    ``write_extras`` (callable(out_dir): partition files, or None)."""
    data: Any
    info: Dict[str, Any]
    write_extras: Optional[Callable[[str], None]] = None


class Recipe:
    """A task's one declaration (see the module docstring); subclass it."""

    TASK = None
    EVALUATION = "classification"
    PREDICTS = "text"
    TABLES: Tuple[str, ...] = ()
    LOCAL_OPTIONS: Tuple[str, ...] = Sites.LOCAL_OPTIONS
    AGREED: Tuple[str, ...] = ()
    #: Facts of :attr:`Loaded.facts` the job holds as the sites' union (``entity_types``).
    UNITED: Tuple[str, ...] = ()
    #: Facts :meth:`build` reads besides :attr:`UNITED`'s (document RE's candidate pair types
    #: and row limits): the simulation's from :attr:`Loaded.facts` (its whole data), a
    #: deployment's from ``job.facts`` (an :attr:`AGREED` fact, or what :meth:`agree` put).
    JOB_FACTS: Tuple[str, ...] = ()
    #: FedCB's prompt set for the class concepts (:attr:`tffre.tasks.sites.Sites.PROMPTS`).
    PROMPTS = "text"

    def check(self, cfg):
        """The options' checks that need no data (ValueError, one line)."""

    def load(self, path, options, *, seed, notes=None, site=None, dataset=None):
        """The :class:`Loaded` data of ``path`` (``site``: a deployment's node configuration,
        which may select part of the file; None in the simulation; ``dataset``: the run's
        ``--dataset``, its format)."""
        raise NotImplementedError

    def load_run(self, cfg, path, notes):
        """The simulation's :class:`Loaded` data: :meth:`load` of ``path``; a task whose data
        depends on the run's settings (synthetic: generated for ``--clients``) overrides it."""
        return self.load(path, cfg.options, seed=cfg.run.seed, notes=notes,
                         dataset=cfg.dataset)

    def check_data(self, dataset, options, *, tokenizer=None, max_len=None, seed=0,
                   site=None):
        """``python -m tffre data check``'s :class:`tffre.data.check.CheckReport` (``site``
        as for :meth:`load`)."""
        raise NotImplementedError

    def resources(self, options, side):
        """The :class:`Resources` of a side's own public files (``side``: {dashed option
        name: path}, the server's run config or a site's node configuration)."""
        return Resources(None)

    def model_resources(self, model, options, side):
        """The side's :class:`Resources` for the ``--model`` ``model``: a task of several
        models whose public files differ (text's LSTM reads word vectors, its encoder a
        folder) overrides it; default :meth:`resources`."""
        return self.resources(options, side)

    def run_resources(self, cfg, loaded):
        """The simulation's :class:`Resources`: :meth:`model_resources` of its side; a task
        whose resources may read the loaded data (an experiment's option) overrides it."""
        return self.model_resources(cfg.model, cfg.options, side_of(self, cfg.options))

    def refusal(self, options):
        """Why a deployment cannot honour ``options`` (one line), or None."""
        return None

    def simulate(self, cfg, loaded, resources, built):
        """The simulation's :class:`Simulated` clients: each split encoded by ``built``,
        then split over clients by :meth:`partition` (:func:`encode_and_partition`)."""
        return encode_and_partition(self, cfg, loaded, resources, built)

    def build(self, spec):
        """The :class:`Built` model of a :class:`ModelSpec`."""
        raise NotImplementedError

    def evaluation(self, options, labels):
        """The :class:`Evaluation` of a run of ``options`` over ``labels`` (default
        :attr:`EVALUATION`'s kind, plain accuracy and F1)."""
        return Evaluation(self.EVALUATION)

    def server_split(self, cfg, loaded):
        """The simulation's D_v (FedED), a :class:`ServerSet` (its records may be moved out
        of ``loaded.splits["train"]``), or None: the task has none."""
        return None

    def read_server_data(self, path, options, *, dataset, labels):
        """A deployment server's D_v: the records of its ``server-data`` file or folder,
        their labels among ``labels`` (ValueError, one line naming file, record and field)."""
        raise ValueError(f"the {self.TASK.name} task has no server labelled set")

    def partition(self, loaded, options, num_clients, seed):
        """{client id: {split: row indices}} of the simulation."""
        raise NotImplementedError

    def survey(self, loaded, options, resources):
        """What a site reports beyond its labels, examples, :attr:`AGREED` facts and the
        resources' fingerprints, read from its :class:`Loaded` data with its resources
        (document RE's row limits that fit its documents); default none."""
        return {}

    def agree(self, job, sites, log):
        """The agreed ``job`` completed from the sites' surveys (``site.facts``; a site it
        refuses gets ``site.error``, logged): document RE's row limits, the largest of the
        sites'. Default: ``job`` as the generic agreement made it."""
        return job

    def encode(self, built, loaded, labels, site=None):
        """({split: (x, y)}, {split: annotations} or None) of a site's :class:`Loaded` data
        (``site``: its node configuration): each split's records by ``built.encode``, labels
        indexed by ``labels`` (the job's); ValueError, one line, naming the split. A recipe
        whose y is not a label index or whose evaluation reads annotations beside the data
        (document RE's ``pair_intra``) overrides it. With ``labels`` in :attr:`AGREED` the
        data's labels must be the job's."""
        if "labels" in self.AGREED and list(loaded.labels) != list(labels):
            raise ValueError(f"labels {list(loaded.labels)} differ from the run's "
                             f"{list(labels)}")
        arrays = {}
        for split, records in loaded.splits.items():
            try:
                arrays[split] = (built.encode(records), loaded.label_ids(split, labels))
            except ValueError as err:
                raise ValueError(f"{split} split: {' '.join(str(err).split())}") from None
        return arrays, None

    def describe(self, cfg, loaded, data):
        """Extra summary fields and a line to print for the simulation (optional)."""
        return {}


def side_of(recipe, options):
    """The simulation's side: the options of :attr:`Recipe.LOCAL_OPTIONS` given, dashed, as a
    deployment's server passes them (:func:`tffre.deploy.server_app.server_side`)."""
    return {k.replace("_", "-"): v for k, v in options.asdict().items()
            if k in recipe.LOCAL_OPTIONS and v not in (None, "")}


def prepare(recipe, cfg, path):
    """The :class:`tffre.runner.PreparedTask` of ``cfg`` from ``recipe``: load ``path`` (``--data``,
    the sample resolved by :meth:`tffre.tasks.Task.prepare`, so that this module does not
    import the registry that imports it), build, encode, split over clients (the simulation's
    half of the recipe)."""
    from tffre.data.concepts import concepts_for
    from tffre.runner.run_settings import PreparedTask
    o = cfg.options
    notes = []
    loaded = recipe.load_run(cfg, path, notes)
    for note in notes:
        print(f"note: {note}")
    loaded.notes = notes   # what was printed is the summary's data_notes
    loaded.server = recipe.server_split(cfg, loaded)
    resources = recipe.run_resources(cfg, loaded)
    built = recipe.build(ModelSpec(cfg.model, o, tuple(loaded.labels), resources,
                                   cfg.run.seed, tuple(cfg.algorithms),
                                   {k: loaded.facts.get(k)
                                    for k in recipe.UNITED + recipe.JOB_FACTS}))
    simulated = recipe.simulate(cfg, loaded, resources, built)
    data, info, export = simulated.data, simulated.info, None
    server_data = None if loaded.server is None else (
        built.encode(loaded.server.records), loaded.ids(loaded.server.records))
    if built.prefix is not None:
        # A frozen prefix: each client's activations once; the federated model is the top.
        from tffre.models.partial import (activations, cache_clients, encoder_depth,
                                          exporter, frozen_prefix, with_hidden)
        prefix, store = frozen_prefix(built.prefix.build, built.load_pretrained, cfg.run.seed,
                                      getattr(o, "prefix_cache", None))
        data = dataclasses.replace(data, clients=cache_clients(data.clients, prefix, store))
        info["partial"] = built.prefix.config.partial.describe(encoder_depth(built.prefix.config))
        print(f"trains the {info['partial']}")
        if server_data is not None:   # D_v's inputs, as the clients will predict on them
            x = server_data[0]
            server_data = (with_hidden(x, store.get(x, lambda x: activations(prefix, x))),
                           server_data[1])
        export = exporter(built.prefix.full_model_fn, prefix)
    return PreparedTask(data=data, model=task_model(recipe, built, o, loaded.labels, export=export),
               title=f"{data.name}, {built.description}", label_names=list(loaded.labels),
               info=info, write_extras=simulated.write_extras,
               # FedCB's class concepts, for a task that declares them (--concept-file).
               concepts=concepts_for(loaded.labels, o.concept_file)
               if "concept_file" in o.names() else None,
               prompts=recipe.PROMPTS, server_data=server_data)


def task_model(recipe, built, options, labels, *, input_spec=None, export=None, identity=""):
    """The :class:`tffre.runner.run_settings.TaskModel` of ``built`` (a :class:`Built`), the
    simulation's and each deployed side's alike: its model, loss, pretrained weights, the
    bundle's encoder and the recipe's :meth:`Recipe.evaluation` for ``options`` and
    ``labels``; ``input_spec``, ``export`` and ``identity`` as the caller has them (a
    deployment's round spec, a split encoder's exporter and fingerprint)."""
    from tffre.runner.run_settings import TaskModel
    evaluation = recipe.evaluation(options, tuple(labels))
    return TaskModel(model_fn=built.model_fn, loss=built.loss, input_spec=input_spec,
                     load_pretrained=built.load_pretrained, encoder=built.encoder,
                     negative_label=evaluation.negative_label, macro_f1=evaluation.macro_f1,
                     export=export, identity=identity, evaluation=evaluation.kind,
                     evaluation_options=dict(evaluation.options))


def encode_and_partition(recipe, cfg, loaded, resources, built):
    """The generic :meth:`Recipe.simulate`: every split's records encoded by ``built`` and
    labelled by ``loaded``, the rows split over clients by :meth:`Recipe.partition`; the info
    holds the labels, counts, trivial baselines and :meth:`Recipe.describe`'s fields."""
    from tffre.data import FederatedData
    from tffre.metrics import trivial_baselines
    o, notes = cfg.options, loaded.notes
    arrays = {split: (built.encode(records), loaded.label_ids(split))
              for split, records in loaded.splits.items()}
    parts = recipe.partition(loaded, o, cfg.run.clients, cfg.run.seed)
    clients = {cid: {split: (arrays[split][0][idx], arrays[split][1][idx])
                     for split, idx in rows.items()} for cid, rows in parts.items()}
    data = FederatedData(clients, num_classes=len(loaded.labels), name=loaded.name or
                         f"{cfg.dataset} ({o.data}), {len(clients)} clients")
    y_train, y_test = arrays["train"][1], arrays["test"][1]
    info = {"labels": list(loaded.labels), "data_notes": notes,
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test)),
            "dev_split": "dev" if "dev" in arrays else None,
            "clients_examples": {c: int(len(s["train"][1])) for c, s in clients.items()},
            **({"resources": resources.description} if resources.description else {}),
            **trivial_baselines(y_train, y_test, len(loaded.labels)),
            **recipe.describe(cfg, loaded, data)}
    print(f"\n{data.name}: {info['train_examples']} train / {info['test_examples']} test "
          f"examples, {len(loaded.labels)} labels; training examples per client: "
          + ", ".join(f"{c} {n}" for c, n in info["clients_examples"].items()))
    return Simulated(data, info)


_SITES = {}


def side_key(side):
    """A side's configuration as a cache key: every key but its state folder (a site's other
    keys, ``site-value``, ``clients``, its files, shape what it loads and builds)."""
    return tuple(sorted((k, str(v)) for k, v in side.items() if k != "state-dir"))


def sites_of(recipe):
    """The :class:`RecipeSites` of ``recipe``, one per recipe in a process (it keeps the last
    job's options, data and files)."""
    if id(recipe) not in _SITES:
        _SITES[id(recipe)] = RecipeSites(recipe)
    return _SITES[id(recipe)]


class RecipeSites(Sites):
    """The deployment's half of a recipe (:mod:`tffre.tasks.sites`), derived from it.

    Node configuration: ``data`` (the site's file or folder, read by :meth:`Recipe.load`)
    and the recipe's local files (its :attr:`Recipe.LOCAL_OPTIONS`, dashed). The labels are
    the union of the sites' (sorted, as the simulation sorts the whole set's), so a hospital
    without one class still takes part; the recipe's :attr:`Recipe.AGREED` facts must be
    alike. The job's options are parsed into the task's ``Options`` once per job.
    """

    def __init__(self, recipe):
        self.recipe = recipe
        self.LOCAL_OPTIONS = tuple(recipe.LOCAL_OPTIONS)
        self.AGREED = tuple(recipe.AGREED)
        self.UNITED = tuple(recipe.UNITED)
        self.PROMPTS = recipe.PROMPTS
        self._options = {}     # job key -> Options
        self._prefixes = {}    # (job, side, cache folder) -> (prefix model, store), the last
        self._loaded = {}      # (path, selection, seed) -> Loaded, the last one
        self._resources = {}   # (options, side) -> Resources, the last one
        self._built_for = {}   # (job, resources) -> Built, the last one

    def options(self, job):
        """The task's typed ``Options`` of ``job``: the server's job holds them typed; a
        site's, from the message, holds their mapping, parsed here once per job (the local
        paths, which the job never holds, unset)."""
        if isinstance(job.options, self.recipe.TASK.Options):
            return job.options
        key = job.key()
        if key not in self._options:
            self._options = {key: job.typed_options(self.recipe.TASK.Options)}
        return self._options[key]

    def _load(self, job, site):
        path = site_path(site, "data")
        if site.get("data") == "sample" and job.dataset in self.recipe.TASK.samples:
            path = self.recipe.TASK.sample_path(job.dataset)   # as --data sample reads it
        # The options too: a site's process may serve runs of another image size or split.
        key = (path, side_key(site), job.seed, repr(self.options(job)))
        if key not in self._loaded:
            try:
                loaded = self.recipe.load(path, self.options(job), seed=job.seed,
                                          site=site, dataset=job.dataset)
            except (OSError, ValueError) as err:   # one line: file, record, field
                message = " ".join(str(err).split())
                raise SiteDataError(message if path in message or ":" in message
                                    else f"{path}: {message}") from None
            self._loaded = {key: loaded}
        return self._loaded[key]

    def _side(self, job, side):
        """The side's :class:`Resources`, checked against the facts the sites agreed on."""
        options = self.options(job)
        key = (job.key(), side_key(side))
        if key not in self._resources:
            try:
                self._resources = {key: self.recipe.model_resources(
                    job.model or self.recipe.TASK.models[0], options, side)}
            except (OSError, ValueError) as err:
                raise SiteDataError(" ".join(str(err).split())) from None
        resources = self._resources[key]
        for name, value in resources.facts.items():
            agreed = job.facts.get(name)
            if agreed and agreed != value:
                whose = "" if side.get("site") else "the server's "
                what = f"{resources.files[name]}: its {name}" if name in resources.files \
                    else name
                raise SiteDataError(f"{whose}{what} (fingerprint {value}) differs from the one "
                                    f"the sites agreed on ({agreed}): every side needs the "
                                    f"same public file")
        return resources

    def refusal(self, job):
        """Why ``job`` cannot run across sites (:meth:`Recipe.refusal` of its options), or
        None: :meth:`agree`, :meth:`model` and :meth:`site_data` refuse it."""
        return self.recipe.refusal(self.options(job))

    def _refuse(self, job):
        refusal = self.refusal(job)
        if refusal:
            raise SiteDataError(refusal)

    def survey(self, job, site):
        """{labels, examples, and the resources' facts} of the site's data and files."""
        loaded = self._load(job, site)
        resources = self._side(job, site)
        return {"labels": list(loaded.labels),
                **{k: loaded.facts.get(k) for k in self.UNITED},
                "examples": loaded.examples("train"),
                **{k: v for k, v in loaded.facts.items() if k in self.AGREED},
                **resources.facts,
                **self.recipe.survey(loaded, self.options(job), resources)}

    def agree(self, head, sites, log, concept_file=None):
        """:meth:`tffre.tasks.sites.Sites.agree` with the labels united (sorted) instead of
        required alike (:attr:`AGREED` holds only the recipe's facts): a hospital without
        one class still takes part. A recipe whose :attr:`Recipe.AGREED` names ``labels`` (a
        task's fixed label names) has them required alike, in their order."""
        from tffre.data.concepts import concepts_for
        job = self.recipe.agree(Sites.agree(self, head, sites, log, concept_file), sites, log)
        if "labels" in self.AGREED:
            return job
        union = sorted({str(x) for s in sites if not s.error for x in s.facts.get("labels")
                        or ()})
        return dataclasses.replace(job, labels=tuple(union),
                                   concepts=tuple(concepts_for(union, concept_file)))

    def disagreement(self, job, facts):
        """Why a site's survey differs from the agreed job: a label outside the job's, or an
        :attr:`AGREED` fact differing; None when it can take part."""
        extra = sorted(set(map(str, facts.get("labels") or ())) - set(job.labels))
        if extra and "labels" not in self.AGREED:   # else labels alike, as Sites says
            return f"its labels {extra} are not among the run's {list(job.labels)}"
        return Sites.disagreement(self, job, facts)

    def _built(self, job, side):
        """The recipe's :class:`Built` model of ``job`` on ``side``, built once for both
        :meth:`model` and :meth:`site_data` (the last job and side's)."""
        resources = self._side(job, side)
        key = (job.key(), side_key(side))
        if key not in self._built_for:
            united = {k: list(job.entity_types) if k == "entity_types" else job.facts.get(k)
                      for k in self.UNITED}
            united.update({k: job.facts.get(k) for k in self.recipe.JOB_FACTS})
            self._built_for = {key: self.recipe.build(ModelSpec(
                job.model or self.recipe.TASK.models[0], self.options(job),
                tuple(job.labels), resources, job.seed, (job.algorithm,), united))}
        return self._built_for[key]

    def _prefix(self, job, side, built, folder=None):
        """(prefix model, activation store) of ``built``'s frozen prefix on ``side``: built
        from the side's encoder and the job's seed (:func:`tffre.models.partial.frozen_prefix`),
        once per job, side and cache folder in this process."""
        from tffre.models.partial import frozen_prefix
        key = (job.key(), side_key(side), folder)
        if key not in self._prefixes:
            self._prefixes = {}   # one job at a time: a new job frees the last prefix
            self._prefixes[key] = frozen_prefix(built.prefix.build, built.load_pretrained,
                                                job.seed, folder)
        return self._prefixes[key]

    def model(self, job, side):
        """The :class:`tffre.tasks.sites.SiteModel` of ``job`` built by the recipe from the
        side's own files."""
        import tensorflow as tf
        self._refuse(job)
        built = self._built(job, side)
        x_spec, export, identity = built.x_spec, None, ""
        if built.prefix is not None:   # the top trains on the prefix's activations
            from tffre.data.federated import ordered
            from tffre.models.partial import HIDDEN, exporter
            prefix, store = self._prefix(job, side, built,
                                         site_path(side, "prefix-cache", required=False))
            identity = store.identity
            hidden = tf.TensorSpec((None,) + tuple(prefix.output_shape[1:]), tf.float32)
            if isinstance(x_spec, dict):   # as with_hidden adds it, ordered as FederatedData
                x_spec = ordered({**x_spec, HIDDEN: hidden})
            else:   # as FederatedData orders a dict: by key
                x_spec = collections.OrderedDict([(HIDDEN, hidden), ("inputs", x_spec)])
            export = exporter(built.prefix.full_model_fn, prefix)
        return task_model(self.recipe, built, self.options(job), job.labels,
                          input_spec=(x_spec, tf.TensorSpec((None,), tf.int32)
                                      if built.y_spec is None else built.y_spec),
                          export=export, identity=identity)

    def site_data(self, job, site):
        """The site's :class:`tffre.tasks.sites.SiteData`: its splits encoded by the recipe's
        model, labels indexed by the job's."""
        self._refuse(job)
        loaded = self._load(job, site)
        built = self._built(job, site)
        try:
            arrays, annotations = self.recipe.encode(built, loaded, tuple(job.labels), site)
        except ValueError as err:   # names the split (or the document) and the field
            raise SiteDataError(f"{site_path(site, 'data')}: "
                                f"{' '.join(str(err).split())}") from None
        if built.prefix is not None:   # this site's activations of the frozen prefix, once
            from tffre.models.partial import cache_clients
            prefix, store = self._prefix(job, site, built,
                                         site_path(site, "prefix-cache", required=False))
            arrays = next(iter(cache_clients({site.get("site", "site"): arrays}, prefix,
                                             store).values()))
        return SiteData(train=arrays.pop("train"), held_out=arrays, annotations=annotations)

    def server_data(self, job, side):
        """D_v at the server (FedED): (x, y) of ``side``'s ``server-data`` file or folder
        (:meth:`Recipe.read_server_data`), encoded as the sites encode their data (through
        the same frozen prefix); labels indexed by ``job.labels``."""
        path = site_path(side, "server-data")
        try:
            records = self.recipe.read_server_data(path, self.options(job),
                                                   dataset=job.dataset, labels=job.labels)
        except (OSError, ValueError) as err:   # "file line N: field: message"
            message = " ".join(str(err).split())
            raise SiteDataError(message if path in message else f"server-data: {message}") \
                from None
        if not len(records):
            raise SiteDataError(f"{path}: server-data has no training examples")
        built = self._built(job, side)
        try:
            x = built.encode(records)
        except ValueError as err:   # names the example and the field
            raise SiteDataError(f"{path}: server-data: {err}") from None
        if built.prefix is not None:   # the sites predict on D_v through the same prefix
            from tffre.models.partial import activations, with_hidden
            prefix, store = self._prefix(job, side, built)
            x = with_hidden(x, store.get(x, lambda x: activations(prefix, x)))
        labels = Loaded({}, tuple(job.labels))
        return x, labels.ids(records)

    def check_site(self, site, dataset=None):
        """``python -m tffre data check``'s report of the site's ``data`` as one line, as
        ``python -m tffre data check --dataset DATASET --data PATH`` checks it (every problem
        counted, the first named); a task of several formats given none: what any format
        needs (:func:`tffre.tasks.sites.check_any_site`); the recipe's own ``check_site(site,
        dataset)`` when it has one (data that is not a path)."""
        own = getattr(self.recipe, "check_site", None)
        if own is not None:
            return own(site, dataset)
        if not dataset and len(self.recipe.TASK.datasets) > 1:
            return check_any_site(site)
        dataset = dataset or self.recipe.TASK.datasets[0]
        path = site_path(site, "data")
        options = self.recipe.TASK.Options.resolve({"data": path})
        report = self.recipe.check_data(dataset, options, site=site)
        return check_report_line(report, dataset, path)
