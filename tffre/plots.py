"""Curves against round (like FLCMC Figs. 14-21) and the federated split (Figs. 5-6).

Also the per-client label mix of a label-skew split (like FedCMC Fig. 1),
:func:`plot_label_mix`.

Safe to use from a library or a notebook: each function builds its own
``matplotlib.figure.Figure``, draws it with the Agg canvas and writes a PNG.
This module never imports ``matplotlib.pyplot`` and never changes the
backend. Every function returns the Figure (already written to ``path``);
``fig.savefig`` writes it again elsewhere, and a notebook shows it inline.
"""

import math

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

# Curves with more points than this are drawn as lines only: markers would
# merge into a thick band, and the line shows every point anyway.
_MAX_MARKED_POINTS = 40
# Legend rows per column, beyond which the legend grows another column
# instead of running off the bottom of the figure.
_LEGEND_ROWS = 20


def _distinct_colors(n):
    """Returns ``n`` pairwise distinct RGBA colours, qualitative while that is possible.

    tab10 for up to 10, tab20 for up to 20 (the default colour cycle repeats
    after 10), then ``n`` points of a smoothly interpolated turbo map.
    """
    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(n)]
    # Interpolated (not the 256-entry lookup table) so any n gives n colours.
    turbo = LinearSegmentedColormap.from_list("turbo_smooth", matplotlib.colormaps["turbo"].colors)
    return [turbo(x) for x in np.linspace(0.0, 1.0, n)]


def _new_figure(ncols, figsize):
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, ncols)


def _save(fig, path, title):
    """Titles and writes a figure; returns it."""
    if title:
        fig.suptitle(title)
    # bbox_inches="tight": nothing drawn outside the axes (legends) is cut off.
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def _finite(rows, column):
    """``rows``' rounds and ``column`` values where the value is a finite number."""
    if column not in rows:
        return rows["round"].iloc[:0], rows["round"].iloc[:0]
    values = pd.to_numeric(rows[column], errors="coerce")
    keep = np.isfinite(values.to_numpy(dtype=float))
    return rows["round"][keep], values[keep]


def plot_curves(metrics, path, title=None, reference=None):
    """Writes a PNG with test accuracy (F1 where ``test_f1`` has values) and train loss against
    round; returns the Figure.

    Args:
      metrics: a pandas DataFrame with columns algorithm, round, test_accuracy,
        train_loss. Points whose value is missing, NaN or infinite (rounds
        without evaluation, or where every client was excluded) are skipped.
      path: the PNG path.
      title: optional figure title.
      reference: optional paper values, ``{algorithm: {"test_accuracy": value
        or None, "train_loss": value or None}}``, drawn as dashed horizontal
        lines in the algorithm's colour, labelled "<algorithm> (paper)".

    Returns:
      The ``matplotlib.figure.Figure``; its axes are [accuracy, loss].
    """
    reference = reference or {}
    names = list(dict.fromkeys(metrics["algorithm"]))
    names += [n for n in reference if n not in names]
    colors = dict(zip(names, _distinct_colors(len(names))))
    fig, (ax_acc, ax_loss) = _new_figure(2, (11, 4))
    # Relation extraction reports F1 (tffre.metrics.relation_f1): plot it instead of accuracy.
    has_f1 = "test_f1" in metrics and pd.to_numeric(metrics["test_f1"], errors="coerce").notna().any()
    panels = ((ax_acc, "test_f1", "test F1", "F1") if has_f1 else
              (ax_acc, "test_accuracy", "test accuracy", "Acc"),
              (ax_loss, "train_loss", "train loss", "loss"))
    rounds = pd.to_numeric(metrics["round"], errors="coerce").dropna()
    for ax, column, ylabel, short in panels:
        for name, rows in metrics.groupby("algorithm", sort=False):
            x, y = _finite(rows, column)
            if len(x):
                ax.plot(x, y, label=name, color=colors[name],
                        marker="o" if len(x) <= _MAX_MARKED_POINTS else None, markersize=4)
        for name, values in reference.items():
            value = (values or {}).get(column)
            if value is not None and np.isfinite(value):
                ax.axhline(value, linestyle="--", linewidth=1, color=colors[name],
                           label=f"{name} (paper)")
        ax.set(xlabel="round", ylabel=ylabel, title=short)
        # min_n_ticks=1: with the default 2, a 1-round run (one integer in
        # view) falls back to fractional ticks.
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1, steps=[1, 2, 5, 10]))
        if len(rounds):
            # Padding keeps a lone round (or the first and last) off the frame.
            lo, hi = float(rounds.min()), float(rounds.max())
            pad = max(0.5, 0.03 * (hi - lo))
            ax.set_xlim(lo - pad, hi + pad)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    return _save(fig, path, title)


