"""``ModelBuilder.add_urdf``, ``add_mjcf`` and ``add_usd``: robots and scenes from files (``inertia.io``).

The importers load on first use (USD's ``pxr`` takes a moment to import).
"""

from __future__ import annotations


class SceneImportMixin:
    """Adds whole robots and scenes to a :class:`inertia.ModelBuilder`."""

    def add_urdf(self, path, xform=None, floating: bool = False, package_paths=(), density: float = 1000.0,
                 **kwargs):
        """Add a URDF robot; see :func:`inertia.io.urdf.add_urdf` for the arguments and what is imported."""
        from ..io.urdf import add_urdf

        return add_urdf(self, path, xform=xform, floating=floating, package_paths=package_paths, density=density,
                        **kwargs)

    def add_mjcf(self, path, xform=None, **kwargs):
        """Add an MJCF (MuJoCo XML) model; see :func:`inertia.io.mjcf.add_mjcf` for the arguments and what is
        imported."""
        from ..io.mjcf import add_mjcf

        return add_mjcf(self, path, xform=xform, **kwargs)

    def add_usd(self, source, xform=None, **kwargs):
        """Add a UsdPhysics scene (a file path or a ``Usd.Stage``); see :func:`inertia.io.usd_import.add_usd`."""
        from ..io.usd_import import add_usd

        return add_usd(self, source, xform=xform, **kwargs)
