// Bytecode output, round-trip verification, the unsafe no-verify parse.
// RUN: %opt %s -emit-bytecode
// RUN: %opt %s -emit-bytecode -emit-bytecode-version=1
// RUN: %opt %s -emit-bytecode -elide-resource-data-from-bytecode -o %t
// RUN: %opt %s -emit-bytecode-version=1
// RUN: %opt %s -emit-bytecode-version=x
// RUN: %opt %s -verify-roundtrip
// RUN: %opt %s -verify-roundtrip -mlir-print-op-generic
// RUN: %opt %s -mlir-very-unsafe-disable-verifier-on-parsing -mlir-print-op-generic -verify-each=false
// RUN: %opt %s -mlir-elide-elementsattrs-if-larger=2 -mlir-print-local-scope

func.func @f(%a: i32) -> tensor<4xi32> {
  %c = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %r = arith.constant dense_resource<blob> : tensor<2xi32>
  return %c : tensor<4xi32>
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000100000002000000"
    }
  }
#-}
