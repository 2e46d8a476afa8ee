"""`core.deprecation.moved_names`: a moved name warns, names its new home and
removal, and is the new module's object; an unknown name stays an error."""
import sys
import types

import pytest

from realformer_tf.core import deprecation


def test_moved_name_warns_and_is_the_new_object():
  getattr_ = deprecation.moved_names("pkg.old", {"dumps": "json"})
  with pytest.warns(DeprecationWarning, match=(
      r"pkg\.old\.dumps is deprecated: use json\.dumps \(this alias goes in "
      rf"realformer_tf {deprecation.REMOVED_IN}\)")):
    assert getattr_("dumps") is sys.modules["json"].dumps


def test_unknown_name_is_an_attribute_error_naming_the_module():
  module = types.ModuleType("pkg.old")
  module.__getattr__ = deprecation.moved_names("pkg.old", {"dumps": "json"})
  with pytest.raises(AttributeError, match="module 'pkg.old' has no attribute 'loads'"):
    module.loads  # pylint: disable=pointless-statement
