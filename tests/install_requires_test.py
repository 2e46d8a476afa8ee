"""Command 2 (`pip install -e ".[test]"`) keeps what command 1 installed.

Apache Beam (the test, beam and dataflow extras) caps packages that the base install
pulls in; where setup.py's `install_requires` does not cap them as tightly,
command 1 takes a newer release and command 2 silently downgrades it. Read
from the installed Beam's own requirements and the installed dependency tree.
"""

import importlib.metadata
import os
import runpy

import pytest
import setuptools

requirements = pytest.importorskip("packaging.requirements")
from packaging import utils  # pylint: disable=g-import-not-at-top,wrong-import-order
from packaging import version  # pylint: disable=g-import-not-at-top,wrong-import-order

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _install_requires(monkeypatch):
  captured = {}
  monkeypatch.setattr(setuptools, "setup", lambda **kw: captured.update(kw))
  monkeypatch.chdir(_REPO_ROOT)
  runpy.run_path(os.path.join(_REPO_ROOT, "setup.py"))
  return [requirements.Requirement(r) for r in captured["install_requires"]]


def _requires(name, extra=None):
  """A distribution's requirements outside extras (and in `extra`), for
  this platform."""
  try:
    listed = importlib.metadata.requires(name) or []
  except importlib.metadata.PackageNotFoundError:
    return []
  out = []
  for line in listed:
    req = requirements.Requirement(line)
    if req.marker and not (req.marker.evaluate({"extra": extra or ""}) and (
        extra or "extra" not in str(req.marker))):
      continue
    out.append(req)
  return out


def _uppers(specifier):
  return [version.Version(version.Version(s.version).base_version)
          for s in specifier if s.operator in ("<", "<=")]


def test_beams_caps_on_command_1s_packages_are_in_install_requires(
    monkeypatch):
  # The dataflow extra's apache-beam[gcp] included.
  beam = _requires("apache-beam", extra="gcp")
  if not beam:
    pytest.skip("apache-beam is not installed")
  ours = _install_requires(monkeypatch)
  installed, todo, tree_caps = set(), list(ours), {}
  while todo:  # what command 1 installs: install_requires' closure
    req = todo.pop()
    name = utils.canonicalize_name(req.name)
    tree_caps.setdefault(name, []).extend(_uppers(req.specifier))
    if name not in installed:
      installed.add(name)
      todo += _requires(name)
  caps = {utils.canonicalize_name(r.name): _uppers(r.specifier) for r in ours}
  # Command 1 resolves under every cap of its tree (google-auth<3 of
  # google-api-python-client, say): only a tighter one of Beam's downgrades.
  loose = [str(r) for r in beam
           if utils.canonicalize_name(r.name) in installed and _uppers(
               r.specifier) and not any(
                   cap <= min(_uppers(r.specifier)) for cap in
                   tree_caps.get(utils.canonicalize_name(r.name), []))]
  assert not loose, loose
  # The caps that held the downgrades the two commands made before.
  for name in ("protobuf", "numpy", "pillow", "pyarrow", "python-dateutil",
               "google-auth-httplib2"):
    assert caps.get(name), name
