"""Record blocks: every table and curve of tffre's figures in the docs, rendered from a record.

A Markdown file (``README.md`` or a page under ``docs/``) holds each table of tffre's figures
between two markers, and this module writes what lies between them from the committed record
``benchmarks/results/NAME.json`` (:mod:`tffre.records`) with :mod:`tffre.report`, so a figure
has one value everywhere and anyone can re-derive it. The markers, each on a line of its own::

    <!-- record: NAME -->                      the whole record: its choices, then a heading,
                                               the note and the table of each shown setting
    <!-- record: NAME level=4 -->              the same with #### headings (default 3)
    <!-- record: NAME choices -->              the choices' tables only (each candidate's
                                               mean dev score, the one chosen)
    <!-- record: NAME setting="alpha 0.5" -->  one shown setting's table
    <!-- record: NAME tables -->               every shown setting's table, without headings
    <!-- record: NAME1,NAME2,... headline -->  one line per comparison and shown setting
                                               (:func:`tffre.report.headline_markdown`)
    <!-- record: NAME curves -->               an image link to the curves the site build
                                               draws (:func:`tffre.report.plot_curves`; a grid
                                               record's plot, :mod:`tffre.grid_report`) into
                                               docs/figures/records/NAME.png (not committed)
    ...
    <!-- end record -->

A record that does not exist yet renders as one line saying so and which command writes it.

* ``python docs/hooks/records.py`` checks every block of ``README.md`` and ``docs/`` against
  its record and lists the stale ones (exit 1); ``--write`` rewrites them.
* As a MkDocs hook (``mkdocs.yml``'s ``hooks:``), before the files are collected it draws the
  curves the pages link to, and warns of every stale block, which fails ``mkdocs build
  --strict``. A malformed block (no end marker, an unknown kind, a setting the record lacks)
  stops the build, naming the file and line.
"""

import dataclasses
import glob
import importlib.util
import logging
import os
import re
import shlex
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RESULTS = os.path.join("benchmarks", "results")    # the records, relative to the root
FIGURES = os.path.join("docs", "figures", "records")   # the curves drawn, likewise
KINDS = ("record", "choices", "tables", "setting", "headline", "curves")
START = re.compile(r"^<!-- record: (?P<spec>.*?) -->[ \t]*$", re.M)
END = "<!-- end record -->"
#: How to make a record that ``benchmarks/real_corpora.py`` does not write.
MAKERS = {"imcs-lstm": "`python examples/imcs_lstm.py --seed S --centralised "
                       "--centralised-learning-rates 3e-4,1e-3,3e-3 --out RUNS/imcs_lstm/seed_S` "
                       "for S in 0, 1, 2 and then `python -m tffre report RUNS --save-record "
                       "benchmarks/results/imcs-lstm.json --name imcs-lstm` write"}

#: A record whose every setting waits for a choice (no test score may show yet).
WAITING = ("Not shown yet: {results}/{name}.json holds runs, but its choice waits for every "
           "candidate's seeds (the choices' table says which), and no test score shows before "
           "dev has chosen.")

log = logging.getLogger("mkdocs.hooks.records")   # under "mkdocs": --strict counts its warnings


