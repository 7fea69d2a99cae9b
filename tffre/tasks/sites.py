"""What a deployment asks of a task: a site's data, the model on each side, the agreed facts.

Every built-in task derives this from its one recipe (:class:`tffre.tasks.recipe.RecipeSites`
of its ``RECIPE``; :meth:`tffre.tasks.Task.sites`), so no task writes it by hand. The
interface, a :class:`Sites` object, is what the deployment calls; its methods, each given the
run's :class:`DeployJob` and a side's own configuration (``site``: a node configuration, a
dict of ``data``, ``encoder`` and the task's other keys; never sent by the server):

* :meth:`Sites.survey`: what a site tells the server before training: its ``labels``,
  ``examples`` (the training count) and any fact the sides must agree on (entity types,
  a vocabulary's fingerprint), or a one-line :class:`SiteDataError`;
* :meth:`Sites.agree`: the job completed from every site's survey (labels equal, entity
  types united: :meth:`Sites.agree`'s default), sites that disagree marked;
* :meth:`Sites.model`: the :class:`SiteModel` (model_fn, loss, input spec, pretrained
  weights at the server, what a bundle saves) built from the side's own files;
* :meth:`Sites.site_data`: the site's :class:`SiteData` (its train split and held-out splits);
* :meth:`Sites.check_site` (optional): what a site checks of its own data when it starts;
* :meth:`Sites.server_data` (FedED only): the server's labelled set D_v.

A task of your own is the same object (``deploy-task="module:attribute"``, from a site's
or the server's own configuration only).
"""

import dataclasses
import hashlib
import json
import os
from typing import Any, Optional, Tuple

from tffre.runner.run_settings import TaskModel


