"""The one place that creates the tf.distribute strategy (and the logical CPU devices for tests).

``DELFT_CPU_REPLICAS=N`` splits the CPU into N logical devices, read here before TensorFlow
initialises (``import delft`` does it: the one process-wide setting the package makes, and only
when the variable is set); ``--multi-gpu`` then mirrors over them when the machine has no GPU.
The strategy is made once per process and reused: every module receives it from here, none
creates its own.
"""
import json
import logging
import os

from delft.utilities.errors import ConfigurationError

CPU_REPLICAS_ENV = "DELFT_CPU_REPLICAS"
logger = logging.getLogger(__name__)

_strategies = {}


def requested_cpu_replicas() -> int:
    """The ``DELFT_CPU_REPLICAS`` count (0 when unset); a one-line error when it is not a count."""
    value = os.environ.get(CPU_REPLICAS_ENV, "").strip()
    if not value:
        return 0
    try:
        replicas = int(value)
    except ValueError:
        raise ConfigurationError(f"{CPU_REPLICAS_ENV} must be a number of replicas, "
                                 f"not {value!r}") from None
    if replicas < 0:
        raise ConfigurationError(f"{CPU_REPLICAS_ENV} must be >= 0, not {replicas}")
    return replicas


def configure_logical_cpu_devices():
    """Split the CPU into ``DELFT_CPU_REPLICAS`` logical devices (no-op when unset).

    A value that is not a count is reported when a strategy is asked for (:func:`get_strategy`),
    not here: ``import delft`` must not fail, for ``--help`` or for a host process.
    """
    try:
        replicas = requested_cpu_replicas()
    except ConfigurationError:
        return
    if replicas < 2:
        return
    import tensorflow as tf

    cores = os.cpu_count() or 1
    if replicas > cores:
        logger.warning("%s=%d is more than the %d CPU cores: each replica gets a share of them, "
                       "and steps will be much slower", CPU_REPLICAS_ENV, replicas, cores)
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    except RuntimeError:
        # TF was initialised before delft was imported: keep what exists, say so once.
        existing = len(tf.config.list_logical_devices("CPU"))
        if existing != replicas:
            logger.warning("%s=%d ignored: TensorFlow was initialised first with %d CPU device(s)",
                           CPU_REPLICAS_ENV, replicas, existing)


def mirrored_devices():
    """Devices a multi-device run mirrors over: every GPU, else the logical CPU devices."""
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return [d.name for d in gpus]
    cpus = tf.config.list_logical_devices("CPU")
    return [d.name for d in cpus] if len(cpus) > 1 else []


def get_strategy(multi_gpu=False):
    """The process-wide strategy: MirroredStrategy when ``multi_gpu`` and devices exist, else default.

    Under a ``TF_CONFIG`` that names several workers, ``multi_gpu`` gives MultiWorkerMirroredStrategy.

    >>> get_strategy(False).num_replicas_in_sync
    1
    """
    import tensorflow as tf

    key = bool(multi_gpu)
    if key in _strategies:
        return _strategies[key]
    if not multi_gpu:
        strategy = tf.distribute.get_strategy()
    elif _is_multi_worker():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        requested_cpu_replicas()  # a malformed value is a one-line error here
        devices = mirrored_devices()
        if len(devices) < 2:
            logger.warning("--multi-gpu asked for, but only one device is visible: running on it "
                           "(set %s=N to test N replicas on a CPU)", CPU_REPLICAS_ENV)
            strategy = tf.distribute.get_strategy()
        else:
            strategy = tf.distribute.MirroredStrategy(devices)
            logger.info("MirroredStrategy over %d devices: %s", len(devices), ", ".join(devices))
    _strategies[key] = strategy
    return strategy


def _is_multi_worker():
    config = os.environ.get("TF_CONFIG")
    if not config:
        return False
    return len(json.loads(config).get("cluster", {}).get("worker", [])) > 1
