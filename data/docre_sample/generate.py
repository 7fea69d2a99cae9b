"""Generates the embedded document-level RE sample (synthetic; invented by the tffre authors).

    python data/docre_sample/generate.py              # rewrites tffre/resources/docre_sample/
    python data/docre_sample/generate.py --out DIR    # writes the same files under DIR instead

``{train,dev,test}.pubtator``: invented chemical-disease abstracts in the PubTator format
of BioCreative V CDR (``PMID|t|title``, ``PMID|a|abstract``, tab-separated mention lines
``PMID start end text type id [texts]`` and relation lines ``PMID CID chemical disease``,
documents separated by a blank line), so that
:func:`tffre.data.formats.pubtator.load_pubtator` reads it like the real corpus. Everything comes
from the templates below and ``random.Random(SEED)``; no real abstract, patient or
annotation is behind it. The chemical names, the PMIDs (91000000+, 92000000+, 93000000+)
and the MeSH-like ids (``C9xxxxx`` chemicals, ``D9xxxxx`` diseases) are invented; the
disease names are ordinary medical words, and the relations between them and the
invented chemicals mean nothing.

Each document has a title and 3-8 sentences, 2-5 chemicals and 2-4 diseases. About a
third of the chemical-disease pairs are CID (chemical-induced disease). A CID pair is
stated either in one sentence with a cue ("C induced D", "D developed after treatment
with C", "C-induced D") or across two sentences that never mention both ("C was
administered at 5 mg/kg per day. Within 3 days, the drug induced D."). Negative pairs
are often co-mentioned too, with negation or another relation ("C did not induce D",
"C is widely used to treat D", "Pretreatment with C prevented the D induced by C2"), and
there are cross-sentence decoys ("C was administered ... The drug was well tolerated,
and no D occurred."), distractor sentences and noise: ~12% of the statements use a
template shared by both classes ("D was reported in patients receiving C") and ~3% of
the stated CID pairs are left unannotated. Some entities have
several mentions (repeats, "name (ABBR)" abbreviations, synonyms), some documents a
composite mention (``renal and hepatic failure``, ids ``D9xxxxx|D9yyyyy``) or an
unnormalised one (``toxicity``, ``metabolites``: id ``-1``). Documents differ in
length and in their number of entities and relations, so graph-based (e.g. degree
entropy) splits give unequal clients.

After writing, the files are read back with a small parser of their own and checked
against what was generated (offsets, ids, relations, which CID pairs share a
sentence); the counts are printed.
"""

import argparse
import collections
import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))
# The sample ships as package data, so that a non-editable install finds it.
OUT_DIR = os.path.join(HERE, "..", "..", "tffre", "resources", "docre_sample")
SEED = 20241220
SPLITS = {"train": 300, "dev": 60, "test": 100}
PMID_BASE = {"train": 91000000, "dev": 92000000, "test": 93000000}

P_POSITIVE = 0.33     # a chemical-disease pair is CID (at least one per document)
P_CROSS = 0.3         # a chemical's CID pairs are stated across sentences
P_NEG_MENTION = 0.5   # a negative pair gets a sentence that co-mentions it
P_MIXED = 0.5         # ... in "C prevented the D induced by C2" form, when possible
P_SHARED = 0.12       # a statement uses a template shared by both classes
P_MISSED = 0.03       # a CID pair stated in the text is left unannotated (annotator noise)
P_DECOY = 0.35        # the document has a cross-sentence negative decoy
P_COMPOSITE = 0.12    # the document has a composite disease mention
P_UNNORMALISED = 0.2  # the document has a mention with id -1
P_ABBREV = 0.5        # an entity with an abbreviation introduces it at first mention
P_SYNONYM = 0.4       # a later mention of an entity with a synonym uses it
P_CONCLUSION = 0.5
MAX_SENTENCES = 8     # abstract sentences, the title not counted

