"""Generates the embedded relation-extraction sample (synthetic; invented by the tffre authors).

    python data/re_sample/generate.py              # rewrites tffre/resources/re_sample/
    python data/re_sample/generate.py --out DIR    # writes the same files under DIR instead

Two parts, both produced from the templates below with ``random.Random(SEED)``;
no real patient, note, study or abstract is behind any of them:

* ``i2b2/{train,test}/{txt,concept,rel}/note_NNN.{txt,con,rel}``: clinical
  notes in the i2b2/n2c2 2010 relation-challenge format (one pre-tokenised
  sentence per line; ``c="..." L:T L:T||t="..."`` concepts; ``c="..." L:T L:T||
  r="..."||c="..." L:T L:T`` relations). The candidate pairs are every
  treatment-problem, test-problem and problem-problem pair within one line; a
  candidate with no ``.rel`` line is class "None". The relation follows from
  the wording between the two concepts (several paraphrases per type), every
  concept word occurs under several relation types, and there is deliberate
  noise: ~8% of relation lines use a template shared by two types, distractor
  clauses add unrelated concepts, a few common-type relations are left
  unannotated (as an annotator might miss them).
* ``gad/{train,dev,test}.tsv``: GAD-style gene-disease sentences as BioBERT
  distributes them (``@GENE$`` / ``@DISEASE$`` blinded; ``sentence<TAB>label``,
  no header, except ``test.tsv`` with ``index<TAB>sentence<TAB>label``), label
  1 when the sentence asserts an association. ~5% of the sentences come from a
  template of the other class and ~8% from templates used for both classes.

After writing, the files are read back with a small parser of their own and
checked (spans, candidate pairs, counts); the counts are printed.
"""

import argparse
import collections
import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))
# The sample ships as package data, so that a non-editable install finds it.
OUT_DIR = os.path.join(HERE, "..", "..", "tffre", "resources", "re_sample")
SEED = 20241105

# ----------------------------------------------------------------------------
# i2b2 2010 part
# ----------------------------------------------------------------------------

NOTES = {"train": 120, "test": 30}  # note_001..note_120 train, note_121..note_150 test
# Relation lines per split (the sentence's relation type before noise).
REL_LINES = {
    "train": {"TrAP": 68, "TeRP": 58, "PIP": 50, "TeCP": 30,
              "TrIP": 22, "TrWP": 20, "TrCP": 21, "TrNAP": 21},
    "test": {"TrAP": 17, "TeRP": 14, "PIP": 12, "TeCP": 8,
             "TrIP": 6, "TrWP": 5, "TrCP": 5, "TrNAP": 5},
}
NONE_LINES = {"train": 70, "test": 18}    # lines with candidate pairs but no relation
SINGLE_LINES = {"train": 70, "test": 18}  # lines with one concept (or a treatment and a test)
P_SHARED = 0.08       # a relation line uses a template shared by two relation types
P_DISTRACTOR = 0.30   # a relation line gets an unrelated concept in a trailing clause
P_COORD = 0.15        # TrAP / TeRP: the problem slot holds "P1 and P2", both related
P_MISSED = 0.03       # TrAP / TeRP / PIP: the relation is left unannotated

# Display forms; the .con text is the lower-cased tokens, as in the release.
PROBLEMS = [
    "chest pain", "shortness of breath", "pneumonia", "atrial fibrillation", "hypertension",
    "fever", "nausea", "cellulitis", "hyperkalemia", "anemia", "renal failure", "hypotension",
    "rash", "diarrhea", "lower extremity edema", "headache", "hypoglycemia", "pleural effusion",
    "urinary tract infection", "delirium", "GI bleed", "dehydration", "tachycardia",
    "congestive heart failure", "deep vein thrombosis", "abdominal pain", "cough",
    "thrombocytopenia", "acute kidney injury", "leukocytosis", "hyponatremia",
    "pulmonary embolism", "sepsis", "wheezing",
]
TREATMENTS = [
    "aspirin", "heparin", "Lasix", "metoprolol", "vancomycin", "ceftriaxone", "insulin",
    "lisinopril", "prednisone", "morphine", "Coumadin", "levofloxacin", "IV fluids",
    "potassium chloride", "nitroglycerin", "albuterol nebulizers", "blood transfusion",
    "diltiazem", "amiodarone", "Zosyn", "Tylenol", "Kayexalate", "oxycodone", "pantoprazole",
    "digoxin", "antibiotics",
]
TESTS = [
    "chest x-ray", "CT scan", "echocardiogram", "EKG", "blood cultures", "urinalysis", "CBC",
    "troponin", "MRI", "abdominal ultrasound", "lower extremity dopplers", "head CT", "chem 7",
    "lumbar puncture", "stool studies", "cardiac catheterization", "arterial blood gas",
]

