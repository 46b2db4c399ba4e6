"""Python DSL to tile IR (internal)."""