# Invented chemical names (name, abbreviation or None). Ids: C9 + 5 digits, in list order.
CHEMICALS = [
    ("valtorazine", "VTZ"), ("fendoxilan", None), ("cloparidone", "CPD"), ("mizotrepam", None),
    ("dextaverine", None), ("ropinaxol", None), ("sulvadrine", "SVD"), ("tramexolone", None),
    ("benzaquinil", None), ("lofetazine", "LFZ"), ("quinoxadrel", None), ("perimetacin", None),
    ("oxaliprane", None), ("zolmetrine", "ZMT"), ("amidroxane", None), ("nortexafil", None),
    ("glicapraxin", None), ("hydrovastane", "HVS"), ("caprenolol", None), ("trimazepride", None),
    ("fluvoxetrine", None), ("metrazolide", "MZL"), ("pentrabucil", None), ("sorafibrate", None),
    ("dolmexitan", None), ("ketorapine", "KTP"), ("vexaprolin", None), ("lumiracet", None),
    ("bromataxel", None), ("cefaroxime", None), ("ostramycin", "OSM"), ("tiludrazine", None),
    ("xenoparin", None), ("halostatin", None), ("ribamoxil", "RBX"), ("prazotrexate", None),
]
# Diseases (name, abbreviation or None, synonym or None). Ids: D9 + 5 digits, in list order.
DISEASES = [
    ("seizures", None, "convulsions"), ("hepatotoxicity", None, "liver injury"),
    ("acute kidney injury", "AKI", None), ("hypotension", None, None),
    ("neutropenia", None, None), ("ventricular tachycardia", "VT", None),
    ("rhabdomyolysis", None, None), ("QT prolongation", None, None),
    ("Stevens-Johnson syndrome", "SJS", None), ("agranulocytosis", None, None),
    ("pancreatitis", None, None), ("thrombocytopenia", None, None),
    ("lactic acidosis", None, None), ("cardiomyopathy", None, None),
    ("pulmonary fibrosis", None, None), ("ototoxicity", None, "hearing loss"),
    ("hyperkalemia", None, None), ("delirium", None, "acute confusion"),
    ("tardive dyskinesia", "TD", None), ("myocardial infarction", "MI", None),
    ("hypertension", None, None), ("depression", None, None), ("schizophrenia", None, None),
    ("atrial fibrillation", "AF", None), ("migraine", None, None), ("asthma", None, None),
    ("hepatitis", None, None), ("bradycardia", None, None), ("nephrotoxicity", None, None),
    ("peripheral neuropathy", None, None),
    # parts of composite mentions (below); they also occur alone
    ("renal failure", None, None), ("hepatic failure", None, None),
    ("motor neuropathy", None, None), ("sensory neuropathy", None, None),
    ("atrial arrhythmias", None, None), ("ventricular arrhythmias", None, None),
    ("gastric ulcers", None, None), ("duodenal ulcers", None, None),
]
# Composite mentions "renal and hepatic failure": (modifier 1, modifier 2, head).
COMPOSITES = [("renal", "hepatic", "failure"), ("motor", "sensory", "neuropathy"),
              ("atrial", "ventricular", "arrhythmias"), ("gastric", "duodenal", "ulcers")]
# Unnormalised mentions (id -1).
UNNORMALISED = {"Disease": ["toxicity", "adverse reactions", "side effects"],
                "Chemical": ["metabolites", "active metabolite"]}

# Slots: {C} the chemical, {C2} a second chemical, {Ds} a list of disease units, {Cs} a list of
# chemicals, {X} an unnormalised mention; the rest are filler words. Each template is one
# sentence; its first character is upper-cased when written.
TITLE_POS = ["{C}-induced {Ds}: a case report.", "{Ds} associated with {C} therapy.",
             "{C}-induced {Ds} in {animal}.", "Reversible {Ds} after exposure to {C}."]
TITLE_NEG = ["{C} in the treatment of {Ds}.", "Efficacy of {C} in patients with {Ds}."]
TITLE_CHEM = ["Safety of {C} in {pop}.", "Adverse effects of {C}: a review of {n} cases.",
              "Pharmacokinetics of {C} in {pop}."]
TITLE_NONE = ["Adverse drug reactions in {pop}: a retrospective study.",
              "Drug safety surveillance in a teaching hospital."]