def plot_partition(stats, path, label_columns, title=None, legend_names=None):
    """Writes a PNG of the federated split, like FLCMC Figures 5 and 6; returns the Figure.

    Left: training examples per client; right: each client's training label
    mix as stacked bars, one distinct colour per label, with the legend to
    the right of the axes (in as many columns as the labels need).

    Args:
      stats: DataFrame with columns client, split, examples and one column per label.
      path: the PNG path.
      label_columns: the label column names, in label order.
      title: optional figure title.
      legend_names: names to show in the legend instead of the column names.

    Returns:
      The ``matplotlib.figure.Figure``; its axes are [examples per client,
      label mix per client].
    """
    train = stats[stats["split"] == "train"]
    shown = list(legend_names or label_columns)
    ncol = max(1, math.ceil(len(label_columns) / _LEGEND_ROWS))
    # Each legend column takes width from the axes; widen the figure to match.
    fig, (ax_size, ax_mix) = _new_figure(2, (12 + 1.8 * ncol, 4.5))
    clients = train["client"].astype(str)
    ax_size.bar(clients, train["examples"], color="tab:blue")
    ax_size.set(xlabel="client", ylabel="training examples", title="examples per client")
    bottom = np.zeros(len(train))
    for column, name, color in zip(label_columns, shown, _distinct_colors(len(label_columns))):
        values = train[column].to_numpy(dtype=float)
        ax_mix.bar(clients, values, bottom=bottom, label=name, color=color)
        bottom = bottom + values
    ax_mix.set(xlabel="client", ylabel="training examples", title="label mix per client")
    if len(label_columns):
        # Reversed, so the legend reads top to bottom like the stacks.
        handles, labels = ax_mix.get_legend_handles_labels()
        ax_mix.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      borderaxespad=0.0, fontsize=7, ncol=ncol)
    for ax in (ax_size, ax_mix):
        ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    return _save(fig, path, title)


def plot_label_mix(mix, path, title=None):
    """Writes a PNG of each client's label counts as a stacked horizontal bar; returns the Figure.

    Like FedCMC Fig. 1(a): one bar per client (client_0 at the top), one
    segment per label in column order, one distinct colour per label, the
    legend to the right of the axes.

    Args:
      mix: a DataFrame from :func:`tffre.data.partition.label_mix` (index:
        clients, columns: labels; a ``total`` column is ignored).
      path: the PNG path.
      title: optional figure title.

    Returns:
      The ``matplotlib.figure.Figure``; its single axes holds one bar
      container per label.
    """
    labels = [column for column in mix.columns if column != "total"]
    clients = [str(name) for name in mix.index]
    ncol = max(1, math.ceil(len(labels) / _LEGEND_ROWS))
    # About a quarter inch per bar, so 50 clients (FedCMC's largest K) stay legible.
    fig, ax = _new_figure(1, (8 + 1.8 * ncol, max(3.0, 1.0 + 0.25 * len(clients))))
    y = np.arange(len(clients))
    left = np.zeros(len(clients))
    for label, color in zip(labels, _distinct_colors(len(labels))):
        values = mix[label].to_numpy(dtype=float)
        ax.barh(y, values, left=left, label=str(label), color=color)
        left = left + values
    ax.set_yticks(y, clients)
    ax.invert_yaxis()  # client_0 on top, as the table reads
    ax.tick_params(axis="y", labelsize=7)
    ax.set(xlabel="examples", title="label mix per client")
    if labels:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7,
                  ncol=ncol)
    return _save(fig, path, title)
