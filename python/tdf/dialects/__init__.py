"""Python op classes of the tdf dialect (generated from ODS).

Registering this package as a dialect search prefix makes ``op.opview``
return the tdf op classes.
"""

from mlir._mlir_libs import _mlir as _cext

_cext.globals.append_dialect_search_prefix("tdf.dialects")
