"""Experiments: a resolved configuration (:mod:`tffre.config`) in, result files out.

Each dataset module (:mod:`tffre.tasks.synthetic`,
:mod:`tffre.tasks.imcs`, :mod:`tffre.tasks.relations` for the
relation-extraction sets, :mod:`tffre.tasks.images`,
:mod:`tffre.tasks.documents` for document-level RE) turns the configuration into a :class:`Job`:
federated data, a model, a loss, the label names and the encoder that turns
new inputs into model inputs. :func:`run` does the rest the same way for
every dataset: output folder, :func:`tffre.runner.run_experiment`, saved
models, ``summary.json``, and a table beside the paper's.
"""

import dataclasses
import importlib
import os
import time
from typing import Any, Callable, Optional

from tffre import config as config_lib
from tffre import paper_tables
from tffre.jsonio import read_json_object, write_json

# Options a resumed run may change: they do not alter what a round computes.
RESUMABLE_CHANGES = ("num_rounds", "eval_every", "checkpoint_every", "executor",
                     "max_parallel_clients", "loop", "client_workers")


@dataclasses.dataclass
class Job:
    """What a dataset module prepares for :func:`run`."""
    data: Any                       # tffre.data.FederatedData
    model_fn: Callable[[], Any]     # a fresh, uncompiled Keras model
    loss: Any                       # the Keras loss
    title: str
    label_names: list
    encoder: Any                    # turns new inputs into model inputs; has save(folder);
                                    # None: no bundle is saved (document RE)
    info: dict = dataclasses.field(default_factory=dict)   # extra summary fields
    write_extras: Optional[Callable[[str], None]] = None   # e.g. the partition files
    # Puts pretrained weights (e.g. word vectors) into a Keras model of model_fn; the runner
    # loads them into the server state after initialize, never into model_fn's graphs.
    load_pretrained: Optional[Callable[[Any], None]] = None
    # Index of the "no relation" class: the run reports relation F1 (tffre.metrics).
    negative_label: Optional[int] = None
    # The server's labelled set D_v as (x, y) arrays (FedED), held out of the clients' data.
    server_data: Any = None
    # Task values the algorithms take (FedCB's class concepts and prompt set).
    context: dict = dataclasses.field(default_factory=dict)
    # Report macro-F1 over the classes (FedCB's image tables).
    macro_f1: bool = False
    # How the runner evaluates the global model: a kind of tffre.evaluation.EVALUATORS
    # ("classification"; "docre": P/R/F1 of the relations over candidate pairs).
    evaluation: str = "classification"


def label_mix_writer(mix, title):
    """A :attr:`Job.write_extras` writing a label split's ``partition.csv`` and
    ``partition.png`` (each client's label counts, FedCMC Fig. 1(a)) into the run's folder."""
    def write(out_dir):
        from tffre.plots import plot_label_mix
        mix.to_csv(os.path.join(out_dir, "partition.csv"), index_label="client")
        plot_label_mix(mix, os.path.join(out_dir, "partition.png"), title=title)
    return write


def needs_features(algorithm_names):
    """True when one of the algorithms builds on the task model's ``features`` output."""
    from tffre import registry
    return any(registry.get_spec(n).load_definition().needs_features for n in algorithm_names)


def prepare(cfg):
    """The :class:`Job` of ``cfg.dataset`` (loads and splits the data; writes nothing)."""
    module = "relations" if cfg.dataset in config_lib.RE_DATASETS else \
        "images" if cfg.dataset in config_lib.IMAGE_DATASETS else \
        "documents" if cfg.dataset in config_lib.DOCRE_DATASETS else cfg.dataset
    return importlib.import_module(f"tffre.tasks.{module}").prepare(cfg)


def check_resume(cfg):
    """Refuses to resume a run whose saved configuration differs from ``cfg``."""
    path = os.path.join(cfg.out, "config.json")
    if not os.path.isfile(path):
        raise config_lib.ConfigError(f"--resume: {path} is missing, so the run cannot be "
                                     f"checked; use --overwrite")
    saved = read_json_object(path, config_lib.ConfigError)
    now = config_lib.persistent_values(cfg)
    changed = [k for k in now if k not in RESUMABLE_CHANGES and saved.get(k) != now[k]]
    if changed:
        raise config_lib.ConfigError(
            "--resume: options differ from the saved run: " + ", ".join(
                f"{config_lib.BY_NAME[k].cli} {saved.get(k)!r} -> {now[k]!r}" for k in changed))


