"""Model Garden task subclasses for RealFormer (pre-training and fine-tuning)."""
