"""Files in and out: URDF import (:mod:`inertia.io.urdf`), UsdPhysics import and export
(:mod:`inertia.io.usd_import`, :mod:`inertia.io.usd_export`), the trajectory recorder
(:mod:`inertia.io.recorder`) and mesh readers (:mod:`inertia.io.meshes`). The USD modules need ``usd-core``
(``pxr``) and load it when imported; nothing here is imported by ``import inertia``."""
