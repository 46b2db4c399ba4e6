"""``tilelang.contrib``: the CUDA toolchain queries ported code makes."""
