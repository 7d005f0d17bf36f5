"""A stand-in for torch, for dry runs of bench.py and overhead.py's
@torchprof on a machine without it (bench.py --fake puts benchfake/ on
PYTHONPATH): torch.profiler alone."""
from . import profiler  # noqa: F401
__version__ = "0.0-benchfake"
