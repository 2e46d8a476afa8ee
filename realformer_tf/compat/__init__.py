"""Workarounds of upstream defects, one module per library (below every layer:
they import upstream libraries only), each pinned by tests/compat/."""
