"""What both faces share: options, Eq. 5 over an ops namespace, block arguments,
the names of a whole-or-nothing writer's leftovers.

Pure Python: imports neither TensorFlow nor Keras nor another package of
ours, so the tf_keras face (`layers`, `networks`) and the Keras 3 face
(`keras3`) both stand on it.
"""
