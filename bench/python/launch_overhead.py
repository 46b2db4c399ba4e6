"""Per-call launch overhead from Python (issue goal: within 1.5x of a
trivial torch op launch), measured in one run on one CUDA device:

- torch:  ``torch.add(x, y, out=z)`` on small CUDA tensors;
- kiln:   a compiled Kiln kernel (Y = alpha * X + Bias[n % 4]) called on
          the same tensors with an output passed in (no allocation), and
          with ``out_idx`` (Kiln allocates the output, as torch.add does
          without out=).

Each is called CALLS times back to back (host time per call, synchronised
at the end), median of 7 rounds. Usage: python3 launch_overhead.py [CALLS]
"""

import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import torch  # noqa: E402

import kiln  # noqa: E402

import kernels  # noqa: E402


def per_call_us(fn, calls):
    rounds = []
    for _ in range(7):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    n = 4096
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    z = torch.empty(n, device="cuda")
    bias = torch.randn(4, device="cuda")
    allocating = kernels.scale_add()
    in_place = kiln.compile(kernels.scale_add.func())
    allocating(x, bias, 2.0)  # compile and load before timing
    in_place(x, bias, z, 2.0)

    results = [
        ("torch.add(x, y, out=z)", per_call_us(
            lambda: torch.add(x, y, out=z), calls)),
        ("torch.add(x, y)", per_call_us(lambda: torch.add(x, y), calls)),
        ("kiln kernel(x, bias, z, 2.0)", per_call_us(
            lambda: in_place(x, bias, z, 2.0), calls)),
        ("kiln kernel(x, bias, 2.0) out_idx", per_call_us(
            lambda: allocating(x, bias, 2.0), calls)),
    ]
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{calls} calls per round, median of 7")
    print(f"{'call':38} {'us per call':>12} {'vs torch':>9}")
    for name, us in results:
        ref = results[0][1] if "z" in name else results[1][1]
        print(f"{name:38} {us:12.2f} {us / ref:8.2f}x")


if __name__ == "__main__":
    main()
