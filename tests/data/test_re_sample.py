"""The shipped synthetic relation-extraction sample (tffre/resources/re_sample/).

Regenerating it with data/re_sample/generate.py gives byte-identical files, and
the sizes and label counts documented in data/README.md hold. The files are
read here with a parser of the test's own, not the generator's.
"""

import collections
import importlib.util
import os
import re
from pathlib import Path

import pytest

from tffre import resources

_REPO = Path(__file__).resolve().parents[2]
_GENERATOR = _REPO / "data" / "re_sample" / "generate.py"
_SHIPPED = Path(resources.path("re_sample"))

# As documented in data/README.md.
I2B2 = {
    "train": dict(notes=120, lines=515, pairs=568,
                  labels={"None": 261, "TrAP": 79, "TeRP": 65, "PIP": 49, "TeCP": 30,
                          "TrIP": 22, "TrCP": 21, "TrNAP": 21, "TrWP": 20}),
    "test": dict(notes=30, lines=140, pairs=128,
                 labels={"None": 54, "TeRP": 17, "TrAP": 16, "PIP": 12, "TeCP": 8,
                         "TrIP": 6, "TrWP": 5, "TrCP": 5, "TrNAP": 5}),
}
GAD = {"train": (400, 180), "dev": (60, 27), "test": (100, 45)}

_SPAN = r'c="([^"]*)" (\d+):(\d+) (\d+):(\d+)'
_CON = re.compile(_SPAN + r'\|\|t="(problem|test|treatment)"$')
_REL = re.compile(_SPAN + r'\|\|r="(TrIP|TrWP|TrCP|TrAP|TrNAP|TeRP|TeCP|PIP)"\|\|' + _SPAN + "$")
_ALLOWED = {"Tr": ("treatment", "problem"), "Te": ("test", "problem"), "PI": ("problem", "problem")}


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _load_generator():
    spec = importlib.util.spec_from_file_location("re_sample_generate", _GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_i2b2(folder):
    """{label: count} over the candidate pairs, plus note and line counts; checks the files."""
    labels, n_lines = collections.Counter(), 0
    stems = sorted(p.stem for p in (folder / "txt").glob("*.txt"))
    assert stems == sorted(p.stem for p in (folder / "concept").glob("*.con"))
    assert stems == sorted(p.stem for p in (folder / "rel").glob("*.rel"))
    for stem in stems:
        text = (folder / "txt" / f"{stem}.txt").read_text(encoding="utf-8")
        assert text.endswith("\n") and "\r" not in text and "  " not in text
        lines = [line.split(" ") for line in text.splitlines()]
        n_lines += len(lines)
        concepts = {}
        for row in (folder / "concept" / f"{stem}.con").read_text(encoding="utf-8").splitlines():
            m = _CON.match(row)
            assert m, row
            quoted, l1, t1, l2, t2 = m.group(1), *map(int, m.group(2, 3, 4, 5))
            assert l1 == l2 and t1 <= t2 < len(lines[l1 - 1]), row
            assert quoted == " ".join(lines[l1 - 1][t1:t2 + 1]).lower(), row
            concepts[(l1, t1, t2)] = m.group(6)
        gold = {}
        for row in (folder / "rel" / f"{stem}.rel").read_text(encoding="utf-8").splitlines():
            m = _REL.match(row)
            assert m, row
            a, b = tuple(map(int, m.group(2, 3, 5))), tuple(map(int, m.group(8, 9, 11)))
            assert a[0] == b[0], row  # within one line
            assert (concepts[a], concepts[b]) == _ALLOWED[m.group(6)[:2]], row
            gold[frozenset([a, b])] = m.group(6)
        candidates = set()
        keys = sorted(concepts)
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                kinds = {concepts[a], concepts[b]}
                if a[0] == b[0] and "problem" in kinds:  # Tr-P, Te-P and P-P pairs
                    candidates.add(frozenset([a, b]))
        assert set(gold) <= candidates, stem
        labels.update(gold.get(pair, "None") for pair in candidates)
    return labels, len(stems), n_lines


def _read_gad(path, header):
    rows = path.read_text(encoding="utf-8").splitlines()
    if header:
        assert rows[0] == "index\tsentence\tlabel"
        rows = [row.split("\t") for row in rows[1:]]
        assert [r[0] for r in rows] == [str(i) for i in range(len(rows))]
        rows = [r[1:] for r in rows]
    else:
        rows = [row.split("\t") for row in rows]
    for row in rows:
        assert len(row) == 2 and row[1] in ("0", "1"), row
        assert row[0].count("@GENE$") == 1 and row[0].count("@DISEASE$") == 1, row
    return len(rows), sum(r[1] == "1" for r in rows)


def test_regenerating_gives_byte_identical_files(tmp_path, capsys):
    _load_generator().main(["--out", str(tmp_path)])
    assert "i2b2 train: 120 notes" in capsys.readouterr().out  # the generator's own check ran
    shipped, fresh = _files(_SHIPPED), _files(tmp_path)
    assert sorted(fresh) == sorted(shipped)
    assert [name for name in shipped if shipped[name] != fresh[name]] == []


def test_sample_is_small_and_marked_synthetic():
    files = _files(_SHIPPED)
    assert sum(len(b) for b in files.values()) < 1_000_000
    assert files["SYNTHETIC.txt"].startswith(b"SYNTHETIC DATA")
    assert "## re_sample/ — SYNTHETIC DATA" in (_REPO / "data" / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("split", sorted(I2B2))
def test_i2b2_sizes_and_label_counts(split):
    labels, n_notes, n_lines = _read_i2b2(_SHIPPED / "i2b2" / split)
    want = I2B2[split]
    assert (n_notes, n_lines, sum(labels.values())) == (want["notes"], want["lines"], want["pairs"])
    assert dict(labels) == want["labels"]
    # A majority ("None") guess is right on ~40% of the pairs and finds no relation.
    assert 0.35 <= labels["None"] / want["pairs"] <= 0.5
    assert min(labels.values()) >= (15 if split == "train" else 4)


@pytest.mark.parametrize("split", sorted(GAD))
def test_gad_sizes_and_label_counts(split):
    assert _read_gad(_SHIPPED / "gad" / f"{split}.tsv", header=split == "test") == GAD[split]
