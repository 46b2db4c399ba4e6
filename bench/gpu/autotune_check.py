"""How good is the autotuner's choice? (issue 8's GPU check)

Tunes the corpus GEMM through a running kilnd (KILN_ADDRESS or the default
socket) at one shape, then measures every candidate that ran *separately*:
a tuning of its own with that candidate's values fixed (so one candidate,
alone in a fresh benchmark run, with --force). Prints the wall time of the
tuning, the chosen configuration, the best configuration by the separate
measurements, and how far the choice is from it; then tunes a small shape
and reports what the candidates were checked against (the CPU target).

Usage: python3 autotune_check.py [M N K] [TARGET]   (default 4096^3 sm_90a)
"""

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

from kiln import _capi  # noqa: E402


def main():
    m, n, k = (int(v) for v in sys.argv[1:4]) if len(sys.argv) >= 4 else \
        (4096, 4096, 4096)
    target = sys.argv[4] if len(sys.argv) >= 5 else "sm_90a"
    ir = open(os.path.join(ROOT, "tests", "compiler", "corpus",
                           "gemm.tile")).read()
    client = _capi.Client.connect(os.environ.get("KILN_ADDRESS"), 10.0)
    shape = {"M": m, "N": n, "K": k}

    start = time.perf_counter()
    answer = client.autotune(ir, "gemm", target, shape, force=True)
    wall = time.perf_counter() - start
    result = answer["result"]
    cands = result["candidates"]
    ran = [c for c in cands if c.get("status") ==
           "CANDIDATE_STATUS_BENCHMARKED"]
    statuses = {}
    for c in cands:
        s = c.get("status", "?").replace("CANDIDATE_STATUS_", "").lower()
        statuses[s] = statuses.get(s, 0) + 1
    print(f"tuned gemm {m}x{n}x{k} for {target} on {result.get('device_sku')}"
          f": {len(cands)} candidates ({statuses}) in {wall:.1f} s")
    print(f"chosen {answer['best_label']} at {answer['best_median_us']:.1f} us"
          f" (checked against {result.get('reference')})")

    separate = {}
    for c in ran:
        fixed = {name: int(v) for name, v in c["bindings"].items()}
        one = client.autotune(ir, "gemm", target, shape, fixed=fixed,
                              force=True)
        separate[c["label"]] = one["best_median_us"]
    best_label = min(separate, key=separate.get)
    chosen = answer["best_label"]
    print(f"{'config':32} {'sweep us':>10} {'alone us':>10}")
    for c in sorted(ran, key=lambda c: separate[c["label"]]):
        mark = "  <- chosen" if c["label"] == chosen else ""
        print(f"{c['label']:32} {float(c['median_us']):10.1f} "
              f"{separate[c['label']]:10.1f}{mark}")

    small = client.autotune(ir, "gemm", target, {"M": 256, "N": 256,
                                                 "K": 256}, force=True)
    print(f"small shape 256^3: chose {small['best_label']}, outputs checked "
          f"against {small['result'].get('reference')}")
    ratio = separate[chosen] / separate[best_label]
    print("\n| measure | value |\n|---|---|")
    print(f"| candidates / ran | {len(cands)} / {len(ran)} |")
    print(f"| tuning wall time | {wall:.1f} s |")
    print(f"| chosen (alone) | {chosen} {separate[chosen]:.1f} us |")
    print(f"| best measured alone | {best_label} {separate[best_label]:.1f}"
          " us |")
    print(f"| chosen / best | {ratio:.3f}x |")


if __name__ == "__main__":
    main()
