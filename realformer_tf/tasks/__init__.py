"""Model Garden task subclasses for RealFormer fine-tuning."""
