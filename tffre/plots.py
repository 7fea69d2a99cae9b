"""Accuracy and loss curves against round, one line per algorithm (like FLCMC Figs. 14-21)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import MaxNLocator  # noqa: E402


def _save(fig, path, title):
    """Titles, lays out, writes and closes a figure; returns the path."""
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_curves(metrics, path, title=None):
    """Writes a PNG with test accuracy and train loss against round.

    Args:
      metrics: a pandas DataFrame with columns algorithm, round, test_accuracy,
        train_loss (rows without evaluation are skipped).
      path: the PNG path.
      title: optional figure title.
    """
    evaluated = metrics.dropna(subset=["test_accuracy"])
    fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(11, 4))
    for name, rows in evaluated.groupby("algorithm", sort=False):
        ax_acc.plot(rows["round"], rows["test_accuracy"], label=name)
        ax_loss.plot(rows["round"], rows["train_loss"], label=name)
    ax_acc.set(xlabel="round", ylabel="test accuracy", title="Acc")
    ax_loss.set(xlabel="round", ylabel="train loss", title="loss")
    for ax in (ax_acc, ax_loss):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(fig, path, title)


def plot_partition(stats, path, label_columns, title=None, legend_names=None):
    """Writes a PNG of the federated split, like FLCMC Figures 5 and 6.

    Left: training examples per client; right: each client's training label
    mix as stacked bars.

    Args:
      stats: DataFrame with columns client, split, examples and one column per label.
      path: the PNG path.
      label_columns: the label column names, in label order.
      title: optional figure title.
      legend_names: names to show in the legend instead of the column names.
    """
    train = stats[stats["split"] == "train"]
    fig, (ax_size, ax_mix) = plt.subplots(1, 2, figsize=(12, 4))
    ax_size.bar(train["client"], train["examples"], color="tab:blue")
    ax_size.set(xlabel="client", ylabel="training examples", title="examples per client")
    bottom = None
    for column, shown in zip(label_columns, legend_names or label_columns):
        values = train[column].to_numpy()
        ax_mix.bar(train["client"], values, bottom=bottom, label=shown)
        bottom = values if bottom is None else bottom + values
    ax_mix.set(xlabel="client", ylabel="training examples", title="label mix per client")
    if len(label_columns) <= 16:
        ax_mix.legend(fontsize=7, ncol=2)
    for ax in (ax_size, ax_mix):
        ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    return _save(fig, path, title)
