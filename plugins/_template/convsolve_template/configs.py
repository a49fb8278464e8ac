"""template's config: the values its kernel's tunables are built with."""

#: direct_fwd.cl's tunables, each equal to its #ifndef default in the kernel: TILE_K, the output
#: channels a work-item computes.  A tunable solver keeps its config space and its defaults per
#: device class here (docs/writing_a_solver.md, "Make it tunable").
CONFIG = {"TILE_K": 4}
