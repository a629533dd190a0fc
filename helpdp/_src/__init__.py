"""Pure numeric kernels (numba). Arrays in, arrays out; no I/O or config."""

import os

from helpdp._src._numba_cache import share_stamp

# the kernels call each other across modules: one cache stamp for all of them
share_stamp(os.path.dirname(__file__))
