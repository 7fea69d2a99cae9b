"""Experiments: a resolved configuration (:mod:`tffre.config`) in, result files out.

The dataset's task (:mod:`tffre.tasks`) turns the configuration into a
:class:`tffre.runner.PreparedTask`: federated data, a model, a loss, the label names and
the encoder that turns new inputs into model inputs. :func:`run` does the rest
the same way for every dataset: output folder, :func:`tffre.runner.run_experiment`,
saved models, ``summary.json``, and a table beside the paper's.
"""

import os
import time

from tffre import paper_tables
from tffre.jsonio import write_json


def prepare(cfg):
    """The :class:`tffre.runner.PreparedTask` of ``cfg`` (loads and splits the data; writes
    nothing)."""
    return cfg.task.prepare(cfg)


def run(cfg):
    """Runs the experiment ``cfg`` describes and prints its table. Returns the summary dict."""
    import tensorflow as tf
    from tffre import runner
    from tffre.runner.rounds import bundle_saver
    from tffre.runtime import federated_runtime

    start = time.perf_counter()
    settings = cfg.run
    tf.keras.utils.set_random_seed(settings.seed)
    prepared = prepare(cfg)
    runner.prepare_out_dir(settings.out, resume=settings.resume, overwrite=settings.overwrite)
    if prepared.write_extras is not None:
        prepared.write_extras(settings.out)
    names = list(cfg.algorithms)
    table, reference = paper_tables.reference(cfg.dataset, cfg.model,
                                              alpha=getattr(cfg.options, "alpha", None),
                                              algorithms=names,
                                              partition=getattr(cfg.options, "partition", None))

    # One bundle writer for simulation and deployment (tffre.runner.rounds.bundle_saver).
    save_model = bundle_saver(prepared.label_names, prepared.model.encoder, {
        "dataset": cfg.dataset, "model": cfg.model, "task": getattr(cfg.options, "task", None),
        "seed": settings.seed})

    from tffre.provenance import input_paths
    from tffre.tasks import data_path
    inputs = input_paths(dict(cfg.values, data=data_path(cfg.dataset, cfg.values.get("data"))))
    with federated_runtime():
        summary = runner.run_experiment(
            prepared, cfg.hparams, settings,
            # A task without an input encoder has no bundle to save.
            save_model=save_model if prepared.model.encoder is not None else None,
            reference={n: reference[n] for n in names if n in reference}, config=cfg.values,
            inputs=inputs)
    summary.update(prepared.info, config=cfg.values, paper_table=table,
                   wall_seconds=round(time.perf_counter() - start, 1),
                   f1_kind="macro" if prepared.model.macro_f1 else "docre"
                   if prepared.model.evaluation == "docre" else "relation")
    write_json(os.path.join(settings.out, "summary.json"), summary)
    print(format_report(summary, reference, table))
    return summary


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
    # Dev alone chooses: with a dev split the reported figure is the test accuracy at the
    # round of best dev accuracy; the paper's max over rounds (chosen on test) comes after.
    head = f"{summary['dataset']}: " + (
        "test accuracy at the round of best dev accuracy; max over rounds as the paper "
        "reports it (chosen on test)" if has_dev else
        "test accuracy, max over rounds (as the paper; no dev split to choose on)")
    if baseline is not None:
        head += f"; majority-class baseline {baseline:.4f}"
    lookup = summary.get("lookup_test_accuracy")
    if lookup is not None:   # IMCS: what remembering the training sentences scores
        head += f"; lookup baseline {lookup:.4f}"
    lines.append(head)
    cols = f"{'algorithm':<10}"
    if has_dev:
        cols += f" {'acc@best dev':>12} {'round':>5}"
    cols += f" {'max acc':>8} {'round':>5}"
    cols += f" {'min loss':>9} {'paper acc':>9} {'paper loss':>10} {'mean ms':>8} " \
            f"{'paper ms':>8} {'up B/round':>12} {'down B/round':>12}"
    lines.append(cols)
    for name, s in algos.items():
        ref = reference.get(name, {})
        line = f"{name:<10}"
        if has_dev:
            line += f" {_fmt(s.get('test_accuracy_at_best_dev'), '.4f'):>12} " \
                    f"{_fmt(s.get('round_of_best_dev'), 'd'):>5}"
        line += f" {_fmt(s.get('max_test_accuracy'), '.4f'):>8} " \
                f"{_fmt(s.get('round_of_max_accuracy'), 'd'):>5}"
        line += f" {_fmt(s.get('min_train_loss'), '.4f'):>9} " \
                f"{_fmt(ref.get('test_accuracy'), '.4f'):>9} " \
                f"{_fmt(ref.get('train_loss'), '.4f'):>10} {s['mean_round_ms']:>8.1f} " \
                f"{_fmt(ref.get('round_ms'), '.1f'):>8} {s['bytes_uploaded_per_round']:>12,.0f} " \
                f"{s['bytes_broadcast_per_round']:>12,.0f}"
        lines.append(line)
    if table:
        lines.append(f"paper: FLCMC {table}")
    return "\n".join(lines + _resources(summary))


