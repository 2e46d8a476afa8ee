"""One tiny Keras 3 reproduction, run once for the tests that read it."""
import pytest

from tests.helpers import keras3_reproduction


@pytest.fixture(scope="session")
def tiny_reproduction(tmp_path_factory):
  """(output dir, corpus, the finished command) of the three architectures
  at tiny size, TensorFlow unimportable."""
  folder = tmp_path_factory.mktemp("keras3_reproduction")
  corpus = keras3_reproduction.write_corpus(str(folder))
  output_dir = str(folder / "out")
  result = keras3_reproduction.run_command(output_dir, corpus)
  assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
  return output_dir, corpus, result
