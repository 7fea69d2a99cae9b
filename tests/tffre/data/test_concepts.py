"""Class concepts: the built-in names, concept files and their errors."""

import pytest

from tffre.data.concepts import ConceptFileError, concepts_for, read_concept_file


def test_builtin_concepts():
    assert concepts_for(["AMD", "NORMAL"]) == ["age-related macular degeneration",
                                              "a healthy retina"]
    assert concepts_for(["spot_rising_thin"]) == [
        "a bright spot, rising stripes and a thin retinal band"]
    assert concepts_for(["小儿发热", "新生儿黄疸"]) == ["fever in a child", "neonatal jaundice"]
    assert concepts_for(["None", "TrAP"])[1] == "a treatment is administered for a medical problem"
    # No built-in concept for some label: the label names, readable.
    assert concepts_for(["AMD", "my_new-class"]) == ["AMD", "my new class"]


def test_concept_files(tmp_path):
    tsv = tmp_path / "c.tsv"
    tsv.write_text("# label\tconcept\nb\tthe letter b\na\tthe letter a\n", encoding="utf-8")
    assert concepts_for(["a", "b"], str(tsv)) == ["the letter a", "the letter b"]
    js = tmp_path / "c.json"
    js.write_text('{"a": "alpha", "b": "beta"}', encoding="utf-8")
    assert read_concept_file(str(js)) == {"a": "alpha", "b": "beta"}
    with pytest.raises(ConceptFileError, match=r"c.tsv: no concept for label\(s\) 'c'"):
        concepts_for(["a", "b", "c"], str(tsv))
    with pytest.raises(ConceptFileError, match=r"unknown label\(s\) 'b'"):
        concepts_for(["a"], str(js))
    bad = tmp_path / "bad.txt"
    bad.write_text("a\talpha\nb beta\n", encoding="utf-8")
    with pytest.raises(ConceptFileError, match=r"bad.txt: line 2: expected <label><TAB>"):
        read_concept_file(str(bad))
    twice = tmp_path / "twice.txt"
    twice.write_text("a\talpha\na\tagain\n", encoding="utf-8")
    with pytest.raises(ConceptFileError, match="line 2: label 'a' is given twice"):
        read_concept_file(str(twice))
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": ', encoding="utf-8")
    with pytest.raises(ConceptFileError, match="broken.json: line 1: not valid JSON"):
        read_concept_file(str(broken))
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_concept_file(str(tmp_path / "missing.txt"))
