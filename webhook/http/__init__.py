"""The HTTP edge: decode, call the engine, encode."""
