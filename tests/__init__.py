"""The test suite. One OpenMP and BLAS thread per process (numpy, scipy, torch, and the commands the
tests start, which inherit it) unless set otherwise: `make test` runs a pytest-xdist worker per core,
and threads beyond the cores wait by spinning (docs/features.md, "Under load"). Set here, before
tests/conftest.py and anything it imports loads numpy."""

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