POSITIVE = [
    "{C} induced {Ds} in {n} of {m} patients.", "{Ds} developed after treatment with {C}.",
    "Administration of {C} resulted in {Ds}.", "{C} caused {Ds} in {animal}.",
    "We report {Ds} associated with {C} therapy.", "{C}-induced {Ds} occurred in {n} patients.",
    "The incidence of {Ds} increased with the dose of {C} ({stats}).",
    "Use of {C} was associated with {Ds} ({stats}).",
    "{C} produced dose-dependent {Ds} in {animal}.",
    "{Ds} appeared within {k} days of starting {C}.",
]
NEGATIVE = [
    "{C} did not induce {Ds}.", "{C} is widely used to treat {Ds}.",
    "Patients with {Ds} were treated with {C}.",
    "No {Ds} was observed in patients receiving {C}.",
    "{C} was not associated with {Ds} ({stats_ns}).",
    "{C} reduced the incidence of {Ds} ({stats}).",
    "The efficacy of {C} in {Ds} was evaluated in {n} patients.",
    "{C} improved {Ds} in {n} of {m} patients.",
    "The risk of {Ds} did not increase with {C} ({stats_ns}).",
]
# Negative for (C, Ds), positive for (C2, Ds).
MIXED = ["Pretreatment with {C} prevented the {Ds} induced by {C2}.",
         "{C} attenuated {C2}-induced {Ds} in {animal}."]
# Used for both classes: irreducible ambiguity.
SHARED = ["{Ds} was reported in patients receiving {C}.",
          "Cases of {Ds} during {C} therapy were reviewed."]
# Cross-sentence statements: A names the chemical alone, B (next sentence) the diseases alone.
CROSS_A = ["{C} was administered at {dose} mg/kg per day.",
           "{n} patients received {C} for {k} weeks.",
           "Treatment with {C} was started on day {k}.", "A woman aged {age} years was given {C}."]
CROSS_B_POS = ["Within {k} days, the drug induced {Ds}.", "This agent subsequently caused {Ds}.",
               "{Ds} developed shortly after the first dose.",
               "{Ds} resolved after the drug was withdrawn."]
CROSS_B_NEG = ["The drug was well tolerated, and no {Ds} occurred.",
               "{Ds} had been present before the drug was started.",
               "No patient developed {Ds} during treatment.", "The drug did not cause {Ds}."]
CHEM_ONLY = ["Concomitant medications included {Cs}.",
             "Serum concentrations of {Cs} were measured weekly.",
             "Doses of {Cs} were adjusted to renal function."]
DISEASE_ONLY = ["Patients with a history of {Ds} were excluded.", "{Ds} was confirmed by {test}.",
                "The severity of {Ds} was graded with standard criteria."]
UNNORMALISED_SENTENCES = {"Disease": ["No other {X} was recorded.",
                                      "Other {X} were mild and transient."],
                          "Chemical": ["Plasma levels of {C} and its {X} were measured."]}
DISTRACTORS = [
    "The study enrolled {n} patients.",
    "Blood samples were collected at baseline and after {k} weeks.",
    "All procedures were approved by the local ethics committee.",
    "Data were analysed with a mixed-effects model.", "Follow-up lasted {k} months.",
    "Baseline characteristics did not differ between groups.",
    "Renal and hepatic function were monitored throughout.",
]
CONCLUSION_POS = ["These findings suggest that {C} can induce {Ds}.",
                  "Clinicians should be aware that {C} may cause {Ds}."]
CONCLUSION_CHEM = ["Patients receiving {C} should be monitored closely."]
CONCLUSION_NONE = ["Further studies are needed.", "The mechanism remains unclear."]

FILL = {
    "n": lambda rng: str(rng.randint(3, 60)), "m": lambda rng: str(rng.randint(61, 400)),
    "k": lambda rng: str(rng.randint(2, 14)), "age": lambda rng: str(rng.randint(19, 84)),
    "dose": lambda rng: rng.choice(["0.5", "1", "2.5", "5", "10", "20", "50"]),
    "animal": lambda rng: rng.choice(["rats", "mice", "rabbits", "dogs"]),
    "pop": lambda rng: rng.choice(["elderly patients", "children", "pregnant women",
                                   "patients with renal impairment", "healthy volunteers"]),
    "test": lambda rng: rng.choice(["biopsy", "electrocardiography", "ultrasound", "serology",
                                    "magnetic resonance imaging"]),
    "stats": lambda rng: f"P < 0.0{rng.randint(1, 5)}",
    "stats_ns": lambda rng: f"P = 0.{rng.randint(12, 89)}",
}


# ----------------------------------------------------------------------------
# Entities
# ----------------------------------------------------------------------------

