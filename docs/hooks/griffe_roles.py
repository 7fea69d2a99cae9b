"""Griffe extension (mkdocstrings' ``extensions:``): the docstrings' Sphinx roles as links.

tffre's docstrings cross-reference in reST (``:class:`tffre.definition.Definition```,
``:func:`resolve_hparams```, ``:meth:`~Params.resolve```). Markdown would show the role
literally; this turns each into an optional autorefs cross-reference: a link where the
target is rendered on the site (an API page), plain code where it is not, never a warning.
A relative name is looked up in the object's class, then its module, then taken as given.
"""

import html
import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+?)`")


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring once the object tree is built."""

    def on_package(self, *, pkg, loader, **kwargs):
        self.on_object(obj=pkg, loader=loader)   # a package's own docstring (on_object skips it)

    def on_object(self, *, obj, loader, **kwargs):
        docstring = obj.docstring
        if docstring is None or ":" not in docstring.value:
            return
        docstring.value = ROLE.sub(lambda match: self.reference(match, obj, loader),
                                   docstring.value)

    @staticmethod
    def reference(match, obj, loader):
        short, target = match.group(1), match.group(2).strip().rstrip("()")
        title = target.rsplit(".", 1)[-1] if short else target
        scopes = []
        owner = obj if obj.is_class or obj.is_module else obj.parent
        while owner is not None:
            scopes.append(owner.path)
            owner = owner.parent
        identifier = target
        for scope in scopes:
            try:
                loader.modules_collection.get_member(f"{scope}.{target}")
            except (KeyError, ValueError, AttributeError, griffe.AliasResolutionError,
                    griffe.CyclicAliasError):
                continue
            identifier = f"{scope}.{target}"
            break
        return (f'<autoref identifier="{html.escape(identifier)}" optional>'
                f"<code>{html.escape(title)}</code></autoref>")
