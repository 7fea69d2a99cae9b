"""MkDocs hook: the site's home page is the README, generated at build time.

One text serves both entrances (GitHub shows README.md, the site shows index.md), so the two
cannot drift. The README links into the site as ``docs/<page>.md``; on the site those pages sit
at the root, so the prefix is dropped.
"""

import os
import re

from mkdocs.structure.files import File

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def home_page(readme_text):
    """The README's Markdown with its ``docs/`` links made relative to the site's root."""
    return re.sub(r"\]\(docs/", "](", readme_text)


def on_files(files, config):
    """Adds ``index.md``, made from the README (refusing a committed docs/index.md beside it)."""
    if files.get_file_from_path("index.md") is not None:
        raise RuntimeError("docs/index.md is generated from README.md: delete the file")
    with open(README, encoding="utf-8") as f:
        files.append(File.generated(config, "index.md", content=home_page(f.read())))
    return files