Chemical = collections.namedtuple("Chemical", "id name abbr")
Disease = collections.namedtuple("Disease", "id name abbr synonym")
# A disease unit of a document: one disease, or the two diseases of a composite mention.
Unit = collections.namedtuple("Unit", "diseases composite")
Unnormalised = collections.namedtuple("Unnormalised", "text type")

CHEMICAL_ENTITIES = [Chemical(f"C9{i + 1:05d}", name, abbr)
                     for i, (name, abbr) in enumerate(CHEMICALS)]
DISEASE_ENTITIES = [Disease(f"D9{i + 1:05d}", name, abbr, syn)
                    for i, (name, abbr, syn) in enumerate(DISEASES)]
DISEASE_BY_NAME = {d.name: d for d in DISEASE_ENTITIES}
COMPOSITE_PARTS = {f"{mod} {head}" for mod1, mod2, head in COMPOSITES for mod in (mod1, mod2)}


# ----------------------------------------------------------------------------
# Writing one document
# ----------------------------------------------------------------------------


class Writer:
    """Renders sentences, tracking mentions (offsets into title + " " + abstract)."""

    def __init__(self, rng):
        self.rng = rng
        self.sentences = []   # sentence strings; [0] is the title
        self.mentions = []    # (start, end, text, type, id, texts or None, sentence index)
        self.introduced = set()
        self.pos = 0          # where the next sentence starts in the document text

    def _entity(self, ent, pieces, follow):
        """Appends one entity's surface (one or two mentions) to ``pieces``."""
        rng = self.rng
        if isinstance(ent, Unnormalised):
            pieces.append((ent.text, ent.type, "-1", None))
            return
        if isinstance(ent, Unit) and ent.composite:
            mod1, mod2, head = ent.composite
            pieces.append((f"{mod1} and {mod2} {head}", "Disease",
                           "|".join(d.id for d in ent.diseases),
                           f"{mod1} {head}|{mod2} {head}"))
            self.introduced.update(d.id for d in ent.diseases)
            return
        if isinstance(ent, Unit):
            ent = ent.diseases[0]
        kind = "Chemical" if isinstance(ent, Chemical) else "Disease"
        first = ent.id not in self.introduced
        self.introduced.add(ent.id)
        synonym = getattr(ent, "synonym", None)
        if ent.abbr and first and follow.startswith(" ") and rng.random() < P_ABBREV:
            # "name (ABBR)": two mentions of one entity; only before a space, not "-induced".
            pieces += [(ent.name, kind, ent.id, None), (" (", None, None, None),
                       (ent.abbr, kind, ent.id, None), (")", None, None, None)]
            self.introduced.add(("abbr", ent.id))
        elif ("abbr", ent.id) in self.introduced and rng.random() < 0.7:
            pieces.append((ent.abbr, kind, ent.id, None))
        elif synonym and not first and rng.random() < P_SYNONYM:
            pieces.append((synonym, kind, ent.id, None))
        else:
            pieces.append((ent.name, kind, ent.id, None))

    def sentence(self, template, slots):
        """Writes one sentence; ``slots`` maps a slot name to a list of entities."""
        parts = re.split(r"(\{\w+\})", template)
        pieces = []  # (text, type or None, id, texts)
        for i, part in enumerate(parts):
            if not (part.startswith("{") and part.endswith("}")):
                pieces.append((part, None, None, None))
                continue
            slot = part[1:-1]
            if slot not in slots:
                pieces.append((FILL[slot](self.rng), None, None, None))
                continue
            follow = parts[i + 1] if i + 1 < len(parts) else ""
            ents = slots[slot]
            for k, ent in enumerate(ents):
                if k:
                    sep = " and " if k == len(ents) - 1 else ", "
                    pieces.append((sep, None, None, None))
                self._entity(ent, pieces, follow if k == len(ents) - 1 else ",")
        text, index = "", len(self.sentences)
        if self.sentences:
            self.pos += 1  # the space between title/sentences
        for k, (piece, kind, eid, texts) in enumerate(pieces):
            if k == 0 or not text:
                piece = piece[:1].upper() + piece[1:]
            if kind is not None:
                start = self.pos + len(text)
                self.mentions.append((start, start + len(piece), piece, kind, eid, texts, index))
            text += piece
        self.sentences.append(text)
        self.pos += len(text)
        return index

    def document(self):
        """(title, abstract, mentions sorted by offset)."""
        return self.sentences[0], " ".join(self.sentences[1:]), sorted(self.mentions)