def run(cfg):
    """Runs the experiment ``cfg`` describes and prints its table. Returns the summary dict."""
    import tensorflow as tf
    from tffre import bundle, runner
    from tffre.runtime import federated_runtime

    start = time.perf_counter()
    if cfg.resume:
        check_resume(cfg)
    tf.keras.utils.set_random_seed(cfg.seed)
    job = prepare(cfg)
    runner.prepare_out_dir(cfg.out, resume=cfg.resume, overwrite=cfg.overwrite)
    write_json(os.path.join(cfg.out, "config.json"), config_lib.persistent_values(cfg))
    if job.write_extras is not None:
        job.write_extras(cfg.out)
    names = cfg.algorithm.split(",")   # registry spellings (tffre.config.algorithm_list)
    table, reference = paper_tables.reference(cfg.dataset, cfg.model, alpha=cfg.alpha,
                                              algorithms=names,
                                              partition=getattr(cfg, "partition", None))

    def save_model(folder, model, name, round_num):
        bundle.save_bundle(folder, model, label_names=job.label_names, encoder=job.encoder,
                           metadata={"algorithm": name, "round": round_num,
                                     "dataset": cfg.dataset, "model": cfg.model,
                                     "task": getattr(cfg, "task", None), "seed": cfg.seed})

    with federated_runtime():
        summary = runner.run_experiment(
            job.data, job.model_fn, loss=job.loss, algorithm_names=names,
            num_rounds=cfg.num_rounds, clients_per_round=cfg.clients_per_round,
            out_dir=cfg.out, batch_size=cfg.batch_size, seed=cfg.seed,
            eval_every=cfg.eval_every, evaluation=job.evaluation,
            hparams={k: getattr(cfg, k) for k in config_lib.ALGORITHM_OPTIONS},
            progress=not cfg.no_progress, title=job.title,
            checkpoint_every=cfg.checkpoint_every, resume=cfg.resume,
            # A job without an input encoder has no bundle to save (document RE: the predict
            # command does not read documents).
            save_model=save_model if job.encoder is not None else None,
            load_pretrained=job.load_pretrained, executor=cfg.executor,
            max_parallel_clients=cfg.max_parallel_clients, loop=cfg.loop,
            client_workers=cfg.client_workers,
            reference={n: reference[n] for n in names if n in reference},
            negative_label=job.negative_label, centralised=centralised_setting(cfg, names),
            class_names=job.label_names, server_data=job.server_data, context=job.context,
            macro_f1=job.macro_f1)
    summary.update(job.info, config=config_lib.persistent_values(cfg), paper_table=table,
                   wall_seconds=round(time.perf_counter() - start, 1),
                   f1_kind="macro" if job.macro_f1 else "docre" if job.evaluation == "docre"
                   else "relation")
    write_json(os.path.join(cfg.out, "summary.json"), summary)
    print(format_report(summary, reference, table))
    return summary


def centralised_setting(cfg, names):
    """The centralised upper bound's setting (``--centralised``), or None.

    It sees as many examples as one federated run: num_rounds x num_epochs
    passes over the sampled fraction of the data (at least one epoch), with
    the first algorithm's local optimizer and learning rate.
    """
    if not getattr(cfg, "centralised", False):
        return None
    from tffre import registry
    spec = registry.get_spec(names[0])
    hp = registry.resolve_hparams(names[0], **config_lib.algorithm_hparams(cfg, names[0]))
    epochs = max(1, int(round(cfg.num_rounds * hp["num_epochs"] * cfg.clients_per_round
                              / cfg.clients)))
    local = registry.LOCAL_OPTIMIZERS[registry.local_optimizer_of(spec, hp)]
    return {"epochs": epochs, "optimizer_fn": lambda: local.make(hp)}


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def format_report(summary, reference=None, table=None):
    """The results table, beside the paper's figures where the paper has them."""
    if any("max_test_f1" in s for s in summary["algorithms"].values()):
        return format_f1_report(summary, reference, table)
    reference = reference or {}
    algos = summary["algorithms"]
    has_dev = any("test_accuracy_at_best_dev" in s for s in algos.values())
    lines = []
    baseline = summary.get("majority_class_test_accuracy")
    head = f"{summary['dataset']}: test accuracy, max over rounds (as the paper)"
    if baseline is not None:
        head += f"; majority-class baseline {baseline:.4f}"
    lines.append(head)
    cols = f"{'algorithm':<10} {'max acc':>8} {'round':>5}"
    if has_dev:
        cols += f" {'acc@best dev':>12} {'round':>5}"
    cols += f" {'min loss':>9} {'paper acc':>9} {'paper loss':>10} {'mean ms':>8} " \
            f"{'paper ms':>8} {'up B/round':>12} {'down B/round':>12}"
    lines.append(cols)
    for name, s in algos.items():
        ref = reference.get(name, {})
        line = f"{name:<10} {_fmt(s.get('max_test_accuracy'), '.4f'):>8} " \
               f"{_fmt(s.get('round_of_max_accuracy'), 'd'):>5}"
        if has_dev:
            line += f" {_fmt(s.get('test_accuracy_at_best_dev'), '.4f'):>12} " \
                    f"{_fmt(s.get('round_of_best_dev'), 'd'):>5}"
        line += f" {_fmt(s.get('min_train_loss'), '.4f'):>9} " \
                f"{_fmt(ref.get('test_accuracy'), '.4f'):>9} " \
                f"{_fmt(ref.get('train_loss'), '.4f'):>10} {s['mean_round_ms']:>8.1f} " \
                f"{_fmt(ref.get('round_ms'), '.1f'):>8} {s['bytes_uploaded_per_round']:>12,.0f} " \
                f"{s['bytes_broadcast_per_round']:>12,.0f}"
        lines.append(line)
    if table:
        lines.append(f"paper: FLCMC {table}")
    return "\n".join(lines + _resources(summary))


