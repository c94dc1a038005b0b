"""Deprecated name of :mod:`tdf.passes.ir_utils`, kept as a re-export until
every importer has switched; import from ``tdf.passes.ir_utils``."""

from .ir_utils import *  # noqa: F401,F403
from .ir_utils import __all__  # noqa: F401
