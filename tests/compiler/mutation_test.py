#!/usr/bin/python3
"""Mutation test of `kiln ir check`: random byte-level mutants of the corpus.

Each mutant is a corpus program with 1 to 4 stacked mutations (bit flips,
byte overwrites with "interesting" bytes, insertions of random bytes or of
language tokens, deletions, duplications of a chunk, and splices of two
programs). Mutants are written to a temporary folder and checked in batches,
many files per `kiln ir check` run. Every run must exit 0 (all valid) or 1
(some invalid): never a signal, never 2 (usage), never a hang; a run that
exits 1 must print diagnostics and one that exits 0 must print none.

A failing batch is re-run file by file; the offending mutants are copied to
--failures (default ./mutation_failures) and named in the output.

Python 3 standard library only. The seed (default 20261129, or
$KILN_MUTATION_SEED, or --seed) is printed so a failure can be replayed.
"""

import argparse
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time

DEFAULT_SEED = 20261129

# Tokens of the language: inserting them keeps mutants close enough to valid
# programs to reach the verifier, not just the lexer.
TOKENS = [
    b"kernel", b"tune", b"in", b"where", b"assume", b"grid", b"threads",
    b"cluster", b"alloc", b"shared", b"fragment", b"local", b"layout",
    b"swizzle(128)", b"padded(4)", b"row_major", b"copy", b"fill", b"clear",
    b"gemm", b"transpose_a", b"transpose_b", b"clear_accum", b"policy=",
    b"full_row", b"reduce.max", b"reduce.sum", b"dim=", b"clear=false",
    b"cumsum", b"reverse=true", b"atomic_add", b"parallel", b"for", b"serial",
    b"unroll", b"pipelined", b"stages=", b"if", b"else", b"let", b"rasterize",
    b"panel=", b"order=column", b"true", b"false", b"inf", b"strides",
    b"bool", b"i4", b"u4", b"i8", b"i32", b"u32", b"f16", b"bf16", b"f32",
    b"f8e4m3", b"select", b"if_then_else", b"ceildiv", b"exp2", b"fma",
    b"->", b":+", b":", b",", b"(", b")", b"[", b"]", b"{", b"}", b"=", b"+=",
    b"/=", b"==", b"!=", b"<=", b"<<", b">>", b"&&", b"||", b"!", b"~", b"-",
    b"*", b"/", b"%", b"//", b"0", b"1", b"-1", b"0x7fffffffffffffff",
    b"9223372036854775807", b"99999999999999999999", b"1e308", b"1e-320",
    b"0.5", b"1.", b"\n", b" ", b"\t", b"\r",
]
INTERESTING_BYTES = b"\x00\xff\x7f\x80\n{}()[],:;-+*/%<>=!~&|^.0129aZ_ \t\r\"'\\$@#"


