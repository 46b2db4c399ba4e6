"""Host-side helpers with TileLang's module paths (``tilelang.utils``)."""
