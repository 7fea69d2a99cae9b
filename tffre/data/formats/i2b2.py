"""i2b2/n2c2 2010 relations: the ``txt/``, ``concept/`` and ``rel/`` files of the release.

The 2010 i2b2/VA challenge's relation task (Uzuner et al. 2011, JAMIA 18(5)) annotates
clinical notes, one sentence per line, with concepts (problem, test, treatment) and the
relations between a treatment or test and a problem, or between two problems.
:func:`load_i2b2` reads one split folder into the sentence-level schema
(:mod:`tffre.data.sentence_schema`): one example per candidate pair of concepts on a line.
"""

import os
import re

from tffre.data.sentence_schema import (FILES, REFileNotFoundError, REFormatError,
                                        check_examples, frame, label_error)
from tffre.errors import collect, show

I2B2_RELATIONS = ("TrIP", "TrWP", "TrCP", "TrAP", "TrNAP", "TeRP", "TeCP", "PIP")
I2B2_LABELS = ("None",) + I2B2_RELATIONS
I2B2_CONCEPT_TYPES = ("problem", "test", "treatment")

_CONCEPT = r'c="(.*)" (\d+):(\d+) (\d+):(\d+)'
_CON_RE = re.compile(rf'^{_CONCEPT}\|\|t="([^"]*)"$')
_REL_RE = re.compile(rf'^{_CONCEPT}\|\|r="([^"]*)"\|\|{_CONCEPT}$')
# ASCII whitespace only, so a non-breaking space inside a token does not split it.
_TOKEN_RE = re.compile(r"[^ \t\n\r\f\v]+")
# Which concept types each relation joins; the first type is e1.
_I2B2_PAIRS = {("treatment", "problem"): "Tr", ("test", "problem"): "Te",
               ("problem", "problem"): "PIP"}


def _i2b2_pair_kind(type_a, type_b):
    """The oriented (e1 type, e2 type) of a candidate pair of concept types, or None."""
    for kind in _I2B2_PAIRS:
        if (type_a, type_b) == kind or (type_b, type_a) == kind:
            return kind
    return None


def _i2b2_relation_kind(relation):
    return next(kind for kind, prefix in _I2B2_PAIRS.items() if relation.startswith(prefix))


class _I2b2Doc:
    """One i2b2 document: its text lines and their token character spans."""

    def __init__(self, path, con_path):
        self.path, self.con_path = path, con_path
        self.lines = FILES.read_lines(path)
        self._tokens = {}

    def tokens(self, line):
        """Character spans of the whitespace tokens of 1-based ``line``."""
        if line not in self._tokens:
            text = self.lines[line - 1]
            self._tokens[line] = [(m.start(), m.end()) for m in _TOKEN_RE.finditer(text)]
        return self._tokens[line]

    def resolve(self, path, lineno, where, text, l1, t1, l2, t2):
        """Checks a concept reference ``text L:T L:T``; returns its (line, start char, end char)."""
        if l1 != l2:
            raise FILES.error(path, lineno, where, f"concept {show(text)} spans lines {l1} and "
                              f"{l2}; a concept must lie on one line")
        if not 1 <= l1 <= len(self.lines):
            raise FILES.error(path, lineno, where, f"line {l1} is outside "
                              f"{os.path.basename(self.path)} ({len(self.lines)} lines)")
        spans = self.tokens(l1)
        if not 0 <= t1 <= t2 < len(spans):
            raise FILES.error(path, lineno, where, f"tokens {t1}..{t2} are outside line {l1} of "
                              f"{os.path.basename(self.path)} ({len(spans)} tokens)")
        line_text = self.lines[l1 - 1]
        found = " ".join(line_text[s:e] for s, e in spans[t1:t2 + 1])
        # The release lowercases concept text, so compare case-insensitively.
        if found.lower() != text.lower():
            raise FILES.error(path, lineno, where, f"concept text {show(text)} does not match "
                              f"tokens {l1}:{t1} {l2}:{t2} of {os.path.basename(self.path)}, "
                              f"which read {show(found)}")
        return l1, spans[t1][0], spans[t2][1]


def _matching_lines(path, pattern, what, expected, problems, allow_empty=False):
    """Yields (line number, match) for each non-blank line of an i2b2 annotation file;
    a line ``pattern`` does not match is refused naming the file, line and field c."""
    for lineno, raw in enumerate(FILES.read_lines(path, allow_empty=allow_empty), 1):
        line = raw.strip()
        if not line:
            continue
        m = pattern.match(line)
        if m:
            yield lineno, m
            continue
        with collect(problems, REFormatError):
            raise FILES.error(path, lineno, "field c", f"malformed {what} line {show(line)}; "
                              f"expected {expected}")


