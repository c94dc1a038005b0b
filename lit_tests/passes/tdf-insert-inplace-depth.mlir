// RUN: tdf-opt %s --tdf-insert-inplace=remarks --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS

// A call nested in more than 16 scf.if ops stays out of place (rule
// "depth"): in-place updates through nested branches form one alias set
// whose One-Shot analysis costs about the fourth power of the depth (100
// levels: 26 s). Each level calls @scale on the previous level's value, which
// its else branch yields; the calls nested 1 to 16 deep run in place, the
// ones nested 17 and 18 deep do not.

// STATS: 2 rejected-depth

func.func private @scale(%in: memref<4xf32>, %out: memref<4xf32>) {
  %c = arith.constant 2.0 : f32
  linalg.map ins(%in : memref<4xf32>) outs(%out : memref<4xf32>)
    (%a: f32, %o: f32) {
      %r = arith.mulf %a, %c : f32
      linalg.yield %r : f32
    }
  return
}

// CHECK-LABEL: func.func @negative_nested_too_deep(
// CHECK:         tdf.call @scale(%arg0)
// CHECK:         %[[A1:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A2:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A3:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A4:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A5:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A6:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A7:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A8:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A9:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A10:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A11:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A12:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A13:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A14:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A15:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         %[[A16:.*]] = tdf.call_inplace @scale_inplace(%{{.*}}) inplace [0]
// CHECK:         tdf.call @scale(%[[A16]])
// CHECK:         tdf.call @scale(
// CHECK-NOT:     tdf.call_inplace
// CHECK:         return
func.func @negative_nested_too_deep(%x: tensor<4xf32>, %c: i1) -> tensor<4xf32> {
  // expected-remark@+1 {{in-place rejected (owned)}}
  %a0 = tdf.call @scale(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %r0 = scf.if %c -> (tensor<4xf32>) {
    %a1 = tdf.call @scale(%a0) : (tensor<4xf32>) -> tensor<4xf32>
    %r1 = scf.if %c -> (tensor<4xf32>) {
      %a2 = tdf.call @scale(%a1) : (tensor<4xf32>) -> tensor<4xf32>
      %r2 = scf.if %c -> (tensor<4xf32>) {
        %a3 = tdf.call @scale(%a2) : (tensor<4xf32>) -> tensor<4xf32>
        %r3 = scf.if %c -> (tensor<4xf32>) {
          %a4 = tdf.call @scale(%a3) : (tensor<4xf32>) -> tensor<4xf32>
          %r4 = scf.if %c -> (tensor<4xf32>) {
            %a5 = tdf.call @scale(%a4) : (tensor<4xf32>) -> tensor<4xf32>
            %r5 = scf.if %c -> (tensor<4xf32>) {
              %a6 = tdf.call @scale(%a5) : (tensor<4xf32>) -> tensor<4xf32>
              %r6 = scf.if %c -> (tensor<4xf32>) {
                %a7 = tdf.call @scale(%a6) : (tensor<4xf32>) -> tensor<4xf32>
                %r7 = scf.if %c -> (tensor<4xf32>) {
                  %a8 = tdf.call @scale(%a7) : (tensor<4xf32>) -> tensor<4xf32>
                  %r8 = scf.if %c -> (tensor<4xf32>) {
                    %a9 = tdf.call @scale(%a8) : (tensor<4xf32>) -> tensor<4xf32>
                    %r9 = scf.if %c -> (tensor<4xf32>) {
                      %a10 = tdf.call @scale(%a9) : (tensor<4xf32>) -> tensor<4xf32>
                      %r10 = scf.if %c -> (tensor<4xf32>) {
                        %a11 = tdf.call @scale(%a10) : (tensor<4xf32>) -> tensor<4xf32>
                        %r11 = scf.if %c -> (tensor<4xf32>) {
                          %a12 = tdf.call @scale(%a11) : (tensor<4xf32>) -> tensor<4xf32>
                          %r12 = scf.if %c -> (tensor<4xf32>) {
                            %a13 = tdf.call @scale(%a12) : (tensor<4xf32>) -> tensor<4xf32>
                            %r13 = scf.if %c -> (tensor<4xf32>) {
                              %a14 = tdf.call @scale(%a13) : (tensor<4xf32>) -> tensor<4xf32>
                              %r14 = scf.if %c -> (tensor<4xf32>) {
                                %a15 = tdf.call @scale(%a14) : (tensor<4xf32>) -> tensor<4xf32>
                                %r15 = scf.if %c -> (tensor<4xf32>) {
                                  %a16 = tdf.call @scale(%a15) : (tensor<4xf32>) -> tensor<4xf32>
                                  %r16 = scf.if %c -> (tensor<4xf32>) {
                                    // expected-remark@+1 {{in-place rejected (depth): nested in 17 scf.if/scf.index_switch ops (more than 16)}}
                                    %a17 = tdf.call @scale(%a16) : (tensor<4xf32>) -> tensor<4xf32>
                                    %r17 = scf.if %c -> (tensor<4xf32>) {
                                      // expected-remark@+1 {{in-place rejected (depth): nested in 18 scf.if/scf.index_switch ops (more than 16)}}
                                      %a18 = tdf.call @scale(%a17) : (tensor<4xf32>) -> tensor<4xf32>
                                      scf.yield %a18 : tensor<4xf32>
                                    } else {
                                      scf.yield %a17 : tensor<4xf32>
                                    }
                                    scf.yield %r17 : tensor<4xf32>
                                  } else {
                                    scf.yield %a16 : tensor<4xf32>
                                  }
                                  scf.yield %r16 : tensor<4xf32>
                                } else {
                                  scf.yield %a15 : tensor<4xf32>
                                }
                                scf.yield %r15 : tensor<4xf32>
                              } else {
                                scf.yield %a14 : tensor<4xf32>
                              }
                              scf.yield %r14 : tensor<4xf32>
                            } else {
                              scf.yield %a13 : tensor<4xf32>
                            }
                            scf.yield %r13 : tensor<4xf32>
                          } else {
                            scf.yield %a12 : tensor<4xf32>
                          }
                          scf.yield %r12 : tensor<4xf32>
                        } else {
                          scf.yield %a11 : tensor<4xf32>
                        }
                        scf.yield %r11 : tensor<4xf32>
                      } else {
                        scf.yield %a10 : tensor<4xf32>
                      }
                      scf.yield %r10 : tensor<4xf32>
                    } else {
                      scf.yield %a9 : tensor<4xf32>
                    }
                    scf.yield %r9 : tensor<4xf32>
                  } else {
                    scf.yield %a8 : tensor<4xf32>
                  }
                  scf.yield %r8 : tensor<4xf32>
                } else {
                  scf.yield %a7 : tensor<4xf32>
                }
                scf.yield %r7 : tensor<4xf32>
              } else {
                scf.yield %a6 : tensor<4xf32>
              }
              scf.yield %r6 : tensor<4xf32>
            } else {
              scf.yield %a5 : tensor<4xf32>
            }
            scf.yield %r5 : tensor<4xf32>
          } else {
            scf.yield %a4 : tensor<4xf32>
          }
          scf.yield %r4 : tensor<4xf32>
        } else {
          scf.yield %a3 : tensor<4xf32>
        }
        scf.yield %r3 : tensor<4xf32>
      } else {
        scf.yield %a2 : tensor<4xf32>
      }
      scf.yield %r2 : tensor<4xf32>
    } else {
      scf.yield %a1 : tensor<4xf32>
    }
    scf.yield %r1 : tensor<4xf32>
  } else {
    scf.yield %a0 : tensor<4xf32>
  }
  return %r0 : tensor<4xf32>
}
