"""Record blocks (docs/hooks/records.py): every block of README.md and docs/ is its record's
rendering, and the mechanism, on a hand-written record (tests/fixtures/records/demo.json),
writes the tables, lines and links written out by hand below. No TensorFlow."""

import importlib.util
import logging
import os
import re
import shutil

import pytest

import hook_loader

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HOOK = os.path.join(ROOT, "docs", "hooks", "records.py")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "records", "demo.json")


@pytest.fixture(autouse=True)
def _seed():
    """Overrides the suite's autouse seeding fixture, which imports TensorFlow: nothing here
    trains, so this file runs without it."""
    yield


def load_hook():
    return hook_loader.load_hook("records.py")


@pytest.fixture(scope="module")
def hook():
    return load_hook()


@pytest.fixture
def root(tmp_path):
    """A repository root holding the demo record and an empty docs/."""
    os.makedirs(tmp_path / "benchmarks" / "results")
    shutil.copy(FIXTURE, tmp_path / "benchmarks" / "results" / "demo.json")
    os.makedirs(tmp_path / "docs" / "papers")
    (tmp_path / "README.md").write_text("# demo\n", encoding="utf-8")
    return tmp_path


def test_readme_and_every_page_hold_their_records_rendering(hook):
    stale = hook.stale_blocks(ROOT)
    assert not stale, "stale record blocks (python docs/hooks/records.py --write):\n" + \
        "\n".join(f"{b.path}, line {b.line}: <!-- record: {b.spec} -->" for b in stale)


# By hand from demo.json. FedAvgT's mean dev F1: top 2 (0.60 + 0.62) / 2 = 0.61, top 4 (0.70 +
# 0.72) / 2 = 0.71, so the top 4 is chosen and the top 2's test scores (0.90, 0.91) never show.
CHOICES = """trainable layers, chosen by FedAvgT's mean dev F1 over the seeds:

| candidate | seeds | mean dev F1 |  |
| --- | --- | --- | --- |
| top 2 | 0, 1 | 0.610 |  |
| top 4 | 0, 1 | 0.710 | **chosen** |"""
# Top 4: FedAvgT test 0.75, 0.73 (mean 0.740, sd 0.01 * sqrt 2 = 0.014); FedCMC 0.76, 0.76, dev
# 0.71, 0.75 (mean 0.730 above FedAvgT's 0.710: best by dev); FedCMC - FedAvgT 0.01, 0.03: mean
# 0.020, sd 0.014, t(0.975, 1 df) = 12.706 times 0.014142 / sqrt 2 = 0.127: [-0.107, +0.147].
# The centralised rate of the higher mean dev: lr 1e-4 (0.69 against 0.51), test 0.72, 0.74.
TABLE = """| algorithm | seeds | test F1 at best dev | dev F1 | best-dev round | minus FedAvgT, paired (95% interval) | bytes up a round |
| --- | --- | --- | --- | --- | --- | --- |
| FedAvgT | 2 | 0.740 ± 0.014 | 0.710 ± 0.014 | 3-5 | baseline | 1,000 |
| FedCMC (best by dev) | 2 | 0.760 ± 0.000 | 0.730 ± 0.028 | 4-5 | +0.020 ± 0.014 [-0.107, +0.147]: no difference shown | 1,200 |
| centralised (same budget), lr 0.0001 | 2 | 0.730 ± 0.014 | 0.690 ± 0.014 | 2 | - | - |
| guess: the majority class |  | 0.690 |  |  |  |  |"""
HEADLINE = """| comparison | best by dev (test at best dev) | against the baseline (paired) | centralised (same budget) | guess | seeds |
| --- | --- | --- | --- | --- | --- |
| Demo comparison: top 4 | FedCMC 0.760 ± 0.000 | FedAvgT 0.740 ± 0.014; +0.020 ± 0.014 [-0.107, +0.147]: no difference shown | 0.730 ± 0.014 | 0.690 | 2 |"""


