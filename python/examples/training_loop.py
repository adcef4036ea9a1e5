"""A training loop: SGD on a session's slots, with a Python custom-call kernel doing the
parameter update, and a checkpoint saved and restored mid-training.

    python training_loop.py [PLUGIN]

The step program is hand-written StableHLO (no JAX needed): a linear model's mean squared
error and its gradient, then `stablehlo.custom_call @example_sgd_update`, served by the
Python handler below, computes the new weights. The session keeps the weights and the data
on the device between steps; `feed_back` routes each step's `w_next` into slot `w`.
After 10 steps the session is saved to an .npz file; 10 more steps run; then the file is
restored and the same 10 steps run again, giving the identical losses and weights.
"""

import os
import sys
import tempfile

import numpy as np

import rpjrt
import rpjrt.ffi

N, D = 32, 4  # examples, features

STEP = f"""
func.func public @main(%w: tensor<{D}xf32>, %x: tensor<{N}x{D}xf32>, %y: tensor<{N}xf32>)
    -> (tensor<{D}xf32>, tensor<f32>) {{
  %pred = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<{N}x{D}xf32>, tensor<{D}xf32>) -> tensor<{N}xf32>
  %err = stablehlo.subtract %pred, %y : tensor<{N}xf32>
  %sq = stablehlo.multiply %err, %err : tensor<{N}xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<{N}xf32>, tensor<f32>) -> tensor<f32>
  %inv_n = stablehlo.constant dense<{1.0 / N}> : tensor<f32>
  %loss = stablehlo.multiply %sum, %inv_n : tensor<f32>
  %xt_err = stablehlo.dot_general %err, %x, contracting_dims = [0] x [0]
      : (tensor<{N}xf32>, tensor<{N}x{D}xf32>) -> tensor<{D}xf32>
  %two_over_n = stablehlo.constant dense<{2.0 / N}> : tensor<{D}xf32>
  %grad = stablehlo.multiply %xt_err, %two_over_n : tensor<{D}xf32>
  %w_next = stablehlo.custom_call @example_sgd_update(%w, %grad) {{api_version = 4 : i32,
      backend_config = {{lr = 0.1 : f32}}}} : (tensor<{D}xf32>, tensor<{D}xf32>) -> tensor<{D}xf32>
  return %w_next, %loss : tensor<{D}xf32>, tensor<f32>
}}
"""


def main(argv: list[str]) -> int:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    true_w = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
    y = (x @ true_w + 0.01 * rng.normal(size=N)).astype(np.float32)

    with rpjrt.Client(argv[1] if len(argv) > 1 else None) as client:
        calls = []

        # The custom kernel: runs on the host inside every step, between the gradient and
        # the returned weights. Argument and result views are valid during the call only.
        @rpjrt.ffi.handler(client, "example_sgd_update")
        def sgd_update(call: rpjrt.ffi.FfiCall) -> None:
            w, grad = call.args[0].to_numpy(), call.args[1].to_numpy()
            call.rets[0].to_numpy()[:] = w - call.attrs["lr"] * grad
            calls.append(call.target)

        w = rpjrt.Slot("w", (rpjrt.float32, (D,)))  # the spec is checked on every bind
        w_next = rpjrt.Slot("w_next", (rpjrt.float32, (D,)))
        loss = rpjrt.Slot("loss", (rpjrt.float32, ()))

        def train(session: rpjrt.Session, step: rpjrt.SessionProgram, steps: int) -> list[float]:
            losses = []
            for _ in range(steps):
                out = step()  # {"w_next": Buffer, "loss": Buffer}, this step's own
                losses.append(float(out["loss"].to_numpy()))
                session.feed_back(out, into={"w_next": w})  # w_next becomes next step's w
            return losses

        with tempfile.TemporaryDirectory() as tmp, rpjrt.Session(client) as session:
            step = session.program(STEP, inputs=[w, "x", "y"], outputs=[w_next, loss])
            session.bind(w, np.zeros(D, np.float32))  # uploaded now
            session.bind_many({"x": x, "y": lambda: y})  # y's loader runs at the first step

            first = train(session, step, 10)
            print("loss, steps 1-10: ", " ".join(f"{v:.4f}" for v in first))
            ckpt = os.path.join(tmp, "step10.npz")
            session.save(ckpt)  # every slot, as an .npz file numpy.load reads
            with np.load(ckpt) as saved:
                print("saved:", sorted(saved.files))

            second = train(session, step, 10)
            w_after = session.fetch(w)
            print("loss, steps 11-20:", " ".join(f"{v:.4f}" for v in second))

            session.restore(ckpt)  # back to step 10: w, w_next, loss, x, y
            again = train(session, step, 10)
            w_again = session.fetch(w)
        # The with block freed the slots' buffers; the numpy copies above remain.

    assert first[-1] < first[0] and second[-1] < second[0], "the loss should fall"
    assert len(calls) == 30, calls  # the Python kernel ran once per step
    print("weights:", np.array2string(w_after, precision=3), "true:", np.array2string(true_w, precision=3))
    if again == second and np.array_equal(w_again, w_after):
        print("restored: identical")
        return 0
    print("restored: different", again, second)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
