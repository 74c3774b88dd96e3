"""Kernel arguments bundled as ``wp.struct``s: which attributes of a Model or Contacts fill each field.

Kernels take the non-differentiated data they share (the shapes' geometry, the joints' topology, the
contact lists) as one struct argument instead of five to eight arrays, so a signature cannot mix them
up and a launch packs one argument. Differentiable arrays (materials, masses, inertias, gains) stay
plain arguments: ``wp.Tape`` then sees them as it always has.

:class:`ArgBundle` declares, once, the attribute of the source object behind each field
(``prefix + field`` unless renamed) and fills the struct from it; :class:`BundleCache` keeps one
filled struct per source object and fills it again only when one of its attributes was replaced (a
launch reads the struct's copy of the array handles).
"""

from __future__ import annotations

import weakref


class ArgBundle:
    """How to fill ``struct`` (a ``wp.struct`` type) from an object: field ``f`` = ``getattr(obj, prefix + f)``.

    ``renames``: fields whose attribute is named otherwise (``capacity="rigid_contact_max"``).
    """

    def __init__(self, struct, prefix: str = "", **renames: str):
        self.struct = struct
        fields = tuple(struct.vars)
        unknown = set(renames) - set(fields)
        if unknown:
            raise ValueError(f"ArgBundle({struct.key}): no fields {sorted(unknown)}")
        self.fields = fields
        self.attributes = tuple(renames.get(f, prefix + f) for f in fields)

    def __call__(self, source):
        """A new struct filled from ``source``."""
        s = self.struct()
        for field, attribute in zip(self.fields, self.attributes):
            setattr(s, field, getattr(source, attribute))
        return s


class BundleCache:
    """Filled :class:`ArgBundle` structs, one per source object (weakly keyed), refilled when an attribute changed.

    Checking costs the attribute reads; filling a struct costs ~10 us of Python.
    """

    def __init__(self, bundle: ArgBundle):
        self.bundle = bundle
        self.entries = weakref.WeakKeyDictionary()

    def get(self, source):
        current = tuple(getattr(source, a) for a in self.bundle.attributes)
        entry = self.entries.get(source)
        if entry is None or any(a is not b for a, b in zip(current, entry[0])):
            entry = self.entries[source] = (current, self.bundle(source))
        return entry[1]
