"""Files shipped inside the package (package data), found with ``importlib.resources``.

They are read from the installed package, so a plain, non-editable
``pip install .`` finds them too. The generators that write them live in the
repository's ``data/`` folder.

* ``medical_dict.txt``: the jieba medical user dictionary.
* ``imcs_sample/``: the synthetic IMCS-V2-format sample and its Word2Vec vectors.
* ``re_sample/``: the synthetic English relation-extraction sample (i2b2 2010 and GAD formats).
* ``image_sample/``: the synthetic 8-class image sample in OCT-C8's layout.
* ``docre_sample/``: the synthetic CDR-style PubTator sample (document-level RE).
"""

import importlib.resources


def path(*parts):
    """The filesystem path of a shipped resource, e.g. ``path("imcs_sample", "w2v_sample.txt")``."""
    return str(importlib.resources.files(__name__).joinpath(*parts))
