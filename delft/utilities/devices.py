"""The one place that creates the tf.distribute strategy (and the logical CPU devices for tests).

``DELFT_CPU_REPLICAS=N`` splits the CPU into N logical devices, read here before TensorFlow
initialises (``import delft`` does it: the one process-wide setting the package makes, and only
when the variable is set); ``--multi-gpu`` then mirrors over them when the machine has no GPU.
With several workers (a ``TF_CONFIG`` naming them, or a SLURM job step of several tasks) it is
``MultiWorkerMirroredStrategy``, TensorFlow's own multi-worker engine (doc/distributed.md).
The strategy is made once per process and reused: every module receives it from here, none
creates its own, and none asks which kind it got: what differs between workers is answered here
(:func:`is_chief`, :func:`common_seed`, :func:`wait_for_workers`).
"""
import itertools
import json
import logging
import os
import sys

from delft.utilities.errors import ConfigurationError
from delft.utilities.tensorflow_pages import import_tensorflow

CPU_REPLICAS_ENV = "DELFT_CPU_REPLICAS"
CROSS_DEVICE_OPS_ENV = "DELFT_CROSS_DEVICE_OPS"
SLURM_PORT_ENV = "DELFT_SLURM_PORT"
CPU_ALLOCATOR_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
DEFAULT_SLURM_PORT = 8888  # TF's SlurmClusterResolver default; task k of a node listens on +k
# how the replicas of one machine (MirroredStrategy) or of all workers (MultiWorkerMirroredStrategy)
# sum their gradients: None is TensorFlow's own choice (NCCL on GPUs, else a copy to one device /
# the RING collective)
CROSS_DEVICE_OPS = ("nccl", "hierarchical_copy", "reduce_to_one", "ring")
logger = logging.getLogger(__name__)

# logical CPU devices are for testing the multi-replica path: a thousand of them made a small
# tag call take minutes
MOST_CPU_REPLICAS = 64
_strategies = {}
_meetings = itertools.count()  # wait_for_workers: every worker calls it in the same order


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
    if not 0 <= replicas <= MOST_CPU_REPLICAS:
        raise ConfigurationError(f"{CPU_REPLICAS_ENV} must be from 0 to {MOST_CPU_REPLICAS}, not "
                                 f"{replicas}")
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
    tf = import_tensorflow()

    cores = cpu_cores()
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


def cpu_cores():
    """The CPU cores of the machine (``os.cpu_count()``, at least 1)."""
    return os.cpu_count() or 1


def configure_cpu_ops(large_ops, training_passes=1):
    """TensorFlow's CPU ops for a command: threads per op and kernels, for its model's ops.

    A sequence labeller's RNN runs many small ops (a BiLSTM's steps, a 20-row batch). On
    TensorFlow's default, every core per op, the threads wait on each other; with one thread per
    op the independent ops (the two directions of each BiLSTM) run side by side, one per core:
    faster train steps and tagging (doc/usage.md, "Threads and kernels"). Its kernels are Eigen's
    (``TF_ENABLE_ONEDNN_OPTS=0``): on an RNN's small tensors oneDNN's layout conversions and
    transposes cost more than they save. ``large_ops`` (a transformer's matmuls, a text
    classifier's batches of 256 texts of 150-300 words) keep every core per op and get oneDNN's
    kernels (``TF_ENABLE_ONEDNN_OPTS=1``: TensorFlow turns them on by itself only on CPUs with
    AVX-512), which run a BERT_CRF's epochs 7-17% shorter than Eigen's on an AVX2 CPU. A training
    whose train step runs ``training_passes`` passes side by side (its length groups, independent
    until their gradients are summed) on no more cores than that runs one thread per op for large
    ops too: each pass on a core of its own instead of every op split over the cores and joined
    (BERT_CRF MiniLM's steady epochs 3% shorter on date, 6% on name-citation, on 2 cores; the
    ``bert`` classifier level). A process that set ``TF_NUM_INTRAOP_THREADS`` or
    ``TF_ENABLE_ONEDNN_OPTS`` itself keeps its choice; with a GPU the threads stay as they are.

    Every family gets TensorFlow's BFC allocator for host memory (``TF_CPU_ALLOCATOR_USE_BFC``,
    unless the process set it): it keeps freed blocks for the next step instead of handing them
    back to malloc. A ``gru`` classifier's training (batch 256 of 300 words) then peaks 0.07 GiB
    lower (and on Eigen's kernels runs an epoch in 1.85 s instead of 3.15), a BERT_CRF's 0.09 GB
    lower; tagging is the same (doc/usage.md, "Threads and kernels"). The CLIs call this
    before TensorFlow is imported, since these settings are read when it starts; it changes
    nothing once it has (a library host keeps its own settings).
    """
    if "tensorflow" not in sys.modules:
        if not os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip():
            os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if large_ops else "0"
        if not os.environ.get(CPU_ALLOCATOR_ENV, "").strip():
            os.environ[CPU_ALLOCATOR_ENV] = "true"
    tf = import_tensorflow()

    if (large_ops and training_passes < cpu_cores()) or \
            os.environ.get("TF_NUM_INTRAOP_THREADS", "").strip() or \
            tf.config.list_physical_devices("GPU"):
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow already started: its threads stay as they are
        return
    logger.debug("one thread per TensorFlow op")