# Slots: {T} treatment, {X} test, {P} the related problem, {Q} PIP's other problem.
# The relation is between (T, P), (X, P) or (P, Q). No final period (added later).
TEMPLATES = {
    "TrAP": [
        "the patient was given {T} for {P}", "{T} was started for {P}",
        "she received {T} for her {P}", "he was treated with {T} for {P}",
        "for {P} , he was placed on {T}", "{P} was managed with {T}",
        "started on {T} for presumed {P}", "she was continued on {T} for {P}",
        "{T} was administered for {P} in the emergency department", "given {T} x1 for {P}",
    ],
    "TrIP": [
        "{P} improved with {T}", "her {P} resolved after {T}", "{P} responded well to {T}",
        "after {T} , his {P} improved significantly", "{T} with good relief of her {P}",
        "{P} much better since starting {T}", "{T} led to resolution of the {P}",
    ],
    "TrWP": [
        "{P} worsened despite {T}", "her {P} progressed despite {T}", "{P} was refractory to {T}",
        "despite {T} , his {P} continued to worsen", "{T} failed to control her {P}",
        "no improvement in {P} on {T}",
    ],
    "TrCP": [
        "he developed {P} after {T}", "{P} thought to be secondary to {T}",
        "{T} was complicated by {P}", "{P} likely induced by {T}", "{T} caused {P}",
        "she developed {P} while on {T}",
    ],
    "TrNAP": [
        "{T} was held because of {P}", "{T} was not given due to {P}",
        "{T} was discontinued given her {P}", "we avoided {T} because of his {P}",
        "{T} was contraindicated in the setting of {P}", "holding {T} secondary to {P}",
    ],
    "TeRP": [
        "{X} showed {P}", "{X} revealed {P}", "{X} was notable for {P}", "{X} demonstrated {P}",
        "{X} was consistent with {P}", "{P} was seen on {X}", "her {X} was positive for {P}",
    ],
    "TeCP": [
        "{X} was ordered to evaluate {P}", "{X} was obtained to rule out {P}",
        "a {X} was performed for {P}", "{X} was checked given concern for {P}",
        "to assess her {P} , a {X} was done", "{X} to evaluate for {P}",
        "will obtain {X} for possible {P}",
    ],
    "PIP": [
        "{P} secondary to {Q}", "{Q} causing {P}", "{P} likely due to {Q}",
        "{P} in the setting of {Q}", "{Q} complicated by {P}", "{P} , consistent with {Q}",
        "{Q} with associated {P}",
    ],
}
# One template per type that another type (or None) uses verbatim: irreducible ambiguity.
SHARED = {
    "TrAP": "{P} was treated with {T}", "TrIP": "{P} was treated with {T}",
    "TrCP": "{P} was noted after {T}", "TrWP": "{P} was noted after {T}",
    "TrNAP": "{T} was stopped because of {P}",  # also a TrCP sentence
    "TeRP": "{X} for {P}", "TeCP": "{X} for {P}",
    "PIP": "{P} with {Q}",  # also a None line
}
SHARED_ALSO = {"TrCP": ["{T} was stopped because of {P}"]}
# Trailing clauses that add one concept unrelated to the others: (slot type, clause).
DISTRACTORS = {
    "problem": [", with a history of {D}", "; she also has chronic {D}", "; {D} is stable",
                ", and {D} was noted incidentally"],
    "treatment": ["; {T2} was continued", "; home {T2} was resumed", ", and she takes {T2} at home"],
    "test": ["; {X2} was unremarkable", "; {X2} is pending", ", and a {X2} was normal"],
}
DISTRACTOR_KINDS = {"Tr": ["problem", "test"], "Te": ["problem", "treatment"],
                    "PI": ["problem", "treatment", "test"]}