def coordinated(rng, units, limit=3):
    """At most ``limit`` of ``units`` in random order (a sentence lists a few diseases)."""
    units = list(units)
    rng.shuffle(units)
    return units[:limit]


def make_document(rng, pmid):
    """One document as a dict: pmid, title, abstract, mentions (start, end, text, type, id,
    texts, sentence index), relations ((chemical id, disease id), sorted) and, for the checks,
    modes ({relation: "intra"/"cross"}), n_pairs and n_sentences (the title not counted)."""
    n_chem = rng.choices([2, 3, 4, 5], weights=[30, 30, 25, 15])[0]
    n_dis = rng.choices([2, 3, 4], weights=[40, 35, 25])[0]
    chems = rng.sample(CHEMICAL_ENTITIES, n_chem)
    units = []
    if rng.random() < P_COMPOSITE:
        group = rng.choice(COMPOSITES)
        parts = tuple(DISEASE_BY_NAME[f"{mod} {group[2]}"] for mod in group[:2])
        units.append(Unit(parts, group))
    used = {d.id for u in units for d in u.diseases}
    singles = [d for d in DISEASE_ENTITIES if d.id not in used and
               not (units and d.name in COMPOSITE_PARTS)]
    n_single = n_dis - 2 * len(units)
    units += [Unit((d,), None) for d in rng.sample(singles, n_single)]

    positive = {(c, u): rng.random() < P_POSITIVE for c in chems for u in units}
    if not any(positive.values()):
        positive[rng.choice(sorted(positive, key=lambda p: (p[0].id, p[1].diseases[0].id)))] = True
    pos_units = {c: [u for u in units if positive[(c, u)]] for c in chems}
    mode = {c: ("cross" if rng.random() < P_CROSS else "intra") for c in chems if pos_units[c]}

    def mandatory():
        return sum(1 if m == "intra" else 2 for m in mode.values())

    # Keep room for the two coverage sentences within MAX_SENTENCES.
    for c in chems:
        if mandatory() + 2 > MAX_SENTENCES and mode.get(c) == "cross":
            mode[c] = "intra"

    # Blocks: lists of (template, slots), kept together and in order.
    blocks = []
    for c in chems:
        if c not in mode:
            continue
        ds = pos_units[c]
        if mode[c] == "intra":
            template = rng.choice(SHARED if rng.random() < P_SHARED else POSITIVE)
            blocks.append([(template, {"C": [c], "Ds": coordinated(rng, ds, 4)})])
        else:
            blocks.append([(rng.choice(CROSS_A), {"C": [c]}),
                           (rng.choice(CROSS_B_POS), {"Ds": coordinated(rng, ds, 4)})])
    intra = [c for c in chems if mode.get(c) == "intra"]

    # Title.
    u = rng.random()
    negatives = [(c, d) for (c, d), p in positive.items() if not p]
    if intra and u < 0.55:
        c = rng.choice(intra)
        title = (rng.choice(TITLE_POS), {"C": [c], "Ds": [rng.choice(pos_units[c])]})
    elif negatives and u < 0.7:
        c, d = rng.choice(negatives)
        title = (rng.choice(TITLE_NEG), {"C": [c], "Ds": [d]})
    elif u < 0.9:
        title = (rng.choice(TITLE_CHEM), {"C": [rng.choice(chems)]})
    else:
        title = (rng.choice(TITLE_NONE), {})

    optional = []
    by_chem = collections.defaultdict(list)
    for c, d in negatives:
        if rng.random() < P_NEG_MENTION:
            by_chem[c].append(d)
    for c in chems:
        if not by_chem[c]:
            continue
        ds = coordinated(rng, by_chem[c])
        helpers = [c2 for c2 in intra if c2 != c and all(positive[(c2, d)] for d in ds)]
        if helpers and rng.random() < P_MIXED:
            template = rng.choice(MIXED)  # drawn before the helper: the seeded output depends on it
            optional.append([(template, {"C": [c], "C2": [rng.choice(helpers)], "Ds": ds})])
        else:
            template = rng.choice(SHARED if rng.random() < P_SHARED else NEGATIVE)
            optional.append([(template, {"C": [c], "Ds": ds})])
    never_positive = [d for d in units if not any(positive[(c, d)] for c in chems)]
    if never_positive and rng.random() < P_DECOY:
        c, d = rng.choice(chems), rng.choice(never_positive)
        optional.append([(rng.choice(CROSS_A), {"C": [c]}), (rng.choice(CROSS_B_NEG), {"Ds": [d]})])
    if rng.random() < P_UNNORMALISED:
        kind = rng.choice(sorted(UNNORMALISED))
        x = Unnormalised(rng.choice(UNNORMALISED[kind]), kind)
        slots = {"X": [x]} if kind == "Disease" else {"X": [x], "C": [rng.choice(chems)]}
        optional.append([(rng.choice(UNNORMALISED_SENTENCES[kind]), slots)])
    rng.shuffle(optional)

    target = rng.randint(3, MAX_SENTENCES)

    def mentioned(chosen):
        found = set()
        for template, slots in [title] + [s for block in chosen for s in block]:
            for ents in slots.values():
                found.update(e for e in ents if not isinstance(e, Unnormalised))
        return found

    def uncovered(chosen):
        """The chemicals and disease units no sentence names yet."""
        seen = mentioned(chosen)
        return [c for c in chems if c not in seen], [d for d in units if d not in seen]

    def n_coverage(chosen):
        return sum(1 for group in uncovered(chosen) if group)

    def size(chosen):
        return sum(len(b) for b in chosen)

    for block in optional:
        trial = blocks + [block]
        if size(trial) + n_coverage(trial) <= target:
            blocks = trial
    # Every entity is mentioned: the rest in a list sentence of chemicals and one of diseases.
    cs, ds = uncovered(blocks)
    if cs:
        blocks.append([(rng.choice(CHEM_ONLY), {"Cs": cs})])
    if ds:
        blocks.append([(rng.choice(DISEASE_ONLY), {"Ds": ds})])
    conclusion = None
    if size(blocks) < target and rng.random() < P_CONCLUSION:
        if intra and rng.random() < 0.6:
            c = rng.choice(intra)
            template = rng.choice(CONCLUSION_POS)
            conclusion = [(template, {"C": [c], "Ds": [rng.choice(pos_units[c])]})]
        elif rng.random() < 0.5:
            conclusion = [(rng.choice(CONCLUSION_CHEM), {"C": [rng.choice(chems)]})]
        else:
            conclusion = [(rng.choice(CONCLUSION_NONE), {})]
    while size(blocks) + (conclusion is not None) < target:
        extra = rng.random()
        if extra < 0.3:  # one more mention of a disease
            blocks.append([(rng.choice(DISEASE_ONLY), {"Ds": [rng.choice(units)]})])
        else:
            blocks.append([(rng.choice(DISTRACTORS), {})])
    rng.shuffle(blocks)
    if conclusion:
        blocks.append(conclusion)

    writer = Writer(rng)
    writer.sentence(*title)
    for block in blocks:
        for template, slots in block:
            writer.sentence(template, slots)
    title_text, abstract, mentions = writer.document()
    # Drawn after the text, so that the noise changes no sentence.
    annotated = [(c, unit) for (c, unit), p in positive.items() if p and rng.random() >= P_MISSED]
    relations = sorted((c.id, d.id) for c, unit in annotated for d in unit.diseases)
    modes = {(c.id, d.id): mode[c] for c, unit in annotated for d in unit.diseases}
    n_pairs = len(chems) * sum(len(u.diseases) for u in units)
    return {"pmid": str(pmid), "title": title_text, "abstract": abstract, "mentions": mentions,
            "relations": relations, "modes": modes, "n_pairs": n_pairs,
            "n_sentences": len(writer.sentences) - 1}