@dataclasses.dataclass(frozen=True)
class DeployJob:
    """The run's shared description, what the server sends every side (described in
    :mod:`tffre.deploy.tasks`). It is the input of every :class:`Sites` method, so it is
    defined here, below the deployment that fills it.

    Typed: ``hparams`` is the algorithm's ``Hparams`` object (a mapping given is parsed
    once, when the job is made: :func:`tffre.registry.resolve_hparams`), from the server's
    command line to the site's round. ``options`` is the task's ``Options`` at the server (the
    options naming a side's own files unset); a site gets them as the message's mapping and
    its task parses them once per job (:meth:`tffre.tasks.recipe.RecipeSites.options`: this
    module, below the task registry, cannot name the task's ``Options``). JSON exists only
    in :meth:`to_json` and :meth:`from_json`, the message."""
    task: str
    dataset: str
    algorithm: str
    #: The algorithm's ``Hparams`` (a mapping given is parsed in ``__post_init__``).
    hparams: Any
    #: The task's ``Options`` at the server; their mapping in a site's message.
    options: Any
    batch_size: int
    seed: int
    #: The run's ``--model`` (a task with several: IMCS's lstm or mean-logistic).
    model: Optional[str] = None
    labels: Tuple[str, ...] = ()
    entity_types: Tuple[str, ...] = ()
    num_clients: Optional[int] = None
    concepts: Optional[Tuple[str, ...]] = None
    #: D_v's inputs {"shape": [count, ...], "dtype": name} (FedED), never their values.
    server_inputs: Optional[dict] = None
    #: What else the sites agreed on ({name: value}: a vocabulary's fingerprint), as the
    #: task's :meth:`tffre.tasks.sites.Sites.agree` puts it.
    facts: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.hparams, dict) and self.algorithm:
            from tffre.registry import resolve_hparams
            object.__setattr__(self, "hparams", resolve_hparams(self.algorithm, self.hparams))

    def to_json(self):
        """The job as canonical JSON (sorted keys)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=list)

    @classmethod
    def from_json(cls, text):
        """The job of :meth:`to_json`'s text."""
        raw = json.loads(text)
        for key in ("labels", "entity_types", "concepts"):
            if raw.get(key) is not None:
                raw[key] = tuple(raw[key])
        return cls(**raw)

    def key(self):
        """A short hash naming the round this job builds."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def typed_options(self, kind):
        """The job's options as the task's ``Options`` class ``kind``: as held when typed
        (the server's), else the message's mapping parsed (names ``kind`` does not declare
        dropped; the local paths, which the job never holds, at their defaults)."""
        if isinstance(self.options, kind):
            return self.options
        names = set(kind.names())
        return kind.resolve({k: v for k, v in self.options.items() if k in names})


class SiteDataError(ValueError):
    """A site's data cannot be used; the message is one line naming file, record and field."""


#: What a task gives a side for the job's model: the simulation's own type
#: (:class:`tffre.runner.run_settings.TaskModel`), so the two halves share one.
SiteModel = TaskModel


@dataclasses.dataclass
class SiteData:
    """A site's arrays: ``train`` (x, y) and ``held_out`` {split: (x, y)}; ``annotations``
    {split: {name: array}}: what the evaluation reads beside the data (document-level RE's
    ``pair_intra``), one row per example, or None."""
    train: tuple
    held_out: dict
    annotations: Optional[dict] = None


def site_path(site, key, required=True):
    """The node configuration's path ``key`` (absolute), or None when absent and optional."""
    value = site.get(key)
    if value in (None, ""):
        if required:
            raise SiteDataError(f"node config: {key} is required (e.g. --node-config "
                                f"'{key}=\"/site/...\"')")
        return None
    return os.path.abspath(os.path.expanduser(str(value)))


def blank(path):
    """True for a file that holds only whitespace (what the loaders read as no split); a large
    file is not read through."""
    from tffre.data.files import is_blank
    return os.path.getsize(path) < (1 << 16) and is_blank(path)


def check_any_site(site):
    """What any format needs, checked before a run names the dataset: a non-empty file, or a
    folder holding a training split (a non-empty file or folder whose name holds "train",
    or i2b2's ``txt/``) or only class folders (an image set the run splits). One line on what
    it holds, or :class:`SiteDataError`."""
    path = site_path(site, "data")
    if os.path.isfile(path):
        if blank(path):
            raise SiteDataError(f"{path}: the file is empty: nothing to train on")
        return f"{path}: one file (its format is checked when a run names the dataset)"
    if not os.path.isdir(path):
        raise SiteDataError(f"{path}: no such file or folder")

    def usable(name):
        full = os.path.join(path, name)
        return os.path.isdir(full) and os.listdir(full) or \
            os.path.isfile(full) and not blank(full)
    names = sorted(os.listdir(path))
    found = [n for n in names if ("train" in n.lower() or n == "txt") and usable(n)]
    held = [n for n in names if ("dev" in n.lower() or "test" in n.lower()) and usable(n)]
    classes = [n for n in names if os.path.isdir(os.path.join(path, n)) and usable(n)]
    if not found and not held and classes:   # Kvasir's layout: class folders, split by the run
        return (f"{path}: {len(classes)} class folders (their images are checked when a run "
                f"names the dataset)")
    if not found:
        what = f"only {', '.join(held)}" if held else "no split files"
        raise SiteDataError(f"{path}: {what}: nothing to train on (a site needs a training "
                            f"split: a file or folder whose name holds 'train', or i2b2's "
                            f"txt/)")
    shown = [n + "/" if os.path.isdir(os.path.join(path, n)) else n for n in found + held]
    return f"{path}: {', '.join(shown)} (their format is checked when a run names the dataset)"


def check_report_line(report, dataset, path):
    """``python -m tffre data check``'s report as a site's start-up line: a summary, or
    :class:`SiteDataError` with the first problem and the count."""
    if report.problems:
        more = len(report.problems) - 1
        raise SiteDataError(
            f"{' '.join(str(report.problems[0]).split())}"
            + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
            + f"; see: python -m tffre data check --dataset {dataset} --data {path}")
    counts = {s.name: s.count for s in report.splits}
    if not counts.get("train"):
        raise SiteDataError(f"{path}: no training examples as {dataset}: nothing to "
                            f"train on")
    return f"{path}: {dataset}, " + ", ".join(f"{n} {c}" for n, c in counts.items()) \
        + " examples"


class Sites:
    """A task's deployment (see the module docstring); the defaults every task shares."""

    #: Task options that name local files: each side uses its own, so they stay out of the job.
    LOCAL_OPTIONS = ("data", "encoder", "server_data", "concept_file", "prefix_cache")
    #: The survey's facts every site must report alike (:meth:`agree`); ``labels`` always.
    AGREED = ("labels",)
    #: The survey's facts the job holds as the union of the sites' (sorted).
    UNITED = ("entity_types",)
    #: FedCB's prompt set for the class concepts (:mod:`tffre.algorithms.fedcb`): "text",
    #: or "image" for the image task.
    PROMPTS = "text"

    def survey(self, job, site):
        """{labels, examples, ...} of the site's data (:class:`SiteDataError` if bad)."""
        raise NotImplementedError

    def model(self, job, site):
        """The job's :class:`SiteModel` built from this side's own files."""
        raise NotImplementedError

    def site_data(self, job, site):
        """The site's :class:`SiteData`."""
        raise NotImplementedError

    @staticmethod
    def refusal(job):
        """Why ``job`` cannot run across sites (an option a deployment cannot honour), or
        None: :meth:`agree` refuses it."""
        return None

    def agree(self, head, sites, log, concept_file=None):
        """The job ``head`` completed from the sites' surveys (``site.facts``): every fact of
        :attr:`AGREED` equal to the first site's, the run's (else the site is marked with
        ``site.error`` and takes no part), the union of :attr:`UNITED`, and the number of
        sites that agree. FedCB's class concepts of the agreed labels come from the server's
        ``concept_file`` (else the built-in names), as a run's ``prepare`` gives them, and
        ``facts["prompts"]`` names the task's prompt set (:attr:`PROMPTS`). A job the task
        cannot run across sites (:meth:`refusal`) is refused first, in one line."""
        refusal = getattr(self, "refusal", Sites.refusal)(head)
        if refusal:
            log(f"error: {refusal}")
            raise SiteDataError(refusal)
        agreed = getattr(self, "AGREED", Sites.AGREED)   # a task object of your own
        first = sites[0].facts
        united = {key: set() for key in getattr(self, "UNITED", Sites.UNITED)}
        for site in sites:
            for key in agreed:
                if _plain(site.facts.get(key)) != _plain(first.get(key)):
                    # The words Sites.disagreement uses later: one line per site in the log.
                    site.error = (f"its {key} {_plain(site.facts.get(key))} differ from the "
                                  f"run's {_plain(first.get(key))}")
                    log(f"site {site.name} (node {site.node_id}): {site.error}; it takes no "
                        f"part")
                    break
            else:
                for key in united:
                    united[key].update(site.facts.get(key) or ())
        usable = [s for s in sites if not s.error]
        facts = {k: _plain(first.get(k)) for k in agreed if k != "labels"
                 and first.get(k) is not None}
        facts.update({k: sorted(v) for k, v in united.items() if k != "entity_types"})
        facts["prompts"] = getattr(self, "PROMPTS", Sites.PROMPTS)
        labels = tuple(str(x) for x in first.get("labels", ()))
        from tffre.data.concepts import concepts_for
        return dataclasses.replace(
            head, labels=labels, entity_types=tuple(sorted(united.get("entity_types", ()))),
            num_clients=len(usable), facts={**head.facts, **facts},
            concepts=tuple(concepts_for(labels, concept_file)) if labels else None)

    def disagreement(self, job, facts):
        """Why a site's survey (``facts``, its hello) differs from the agreed ``job`` (a fact
        of :attr:`AGREED` other than the job's), or None: a site that says hello after the
        agreement, or again after it was left out, takes part only when it agrees."""
        for key in getattr(self, "AGREED", Sites.AGREED):
            want = list(job.labels) if key == "labels" else job.facts.get(key)
            if _plain(facts.get(key)) != _plain(want):
                return (f"its {key} {_plain(facts.get(key))} differ from the run's "
                        f"{_plain(want)}")
        return None

    def check_site(self, site, dataset=None):
        """What a site checks of its own data when it starts: one line on what it holds, or
        :class:`SiteDataError` when it has nothing to train on; None when nothing could be
        checked before a run's job arrives. The default asks :meth:`survey` with a job that
        names only ``dataset``."""
        job = DeployJob(task="", dataset=dataset or "", algorithm="", hparams={}, options={},
                        batch_size=1, seed=0)
        try:
            facts = self.survey(job, site)
        except SiteDataError:
            raise
        except Exception:   # the survey needs the run's job: checked when the run starts
            return None
        if not int(facts.get("examples", 0)):
            raise SiteDataError(f"{site.get('data')}: no training examples: nothing to train on")
        return f"{site.get('data')}: {int(facts['examples'])} training examples"


def _plain(value):
    """A fact as JSON gives it back (lists, not tuples), for comparing the sites' answers."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def check_site_data(task, site, dataset=None):
    """What a site checks of its own data when it starts (``deploy supernode``): one line on
    what it holds, or :class:`SiteDataError` (one line) when it has nothing to train on.

    The task's own ``check_site(site, dataset)`` decides; a task object without one (of
    your own) is checked as :meth:`Sites.check_site` checks."""
    return method_of(task, "check_site")(site, dataset)


def method_of(task, name):
    """``task``'s method ``name``; for a task object of your own that lacks it, the
    :class:`Sites` default bound to that object."""
    own = getattr(task, name, None)
    if own is not None:
        return own
    return lambda *args: getattr(Sites, name)(task, *args)