def mirrored_devices():
    """Devices a multi-device run mirrors over: every GPU, else the logical CPU devices."""
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return [d.name for d in gpus]
    cpus = tf.config.list_logical_devices("CPU")
    return [d.name for d in cpus] if len(cpus) > 1 else []


def get_strategy(multi_gpu=False, cross_device_ops=None):
    """The process-wide strategy: MirroredStrategy when ``multi_gpu`` and devices exist, else default.

    With several workers (:func:`cluster_resolver`), ``multi_gpu`` gives MultiWorkerMirroredStrategy
    over every replica of every worker. It must then be made before TensorFlow runs anything.

    Args:
        multi_gpu: mirror over every local device (and every worker), else one device.
        cross_device_ops: how replicas sum gradients, one of ``CROSS_DEVICE_OPS`` ("nccl",
            "hierarchical_copy", "reduce_to_one" on one machine; "nccl" or "ring" across
            workers); default ``DELFT_CROSS_DEVICE_OPS``, else TensorFlow's choice.

    Returns:
        The strategy, the same object for the same arguments.

    >>> get_strategy(False).num_replicas_in_sync
    1
    """
    tf = import_tensorflow()

    if cross_device_ops is None:
        cross_device_ops = os.environ.get(CROSS_DEVICE_OPS_ENV, "").strip() or None
    if cross_device_ops is not None and cross_device_ops not in CROSS_DEVICE_OPS:
        raise ConfigurationError(f"cross-device ops {cross_device_ops!r}: one of "
                                 f"{', '.join(CROSS_DEVICE_OPS)} ({CROSS_DEVICE_OPS_ENV})")
    key = (bool(multi_gpu), cross_device_ops if multi_gpu else None)
    if key in _strategies:
        return _strategies[key]
    resolver = cluster_resolver() if multi_gpu else None
    if not multi_gpu:
        strategy = tf.distribute.get_strategy()
    elif resolver is not None:
        strategy = _multi_worker_strategy(resolver, cross_device_ops)
    else:
        requested_cpu_replicas()  # a malformed value is a one-line error here
        devices = mirrored_devices()
        if len(devices) < 2:
            logger.warning("--multi-gpu asked for, but only one device is visible: running on it "
                           "(set %s=N to test N replicas on a CPU)", CPU_REPLICAS_ENV)
            strategy = tf.distribute.get_strategy()
        else:
            strategy = tf.distribute.MirroredStrategy(
                devices, cross_device_ops=_mirrored_cross_device_ops(cross_device_ops))
            logger.info("MirroredStrategy over %d devices: %s%s", len(devices), ", ".join(devices),
                        f" ({cross_device_ops})" if cross_device_ops else "")
    _strategies[key] = strategy
    return strategy


def _mirrored_cross_device_ops(name):
    import tensorflow as tf

    if name == "ring":
        raise ConfigurationError("the ring all-reduce is a collective across workers: on one "
                                 "machine use nccl, hierarchical_copy or reduce_to_one")
    kinds = {"nccl": tf.distribute.NcclAllReduce,
             "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
             "reduce_to_one": tf.distribute.ReductionToOneDevice}
    return kinds[name]() if name else None


