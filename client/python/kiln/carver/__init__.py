"""``tilelang.carver``: the device queries ported kernels size grids with.
(TileLang's carver also holds its roller and templates; Kiln tunes through
``kiln.autotune`` instead.)"""