def _privacy(summary):
    """One line per algorithm trained with client-level differential privacy: its guarantee."""
    lines = []
    for name, s in summary["algorithms"].items():
        p = s.get("privacy")
        if p:
            clip = p["clip"] if isinstance(p["clip"], str) else f"{p['clip']:g}"
            lines.append(f"{name}: client-level DP, epsilon {p['epsilon']:.3g} at delta "
                         f"{p['delta']:.2g} after {p['rounds']} rounds (noise multiplier "
                         f"{p['noise_multiplier']:.3g}, clip {clip}, {p['sampling']}; "
                         f"{p['relation']})")
    return lines


def _resources(summary):
    """The wall time and peak memory line of a report (none before the run has finished),
    after the privacy lines of the algorithms that have them."""
    lines = _privacy(summary)
    if "wall_seconds" not in summary:
        return lines
    rss = summary.get("peak_rss_mib", {})
    return lines + [f"wall time {summary['wall_seconds']:.0f} s; peak RSS "
                    f"{rss.get('python', 0):.0f} MiB (python) + {rss.get('tff_worker', 0):.0f} "
                    f"MiB (TFF worker)"]


def docre_guesses(summary):
    """What guessing scores on document-level RE's test pairs, in % as the reports word it
    ("guessing no relation scores F1 0.00, the relation for every candidate pair 47.22"),
    or "" where the summary holds no guesses."""
    if summary.get("majority_class_test_f1") is None:
        return ""
    text = f"guessing no relation scores F1 {100 * summary['majority_class_test_f1']:.2f}"
    if summary.get("all_positive_test_f1") is not None:
        text += (f", the relation for every candidate pair "
                 f"{100 * summary['all_positive_test_f1']:.2f}")
    return text


def format_docre_report(summary, reference=None, table=None):
    """The document-level RE table (FedLCC Tables 3-5's layout): test P/R/F1 at the round of
    best dev F1 (the authors' choice; the last round without a dev split), the intra- and
    inter-sentence F1 (and Ign F1 where scored), beside the paper's P/R/F1."""
    reference = reference or {}
    algos = summary["algorithms"]
    dev = any("test_f1_at_best_dev" in s for s in algos.values())
    ign = any("test_ign_f1_at_best_dev" in s or "final_test_ign_f1" in s for s in algos.values())
    guesses = docre_guesses(summary)
    unscorable = (summary.get("splits", {}).get("test") or {}).get("unscorable_gold_pairs")
    lines = [f"{summary['dataset']}: relations, every gold pair counted, % (test "
             + ("at the round of best dev F1" if dev else "at the last round") + ")"
             + ("" if unscorable is None else
                f"; {unscorable} test gold pair(s) no candidate pair holds, counted as misses")
             + (f"; {guesses}" if guesses else ""),
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
        guesses = [f"guessing the majority class scores "
                   f"{_fmt(summary.get('majority_class_test_f1'), '.4f')}"]
        if summary.get("all_positive_test_f1") is not None:
            guesses.append(f"guessing a relation for every pair "
                           f"{summary['all_positive_test_f1']:.4f}")
        lines = [f"{summary['dataset']}: relation F1 (micro over the positive classes; "
                 f"positive class for binary sets); " + ", ".join(guesses)]
    # The reported figure first (F1 at the round of best dev), then the paper's max over rounds.
    lines.append(f"{'algorithm':<12} {'F1@best dev':>11} {'max F1':>7} {'round':>5} "
                 f"{'final F1':>8} {'max acc':>7} {'paper F1':>8} {'mean ms':>8} "
                 f"{'up B/round':>14}")
    for name, s in summary["algorithms"].items():
        ref = reference.get(name, {})
        lines.append(
            f"{name:<12} {_fmt(s.get('test_f1_at_best_dev'), '.4f'):>11} "
            f"{_fmt(s.get('max_test_f1'), '.4f'):>7} "
            f"{_fmt(s.get('round_of_max_f1'), 'd'):>5} "
            f"{_fmt(s.get('final_test_f1'), '.4f'):>8} "
            f"{_fmt(s.get('max_test_accuracy'), '.4f'):>7} "
            f"{_fmt(ref.get('test_f1'), '.4f'):>8} {s['mean_round_ms']:>8.0f} "
            f"{s['bytes_uploaded_per_round']:>14,.0f}")
    if table:
        lines.append(f"paper: {table} (real data; ours: the synthetic sample unless --data)")
    return "\n".join(lines + _resources(summary))
