"""realformer_tf: RealFormer (residual attention Transformers) on TF Model Garden."""
import setuptools

# The TF family is pinned together: Model Garden, tf_keras and tensorflow-text
# ship binary-compatible releases in lockstep with TensorFlow.
INSTALL_REQUIRES = [
    "tensorflow~=2.20.0",
    "tf-keras~=2.20.0",
    "tf-models-official~=2.20.0",
    "tensorflow-text~=2.20.0",
    "tensorflow-datasets",
    "absl-py",
    "numpy",
    "pyyaml",
    "matplotlib",  # attention analysis figures
    "tqdm",        # analysis progress bar
    "scikit-learn",  # GLUE metrics (as Model Garden's sentence_prediction)
    "scipy",         # GLUE correlations
    "psutil",        # stale temp files of dead processes
    "sentencepiece",  # translation: SentencePiece training and id checks
]

setuptools.setup(
    name="realformer_tf",
    version="0.1.0",
    description="RealFormer: Transformer Likes Residual Attention, on TF Model Garden",
    packages=setuptools.find_packages(include=["realformer_tf", "realformer_tf.*"]),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.12",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "test": ["pytest", "pytest-xdist"],
    },
)
