"""Upstream defects' workarounds, one module per library (tests/compat/)."""
