"""Training driver pieces used by train.py, on top of Model Garden's train_lib."""
