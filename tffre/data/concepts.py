"""Class concepts: the natural-language name or description of each class (FedCB section 2).

FedCB's server puts each class's concept into prompt templates and embeds them
with a language model (:mod:`tffre.algorithms.fedcb`). The built-in concepts
below cover the datasets we ship or read; ``--concept-file`` replaces them:

* a JSON object ``{"<label>": "<concept>", ...}``, or
* a text file of ``<label><TAB><concept>`` lines (``#`` starts a comment line).

Every label of the task must have a concept; a concept for an unknown label is
an error (it is probably a typo). Errors name the file, the line and the label.
"""

import json
import os

from tffre.errors import MessageFileNotFoundError, one_line

# OCT-C8 (Kaggle layout: one folder per class) and Kvasir-v2 (its folder names).
OCT_C8 = {"AMD": "age-related macular degeneration", "CNV": "choroidal neovascularization",
          "CSR": "central serous retinopathy", "DME": "diabetic macular edema",
          "DR": "diabetic retinopathy", "DRUSEN": "drusen", "MH": "a macular hole",
          "NORMAL": "a healthy retina"}
KVASIR = {"dyed-lifted-polyps": "dyed lifted polyps",
          "dyed-resection-margins": "dyed resection margins", "esophagitis": "esophagitis",
          "normal-cecum": "a normal cecum", "normal-pylorus": "a normal pylorus",
          "normal-z-line": "a normal Z-line", "polyps": "polyps",
          "ulcerative-colitis": "ulcerative colitis"}
# The invented image sample: <lesion>_<texture>_<thickness> (data/image_sample/README.md).
_LESION = {"spot": "a bright spot", "cyst": "a dark cyst"}
_TEXTURE = {"rising": "rising stripes", "falling": "falling stripes"}
_THICKNESS = {"thin": "a thin retinal band", "thick": "a thick retinal band"}
# IMCS-V2's ten diagnoses (the diagnosis task's labels), in English.
IMCS_DIAGNOSES = {"小儿支气管炎": "bronchitis in a child", "小儿发热": "fever in a child",
                  "小儿感冒": "a common cold in a child", "上呼吸道感染": "an upper respiratory tract infection",
                  "小儿腹泻": "diarrhea in a child", "小儿消化不良": "indigestion in a child",
                  "小儿支气管肺炎": "bronchopneumonia in a child", "新生儿黄疸": "neonatal jaundice",
                  "小儿咳嗽": "a cough in a child", "小儿便秘": "constipation in a child"}
# i2b2 2010's relation types (the RE sample's labels) as relation descriptions.
I2B2_RELATIONS = {
    "None": "no relation between the two concepts",
    "TrIP": "a treatment improves a medical problem", "TrWP": "a treatment worsens a medical problem",
    "TrCP": "a treatment causes a medical problem",
    "TrAP": "a treatment is administered for a medical problem",
    "TrNAP": "a treatment is not administered because of a medical problem",
    "TeRP": "a test reveals a medical problem",
    "TeCP": "a test is conducted to investigate a medical problem",
    "PIP": "a medical problem indicates another medical problem"}
GAD_RELATIONS = {"0": "no association between the gene and the disease",
                 "1": "the gene is associated with the disease"}


class ConceptFileError(ValueError):
    """A concept file that cannot be used; the message names the file, line and label."""


def sample_concept(label):
    """The concept of an image-sample class name, e.g. spot_rising_thin ->
    "a bright spot, rising stripes and a thin retinal band"."""
    parts = str(label).split("_")
    if len(parts) != 3 or parts[0] not in _LESION or parts[1] not in _TEXTURE \
            or parts[2] not in _THICKNESS:
        return None
    return f"{_LESION[parts[0]]}, {_TEXTURE[parts[1]]} and {_THICKNESS[parts[2]]}"


def builtin_concepts(labels):
    """The built-in concept of each label, or None if some label has none."""
    tables = (OCT_C8, KVASIR, IMCS_DIAGNOSES, I2B2_RELATIONS, GAD_RELATIONS)
    out = []
    for label in labels:
        concept = next((t[str(label)] for t in tables if str(label) in t), None) \
            or sample_concept(label)
        if concept is None:
            return None
        out.append(concept)
    return out


def read_concept_file(path):
    """{label: concept} from a JSON object or a ``label<TAB>concept`` text file."""
    if not os.path.isfile(path):
        raise MessageFileNotFoundError(f"--concept-file: no such file: {path}")
    with open(path, encoding="utf-8") as f:
        content = f.read()
    if path.lower().endswith(".json") or content.lstrip().startswith("{"):
        try:
            raw = json.loads(content)
        except json.JSONDecodeError as err:
            raise ConceptFileError(one_line(f"{path}: line {err.lineno}: not valid JSON "
                                            f"({err.msg})")) from None
        if not isinstance(raw, dict):
            raise ConceptFileError(f"{path}: expected a JSON object of label: concept")
        items = [(None, str(k), v) for k, v in raw.items()]
    else:
        items = []
        for number, line in enumerate(content.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            label, sep, concept = line.partition("\t")
            if not sep:
                raise ConceptFileError(one_line(f"{path}: line {number}: expected "
                                                f"<label><TAB><concept>, got {line!r}"))
            items.append((number, label.strip(), concept))
    concepts = {}
    for number, label, concept in items:
        where = f"{path}: line {number}" if number else path
        if not isinstance(concept, str) or not concept.strip():
            raise ConceptFileError(one_line(f"{where}: label {label!r}: the concept is empty"))
        if label in concepts:
            raise ConceptFileError(one_line(f"{where}: label {label!r} is given twice"))
        concepts[label] = concept.strip()
    return concepts


def concepts_for(labels, concept_file=None):
    """The concepts of ``labels`` in label order: from ``concept_file`` when given, else the
    built-in ones, else the label names themselves (with underscores and hyphens as spaces)."""
    labels = [str(label) for label in labels]
    if concept_file:
        given = read_concept_file(concept_file)
        missing = [label for label in labels if label not in given]
        unknown = sorted(set(given) - set(labels))
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"no concept for label(s) {', '.join(map(repr, missing))}")
            if unknown:
                parts.append(f"unknown label(s) {', '.join(map(repr, unknown))}")
            raise ConceptFileError(one_line(f"{concept_file}: {'; '.join(parts)} (labels: "
                                            f"{', '.join(labels)})"))
        return [given[label] for label in labels]
    return builtin_concepts(labels) or [label.replace("_", " ").replace("-", " ")
                                        for label in labels]
