"""Where a marked line of a test file is (for located-error tests)."""


def line_ending_with(path, marker):
    """The 1-based line of ``path`` that ends with ``marker``; exactly one
    line may."""
    with open(path) as f:
        hits = [n for n, line in enumerate(f, 1)
                if line.rstrip().endswith(marker)]
    assert len(hits) == 1, marker
    return hits[0]