# Lines with candidate pairs and no relation.
NONE_TEMPLATES = [
    "history of {P} and {Q}", "past medical history is significant for {P} , {Q} , and {R}",
    "she denies {P} or {Q}", "home medications include {T} and {T2} ; she reports {P}",
    "{T} was continued ; {P} remains stable", "{X} was reviewed ; she has known {P}",
    "{X} is pending ; {P} was discussed with the family", "{P} with {Q}",
    "the patient has {P} and was also on {T} at home",
    "{X} was unremarkable and {P} was noted on exam",
    "review of systems positive for {P} , negative for {Q}",
]
SINGLE_TEMPLATES = [
    "she denies {P}", "continue {T}", "will repeat {X} in the morning",
    "{T} was continued at home dose", "no {P}", "{X} is pending", "discharged on {T}",
    "family history of {P}", "{X} was checked before {T} was given", "she was restarted on {T}",
]
FILLERS = [
    "HOSPITAL COURSE :", "HISTORY OF PRESENT ILLNESS :", "The patient was seen and examined .",
    "Vital signs were stable .", "She was discharged home in good condition .",
    "Follow up with her primary care physician in two weeks .", "Code status : full code .",
    "The family was updated at the bedside .", "He tolerated a regular diet .",
    "Physical therapy was consulted .",
]
SLOT_TYPE = {"T": "treatment", "T2": "treatment", "X": "test", "X2": "test", "P": "problem",
             "P2": "problem", "Q": "problem", "R": "problem", "D": "problem"}
VOCAB = {"treatment": TREATMENTS, "test": TESTS, "problem": PROBLEMS}
CANDIDATE_TYPES = {frozenset(["treatment", "problem"]), frozenset(["test", "problem"]),
                   frozenset(["problem"])}


class Line:
    """One sentence being built: tokens, concepts (start, end, type) and relations."""

    def __init__(self):
        self.tokens, self.concepts, self.rels = [], [], []

    def fill(self, template, values):
        """Appends a template; ``values`` maps a slot to a list of concept strings.

        Returns {slot: [concept index, ...]}.
        """
        slots = {}
        for part in re.split(r"(\{\w+\})", template):
            if part.startswith("{"):
                slot = part[1:-1]
                for k, text in enumerate(values[slot]):
                    if k:
                        self.tokens.append("and")
                    start = len(self.tokens)
                    self.tokens += text.split()
                    self.concepts.append((start, len(self.tokens) - 1, SLOT_TYPE[slot]))
                    slots.setdefault(slot, []).append(len(self.concepts) - 1)
            else:
                self.tokens += part.split()
        return slots

    def finish(self):
        self.tokens.append(".")
        for i in range(len(self.tokens) - 1):  # "a" before a concept: "an echocardiogram"
            if self.tokens[i] == "a" and needs_an(self.tokens[i + 1]):
                self.tokens[i] = "an"
        first = self.tokens[0]
        self.tokens[0] = first[0].upper() + first[1:]
        return self


def needs_an(word):
    return word[0].lower() in "aeio" or word in ("EKG", "MRI")


def pick(rng, kind, used):
    """A concept string of ``kind`` not yet used in the line."""
    while True:
        text = rng.choice(VOCAB[kind])
        if text not in used:
            used.add(text)
            return text


def relation_line(rng, rtype):
    if rng.random() < P_SHARED:
        template = rng.choice([SHARED[rtype]] + SHARED_ALSO.get(rtype, []))
    else:
        template = rng.choice(TEMPLATES[rtype])
    used = set()
    values = {}
    for slot in re.findall(r"\{(\w+)\}", template):
        values[slot] = [pick(rng, SLOT_TYPE[slot], used)]
    if rtype in ("TrAP", "TeRP") and rng.random() < P_COORD:
        values["P"].append(pick(rng, "problem", used))
    distractor = None
    if rng.random() < P_DISTRACTOR:
        kind = rng.choice(DISTRACTOR_KINDS[rtype[:2]])
        distractor = rng.choice(DISTRACTORS[kind])
        for slot in re.findall(r"\{(\w+)\}", distractor):
            values[slot] = [pick(rng, SLOT_TYPE[slot], used)]
    line = Line()
    slots = line.fill(template, values)
    if distractor:
        line.fill(distractor, values)
    missed = rtype in ("TrAP", "TeRP", "PIP") and rng.random() < P_MISSED
    if not missed:
        if rtype == "PIP":
            pair = [slots["P"][0], slots["Q"][0]]
            rng.shuffle(pair)  # PIP is written in either order
            line.rels.append((pair[0], rtype, pair[1]))
        else:
            head = slots["T" if rtype.startswith("Tr") else "X"][0]
            for p in slots["P"]:
                line.rels.append((head, rtype, p))
    return line.finish()