def _resources(summary):
    """The wall time and peak memory line of a report (none before the run has finished)."""
    if "wall_seconds" not in summary:
        return []
    rss = summary.get("peak_rss_mib", {})
    return [f"wall time {summary['wall_seconds']:.0f} s; peak RSS {rss.get('python', 0):.0f} MiB "
            f"(python) + {rss.get('tff_worker', 0):.0f} MiB (TFF worker)"]


def format_docre_report(summary, reference=None, table=None):
    """The document-level RE table (FedLCC Tables 3-5's layout): test P/R/F1 at the round of
    best dev F1 (the authors' choice; the last round without a dev split), the intra- and
    inter-sentence F1 (and Ign F1 where scored), beside the paper's P/R/F1."""
    reference = reference or {}
    algos = summary["algorithms"]
    dev = any("test_f1_at_best_dev" in s for s in algos.values())
    ign = any("test_ign_f1_at_best_dev" in s or "final_test_ign_f1" in s for s in algos.values())
    lines = [f"{summary['dataset']}: relations over candidate pairs, % (test "
             + ("at the round of best dev F1" if dev else "at the last round") + ")",
             f"{'algorithm':<12} {'P':>6} {'R':>6} {'F1':>6} {'round':>5} {'intra':>6} "
             f"{'inter':>6}" + (f" {'Ign F1':>6}" if ign else "")
             + f" {'paper P':>7} {'paper R':>7} {'paper F1':>8} {'mean ms':>8} {'up B/round':>14}"]

    def pct(value):
        return _fmt(None if value is None else 100 * value, ".2f")

    for name, s in algos.items():
        at = "_at_best_dev" if dev else ""
        pick = (lambda k: s.get(f"test_{k}{at}")) if dev else \
            (lambda k: s.get(f"final_test_{k}"))
        ref = reference.get(name, {})
        line = (f"{name:<12} {pct(pick('precision')):>6} {pct(pick('recall')):>6} "
                f"{pct(pick('f1')):>6} "
                f"{_fmt(s.get('round_of_best_dev_f1' if dev else 'rounds'), 'd'):>5} "
                f"{pct(pick('intra_f1')):>6} {pct(pick('inter_f1')):>6}")
        if ign:
            line += f" {pct(pick('ign_f1')):>6}"
        line += (f" {pct(ref.get('precision')):>7} {pct(ref.get('recall')):>7} "
                 f"{pct(ref.get('test_f1')):>8} {s['mean_round_ms']:>8.0f} "
                 f"{s['bytes_uploaded_per_round']:>14,.0f}")
        lines.append(line)
    if table:
        lines.append(f"paper: {table} (real data; ours: the invented sample unless --data)")
    return "\n".join(lines + _resources(summary))


def format_f1_report(summary, reference=None, table=None):
    """The relation-extraction table: F1 per algorithm, beside the paper's where it has them."""
    if summary.get("f1_kind") == "docre":
        return format_docre_report(summary, reference, table)
    reference = reference or {}
    if summary.get("f1_kind") == "macro":
        lines = [f"{summary['dataset']}: macro-F1 over the classes, and accuracy"]
    else:
        lines = [f"{summary['dataset']}: relation F1 (micro over the positive classes; "
                 f"positive class for binary sets); a majority/negative guess scores 0"]
    lines.append(f"{'algorithm':<12} {'max F1':>7} {'round':>5} {'F1@best dev':>11} "
                 f"{'final F1':>8} {'max acc':>7} {'paper F1':>8} {'mean ms':>8} "
                 f"{'up B/round':>14}")
    for name, s in summary["algorithms"].items():
        ref = reference.get(name, {})
        lines.append(
            f"{name:<12} {_fmt(s.get('max_test_f1'), '.4f'):>7} "
            f"{_fmt(s.get('round_of_max_f1'), 'd'):>5} "
            f"{_fmt(s.get('test_f1_at_best_dev'), '.4f'):>11} "
            f"{_fmt(s.get('final_test_f1'), '.4f'):>8} "
            f"{_fmt(s.get('max_test_accuracy'), '.4f'):>7} "
            f"{_fmt(ref.get('test_f1'), '.4f'):>8} {s['mean_round_ms']:>8.0f} "
            f"{s['bytes_uploaded_per_round']:>14,.0f}")
    if table:
        lines.append(f"paper: {table} (real data; ours: the synthetic sample unless --data)")
    return "\n".join(lines + _resources(summary))
