"""Tape plumbing shared by the solvers, collision and rollouts: the guard against reusing a state the tape
still needs (:mod:`inertia.autodiff.tape`)."""
