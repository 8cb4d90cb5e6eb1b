"""The one place that creates the tf.distribute strategy (and the logical CPU devices for tests).

``DELFT_CPU_REPLICAS=N`` splits the CPU into N logical devices, read here before TensorFlow
initialises; ``--multi-gpu`` then mirrors over them when the machine has no GPU. The strategy is made
once per process and reused: every module receives it from here, none creates its own.
"""
import atexit
import gc
import logging
import os

CPU_REPLICAS_ENV = "DELFT_CPU_REPLICAS"
logger = logging.getLogger(__name__)

_strategies = {}


def requested_cpu_replicas() -> int:
    value = os.environ.get(CPU_REPLICAS_ENV, "").strip()
    if not value:
        return 0
    try:
        replicas = int(value)
    except ValueError:
        raise ValueError(f"{CPU_REPLICAS_ENV} must be an integer, got {value!r}") from None
    return max(replicas, 0)


def configure_logical_cpu_devices():
    """Split the CPU into ``DELFT_CPU_REPLICAS`` logical devices (no-op when unset)."""
    replicas = requested_cpu_replicas()
    if replicas < 2:
        return
    import tensorflow as tf

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
    import json

    config = os.environ.get("TF_CONFIG")
    if not config:
        return False
    return len(json.loads(config).get("cluster", {}).get("worker", [])) > 1


def close_strategies():
    """Close what the strategies leave open: the cross-device ops' thread pools (TF issue 50487).

    An eager all-reduce of MirroredStrategy opens a ``multiprocessing.pool.ThreadPool`` per call,
    closes it but never joins it; its ``__del__`` at interpreter shutdown can then raise
    "Bad file descriptor". Joining every such pool here, before save and exit, leaves nothing for
    the shutdown to trip on.
    """
    # the default strategy has no cross-device ops (and scanning the heap costs ~0.5 s)
    if not any(_is_distributed(strategy) for strategy in _strategies.values()):
        return
    for pool in _live_thread_pools():
        pool.terminate()
        pool.join()


def _is_distributed(strategy):
    import tensorflow as tf

    return isinstance(strategy, (tf.distribute.MirroredStrategy,
                                 tf.distribute.MultiWorkerMirroredStrategy))


def _live_thread_pools():
    from multiprocessing.pool import Pool

    gc.collect()
    return [obj for obj in gc.get_objects() if isinstance(obj, Pool)]


class StrategyContext:
    """Owns the strategy for the length of a job and closes what it leaves open on the way out.

    >>> with StrategyContext(multi_gpu=False) as strategy:
    ...     strategy.num_replicas_in_sync
    1
    """

    def __init__(self, multi_gpu=False):
        self.multi_gpu = multi_gpu
        self.strategy = None

    def __enter__(self):
        self.strategy = get_strategy(self.multi_gpu)
        return self.strategy

    def __exit__(self, *exc):
        close_strategies()
        return False


atexit.register(close_strategies)
