//===- TDF.td - tdf dialect umbrella ------------------------*- tablegen -*-===//
//
// Umbrella file for the tdf dialect: the dialect definition and its ops.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_TD
#define TDF_TD

include "TDFDialect.td"
include "TDFOps.td"

#endif // TDF_TD