def mutate_once(data, corpus, rng):
    """Applies one random mutation to bytearray `data` (in place)."""
    n = len(data)
    kind = rng.randrange(8)
    if n == 0:
        kind = 3
    if kind == 0:  # flip one bit
        i = rng.randrange(n)
        data[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # overwrite a byte with an interesting one
        data[rng.randrange(n)] = rng.choice(INTERESTING_BYTES)
    elif kind == 2:  # overwrite a byte with a random one
        data[rng.randrange(n)] = rng.randrange(256)
    elif kind == 3:  # insert random bytes
        i = rng.randrange(n + 1)
        data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif kind == 4:  # insert a token
        i = rng.randrange(n + 1)
        data[i:i] = rng.choice(TOKENS)
    elif kind == 5:  # delete a range
        i = rng.randrange(n)
        del data[i:i + rng.randint(1, min(64, n - i))]
    elif kind == 6:  # duplicate a chunk somewhere else
        i = rng.randrange(n)
        chunk = bytes(data[i:i + rng.randint(1, 256)])
        j = rng.randrange(n + 1)
        data[j:j] = chunk
    else:  # splice: a head of this program and a tail of another
        other = rng.choice(corpus)
        data[rng.randrange(n + 1):] = other[rng.randrange(len(other) + 1):]


def make_mutant(corpus, rng):
    data = bytearray(rng.choice(corpus))
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        mutate_once(data, corpus, rng)
    return bytes(data)


def run_check(kiln, files, timeout):
    """Runs `kiln ir check FILES`; returns (exit status, stderr) where a
    negative status is a signal and None a timeout."""
    try:
        proc = subprocess.run([kiln, "ir", "check", *map(str, files)],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE,
                              timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired as e:
        return None, e.stderr or b""
    return proc.returncode, proc.stderr


def batch_problem(rc, stderr):
    """Why a run's outcome is wrong, or None when it is fine."""
    if rc is None:
        return "timed out"
    if rc < 0:
        return "killed by signal %d" % -rc
    if rc not in (0, 1):
        return "exit status %d" % rc
    if rc == 1 and b"error:" not in stderr:
        return "exit status 1 without a diagnostic"
    if rc == 0 and stderr:
        return "exit status 0 but printed: %r" % stderr[:200]
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kiln", required=True, help="the kiln binary")
    parser.add_argument("--corpus", required=True,
                        help="folder of valid .tile programs")
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=250,
                        help="mutants per kiln invocation")
    parser.add_argument("--seed", type=int,
                        default=int(os.environ.get("KILN_MUTATION_SEED",
                                                   DEFAULT_SEED)))
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds allowed per kiln invocation")
    parser.add_argument("--failures", default="mutation_failures",
                        help="where failing mutants are copied")
    args = parser.parse_args()

    corpus = [p.read_bytes()
              for p in sorted(pathlib.Path(args.corpus).glob("*.tile"))]
    if not corpus:
        print("no .tile files in %s" % args.corpus)
        return 1
    print("mutation test: seed %d (set KILN_MUTATION_SEED to change), "
          "%d mutants of %d programs, %d per run"
          % (args.seed, args.count, len(corpus), args.batch))
    sys.stdout.flush()

    rng = random.Random(args.seed)
    start = time.monotonic()
    failures = []
    runs = 0
    rejected = 0
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="kiln-mutants-", dir=shm) as tmp:
        for first in range(0, args.count, args.batch):
            files = []
            for i in range(first, min(first + args.batch, args.count)):
                path = pathlib.Path(tmp) / ("m%05d.tile" % i)
                path.write_bytes(make_mutant(corpus, rng))
                files.append(path)
            rc, stderr = run_check(args.kiln, files, args.timeout)
            runs += 1
            problem = batch_problem(rc, stderr)
            if problem is None:
                rejected += sum(
                    1 for f in files if (str(f) + ":").encode() in stderr)
            else:
                # Find the culprits one file at a time.
                culprits = []
                for f in files:
                    rc1, stderr1 = run_check(args.kiln, [f], args.timeout)
                    runs += 1
                    problem1 = batch_problem(rc1, stderr1)
                    if problem1 is not None:
                        culprits.append((f, problem1, stderr1))
                if not culprits:  # only the batch as a whole fails
                    culprits.append(
                        (files[0], "batch of %d from here: %s" %
                         (len(files), problem), stderr))
                failures.extend(culprits)
            kept = {f for f, _, _ in failures}
            for f in files:
                if f not in kept:
                    f.unlink()

        elapsed = time.monotonic() - start
        print("%d mutants, %d kiln runs, %.1f s; %d rejected with diagnostics, "
              "%d accepted as valid" % (args.count, runs, elapsed, rejected,
                                        args.count - rejected - len(failures)))
        if not failures:
            print("PASS: every run exited 0 or 1")
            return 0
        keep = pathlib.Path(args.failures).resolve()
        keep.mkdir(parents=True, exist_ok=True)
        for f, problem, stderr in failures:
            dest = keep / f.name
            shutil.copyfile(f, dest)
            print("FAIL %s: %s" % (dest, problem))
            tail = stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
            for line in tail:
                print("    " + line)
        print("%d failing mutants (seed %d) copied to %s"
              % (len(failures), args.seed, keep))
        return 1


if __name__ == "__main__":
    sys.exit(main())
