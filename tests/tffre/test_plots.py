"""tffre.plots: library-safe figures (no pyplot, backend untouched) and readable charts."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from tffre.plots import plot_curves, plot_label_mix, plot_partition


def assert_png(path):
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 1000


def axes_titled(fig, title):
    (ax,) = [ax for ax in fig.axes if ax.get_title() == title]
    return ax


def curves_frame(rounds, algorithms=("FedAvgS", "FedPAP")):
    rows = [{"algorithm": a, "round": r, "test_accuracy": 0.5 + 0.01 * r + 0.1 * i,
             "train_loss": 1.0 / r + i} for i, a in enumerate(algorithms) for r in rounds]
    return pd.DataFrame(rows)


def test_import_and_plotting_leave_pyplot_and_the_backend_alone(tmp_path):
    # A notebook has its own backend; the module once forced Agg and imported pyplot.
    script = textwrap.dedent("""
        import sys
        import matplotlib
        import pandas as pd
        matplotlib.use("pdf")  # stands in for the notebook's backend
        import tffre.plots
        imported_on_import = "matplotlib.pyplot" in sys.modules
        frame = pd.DataFrame({"algorithm": ["a"], "round": [1], "test_accuracy": [0.5],
                              "train_loss": [1.0]})
        tffre.plots.plot_curves(frame, sys.argv[1])
        print(imported_on_import, "matplotlib.pyplot" in sys.modules, matplotlib.get_backend())
    """)
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "c.png")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "pdf"]
    assert_png(tmp_path / "c.png")


@pytest.mark.parametrize("num_labels", [3, 16, 30])
def test_partition_colours_are_distinct_and_legend_is_outside(num_labels, tmp_path):
    labels = [f"act{i}" for i in range(num_labels)]
    rng = np.random.RandomState(0)
    train = pd.DataFrame({"client": [f"client_{i}" for i in range(12)], "split": "train"})
    for label in labels:
        train[label] = rng.randint(0, 20, len(train))
    train["examples"] = train[labels].sum(axis=1)
    stats = pd.concat([train, train.assign(split="test")], ignore_index=True)
    path = tmp_path / "partition.png"
    names = [f"Act {i}" for i in range(num_labels)]
    fig = plot_partition(stats, str(path), labels, title="IMCS", legend_names=names)
    assert_png(path)
    ax = axes_titled(fig, "label mix per client")
    assert len(ax.containers) == num_labels
    colours = {to_rgba(bars.patches[0].get_facecolor()) for bars in ax.containers}
    assert len(colours) == num_labels
    legend = ax.get_legend()
    assert sorted(t.get_text() for t in legend.get_texts()) == sorted(names)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    box, axes_box = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.x0 >= axes_box.x1  # to the right of the bars, not over them
    assert not box.overlaps(axes_box)
    assert fig.bbox.contains(box.x1, box.y0) and fig.bbox.contains(box.x1, box.y1)


def test_one_round_curve_shows_its_points_with_integer_ticks(tmp_path):
    path = tmp_path / "curves.png"
    fig = plot_curves(curves_frame([1]), str(path), title="one round")
    assert_png(path)
    fig.canvas.draw()
    for ax in fig.axes:
        lo, hi = ax.get_xlim()
        assert lo <= 0.5 and hi >= 1.5  # the round is not on the frame
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks == [1.0]
        labels = [t.get_text().replace("\N{MINUS SIGN}", "-") for t in ax.get_xticklabels()]
        assert labels and all(label.lstrip("-").isdigit() for label in labels)
        lines = ax.get_lines()
        assert len(lines) == 2 and all(line.get_marker() not in (None, "None", "")
                                       for line in lines)


def test_reference_lines_are_dashed_in_the_algorithms_colour(tmp_path):
    reference = {"FedAvgS": {"test_accuracy": 0.8308, "train_loss": 0.0684},
                 "FedPAP": {"test_accuracy": 0.8654, "train_loss": None}}
    fig = plot_curves(curves_frame(range(1, 6)), str(tmp_path / "c.png"), title="t",
                      reference=reference)
    assert_png(tmp_path / "c.png")
    for title, column in (("Acc", "test_accuracy"), ("loss", "train_loss")):
        lines = {line.get_label(): line for line in axes_titled(fig, title).get_lines()}
        for name, values in reference.items():
            paper = lines.get(f"{name} (paper)")
            if values[column] is None:
                assert paper is None
                continue
            assert paper.get_linestyle() == "--"
            assert set(paper.get_ydata()) == {values[column]}
            assert to_rgba(paper.get_color()) == to_rgba(lines[name].get_color())
    plain = plot_curves(curves_frame(range(1, 6)), str(tmp_path / "plain.png"))
    assert not [line for ax in plain.axes for line in ax.get_lines()
                if "paper" in line.get_label()]


def test_missing_train_loss_is_skipped_not_drawn_as_zero(tmp_path):
    frame = curves_frame(range(1, 6))
    frame["train_loss"] = frame["train_loss"].astype(object)
    frame.loc[(frame["algorithm"] == "FedAvgS") & (frame["round"] == 3), "train_loss"] = np.nan
    frame.loc[(frame["algorithm"] == "FedPAP") & (frame["round"] == 2), "train_loss"] = None
    fig = plot_curves(frame, str(tmp_path / "c.png"))
    assert_png(tmp_path / "c.png")
    lines = {line.get_label(): line for line in axes_titled(fig, "loss").get_lines()}
    assert list(lines["FedAvgS"].get_xdata()) == [1, 2, 4, 5]
    assert list(lines["FedPAP"].get_xdata()) == [1, 3, 4, 5]
    for line in lines.values():
        y = np.asarray(line.get_ydata(), dtype=float)
        assert np.all(np.isfinite(y)) and np.all(y > 0)
    accuracy = {line.get_label(): line for line in axes_titled(fig, "Acc").get_lines()}
    assert list(accuracy["FedAvgS"].get_xdata()) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("num_clients,num_labels", [(4, 2), (10, 8), (50, 25)])
def test_label_mix_stacks_one_bar_per_client_with_legend_outside(num_clients, num_labels, tmp_path):
    from tffre.data.partition import dirichlet_label_split, label_mix
    names = [f"rel{i}" for i in range(num_labels)]
    rng = np.random.RandomState(0)
    labels = np.array([names[i] for i in rng.randint(0, num_labels, 40 * num_clients)])
    mix = label_mix(labels, dirichlet_label_split(labels, num_clients, 0.5, seed=0),
                    label_names=names)
    path = tmp_path / "mix.png"
    fig = plot_label_mix(mix, str(path), title="alpha = 0.5")
    assert_png(path)
    (ax,) = fig.axes
    assert len(ax.patches) == num_clients * num_labels
    assert len(ax.containers) == num_labels
    colours = {to_rgba(bars.patches[0].get_facecolor()) for bars in ax.containers}
    assert len(colours) == num_labels
    # Each bar ends at its client's total (the "total" column is not a segment).
    last = ax.containers[-1]
    ends = [patch.get_x() + patch.get_width() for patch in last.patches]
    np.testing.assert_allclose(ends, mix["total"].to_numpy())
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == names
    assert [t.get_text() for t in ax.get_yticklabels()] == list(mix.index)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    box, axes_box = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.x0 >= axes_box.x1 and not box.overlaps(axes_box)


def test_label_mix_plot_leaves_pyplot_and_the_backend_alone(tmp_path):
    script = textwrap.dedent("""
        import sys
        import matplotlib
        import pandas as pd
        matplotlib.use("pdf")  # stands in for the notebook's backend
        import tffre.plots
        mix = pd.DataFrame({"a": [1, 2], "b": [3, 0], "total": [4, 2]},
                           index=["client_0", "client_1"])
        tffre.plots.plot_label_mix(mix, sys.argv[1])
        print("matplotlib.pyplot" in sys.modules, matplotlib.get_backend())
    """)
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "m.png")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "pdf"]
    assert_png(tmp_path / "m.png")
