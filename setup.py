"""delft: sequence labelling on TensorFlow/Keras, scaling across devices with tf.distribute."""
from setuptools import find_packages, setup

EXPORT_REQUIRES = ["tf2onnx==1.17.0", "onnx>=1.17,<1.24", "onnxruntime>=1.20,<1.33"]
TRACKING_REQUIRES = ["wandb>=0.19,<0.32"]

setup(
    name="delft",
    version="0.6.0",
    description="Sequence labelling (GROBID, NER) on TensorFlow/Keras with multi-device training "
                "and sharded inference",
    license="Apache-2.0",
    python_requires=">=3.10,<3.13",
    packages=find_packages(include=["delft", "delft.*"]),
    package_data={"delft": ["resources/*.json"]},
    include_package_data=True,
    install_requires=[
        "tensorflow==2.21.0",
        "keras==3.15.1",
        "keras-hub==0.32.0",
        "transformers==5.24.0",
        # transformers' own (>=1.31,<3); named since delft calls it: Hub names found in its cache
        # or downloaded into it (its 2.4 API: model_info timeouts, httpx2 errors)
        "huggingface_hub>=2.4,<2.5",
        "tokenizers==0.23.3",
        "safetensors==0.8.0",
        "numpy>=2.4,<2.5",
        # TensorFlow's dtypes (>=0.5.1): 0.7.0's extension loads much more slowly than 0.6.0's, and
        # every command and GROBID's start-up import it (doc/benchmarks.md, "Start-up")
        "ml_dtypes>=0.6,<0.7",
        "scikit-learn>=1.9,<1.10",
        "h5py>=3.14,<3.15",
        "matplotlib>=3.9,<4",
        "lmdb>=1.4,<4",
        "tqdm>=4.66,<5",
        # text classification's clean_text (ISC; DeLFT's Unidecode is GPL); exact: its tables
        # decide the tokens a trained classifier looks up
        "anyascii==0.3.3",
    ],
    extras_require={
        # ONNX export (delftExport --format onnx): converter, checker; onnxruntime to run bundles
        "export": EXPORT_REQUIRES,
        # --wandb: DeLFT's Weights & Biases reporting (--tensorboard needs nothing more)
        "tracking": TRACKING_REQUIRES,
        # jep: GROBID's JEP client in the tests (builds against the JDK); pytest-xdist: two workers
        "test": ["pytest>=8", "pytest-xdist>=3.8,<4", "seqeval==1.2.2", "jep==4.3.2"] +
                EXPORT_REQUIRES + TRACKING_REQUIRES,
    },
    entry_points={
        "console_scripts": [
            "grobidTagger=delft.applications.grobidTagger:command",
            "nerTagger=delft.applications.nerTagger:command",
            "insultTagger=delft.applications.insultTagger:command",
            "delftExport=delft.applications.export:command",
            "licenseClassifier=delft.applications.licenseClassifier:command",
            "citationClassifier=delft.applications.citationClassifier:command",
        ],
    },
)