def plain_line(rng, templates):
    template = rng.choice(templates)
    used = set()
    values = {s: [pick(rng, SLOT_TYPE[s], used)] for s in re.findall(r"\{(\w+)\}", template)}
    line = Line()
    line.fill(template, values)
    return line.finish()


def filler_line(rng):
    line = Line()
    line.tokens = rng.choice(FILLERS).split()
    return line


def generate_i2b2(rng):
    """Returns {split: [(stem, [Line, ...]), ...]}."""
    out, number = {}, 1
    for split, n_notes in NOTES.items():
        sizes = [rng.randint(3, 6) for _ in range(n_notes)]
        jobs = [("rel", t) for t, n in REL_LINES[split].items() for _ in range(n)]
        jobs += [("none", None)] * NONE_LINES[split] + [("single", None)] * SINGLE_LINES[split]
        n_fill = sum(sizes) - len(jobs)
        assert n_fill >= 0, (split, sum(sizes), len(jobs))
        jobs += [("filler", None)] * n_fill
        rng.shuffle(jobs)
        notes = []
        for size in sizes:
            lines = []
            for kind, rtype in jobs[:size]:
                if kind == "rel":
                    lines.append(relation_line(rng, rtype))
                elif kind == "none":
                    lines.append(plain_line(rng, NONE_TEMPLATES))
                elif kind == "single":
                    lines.append(plain_line(rng, SINGLE_TEMPLATES))
                else:
                    lines.append(filler_line(rng))
            del jobs[:size]
            notes.append((f"note_{number:03d}", lines))
            number += 1
        out[split] = notes
    return out


def concept_ref(line_no, line, index):
    start, end, _ = line.concepts[index]
    text = " ".join(line.tokens[start:end + 1]).lower()
    return f'c="{text}" {line_no}:{start} {line_no}:{end}'


def write_i2b2(notes_by_split, out_dir):
    for split, notes in notes_by_split.items():
        folders = {sub: os.path.join(out_dir, "i2b2", split, sub) for sub in ("txt", "concept", "rel")}
        for sub, ext in (("txt", ".txt"), ("concept", ".con"), ("rel", ".rel")):
            os.makedirs(folders[sub], exist_ok=True)
            for name in os.listdir(folders[sub]):  # stale notes of an earlier run
                if name.startswith("note_") and name.endswith(ext):
                    os.remove(os.path.join(folders[sub], name))
        for stem, lines in notes:
            txt, con, rel = [], [], []
            for line_no, line in enumerate(lines, start=1):
                txt.append(" ".join(line.tokens))
                for i, (_, _, ctype) in enumerate(line.concepts):
                    con.append(f'{concept_ref(line_no, line, i)}||t="{ctype}"')
                for a, rtype, b in line.rels:
                    rel.append(f'{concept_ref(line_no, line, a)}||r="{rtype}"||'
                               f'{concept_ref(line_no, line, b)}')
            for sub, ext, rows in (("txt", ".txt", txt), ("concept", ".con", con), ("rel", ".rel", rel)):
                with open(os.path.join(folders[sub], stem + ext), "w", encoding="utf-8", newline="\n") as f:
                    f.write("".join(r + "\n" for r in rows))


# ----------------------------------------------------------------------------
# GAD part
# ----------------------------------------------------------------------------

GAD_SIZES = {"train": 400, "dev": 60, "test": 100}
GAD_POSITIVE = {"train": 180, "dev": 27, "test": 45}
P_GAD_FLIP = 0.05     # the sentence comes from a template of the other class
P_GAD_SHARED = 0.08   # the sentence comes from a template used for both classes