class BlockError(ValueError):
    """A block that cannot be rendered; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """What a block shows: its records, kind, setting (kind "setting") and heading level."""
    names: tuple
    kind: str
    setting: str = None
    level: int = 3


@dataclasses.dataclass(frozen=True)
class Block:
    """A block of a file: where it is, what it asks for, what it holds and what it should."""
    path: str
    line: int
    spec: str
    start: int          # offsets of the text between the markers
    end: int
    text: str
    expected: str


def parse_spec(spec, where="block"):
    """The :class:`Spec` of a start marker's text (``NAME[,NAME...] [KIND] [key=value]...``)."""
    try:
        words = shlex.split(spec)
    except ValueError as err:
        raise BlockError(f"{where}: cannot read {spec!r} ({err})") from None
    if not words:
        raise BlockError(f"{where}: a record block names no record")
    names = tuple(n for n in words[0].split(",") if n)
    kind, options = "record", {}
    for word in words[1:]:
        if "=" in word:
            key, _, value = word.partition("=")
            options[key] = value
        elif word in KINDS and word not in ("record", "setting") and kind == "record":
            kind = word
        else:
            raise BlockError(f"{where}: unknown word {word!r} in {spec!r}; a block is NAME "
                             f"[choices|tables|headline|curves] [setting=\"...\"] [level=N]")
    unknown = set(options) - {"setting", "level"}
    if unknown:
        raise BlockError(f"{where}: unknown option {sorted(unknown)[0]!r} in {spec!r} "
                         f"(known: setting, level)")
    if "setting" in options:
        if kind != "record":
            raise BlockError(f"{where}: setting= goes with no kind ({kind!r}) in {spec!r}")
        kind = "setting"
    level = options.get("level", "3")
    if not level.isdigit() or not 1 <= int(level) <= 6:
        raise BlockError(f"{where}: level must be 1-6, not {level!r}")
    if kind != "headline" and len(names) != 1:
        raise BlockError(f"{where}: a {kind} block takes one record, not {', '.join(names)}")
    if any(not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", n) for n in names):
        raise BlockError(f"{where}: {spec!r}: a record's name is a file name under "
                         f"{RESULTS}/, without .json")
    return Spec(names, kind, options.get("setting"), int(level))


def record_file(name, root=ROOT):
    """The record file of ``name``."""
    return os.path.join(root, RESULTS, f"{name}.json")


def figure_file(name, root=ROOT):
    """The curves the site build draws from record ``name``."""
    return os.path.join(root, FIGURES, f"{name}.png")


def _benchmark_comparisons(root):
    path = os.path.join(root, "benchmarks", "real_corpora.py")
    if not os.path.isfile(path):
        return set()
    spec = importlib.util.spec_from_file_location("tffre_docs_real_corpora", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.comparisons())


def not_measured(names, root=ROOT):
    """The one line a block holds for records that do not exist yet."""
    benchmark = _benchmark_comparisons(root)
    files = f"{RESULTS}/{names[0]}.json" if len(names) == 1 else \
        f"their records, {RESULTS}/NAME.json"
    if all(n in benchmark for n in names):
        return (f"Not yet measured under the protocol: `python benchmarks/real_corpora.py "
                f"--root ROOT --only {','.join(names)}` writes {files}.")
    if len(names) == 1 and names[0] in MAKERS:
        return f"Not yet measured: {MAKERS[names[0]]} {files}."
    return "Not yet measured: " + " ".join(
        f"`python -m tffre report RUN_FOLDER --save-record {RESULTS}/{n}.json --name {n}` "
        f"writes {RESULTS}/{n}.json from a finished run's folder." for n in names)


def _load(name, root, where):
    from tffre.records import RecordError, read_record
    path = record_file(name, root)
    if not os.path.exists(path):
        return None
    try:
        return read_record(path)
    except RecordError as err:
        raise BlockError(f"{where}: {err}") from None


def render(spec, page, root=ROOT, where="block"):
    """The Markdown a block of ``page`` (a path relative to ``root``) holds for ``spec`` (a
    marker's text or a :class:`Spec`): the rendering alone, without the markers."""
    from tffre import grid_report, report
    if isinstance(spec, str):
        spec = parse_spec(spec, where)
    records = {n: _load(n, root, where) for n in spec.names}
    missing = [n for n, r in records.items() if r is None]
    if spec.kind == "headline":
        found = [r for r in records.values() if r is not None]
        parts = [t for t in [report.headline_markdown(found) if found else ""] if t]
        waiting = [n for n, r in records.items() if r is not None and not report.headline_rows(r)]
        if waiting:
            parts.append(f"Not shown yet: {', '.join(waiting)} (its choice waits for every "
                         f"candidate's seeds; no test score shows before dev has chosen).")
        if missing:
            parts.append(not_measured(missing, root))
        return "\n\n".join(parts)
    name = spec.names[0]
    record = records[name]
    if record is None:
        return not_measured([name], root)
    if spec.kind == "record":
        return report.markdown(record, heading_level=spec.level)
    if spec.kind == "choices":
        if not record.get("choices"):
            raise BlockError(f"{where}: {name} declares no choice")
        return report.choices_markdown(record)
    if not report.shown_settings(record) and spec.kind in ("tables", "curves"):
        return WAITING.format(name=name, results=RESULTS)
    if spec.kind == "tables":
        return "\n\n".join(report.setting_markdown(record, s)
                           for s in report.shown_settings(record))
    if spec.kind == "setting":
        setting = spec.setting
        declared = list(record.get("settings") or {}) + [r["setting"] for r in record["runs"]]
        if setting not in declared:
            raise BlockError(f"{where}: {name} has no setting {setting!r} (it has: "
                             f"{', '.join(dict.fromkeys(declared))})")
        if not report.runs_of(record, setting):
            return (f"Not yet measured: {RESULTS}/{name}.json holds no run of {setting!r} "
                    f"yet (`python benchmarks/real_corpora.py --root ROOT --only {name}`).")
        if setting not in report.shown_settings(record):
            raise BlockError(f"{where}: {setting!r} is a candidate of {name} that dev did not "
                             f"choose: its test scores are not shown")
        return report.setting_markdown(record, setting)
    # curves
    target = os.path.relpath(figure_file(name, root), os.path.dirname(os.path.join(root, page)))
    metric = report.METRIC_NAMES.get(record.get("metric"), record.get("metric") or "score")
    title = record.get("title") or name
    if grid_report.is_grid(record):
        return (f"![Test {metric} against the number of faulty clients, {title}: a line per "
                f"{record['grid']['rows']}, the mean over the seeds with error bars of ± one "
                f"sd]({target.replace(os.sep, '/')})")
    return (f"![Test {metric} per round, {title}: the mean over the seeds and a band of ± one "
            f"sd]({target.replace(os.sep, '/')})")


FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[ \t]*$", re.M | re.S)


def _outside_fences(text, pattern):
    """``pattern``'s matches in ``text`` outside fenced code (where a page may show the
    markers themselves)."""
    fenced = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    return [m for m in pattern.finditer(text) if not any(a <= m.start() < b for a, b in fenced)]


def blocks(text, page, root=ROOT):
    """The :class:`Block` s of ``text``, the content of ``page`` (relative to ``root``);
    markers in fenced code are text, not blocks."""
    out = []
    for match in _outside_fences(text, START):
        line = text.count("\n", 0, match.start()) + 1
        where = f"{page}, line {line}"
        start = match.end() + 1
        end = text.find(END, start)
        nested = START.search(text, start, end if end >= 0 else len(text))
        if end < 0 or nested:
            raise BlockError(f"{where}: <!-- record: {match.group('spec')} --> has no "
                             f"{END} after it (before the next block)")
        expected = "\n" + render(match.group("spec"), page, root, where) + "\n\n"
        out.append(Block(page, line, match.group("spec"), start, end, text[start:end],
                         expected))
    stray = len(_outside_fences(text, re.compile(rf"^{re.escape(END)}", re.M))) - len(out)
    if stray:
        raise BlockError(f"{page}: {stray} {END} without a start marker")
    return out


def _read(path, root):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def check(path, root=ROOT):
    """The blocks of file ``path`` (relative to ``root``) whose text is not their rendering."""
    return [b for b in blocks(_read(path, root), path, root) if b.text != b.expected]


def rewrite(path, root=ROOT):
    """Rewrites the stale blocks of ``path`` with their rendering; returns those rewritten."""
    text = _read(path, root)
    stale = [b for b in blocks(text, path, root) if b.text != b.expected]
    for b in reversed(stale):
        text = text[:b.start] + b.expected + text[b.end:]
    if stale:
        with open(os.path.join(root, path), "w", encoding="utf-8") as f:
            f.write(text)
    return stale


def pages(root=ROOT):
    """The files that may hold blocks: README.md and every page under docs/."""
    found = sorted(os.path.relpath(p, root) for p in glob.glob(
        os.path.join(root, "docs", "**", "*.md"), recursive=True))
    return ["README.md"] + [p for p in found if not p.startswith(os.path.join("docs", "hooks"))]


def draw_figures(root=ROOT):
    """Draws the curves of every curves block whose record exists, where the PNG is missing
    or older than its record; returns the files drawn."""
    from tffre import report
    names = sorted({n for page in pages(root)
                    for m in _outside_fences(_read(page, root), START)
                    for spec in [parse_spec(m.group("spec"), page)] if spec.kind == "curves"
                    for n in spec.names})
    drawn = []
    for name in names:
        source, target = record_file(name, root), figure_file(name, root)
        if not os.path.exists(source) or not report.shown_settings(_load(name, root, source)):
            continue
        if os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(source):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        report.plot_curves(_load(name, root, source), target)
        drawn.append(target)
    return drawn


def stale_blocks(root=ROOT):
    """Every stale block of README.md and docs/."""
    return [b for page in pages(root) for b in check(page, root)]


# --- the MkDocs hook ---

def on_pre_build(config):
    """Before the files are collected: draws the curves and warns of every stale block."""
    from mkdocs.exceptions import PluginError
    root = os.path.dirname(os.path.abspath(config["docs_dir"]))
    try:
        for path in draw_figures(root):
            log.info("drew %s", os.path.relpath(path, root))
        stale = stale_blocks(root)
    except BlockError as err:
        raise PluginError(str(err)) from None
    for b in stale:
        log.warning("%s, line %d: the block <!-- record: %s --> differs from its record; "
                    "python docs/hooks/records.py --write rewrites it", b.path, b.line, b.spec)


# --- the command ---

def main(argv=None):
    """``python docs/hooks/records.py [--write] [FILE...]``: checks (or rewrites) the blocks;
    returns 1 when a checked block is stale or malformed."""
    import argparse
    parser = argparse.ArgumentParser(prog="python docs/hooks/records.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="files relative to the repository root (default: README.md "
                             "and every page under docs/)")
    parser.add_argument("--write", action="store_true",
                        help="rewrite the stale blocks from their records")
    args = parser.parse_args(argv)
    try:
        files = args.files or pages()
        if args.write:
            for path in files:
                for b in rewrite(path):
                    print(f"{b.path}, line {b.line}: rewrote <!-- record: {b.spec} -->")
            return 0
        stale = [b for path in files for b in check(path)]
    except (BlockError, OSError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 1
    for b in stale:
        print(f"{b.path}, line {b.line}: <!-- record: {b.spec} --> differs from its record")
    if stale:
        print(f"{len(stale)} stale block(s): {parser.prog} --write rewrites them")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
