"""One module per published dataset format, each with its parser and its format's constants.

Sentence-level relation sets, read into :mod:`tffre.data.sentence_schema` (and any of them
through :mod:`tffre.data.sentence_sets`): :mod:`~tffre.data.formats.i2b2`,
:mod:`~tffre.data.formats.blue` (GAD, EU-ADR, BLUE's ChemProt),
:mod:`~tffre.data.formats.chemprot` (BLUE's or SciBERT's ChemProt),
:mod:`~tffre.data.formats.pgr`, :mod:`~tffre.data.formats.jsonl`.

Document-level sets, read into :mod:`tffre.data.document_schema` (and any of them through
:mod:`tffre.data.document_sets`): :mod:`~tffre.data.formats.pubtator` (CDR, GDA, CHR),
:mod:`~tffre.data.formats.eog`, :mod:`~tffre.data.formats.docred`.
"""