def test_each_kind_of_block_by_hand(hook, root):
    page = "docs/papers/demo.md"
    assert hook.render("demo choices", page, root) == CHOICES
    assert hook.render('demo setting="top 4"', page, root) == TABLE
    assert hook.render("demo tables", page, root) == TABLE     # the one shown setting's
    assert hook.render("demo", page, root) == \
        CHOICES + "\n\n### top 4\n\nThe top 4 layers train.\n\n" + TABLE
    assert hook.render("demo level=4", page, root).startswith(CHOICES + "\n\n#### top 4\n")
    # A record not there yet: one line, and the headline's rows of those that are.
    missing = "Not yet measured: `python -m tffre report RUN_FOLDER --save-record " \
              "benchmarks/results/later.json --name later` writes " \
              "benchmarks/results/later.json from a finished run's folder."
    assert hook.render("demo,later headline", page, root) == HEADLINE + "\n\n" + missing
    assert hook.render('later setting="top 4"', page, root) == missing
    # The curves: a link from the page's folder to docs/figures/records/demo.png.
    alt = "Test F1 per round, Demo comparison: the mean over the seeds and a band of ± one sd"
    assert hook.render("demo curves", page, root) == f"![{alt}](../figures/records/demo.png)"
    assert hook.render("demo curves", "docs/real-corpora.md", root) == \
        f"![{alt}](figures/records/demo.png)"
    assert hook.render("demo curves", "README.md", root) == \
        f"![{alt}](docs/figures/records/demo.png)"


def test_the_benchmarks_comparisons_name_their_command(hook):
    assert hook.not_measured(["iid-gad"]) == (
        "Not yet measured under the protocol: `python benchmarks/real_corpora.py --root ROOT "
        "--only iid-gad` writes benchmarks/results/iid-gad.json.")
    assert hook.not_measured(["iid-gad", "feded-gad"]) == (
        "Not yet measured under the protocol: `python benchmarks/real_corpora.py --root ROOT "
        "--only iid-gad,feded-gad` writes their records, benchmarks/results/NAME.json.")
    assert hook.not_measured(["imcs-lstm"]) == (
        "Not yet measured: `python examples/imcs_lstm.py --seed S --centralised "
        "--centralised-learning-rates 3e-4,1e-3,3e-3 --out RUNS/imcs_lstm/seed_S` for S in 0, "
        "1, 2 and then `python -m tffre report RUNS --save-record "
        "benchmarks/results/imcs-lstm.json --name imcs-lstm` write "
        "benchmarks/results/imcs-lstm.json.")


PAGE = """# A page

Before.

<!-- record: demo setting="top 4" -->
an old table
<!-- end record -->

Between.

<!-- record: demo choices -->

{choices}

<!-- end record -->

After. A page may show the markers in fenced code, which stay as they are:

```markdown
<!-- record: demo -->
<!-- end record -->
```
"""


def test_check_finds_the_stale_block_and_write_rewrites_it_alone(hook, root):
    path = root / "docs" / "page.md"
    path.write_text(PAGE.format(choices=CHOICES), encoding="utf-8")
    stale = hook.check("docs/page.md", root)
    assert [(b.line, b.spec) for b in stale] == [(5, 'demo setting="top 4"')]
    assert hook.stale_blocks(root) == stale
    assert [b.line for b in hook.rewrite("docs/page.md", root)] == [5]
    want = PAGE.format(choices=CHOICES).replace("an old table\n", f"\n{TABLE}\n\n")
    assert path.read_text(encoding="utf-8") == want
    assert hook.check("docs/page.md", root) == [] and hook.rewrite("docs/page.md", root) == []


def test_the_hook_draws_the_curves_and_warns_of_a_stale_block(hook, root, caplog):
    (root / "docs" / "page.md").write_text(
        "<!-- record: demo curves -->\n<!-- end record -->\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.records"):
        hook.on_pre_build({"docs_dir": str(root / "docs")})
    figure = root / "docs" / "figures" / "records" / "demo.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "docs/page.md, line 1: the block <!-- record: demo curves --> differs from its record; "
        "python docs/hooks/records.py --write rewrites it"]
    # Drawn again only when the record is newer than the figure.
    assert hook.draw_figures(root) == []