def pubtator(doc):
    """The PubTator text of one document (with its trailing blank line)."""
    pmid = doc["pmid"]
    lines = [f"{pmid}|t|{doc['title']}", f"{pmid}|a|{doc['abstract']}"]
    for start, end, text, kind, eid, texts, _ in doc["mentions"]:
        fields = [pmid, str(start), str(end), text, kind, eid] + ([texts] if texts else [])
        lines.append("\t".join(fields))
    lines += [f"{pmid}\tCID\t{c}\t{d}" for c, d in doc["relations"]]
    return "".join(line + "\n" for line in lines) + "\n"


def generate(rng):
    """{split: [document, ...]} (see make_document)."""
    return {split: [make_document(rng, PMID_BASE[split] + i + 1) for i in range(n)]
            for split, n in SPLITS.items()}


def write(docs_by_split, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for split, docs in docs_by_split.items():
        with open(os.path.join(out_dir, f"{split}.pubtator"), "w", encoding="utf-8",
                  newline="\n") as f:
            f.write("".join(pubtator(doc) for doc in docs))


# ----------------------------------------------------------------------------
# Self-check: an independent reading of what was written
# ----------------------------------------------------------------------------


def read_pubtator(path):
    """[(pmid, text, [(start, end, text, type, ids)], [(type, id1, id2)])] of a written file."""
    with open(path, encoding="utf-8") as f:
        blocks = f.read().split("\n\n")
    assert blocks[-1] == "", path
    out = []
    for block in blocks[:-1]:
        lines = block.split("\n")
        pmid, _, title = lines[0].partition("|t|")
        pmid_a, _, abstract = lines[1].partition("|a|")
        assert pmid == pmid_a and title and abstract, lines[:2]
        mentions, relations = [], []
        for line in lines[2:]:
            cols = line.split("\t")
            assert cols[0] == pmid, line
            if len(cols) == 4:
                relations.append(tuple(cols[1:]))
            else:
                assert len(cols) in (6, 7), line
                mentions.append((int(cols[1]), int(cols[2]), cols[3], cols[4], cols[5]))
        out.append((pmid, title + " " + abstract, mentions, relations))
    return out


def check(docs_by_split, out_dir):
    """Reads back the written files, checks them against ``docs_by_split``; returns a summary."""
    summary = []
    for split, docs in docs_by_split.items():
        read = read_pubtator(os.path.join(out_dir, f"{split}.pubtator"))
        assert len(read) == len(docs) == SPLITS[split]
        counts = collections.Counter()
        for doc, (pmid, text, mentions, relations) in zip(docs, read):
            assert pmid == doc["pmid"]
            entities = set()
            for start, end, mtext, kind, ids in mentions:
                assert text[start:end] == mtext, (pmid, start, end, mtext)
                entities.update(i for i in ids.split("|") if i != "-1")
                counts["composite"] += "|" in ids
                counts["unnormalised"] += ids == "-1"
            counts["mentions"] += len(mentions)
            assert {r[1] for r in relations} | {r[2] for r in relations} <= entities, pmid
            assert [r[1:] for r in relations] == doc["relations"]
            # Which sentences each entity is in, from the writer's own sentence indices.
            where = collections.defaultdict(set)
            for *_, eid, _, sent in doc["mentions"]:
                for i in eid.split("|"):
                    where[i].add(sent)
            for c, d in doc["relations"]:
                shared = bool(where[c] & where[d])
                # Intra statements share a sentence; cross ones never do.
                assert shared == (doc["modes"][(c, d)] == "intra"), (pmid, c, d)
                counts["cross"] += not shared
            assert 3 <= doc["n_sentences"] <= MAX_SENTENCES, pmid
            counts["sentences"] += doc["n_sentences"] + 1
            counts["entities"] += len(entities)
            counts["pairs"] += doc["n_pairs"]
            counts["positive"] += len(relations)
        summary.append(
            f"{split}: {len(docs)} documents, {counts['sentences']} sentences (titles included), "
            f"{counts['mentions']} mentions, {counts['entities']} entities, "
            f"{counts['pairs']} chemical-disease pairs, {counts['positive']} CID "
            f"({counts['positive'] / counts['pairs']:.0%}), {counts['cross']} cross-sentence CID, "
            f"{counts['composite']} composite and {counts['unnormalised']} -1 mentions")
    return "\n".join(summary)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT_DIR,
                        help="folder to write into (default: tffre/resources/docre_sample)")
    args = parser.parse_args(argv)
    docs = generate(random.Random(SEED))
    write(docs, args.out)
    print(f"wrote {os.path.normpath(args.out)}")
    print(check(docs, args.out))


if __name__ == "__main__":
    main()
