"""Predict labels for new texts with a saved model bundle (see :mod:`tffre.bundle`).

    python -m tffre.predict --model results/x/model --text "孩子咳嗽三天了" [--top-k 3] [--json]
    python -m tffre.predict --model results/x/model --input sentences.jsonl

``--input`` reads JSON lines: an object per line with "text" (for a model over
numeric features "x", a list of numbers; for an image model "path", an image
file, relative to the JSON-lines file's folder unless absolute) and an optional
"id" (default: the line number; for ``--text``, the position). Output: one
``id<TAB>label<TAB>probability`` line per input and label (``--top-k`` labels: the
model's decision first, then the others most probable first), or with ``--json`` one
object per input:
``{"id": ..., "predictions": [{"label": ..., "probability": ...}, ...]}``. The decision
is the most probable label, or for a model trained with ``--threshold`` (a binary
relation set) the label its run scored: the relation where its probability is above
the saved threshold (``Bundle.decide``). Probabilities are rounded to 4 decimals. Bad arguments or input exit with
status 2 and a one-line error naming the file, line and field.

A document model (document-level RE, e.g. FedLCC on CDR) reads ``--input`` as a file of
documents with their entity mentions, in any format ``run --data`` reads (PubTator, DocRED
JSON, EoG), and prints every relation it predicts over each document's candidate entity
pairs, at the decision its run scored with (``Bundle.relations``): one
``document<TAB>subject<TAB>relation<TAB>object<TAB>probability`` line per relation, or with
``--json`` one ``{"id": ..., "relations": [{"subject", "relation", "object",
"probability"}, ...]}`` object per document::

    python -m tffre.predict --model results/cdr/models/FedLCC --input new.pubtator
"""

import argparse
import json
import os
import sys

from tffre import bundle as bundle_lib

#: The bundle encoders that read raw texts: jieba's ids ("text"), an encoder's word pieces.
TEXT_KINDS = ("text", "wordpieces")


class InputError(ValueError):
    """Bad command-line input; the message is one line."""


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser(prog=None):
    """The argument parser; ``prog`` names the command in usage and error lines."""
    p = argparse.ArgumentParser(
        prog=prog or "python -m tffre.predict",
        description="Label new texts (or feature vectors, or images) with a saved tffre model.")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="model bundle folder (model.keras, bundle.json, encoder files)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", action="append", metavar="T",
                        help="a text to label (repeat for several)")
    source.add_argument("--input", metavar="FILE.jsonl",
                        help='JSON lines: {"text": ...} (a feature model: {"x": [...]}; an image '
                             'model: {"path": ...}), optional "id"')
    p.add_argument("--top-k", type=_positive_int, default=1, metavar="K",
                   help="labels to print per input: the model's decision, then the others "
                        "most probable first (default 1)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per input instead of tab-separated lines")
    return p


def _type_name(value):
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            type(None): "null"}.get(type(value), "number")


def _check_x(where, value, num_features):
    if not isinstance(value, list):
        raise InputError(f'{where}: field "x" must be an array of numbers, got {_type_name(value)}')
    if len(value) != num_features:
        raise InputError(f'{where}: field "x" must have {num_features} numbers, got {len(value)}')
    for j, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InputError(f'{where}: field "x" item {j} must be a number, '
                             f"got {_type_name(v)}")
    return value


def _json_objects(path):
    """Yields ``(id, object, where)`` for each non-blank line of a JSON-lines file.

    InputError names the file and line of anything that is not a UTF-8 JSON
    object with an optional string or number "id" (default: the line number).
    """
    if not os.path.isfile(path):
        raise InputError(f"input file not found: {path}")
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{where}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{where}: invalid JSON ({err.msg} at column {err.colno})") from None
            if not isinstance(obj, dict):
                raise InputError(f"{where}: expected a JSON object, got {_type_name(obj)}")
            rid = obj.get("id", lineno)
            if isinstance(rid, bool) or not isinstance(rid, (str, int, float)):
                raise InputError(f'{where}: field "id" must be a string or a number, '
                                 f"got {_type_name(rid)}")
            yield rid, obj, where


def read_jsonl(path, field, num_features=None):
    """Reads ``(id, input)`` pairs from a JSON-lines file; InputError names file, line, field.

    ``field`` is "text" (a string) or "x" (``num_features`` numbers). Blank lines are skipped.
    """
    records = []
    for rid, obj, where in _json_objects(path):
        if field not in obj:
            other = "text" if field == "x" else "x"
            hint = (f' (this model takes "{field}"; "{other}" is for a '
                    f'{"feature" if other == "x" else "text"} model)') if other in obj else ""
            raise InputError(f'{where}: missing field "{field}"{hint}')
        value = obj[field]
        if field == "text":
            if not isinstance(value, str):
                raise InputError(f'{where}: field "text" must be a string, '
                                 f"got {_type_name(value)}")
        else:
            _check_x(where, value, num_features)
        records.append((rid, value))
    return records


def read_image_jsonl(path):
    """Reads ``(id, image path)`` pairs: each line's "path", relative to the JSON-lines file's
    folder unless absolute. InputError names the file, line and field of a missing image."""
    records = []
    base = os.path.dirname(os.path.abspath(path))
    for rid, obj, where in _json_objects(path):
        value = obj.get("path")
        if not isinstance(value, str) or not value:
            raise InputError(f'{where}: field "path" must name an image file'
                             + ("" if "path" in obj else ' (this is an image model)'))
        image = os.path.join(base, value)
        if not os.path.isfile(image):
            raise InputError(f'{where}: field "path": no such file {image}')
        records.append((rid, image))
    return records