@pytest.mark.parametrize("text, message", [
    ("<!-- record: demo -->\nno end\n", "has no <!-- end record --> after it"),
    ("<!-- record: demo -->\n<!-- record: demo -->\n<!-- end record -->\n",
     "has no <!-- end record --> after it"),
    ("<!-- end record -->\n", "without a start marker"),
    ("<!-- record: demo sideways -->\n<!-- end record -->\n", "unknown word 'sideways'"),
    ("<!-- record: demo,other -->\n<!-- end record -->\n", "takes one record"),
    ('<!-- record: demo setting="top 9" -->\n<!-- end record -->\n',
     "demo has no setting 'top 9'"),
    ('<!-- record: demo setting="top 2" -->\n<!-- end record -->\n',
     "a candidate of demo that dev did not choose"),
    ("<!-- record: demo colour=red -->\n<!-- end record -->\n", "unknown option 'colour'"),
])
def test_a_malformed_block_names_its_file_and_line(hook, root, text, message):
    (root / "docs" / "bad.md").write_text("# Bad\n\n" + text, encoding="utf-8")
    with pytest.raises(hook.BlockError, match="docs/bad.md") as caught:
        hook.check("docs/bad.md", root)
    assert message in str(caught.value)
    if "start marker" not in message:
        assert "line 3" in str(caught.value)


def test_the_real_corpora_setup_is_the_benchmarks():
    """docs/real-corpora.md's partition table names the benchmark's paper comparisons in order,
    each with the algorithms its settings run (names as the registry spells them), and the
    seeds: 5 where a setting runs more seeds, else 3."""
    from tffre import registry
    spec = importlib.util.spec_from_file_location(
        "tffre_docs_real_corpora_test", os.path.join(ROOT, "benchmarks", "real_corpora.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with open(os.path.join(ROOT, "docs", "real-corpora.md"), encoding="utf-8") as f:
        page = f.read()
    rows = re.findall(r"^\| \[([a-z-]+)\]\(#\1\) \|(.*)$", page, re.M)
    # The papers' comparisons; the defence grids have their page (docs/how-to/robustness.md).
    comparisons = {n: c for n, c in bench.comparisons().items() if not c.grid}
    assert [name for name, _ in rows] == list(comparisons)
    for name, rest in rows:
        cells = [c.strip() for c in rest.split(" | ")]
        algorithms, seeds = cells[3], cells[4]
        settings = comparisons[name].settings
        declared = {registry.get_spec(a).name for s in settings
                    for a in s.preset["algorithm"].split(",")}
        assert {a.strip() for a in algorithms.split(",")} == declared, name
        most = max(len(s.seeds) + len(s.more_seeds) for s in settings)
        fewest = min(len(s.seeds) for s in settings)
        assert str(most) in seeds and ("3" in seeds) == (fewest == 3), (name, seeds)


def test_a_record_waiting_for_its_choice_shows_no_test_score(hook, root):
    """Only the top 2's seeds are in: the choice waits, so its tables, curves and headline say
    so, and no test score (the top 2's 0.90, 0.91) is rendered or drawn."""
    import json
    record = json.loads(open(FIXTURE, encoding="utf-8").read())
    record["runs"] = [r for r in record["runs"] if r["setting"] == "top 2"]
    path = root / "benchmarks" / "results" / "wait.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    page = "docs/papers/demo.md"
    for spec in ("wait tables", "wait curves", "wait headline"):
        text = hook.render(spec, page, root)
        assert text.startswith("Not shown yet") and "0.90" not in text, spec
    assert "not chosen yet" in hook.render("wait choices", page, root)
    (root / "docs" / "papers" / "demo.md").write_text(
        "<!-- record: wait curves -->\n<!-- end record -->\n", encoding="utf-8")
    assert hook.draw_figures(root) == []      # nothing to draw before the choice
