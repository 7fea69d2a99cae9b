"""Accuracy and loss curves against round, one line per algorithm (like FLCMC Figs. 14-21)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)


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
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
