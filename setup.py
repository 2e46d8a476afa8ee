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
    "matplotlib",  # attention analysis figures
    "tqdm",        # analysis progress bar
    "scikit-learn",  # Model Garden's sentence_prediction imports it
    "scipy",         # GLUE correlations (data/glue_tasks.py)
    "psutil",        # stale temp files of dead processes
    "sentencepiece",  # translation: SentencePiece training and id checks
    # The Keras 3 face (realformer_tf.keras3). TensorFlow 2.20 pulls Keras 3
    # already (`tf.keras`); keras-hub 0.32 needs Keras >= 3.15.
    "keras~=3.15",
    # keras-hub's Backbone/Task base classes, BERT tokenizer, preprocessors
    # and samplers. It needs tensorflow-text >= 2.20.1, which
    # tensorflow-text~=2.20.0 above admits; its kagglesdk==0.1.28 pin and
    # tf-models-official's kaggle resolve together (kaggle 2.2.1).
    "keras-hub~=0.32.0",
    # tensorflow-hub 0.16.1 (which Model Garden's NLP tasks import,
    # official/nlp/tasks/utils.py:20) imports pkg_resources
    # (tensorflow_hub/__init__.py:61); setuptools 82 removed it, and from
    # 80.9.0 on that import warns ("pkg_resources is deprecated ... pin to
    # Setuptools<81"; 80.9 and 80.10 too, checked) at the top of every
    # train.py run and test session. Python 3.12+ venvs have no setuptools,
    # so pip would take the newest (found on 3.13).
    "setuptools<80.9",
    # Apache Beam's caps (the test and beam extras) on what the lines above
    # install, here too, so that `pip install -e .` already resolves to the
    # versions `.[test]` keeps (tests/install_requires_test.py).
    "numpy<2.5",
    "protobuf<7",
    "pillow<13",
    "pyarrow<26",
    "python-dateutil<3",
    "pyyaml<7",
    "cryptography<51",
    "grpcio<2",
    "httplib2<1",
    "proto-plus<2",
    "requests<3",
    # apache-beam[gcp]'s (the dataflow extra), likewise: google-api-python-
    # client (Model Garden's) takes 0.4 otherwise.
    "google-auth-httplib2<0.3",
]

# Apache Beam 2.77 (2026-10, the newest) installs beside the TF family:
# protobuf<7 (TF 2.20: >=5.28; google-api-core, a Model Garden dependency:
# >=6.33.5) leaves protobuf 6.33.x; its other caps are in INSTALL_REQUIRES.
BEAM = ["apache-beam~=2.77.0"]
# DataflowRunner's client and Beam's GCS file system beside the TF family.
DATAFLOW = ["apache-beam[gcp]~=2.77.0"]

setuptools.setup(
    name="realformer_tf",
    version="0.1.0",
    description="RealFormer: Transformer Likes Residual Attention, on TF Model Garden",
    packages=setuptools.find_packages(include=["realformer_tf", "realformer_tf.*"]),
    # The quickstart's corpus (quickstart_corpus.STDLIB_CORPUS_FILE), in
    # editable and non-editable installs alike; MANIFEST.in adds it to sdists.
    package_data={"realformer_tf.data": ["quickstart_stdlib_corpus.txt.gz"]},
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    # keras-hub needs Python >= 3.11; TensorFlow 2.20 has wheels for 3.9 to
    # 3.13 (and tensorflow-text 2.20.1, jaxlib 0.10.2 for 3.13 too).
    python_requires=">=3.11,<3.14",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    install_requires=INSTALL_REQUIRES,
    extras_require={
        # jax: tests/keras3/backends_test.py re-runs the Keras 3 tests on
        # KERAS_BACKEND=jax (CPU). Beam: tests/data/beam_pretraining_data_test.py
        # runs the pipeline in CI.
        # grain: keras-hub's data pipelines in the JAX re-run without TensorFlow.
        "test": ["pytest", "pytest-xdist", "jax[cpu]~=0.10.2", "grain~=0.2.18",
                 *BEAM],
        # Corpus-scale pre-training data (data/beam_pretraining_data.py).
        "beam": BEAM,
        # The Beam pipeline on Dataflow (docs/pretraining_at_scale.md); its
        # workers install this package from --setup_file=./setup.py.
        "dataflow": DATAFLOW,
        # Keras 3 on JAX (CPU; on an accelerator install JAX's own wheel).
        "jax": ["jax[cpu]~=0.10.2"],
    },
)
