"""Kernel arguments bundled as ``wp.struct``s: which attributes of a Model or Contacts fill each field.

Kernels take the non-differentiated data they share (the shapes' geometry, the joints' topology, the
contact lists) as one struct argument instead of five to eight arrays, so a signature cannot mix them
up and a launch packs one argument. Differentiable arrays (materials, masses, inertias, gains) stay
plain arguments: ``wp.Tape`` then sees them as it always has.

:class:`ArgBundle` declares, once, the attribute of the source object behind each field
(``prefix + field`` unless renamed). Calling it returns the struct of a source object: filled the
first time, then the same struct as long as none of those attributes (nor their gradient arrays) has
been replaced (a check of attribute reads, ~2 us, where filling a struct costs ~10 us of Python and more than the launch
saves). The structs hold array handles only (nothing is allocated); they are kept per source object
and go with it (weak keys).
"""

from __future__ import annotations

import weakref


class ArgBundle:
    """The ``struct`` (a ``wp.struct`` type) of an object: field ``f`` = ``getattr(obj, prefix + f)``.

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
        self._filled = weakref.WeakKeyDictionary()  # source -> (its attributes when filled, the struct)

    def fill(self, source):
        """A new struct filled from ``source``."""
        s = self.struct()
        for field, attribute in zip(self.fields, self.attributes):
            setattr(s, field, getattr(source, attribute))
        return s

    def __call__(self, source):
        """The struct of ``source`` (filled again only when one of its attributes was replaced, or an array of
        them got another gradient array: a struct holds each array's gradient pointer too, and one filled
        before ``requires_grad`` was switched on would point at none)."""
        current = tuple(getattr(source, a) for a in self.attributes)
        grads = tuple(getattr(a, "grad", None) for a in current)
        entry = self._filled.get(source)
        if (entry is None or any(a is not b for a, b in zip(current, entry[0]))
                or any(a is not b for a, b in zip(grads, entry[1]))):
            entry = self._filled[source] = (current, grads, self.fill(source))
        return entry[2]
