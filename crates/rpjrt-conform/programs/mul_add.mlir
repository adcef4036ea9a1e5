func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<8xf32>
  %one = stablehlo.constant dense<1.0> : tensor<8xf32>
  %1 = stablehlo.add %0, %one : tensor<8xf32>
  return %1 : tensor<8xf32>
}