def _multi_worker_strategy(resolver, cross_device_ops):
    """TensorFlow's MultiWorkerMirroredStrategy; it waits until every worker has joined."""
    import tensorflow as tf

    if cross_device_ops in ("hierarchical_copy", "reduce_to_one"):
        raise ConfigurationError(f"{cross_device_ops} works on one machine: across workers use "
                                 "nccl or ring")
    implementation = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(implementation={
        None: implementation.AUTO, "nccl": implementation.NCCL,
        "ring": implementation.RING}[cross_device_ops])
    spec = resolver.cluster_spec()
    logger.info("waiting for the %d workers of %s (this is task %s %s)", _count_workers(spec),
                ", ".join(a for addresses in spec.as_dict().values() for a in addresses),
                resolver.task_type, resolver.task_id)
    try:
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver, communication_options=options)
    except RuntimeError as error:
        if "configured at program startup" not in str(error):
            raise
        raise ConfigurationError(
            "MultiWorkerMirroredStrategy must be made before TensorFlow runs anything: ask "
            "devices.get_strategy(True) (or pass multi_gpu=True) first in the process") from None
    logger.info("MultiWorkerMirroredStrategy: %d workers, %d replicas in all, this worker is "
                "%s %s%s", _count_workers(spec), strategy.num_replicas_in_sync,
                resolver.task_type, resolver.task_id, " (chief)" if is_chief(strategy) else "")
    return strategy


def cluster_resolver():
    """The cluster this process is a worker of, or None when it runs alone.

    A ``TF_CONFIG`` naming several tasks (the standard tf.distribute cluster description) comes
    first; without one, a SLURM job step of several tasks (``srun``) is resolved by TensorFlow's
    ``SlurmClusterResolver``: task k of a node listens on port ``DELFT_SLURM_PORT`` (default
    8888) + k and uses every GPU it sees (bind them with ``--gpus-per-task``, or run one task per
    node).

    Returns:
        A ``tf.distribute.cluster_resolver.ClusterResolver``, or None.
    """
    import tensorflow as tf

    if os.environ.get("TF_CONFIG", "").strip():
        try:
            config = json.loads(os.environ["TF_CONFIG"])
            tasks = sum(len(config.get("cluster", {}).get(job, [])) for job in ("chief", "worker"))
        except (ValueError, AttributeError, TypeError) as error:
            raise ConfigurationError(f"TF_CONFIG is not a cluster description ({error})") from None
        return tf.distribute.cluster_resolver.TFConfigClusterResolver() if tasks > 1 else None
    step_tasks = _slurm_count("SLURM_STEP_NUM_TASKS")
    if step_tasks > 1:
        return _slurm_resolver(step_tasks)
    if _slurm_count("SLURM_NTASKS") > 1:
        logger.warning("SLURM allocated %s tasks but this process is not one task of a job step: "
                       "start the workers with srun (doc/distributed.md)", os.environ["SLURM_NTASKS"])
    return None


def _slurm_count(name):
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else 0
    except ValueError:
        raise ConfigurationError(f"{name} must be a count of tasks, not {value!r}") from None


def _slurm_resolver(step_tasks):
    """TF's SlurmClusterResolver for the tasks and hosts of this job step, with the GPUs SLURM
    made visible to this task (not a share of the node's that it would pick itself)."""
    import tensorflow as tf

    port = os.environ.get(SLURM_PORT_ENV, "").strip() or DEFAULT_SLURM_PORT
    try:
        port = int(port)
    except ValueError:
        raise ConfigurationError(f"{SLURM_PORT_ENV} must be a port number, not {port!r}") from None
    gpus = len(tf.config.list_physical_devices("GPU"))
    # with GPU counts of 0 TF's resolver cannot place its tasks (a range of step 0): it is given
    # one per task, never applied (auto_set_gpu=False), and the real count is handed on below
    slurm = tf.distribute.cluster_resolver.SlurmClusterResolver(
        port_base=port, gpus_per_task=max(gpus, 1), gpus_per_node=max(gpus, 1) * step_tasks,
        auto_set_gpu=False)
    try:
        spec = slurm.cluster_spec()
    except (RuntimeError, ValueError) as error:
        raise ConfigurationError(f"SLURM job step not understood: {error}") from None
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        spec, task_type=slurm.task_type, task_id=slurm.task_id, num_accelerators={"GPU": gpus},
        rpc_layer="grpc")


