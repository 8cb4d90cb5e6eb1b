"""delft: sequence labelling on TensorFlow/Keras that scales across devices.

Importing the package changes one process-wide thing, and only when asked: with
``DELFT_CPU_REPLICAS=N`` set, the CPU is split into N logical devices (for testing the multi-device
path), which must happen before TensorFlow initialises its devices.
"""
from delft.utilities import devices

devices.configure_logical_cpu_devices()

__version__ = "0.6.0"
