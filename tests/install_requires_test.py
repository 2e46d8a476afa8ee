"""Command 2 (`pip install -e ".[test]"`) keeps what command 1 installed.

Apache Beam (the test and beam extras) caps packages that the base install
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


def _requires(name):
  """A distribution's requirements outside extras, for this platform."""
  try:
    listed = importlib.metadata.requires(name) or []
  except importlib.metadata.PackageNotFoundError:
    return []
  out = []
  for line in listed:
    req = requirements.Requirement(line)
    if req.marker and ("extra" in str(req.marker) or
                       not req.marker.evaluate()):
      continue
    out.append(req)
  return out


def _uppers(specifier):
  return [version.Version(version.Version(s.version).base_version)
          for s in specifier if s.operator in ("<", "<=")]


def test_beams_caps_on_command_1s_packages_are_in_install_requires(
    monkeypatch):
  beam = _requires("apache-beam")
  if not beam:
    pytest.skip("apache-beam is not installed")
  ours = _install_requires(monkeypatch)
  installed, todo = set(), [r.name for r in ours]
  while todo:  # what command 1 installs: install_requires' closure
    name = utils.canonicalize_name(todo.pop())
    if name not in installed:
      installed.add(name)
      todo += [r.name for r in _requires(name)]
  caps = {utils.canonicalize_name(r.name): _uppers(r.specifier) for r in ours}
  loose = [str(r) for r in beam
           if utils.canonicalize_name(r.name) in installed and _uppers(
               r.specifier) and not any(
                   ours_cap <= min(_uppers(r.specifier)) for ours_cap in
                   caps.get(utils.canonicalize_name(r.name), []))]
  assert not loose, loose
  # The caps that held the downgrades the two commands made before.
  for name in ("protobuf", "numpy", "pillow", "pyarrow", "python-dateutil"):
    assert caps.get(name), name
