"""delft: sequence labelling on TensorFlow/Keras that scales across devices.

The logical CPU replicas asked for by ``DELFT_CPU_REPLICAS`` must exist before TensorFlow
initialises its devices, so the device module is configured on the first import of the package.
"""
import os

# TensorFlow's C++ start-up chatter (no CUDA driver, oneDNN notices) hides the logs people read.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from delft.utilities import devices  # noqa: E402

devices.configure_logical_cpu_devices()

__version__ = "0.5.0"
