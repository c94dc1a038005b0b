"""Shim so that the generated op classes find upstream's ODS helpers
(the generated ``_tdf_ops_gen.py`` imports them from ``._ods_common``)."""

import mlir.dialects._ods_common as _upstream

globals().update({k: v for k, v in vars(_upstream).items() if not k.startswith("__")})
