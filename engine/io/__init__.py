"""Files in and out: robot import from URDF (:mod:`inertia.io.urdf`) and MJCF (:mod:`inertia.io.mjcf`) on a shared
robot description (:mod:`inertia.io.robot`), UsdPhysics import and export (:mod:`inertia.io.usd_import`,
:mod:`inertia.io.usd_export`), the trajectory recorder (:mod:`inertia.io.recorder`) and mesh readers
(:mod:`inertia.io.meshes`). The USD modules need ``usd-core`` (``pxr``) and load it when imported; ``import
inertia`` loads only the URDF and MJCF modules (for their error types), never ``pxr``."""