G, D = "@GENE$", "@DISEASE$"
GAD_POS = [
    "{G} polymorphisms were associated with {D}{pop}.",
    "The {var} variant of {G} was significantly associated with an increased risk of {D}{sig}.",
    "Our results suggest that {G} is a susceptibility gene for {D}{pop}.",
    "Carriers of the {var} allele of {G} had a higher risk of {D} than non-carriers{sig}.",
    "Genetic variation in {G} contributes to susceptibility to {D}{pop}.",
    "{D} was associated with the {var} genotype of {G}{sig}.",
    "A significant association between {G} and {D} was observed{pop}{sig}.",
    "The {G} {var} polymorphism may be a risk factor for {D}{pop}.",
    "These findings indicate that the {G} gene is involved in the development of {D}.",
    "Haplotype analysis confirmed the association of {G} with {D}{sig}.",
    "Increased susceptibility to {D} was conferred by the {var} allele of {G}{sig}.",
    "The {var} genotype of {G} was more frequent in patients with {D} than in controls{sig}.",
    "{G} {var} is associated with early onset {D}{pop}.",
    "{G} was associated with {D}, but not with {other_disease}{pop}.",
]
GAD_NEG = [
    "No association between {G} polymorphisms and {D} was found{pop}.",
    "The {G} {var} polymorphism was not associated with {D}{ns}.",
    "We found no evidence that {G} contributes to susceptibility to {D}{pop}.",
    "Genotype frequencies of {G} did not differ between patients with {D} and controls{ns}.",
    "Our data do not support a role for {G} in {D}{pop}.",
    "The association between {G} and {D} reported previously could not be replicated{pop}.",
    "{G} expression was measured in tissue samples from patients with {D}.",
    "We genotyped {G} in {n} patients with {D} and {m} healthy controls.",
    "The {var} variant of {G} was not a risk factor for {D}{ns}.",
    "Neither {G} nor {other_gene} variants were associated with {D}{ns}.",
    "Further studies are needed to determine whether {G} plays a role in {D}.",
    "{D} patients and controls were genotyped for the {var} polymorphism of {G}.",
    "The frequency of the {G} {var} allele was similar in {D} cases and controls{ns}.",
    "{G} was associated with {other_disease}, but not with {D}{pop}.",
]
GAD_SHARED = [
    "The role of {G} in {D} was investigated{pop}.",
    "The {G} {var} polymorphism may be associated with {D}.",
    "We examined whether {G} variants influence the risk of {D}{pop}.",
]
VARIANTS = ["C677T", "rs1801133", "-308G/A", "Val158Met", "Arg72Pro", "I/D", "rs7903146",
            "A1298C", "Gln192Arg", "4G/5G", "Pro12Ala", "rs2476601", "E23K", "R620W"]
POPULATIONS = ["Chinese Han", "Korean", "Japanese", "Caucasian", "Brazilian", "Turkish",
               "Iranian", "Italian", "Finnish", "African American", "Tunisian", "Mexican"]
OTHER_GENES = ["APOE", "TNF", "IL6", "ACE", "CTLA4", "VDR", "PPARG", "ESR1"]
OTHER_DISEASES = ["type 2 diabetes", "asthma", "hypertension", "coronary artery disease",
                  "colorectal cancer", "rheumatoid arthritis", "Alzheimer's disease", "obesity"]


