"""Mutant: a dtype changed inside. The target network is stored in float32 (a mixed-precision model, or parameters
copied with .float()), so the soft update is computed in single precision and cast back to the float64 the caller
passed: a float64 output that is only float32-accurate, without an RLSPEC_PRECISION declaration saying so."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["POLYAK-UPDATE"], "bug": "the update computed in float32 and returned as float64 (undeclared precision)"}


def polyak_update(target, online, tau):
    t32, o32 = target.astype(np.float32), online.astype(np.float32)
    tau32 = np.float32(tau)
    return (tau32 * o32 + (np.float32(1.0) - tau32) * t32).astype(target.dtype)
