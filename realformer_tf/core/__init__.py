"""What both faces share: options, Eq. 5 over an ops namespace, block
arguments, the names of a whole-or-nothing writer's leftovers.

Pure Python (no TensorFlow, Keras or package of ours): both faces stand on it.
"""