def _parse_concept_ref(match, offset):
    """(text, l1, t1, l2, t2) from a regex match, starting at group ``offset``."""
    text = match.group(offset)
    l1, t1, l2, t2 = (int(match.group(offset + k)) for k in range(1, 5))
    return text, l1, t1, l2, t2


def _i2b2_concepts(doc, con_path, problems):
    """{(line, tok_start, tok_end): (type, start char, end char)} from a .con file."""
    concepts, where_defined = {}, {}
    for lineno, m in _matching_lines(con_path, _CON_RE, "concept",
                                     'c="text" L:T L:T||t="type"', problems):
        with collect(problems, REFormatError):
            _i2b2_concept(doc, con_path, lineno, m, concepts, where_defined)
    return concepts


def _i2b2_concept(doc, con_path, lineno, m, concepts, where_defined):
    """Checks one .con line and adds its concept to ``concepts``."""
    text, l1, t1, l2, t2 = _parse_concept_ref(m, 1)
    ctype = m.group(6)
    if ctype not in I2B2_CONCEPT_TYPES:
        raise FILES.error(con_path, lineno, "field t", f"unknown concept type {show(ctype)}; "
                          f"valid: {', '.join(I2B2_CONCEPT_TYPES)}")
    _, start, end = doc.resolve(con_path, lineno, "field c", text, l1, t1, l2, t2)
    key = (l1, t1, t2)
    if key in concepts and concepts[key][0] != ctype:
        raise FILES.error(con_path, lineno, "field t", f"concept {show(text)} {l1}:{t1} {l2}:{t2} "
                          f"is typed {ctype!r} here and {concepts[key][0]!r} on line "
                          f"{where_defined[key]}")
    concepts.setdefault(key, (ctype, start, end))
    where_defined.setdefault(key, lineno)


def _i2b2_relations(doc, rel_path, concepts, problems):
    """{frozenset of two concept keys: (relation, (e1 key, e2 key))} from a .rel file."""
    relations, where_defined = {}, {}
    if not os.path.isfile(rel_path):
        return relations  # a document without a .rel file has no relations
    for lineno, m in _matching_lines(rel_path, _REL_RE, "relation",
                                     'c="text" L:T L:T||r="type"||c="text" L:T L:T', problems,
                                     allow_empty=True):
        with collect(problems, REFormatError):
            _i2b2_relation(doc, rel_path, lineno, m, concepts, relations, where_defined)
    return relations


def _i2b2_relation(doc, rel_path, lineno, m, concepts, relations, where_defined):
    """Checks one .rel line and adds its relation to ``relations``."""
    relation = m.group(6)
    if relation not in I2B2_RELATIONS:
        raise label_error(rel_path, lineno, relation, I2B2_LABELS, field="r")
    keys = []
    for entity, offset in (("e1", 1), ("e2", 7)):
        text, l1, t1, l2, t2 = _parse_concept_ref(m, offset)
        doc.resolve(rel_path, lineno, f"entity {entity}", text, l1, t1, l2, t2)
        key = (l1, t1, t2)
        if key not in concepts:
            raise FILES.error(rel_path, lineno, f"entity {entity}", f"concept {show(text)} "
                              f"{l1}:{t1} {l2}:{t2} is not in {os.path.basename(doc.con_path)}")
        keys.append(key)
    (type_a, start_a, end_a), (type_b, start_b, end_b) = concepts[keys[0]], concepts[keys[1]]
    kind = _i2b2_pair_kind(type_a, type_b)
    if keys[0] == keys[1] or keys[0][0] != keys[1][0] or kind is None or (
            max(start_a, start_b) < min(end_a, end_b)):
        raise FILES.error(rel_path, lineno, "field r", f"{relation} joins a {type_a} on line "
                          f"{keys[0][0]} and a {type_b} on line {keys[1][0]}, which is not a "
                          "candidate pair (treatment-problem, test-problem or problem-problem, "
                          "two distinct non-overlapping concepts on one line)")
    if kind != _i2b2_relation_kind(relation):
        raise FILES.error(rel_path, lineno, "field r", f"{relation} must join a "
                          f"{' and a '.join(_i2b2_relation_kind(relation))}, not a {type_a} "
                          f"and a {type_b}")
    # Treatment/test is e1 whatever the line's order; problem-problem keeps the .rel order.
    order = tuple(keys) if type_a == kind[0] else (keys[1], keys[0])
    pair = frozenset(keys)
    if pair in relations and relations[pair] != (relation, order):
        raise FILES.error(rel_path, lineno, "field r", f"{relation} contradicts the relation on "
                          f"line {where_defined[pair]}")
    relations[pair] = (relation, order)
    where_defined.setdefault(pair, lineno)