RELATION_FIELDS = ("text", "e1_start", "e1_end", "e2_start", "e2_end")


def read_relation_jsonl(path):
    """Reads ``(id, record)`` pairs of relation examples (tffre.data.sentence_schema's schema, no label).

    Each line is an object with text and the character offsets of the two entities
    (e1_type and e2_type optional). InputError names the file, line and field.
    """
    records = []
    for rid, obj, where in _json_objects(path):
        for field in RELATION_FIELDS:
            if field not in obj:
                raise InputError(f'{where}: missing field "{field}"')
        if not isinstance(obj["text"], str):
            raise InputError(f'{where}: field "text" must be a string')
        for field in RELATION_FIELDS[1:]:
            value = obj[field]
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not 0 <= value <= len(obj["text"]):
                raise InputError(f'{where}: field "{field}" must be a character offset in '
                                 f'0..{len(obj["text"])}, got {value!r}')
        records.append((rid, {k: obj.get(k) for k in RELATION_FIELDS + ("e1_type", "e2_type")}))
    return records


def _tsv_field(value):
    # A tab or line break inside an id or label would shift the columns.
    return " ".join(str(value).replace("\t", " ").splitlines())


def format_predictions(ids, tops, as_json=False):
    """Output lines: ``id<TAB>label<TAB>probability`` per label, or one JSON object per input."""
    lines = []
    for rid, top in zip(ids, tops):
        if as_json:
            lines.append(json.dumps(
                {"id": rid, "predictions": [{"label": label, "probability": round(p, 4)}
                                            for label, p in top]}, ensure_ascii=False))
        else:
            lines.extend(f"{_tsv_field(rid)}\t{_tsv_field(label)}\t{p:.4f}" for label, p in top)
    return lines


def read_documents(path):
    """The documents of a PubTator, DocRED JSON or EoG file (the format guessed as ``run
    --data`` guesses it); InputError names the file, record and field of bad input."""
    from tffre.data.document_schema import DocREFormatError
    from tffre.data.document_sets import load_documents
    if not os.path.isfile(path):
        raise InputError(f"input file not found: {path}")
    try:
        return load_documents(path)
    except DocREFormatError as err:
        raise InputError(str(err)) from None


def format_relations(documents, relations, as_json=False):
    """Output lines: ``document<TAB>subject<TAB>relation<TAB>object<TAB>probability`` per
    predicted relation, or one JSON object per document (its relations may be none)."""
    lines = []
    for doc, facts in zip(documents, relations):
        if as_json:
            lines.append(json.dumps(
                {"id": doc.pmid, "relations": [
                    {"subject": s, "relation": r, "object": o, "probability": round(p, 4)}
                    for s, r, o, p in facts]}, ensure_ascii=False))
        else:
            lines.extend("\t".join(map(_tsv_field, (doc.pmid, s, r, o))) + f"\t{p:.4f}"
                         for s, r, o, p in facts)
    return lines


def _print_lines(lines):
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:  # piped into head: stop quietly, and keep Python's exit flush quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def read_document_input(args):
    """The documents of a document model's ``--input`` (:func:`read_documents`); InputError
    for ``--text`` or ``--top-k``, which do not apply to it."""
    if args.text is not None:
        raise InputError(f"{args.model} is a document model: use --input with a PubTator, "
                         f"DocRED JSON or EoG file of documents and their entity mentions")
    if args.top_k != 1:
        raise InputError(f"{args.model} is a document model: it prints every relation it "
                         f"predicts, so --top-k does not apply")
    return read_documents(args.input)


def main(argv=None, prog=None):
    """Runs the command line; returns the exit status (0, or 2 for bad arguments or input)."""
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): argparse has printed it
        return exc.code if isinstance(exc.code, int) else 2

    def fail(message):
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        return 2

    # Everything that can be checked without TensorFlow is checked first, so mistakes fail fast.
    try:
        manifest = bundle_lib.read_manifest(args.model)
    except bundle_lib.BundleError as err:
        return fail(err)
    kind = manifest["encoder"]
    try:
        if kind == bundle_lib.DOCUMENTS:
            documents = read_document_input(args)
        elif kind == "relation":
            if args.text is not None:
                raise InputError(f"{args.model} is a relation model: use --input with JSON "
                                 f"lines holding text, e1_start, e1_end, e2_start, e2_end "
                                 f"(and e1_type, e2_type)")
            records = read_relation_jsonl(args.input)
        elif args.text is not None:
            if kind == "image":
                raise InputError(f"{args.model} is an image model: use --input with JSON "
                                 'lines holding "path" (an image file)')
            if kind not in TEXT_KINDS:
                raise InputError(f"{args.model} takes numeric features, not texts: use --input "
                                 'with JSON lines holding "x"')
            records = list(enumerate(args.text, 1))
        elif kind in TEXT_KINDS:
            records = read_jsonl(args.input, "text")
        elif kind == "image":
            records = read_image_jsonl(args.input)
        else:
            from tffre.text.encoder import FeatureEncoder
            num_features = FeatureEncoder.load(args.model).num_features
            records = read_jsonl(args.input, "x", num_features)
    except (InputError, OSError, ValueError) as err:
        return fail(err)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        model = bundle_lib.load_bundle(args.model)
    except bundle_lib.BundleError as err:
        return fail(err)
    if kind == bundle_lib.DOCUMENTS:
        lines = format_relations(documents, model.relations(documents), args.json)
    else:
        lines = format_predictions([r[0] for r in records],
                                   model.top([r[1] for r in records], k=args.top_k), args.json)
    _print_lines(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
