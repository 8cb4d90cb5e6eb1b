"""Start several worker processes on 127.0.0.1 and always end them (tests and benchmarks).

Each worker is a plain subprocess with its own ``TF_CONFIG`` (or SLURM variables) naming free
loopback ports; :func:`run_workers` waits for all of them up to a deadline and kills whatever
still runs when it returns, whatever happened.
"""
import json
import os
import signal
import socket
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass


def free_ports(count, consecutive=False):
    """``count`` TCP ports free on 127.0.0.1 now (``consecutive``: port, port + 1, ...)."""
    for _ in range(100):
        with ExitStack() as stack:
            first = stack.enter_context(socket.socket())
            first.bind(("127.0.0.1", 0))
            ports = [first.getsockname()[1]]
            try:
                for k in range(1, count):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", ports[0] + k if consecutive else 0))
                    ports.append(sock.getsockname()[1])
            except OSError:
                continue
            return ports
    raise RuntimeError("no free loopback ports")


def tf_config(ports, index):
    """The TF_CONFIG of worker ``index`` of a cluster of workers on ``ports`` of 127.0.0.1."""
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def slurm_environment(port_base, procid, tasks):
    """The variables ``srun`` gives task ``procid`` of a job step of ``tasks`` tasks on this host."""
    return {"SLURM_STEP_NUM_TASKS": str(tasks), "SLURM_NTASKS": str(tasks),
            "SLURM_PROCID": str(procid), "SLURM_STEP_NODELIST": "127.0.0.1",
            "SLURM_STEP_TASKS_PER_NODE": str(tasks), "DELFT_SLURM_PORT": str(port_base)}


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_workers(commands, environments, cwd, timeout):
    """Run ``commands[i]`` with ``environments[i]`` at once; all end within ``timeout`` seconds.

    Returns:
        One :class:`Finished` per command (returncode -9 for a process killed at the deadline).
    """
    processes, results = [], []
    start = time.monotonic()
    try:
        for command, env in zip(commands, environments):
            processes.append(subprocess.Popen(
                command, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, start_new_session=True))
        for process in processes:
            remaining = max(1.0, timeout - (time.monotonic() - start))
            try:
                out, err = process.communicate(timeout=remaining)
            except subprocess.TimeoutExpired:
                _kill(process)
                out, err = process.communicate()
            results.append(Finished(process.returncode, out, err, time.monotonic() - start))
    finally:
        for process in processes:
            if process.poll() is None:
                _kill(process)
                process.communicate()
    return results


def _kill(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
