"""Pure numeric kernels (numba). Arrays in, arrays out; no I/O or config."""