def _i2b2_document(txt_path, con_path, rel_path, stem, problems):
    """The example rows of one i2b2 document."""
    doc = _I2b2Doc(txt_path, con_path)
    concepts = _i2b2_concepts(doc, con_path, problems)
    relations = _i2b2_relations(doc, rel_path, concepts, problems)
    by_line = {}
    for key in sorted(concepts, key=lambda k: (k[0], concepts[k][1], concepts[k][2])):
        by_line.setdefault(key[0], []).append(key)
    rows = []
    for line, keys in sorted(by_line.items()):
        text, count = doc.lines[line - 1], 0
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                kind = _i2b2_pair_kind(concepts[a][0], concepts[b][0])
                (_, sa, ea), (_, sb, eb) = concepts[a], concepts[b]
                if kind is None or max(sa, sb) < min(ea, eb):
                    continue  # not a candidate pair: e.g. test-treatment, or nested concepts
                label, order = relations.get(frozenset((a, b)), ("None", None))
                if order is None:
                    # Treatment/test first; problem-problem in text order (a precedes b).
                    order = (a, b) if concepts[a][0] == kind[0] else (b, a)
                (t1, s1, e1), (t2, s2, e2) = concepts[order[0]], concepts[order[1]]
                rows.append((f"{stem}:{line}:{count}", text, s1, e1, s2, e2, t1, t2, label))
                count += 1
    return rows


def load_i2b2(folder, problems=None):
    """Loads one split of the i2b2/n2c2 2010 relation data as ``(examples, labels)``.

    ``folder`` holds the release layout: ``txt/*.txt`` (one sentence per line, tokens
    split on whitespace), ``concept/*.con`` (``concepts/`` is accepted too, as in the
    test reference standard) and ``rel/*.rel``, one stem per document. A document
    without a ``.rel`` file has no relations; one without a ``.con`` file is an error.

    ``.con`` lines read ``c="text" L:T L:T||t="problem|test|treatment"`` (L 1-based line,
    T 0-based token, both ends inclusive, one line per concept); ``.rel`` lines read
    ``c="text" L:T L:T||r="TrAP"||c="text" L:T L:T``. Concept text must equal its tokens
    joined by one space, ignoring case.

    Examples are the candidate pairs within one text line: treatment-problem (e1 is the
    treatment), test-problem (e1 is the test) and problem-problem (e1 is the earlier
    concept, unless a ``.rel`` line names the pair the other way round). Pairs without a
    ``.rel`` line are labelled "None"; nested (overlapping) concepts are never paired.
    ``text`` is the line, ``e*_type`` the concept types, ``example_id``
    ``"{stem}:{line}:{k}"`` (k counts the line's examples), in order of document, line,
    then concept position. Labels: :data:`I2B2_LABELS`. ``problems`` (a list) makes the
    load lenient: a bad .con or .rel line, or a document without its .con, is skipped.
    """
    FILES.require_folder(folder)
    txt_dir = os.path.join(folder, "txt")
    FILES.require_folder(txt_dir, "folder (i2b2 data needs txt/, concept/ and rel/)")
    con_dir = os.path.join(folder, "concept")
    if not os.path.isdir(con_dir) and os.path.isdir(os.path.join(folder, "concepts")):
        con_dir = os.path.join(folder, "concepts")
    rel_dir = os.path.join(folder, "rel")
    stems = sorted(name[:-4] for name in os.listdir(txt_dir) if name.endswith(".txt"))
    if not stems:
        raise REFileNotFoundError(f"{txt_dir}: no .txt files")
    # A .con or .rel without its .txt is a misplaced file; say so rather than drop it.
    for sub, ext in ((con_dir, ".con"), (rel_dir, ".rel")):
        if os.path.isdir(sub):
            for name in sorted(os.listdir(sub)):
                if name.endswith(ext) and name[:-len(ext)] not in stems:
                    with collect(problems, REFormatError):
                        raise REFileNotFoundError(
                            f"{os.path.join(sub, name)}: no matching "
                            f"{os.path.join(txt_dir, name[:-len(ext)] + '.txt')}")
    rows = []
    for stem in stems:
        con_path = os.path.join(con_dir, stem + ".con")
        with collect(problems, REFormatError):
            FILES.require_file(con_path, "concept file")
            rows.extend(_i2b2_document(os.path.join(txt_dir, stem + ".txt"), con_path,
                                       os.path.join(rel_dir, stem + ".rel"), stem, problems))
    examples, labels = frame(rows), list(I2B2_LABELS)
    examples = check_examples(examples, labels, folder, problems)
    return examples, labels