def gad_sentence(rng, template):
    def pop():
        who = rng.choice(POPULATIONS)
        return rng.choice(["", "", f" in {'an' if needs_an(who) else 'a'} {who} population",
                           f" in {rng.randint(120, 900)} {rng.choice(POPULATIONS)} patients",
                           " among postmenopausal women", " in a case-control study"])

    def sig():
        if rng.random() < 0.4:
            return ""
        if rng.random() < 0.5:
            return f" (P = 0.00{rng.randint(1, 9)})"
        odds = rng.uniform(1.4, 3.2)
        low = rng.uniform(1.05, odds - 0.2)
        return f" (OR = {odds:.2f}, 95% CI {low:.2f}-{odds + (odds - low):.2f})"

    def ns():
        if rng.random() < 0.4:
            return ""
        if rng.random() < 0.5:
            return f" (P = 0.{rng.randint(12, 89)})"
        odds = rng.uniform(0.85, 1.2)
        low = rng.uniform(0.6, 0.95)
        return f" (OR = {odds:.2f}, 95% CI {low:.2f}-{odds + (odds - low) + 0.1:.2f})"

    fill = {"G": lambda: G, "D": lambda: D, "pop": pop, "sig": sig, "ns": ns,
            "var": lambda: rng.choice(VARIANTS), "other_gene": lambda: rng.choice(OTHER_GENES),
            "other_disease": lambda: rng.choice(OTHER_DISEASES),
            "n": lambda: str(rng.randint(80, 600)), "m": lambda: str(rng.randint(100, 800))}
    text = re.sub(r"\{(\w+)\}", lambda m: fill[m.group(1)](), template)
    return text[0].upper() + text[1:]


def generate_gad(rng):
    """Returns {split: [(sentence, label), ...]}."""
    out = {}
    for split, size in GAD_SIZES.items():
        labels = [1] * GAD_POSITIVE[split] + [0] * (size - GAD_POSITIVE[split])
        rng.shuffle(labels)
        rows = []
        for label in labels:
            u = rng.random()
            if u < P_GAD_SHARED:
                template = rng.choice(GAD_SHARED)
            elif u < P_GAD_SHARED + P_GAD_FLIP:
                template = rng.choice(GAD_NEG if label else GAD_POS)
            else:
                template = rng.choice(GAD_POS if label else GAD_NEG)
            rows.append((gad_sentence(rng, template), label))
        out[split] = rows
    return out


def write_gad(rows_by_split, out_dir):
    folder = os.path.join(out_dir, "gad")
    os.makedirs(folder, exist_ok=True)
    for split, rows in rows_by_split.items():
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8", newline="\n") as f:
            if split == "test":
                f.write("index\tsentence\tlabel\n")
                f.write("".join(f"{i}\t{s}\t{y}\n" for i, (s, y) in enumerate(rows)))
            else:
                f.write("".join(f"{s}\t{y}\n" for s, y in rows))


SYNTHETIC_TXT = """\
SYNTHETIC DATA - invented by the tffre authors, not from any patient or publication.

Every note, concept, relation and sentence under this folder was produced by
data/re_sample/generate.py (templates + random.Random({seed})) in the tffre
repository. No real patient, clinical note, study or abstract is behind them.

i2b2/  notes in the i2b2/n2c2 2010 relation-challenge format (txt/, concept/, rel/)
gad/   GAD-style gene-disease sentences in the BioBERT/BLUE TSV layout

They exist so that the relation-extraction code runs and is tested without the
real corpora (which need a data-use agreement). Do not report results on them
as results on i2b2 2010 or GAD. See data/README.md for sizes and label counts.
"""


# ----------------------------------------------------------------------------
# Self-check: an independent reading of what was written
# ----------------------------------------------------------------------------

CON_RE = re.compile(r'^c="(.*)" (\d+):(\d+) (\d+):(\d+)\|\|t="(problem|test|treatment)"$')
REL_RE = re.compile(r'^c="(.*)" (\d+):(\d+) (\d+):(\d+)\|\|r="(\w+)"\|\|c="(.*)" (\d+):(\d+) (\d+):(\d+)$')
REL_TYPES = ("TrIP", "TrWP", "TrCP", "TrAP", "TrNAP", "TeRP", "TeCP", "PIP")