def _count_workers(spec):
    jobs = spec.as_dict()
    return sum(len(jobs.get(job, [])) for job in ("chief", "worker"))


def is_chief(strategy):
    """Whether this process writes the model, its checkpoints, reports and outputs: True except on
    the workers of a multi-worker strategy other than the chief (task 0, or the ``chief`` task)."""
    return bool(strategy.extended.should_checkpoint)


def worker_count(strategy):
    """How many processes run ``strategy`` together (1 unless it is multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().jobs:
        return 1
    return max(1, _count_workers(resolver.cluster_spec()))


def common_seed(strategy, seed):
    """``seed``, or with several workers and no seed, one random seed drawn and shared by all.

    Every worker must draw the same data order and splits, or each would feed its replicas from
    different global batches (examples seen twice, others never). Each worker draws, the chief's
    draw is taken (a collective: every worker must call this at the same point).

    Args:
        strategy: the strategy of the run.
        seed: the seed given, or None.

    Returns:
        ``seed``, the shared seed, or None (one worker, no seed).
    """
    if seed is not None or worker_count(strategy) == 1:
        return seed
    import numpy as np

    draw = int(np.random.default_rng().integers(0, 2 ** 31 - 1))
    seed = int(chief_value(strategy, draw))
    logger.info("no seed given: the %d workers share the seed %d", worker_count(strategy), seed)
    return seed


def wait_for_workers(strategy):
    """Return once every worker has called this (nothing to wait for with one worker): the chief
    finishes writing before the others go on, and the chief returns last, so that a process may
    exit right after it.

    A collective cannot end a run: the worker whose part completes first may exit while a peer
    still fetches from it ("Socket closed"). This meeting goes through the keys of TensorFlow's
    coordination service, which the chief hosts: the others say they arrived, wait for the
    chief's go, and say they have it (that last word may find the chief gone: nothing is lost);
    the chief waits for both words from all of them.
    """
    if worker_count(strategy) == 1:
        return
    import tensorflow as tf
    from tensorflow.python.eager import context  # the coordination service: no public API

    service = context.context()
    resolver = strategy.cluster_resolver
    meeting = f"delft/wait/{next(_meetings)}"
    if not is_chief(strategy):
        me = f"{resolver.task_type}-{resolver.task_id}"
        service.set_config_key_value(f"{meeting}/arrived/{me}", "1")
        service.get_config_key_value(f"{meeting}/go")
        try:
            service.set_config_key_value(f"{meeting}/left/{me}", "1")
        except tf.errors.OpError:
            pass  # the chief heard it and has gone
        return
    spec = resolver.cluster_spec().as_dict()
    others = [f"{job}-{index}" for job in ("chief", "worker")
              for index in range(len(spec.get(job, [])))
              if (job, index) != (resolver.task_type, resolver.task_id)]
    for word in ("arrived", "left"):
        for other in others:
            service.get_config_key_value(f"{meeting}/{word}/{other}")
        if word == "arrived":
            service.set_config_key_value(f"{meeting}/go", "1")


def all_workers_agree(strategy, value):
    """Whether every worker holds the same ``value`` (a number below 2**53; a collective)."""
    if worker_count(strategy) == 1:
        return True
    return bool((_every_replica_value(strategy, value) == value).all())


def chief_value(strategy, value):
    """The ``value`` (a number below 2**53) the chief holds, on every worker (a collective)."""
    if worker_count(strategy) == 1:
        return value
    return _every_replica_value(strategy, value)[0]


def _every_replica_value(strategy, value):
    """``value`` (a number below 2**53) as every replica of every worker holds it, in replica
    order (a collective: every worker must call it at the same point)."""
    import tensorflow as tf

    values = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant([value], tf.float64))
    return strategy.gather(values, axis=0).numpy()