def read_i2b2_counts(folder):
    """Parses txt/, concept/, rel/ under ``folder``; checks them; returns (Counter, n_notes, n_lines)."""
    counts, n_lines = collections.Counter(), 0
    stems = sorted(n[:-4] for n in os.listdir(os.path.join(folder, "txt")) if n.endswith(".txt"))
    for stem in stems:
        with open(os.path.join(folder, "txt", stem + ".txt"), encoding="utf-8") as f:
            lines = [row.split(" ") for row in f.read().split("\n")[:-1]]
        n_lines += len(lines)
        concepts = {}
        with open(os.path.join(folder, "concept", stem + ".con"), encoding="utf-8") as f:
            for row in f.read().splitlines():
                m = CON_RE.match(row)
                assert m, (stem, row)
                text, l1, t1, l2, t2, ctype = m.groups()
                l1, t1, l2, t2 = int(l1), int(t1), int(l2), int(t2)
                assert l1 == l2 and 0 <= t1 <= t2 < len(lines[l1 - 1]), (stem, row)
                assert " ".join(lines[l1 - 1][t1:t2 + 1]).lower() == text, (stem, row)
                concepts[(text, l1, t1, t2)] = ctype
        gold = {}
        with open(os.path.join(folder, "rel", stem + ".rel"), encoding="utf-8") as f:
            for row in f.read().splitlines():
                m = REL_RE.match(row)
                assert m, (stem, row)
                a = (m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(5)))
                b = (m.group(7), int(m.group(8)), int(m.group(9)), int(m.group(11)))
                rtype = m.group(6)
                assert rtype in REL_TYPES and a in concepts and b in concepts, (stem, row)
                assert a[1] == b[1], (stem, row)  # within one line
                types = (concepts[a], concepts[b])
                want = {"Tr": ("treatment", "problem"), "Te": ("test", "problem"),
                        "PI": ("problem", "problem")}[rtype[:2]]
                assert types == want, (stem, row)
                key = frozenset([a, b])
                assert key not in gold, (stem, row)
                gold[key] = rtype
        by_line = collections.defaultdict(list)
        for c in concepts:
            by_line[c[1]].append(c)
        pairs = set()
        for cs in by_line.values():
            cs.sort(key=lambda c: c[2])
            for i in range(len(cs)):
                for j in range(i + 1, len(cs)):
                    if frozenset([concepts[cs[i]], concepts[cs[j]]]) in CANDIDATE_TYPES:
                        key = frozenset([cs[i], cs[j]])
                        pairs.add(key)
                        counts[gold.get(key, "None")] += 1
        assert set(gold) <= pairs, stem
    return counts, len(stems), n_lines


def read_gad_counts(path, header):
    with open(path, encoding="utf-8") as f:
        rows = f.read().split("\n")
    assert rows[-1] == ""
    rows = rows[:-1]
    if header:
        assert rows[0] == "index\tsentence\tlabel"
        rows = rows[1:]
    counts = collections.Counter()
    for i, row in enumerate(rows):
        cols = row.split("\t")
        if header:
            assert cols[0] == str(i), row
            cols = cols[1:]
        sentence, label = cols
        assert sentence.count(G) == 1 and sentence.count(D) == 1 and '"' not in sentence, row
        counts[int(label)] += 1
    return counts


def check(out_dir):
    """Reads back the written files; returns a printable summary."""
    summary = []
    for split in NOTES:
        counts, n_notes, n_lines = read_i2b2_counts(os.path.join(out_dir, "i2b2", split))
        assert n_notes == NOTES[split]
        for rtype in REL_TYPES + ("None",):
            assert counts[rtype] > 0, (split, rtype)
        total = sum(counts.values())
        summary.append(f"i2b2 {split}: {n_notes} notes, {n_lines} lines, {total} candidate pairs, "
                       + ", ".join(f"{k} {counts[k]}" for k in ("None",) + REL_TYPES))
    for split in GAD_SIZES:
        counts = read_gad_counts(os.path.join(out_dir, "gad", f"{split}.tsv"), split == "test")
        assert counts[1] == GAD_POSITIVE[split] and sum(counts.values()) == GAD_SIZES[split]
        summary.append(f"gad {split}: {sum(counts.values())} sentences, {counts[1]} positive")
    return "\n".join(summary)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT_DIR,
                        help="folder to write into (default: tffre/resources/re_sample)")
    args = parser.parse_args(argv)
    rng = random.Random(SEED)
    os.makedirs(args.out, exist_ok=True)
    write_i2b2(generate_i2b2(rng), args.out)
    write_gad(generate_gad(rng), args.out)
    with open(os.path.join(args.out, "SYNTHETIC.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(SYNTHETIC_TXT.format(seed=SEED))
    print(f"wrote {os.path.normpath(args.out)}")
    print(check(args.out))


if __name__ == "__main__":
    main()
