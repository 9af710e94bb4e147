"""A Spark standalone cluster for tests: one master and two workers, each its own process.

Use it through the module-scoped fixture ``spark_standalone`` (``tests/export/conftest.py``
provides it to every module under ``tests/export``; one cluster per test module, since starting
one costs seconds of CPU)::

    def test_x(spark_standalone: SparkStandalone, tmp_path: Path) -> None:
        command = [sys.executable, "-m", "pykraft.cli", "spark", ...,
                   "--master", spark_standalone.master_url, *spark_standalone.conf_args()]
        subprocess.run(command, env={**spark_standalone.driver_env(), "PYTHONPATH": ROOT}, ...)

What it models is a cluster of separate machines, as far as one machine allows:

* each worker has its own working directory (``worker_dirs``), so its executors resolve
  relative paths somewhere else than the driver does (the disk itself is shared: to hide the
  executors' files from a driver, run the driver in a mount namespace of its own, as
  ``test_spark_standalone.py`` does);
* each worker's ``python3`` (the name PySpark runs when ``PYSPARK_PYTHON`` is unset) is a venv
  that reaches the third-party packages (pyspark, pyarrow) but NOT pykraft: a job works only
  if it ships its code (``check_pykraft_hidden`` proves it at start-up);
* every process listens on 127.0.0.1 on free ports, workers have 1 core and 512 MiB each
  (twice that with ``apps=2``, for a second app's executors next to the first's),
  and the cluster is always stopped (SIGTERM, then SIGKILL), also when a test fails.

``driver_env()`` is the environment for a driver process: the same ``python3`` first on
``PATH`` (the driver-side Python data source planner runs there too), ``PYSPARK_PYTHON``
removed, Spark bound to 127.0.0.1. ``conf_args()`` are the ``--conf`` pairs every app needs
here (executors small enough for the workers).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from pykraft.free_ports import pick_free_ports

WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "512m"
# Room on each worker for one executor of each of two apps at once (``apps=2``).
WORKER_MEMORY_TWO_APPS = "1g"
EXECUTOR_MEMORY = "450m"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
_POLL_S = 0.2


@attrs.frozen
class SparkStandalone:
    master_url: str
    master_ui_url: str
    worker_dirs: tuple[Path, ...]
    worker_python: Path  # a python3 without pykraft
    base_dir: Path

    def driver_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env["PATH"] = f"{self.worker_python.parent}{os.pathsep}{env.get('PATH', '')}"
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env.pop("SPARK_HOME", None)
        return env

    def conf(self) -> dict[str, str]:
        return {
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1",
            "spark.cores.max": str(WORKERS),  # an executor on each worker
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
        }

    def conf_args(self) -> list[str]:
        return [arg for key, value in self.conf().items() for arg in ("--conf", f"{key}={value}")]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def make_worker_python(venv_dir: Path) -> Path:
    """A venv whose site-packages reaches this interpreter's third-party packages through a
    ``.pth`` path line; a path line does not run the ``.pth`` files there, so pykraft's
    editable-install hook is not installed and ``import pykraft`` fails."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv_dir)],
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    site = Path(
        sysconfig.get_paths(vars={"base": str(venv_dir), "platbase": str(venv_dir)})["purelib"]
    )
    (site / "third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = venv_dir / "bin" / "python3"
    check_pykraft_hidden(python)
    return python


def check_pykraft_hidden(python: Path) -> None:
    code = (
        "import importlib.util, sys\n"
        "import pyspark, pyarrow\n"
        "sys.exit(0 if importlib.util.find_spec('pykraft') is None "
        "and importlib.util.find_spec('export') is None else 3)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(python), "-c", code], cwd="/", env=env, check=False)
    assert done.returncode == 0, f"{python} can import pykraft or lacks pyspark/pyarrow"


def _spark_class(
    main: str, args: list[str], env: dict[str, str], log: Path, cwd: Path
) -> subprocess.Popen[bytes]:
    command = [str(spark_home() / "bin" / "spark-class"), main, *args]
    with log.open("wb") as out:
        return subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _alive_workers(ui_url: str) -> int:
    """Workers the master's UI lists as ALIVE; -1 while the UI is not answering yet (no port,
    or a page that is not JSON while the master starts)."""
    try:
        with urllib.request.urlopen(f"{ui_url}/json/", timeout=2) as response:
            import json

            state = json.loads(response.read())
    except (OSError, ValueError):
        return -1
    return sum(1 for worker in state.get("workers", ()) if worker.get("state") == "ALIVE")


def stop_processes(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in reversed(processes):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for process in reversed(processes):
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def start_cluster(
    base_dir: Path, processes: list[subprocess.Popen[bytes]], *, apps: int = 1
) -> SparkStandalone:
    """Start master and workers, appending each process to ``processes`` as it starts (so the
    caller stops whatever started, even if start-up fails half-way). ``apps=2``: each worker
    has a core and the memory for an executor of a second app running meanwhile (a driver
    process next to this process's session, whose executors keep the first cores)."""
    assert apps in (1, 2), apps
    cores = WORKER_CORES * apps
    memory = WORKER_MEMORY if apps == 1 else WORKER_MEMORY_TWO_APPS
    worker_python = make_worker_python(base_dir / "worker-venv")
    master_port, master_ui, *worker_ports = pick_free_ports(2 + 2 * WORKERS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env.pop("PYTHONPATH", None)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_HOME=str(spark_home()),
        SPARK_LOG_DIR=str(base_dir / "logs"),
        SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=false",
        PATH=f"{worker_python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    master_url = f"spark://127.0.0.1:{master_port}"
    ui_url = f"http://127.0.0.1:{master_ui}"
    master_args = ["--host", "127.0.0.1", "--port", str(master_port)]
    master_log = base_dir / "master.log"
    processes.append(
        _spark_class(
            "org.apache.spark.deploy.master.Master",
            [*master_args, "--webui-port", str(master_ui)],
            env,
            master_log,
            base_dir,
        )
    )
    worker_dirs = []
    for n in range(WORKERS):
        work_dir = base_dir / f"worker-{n}"
        work_dir.mkdir(parents=True)
        worker_dirs.append(work_dir)
        port, ui_port = worker_ports[2 * n], worker_ports[2 * n + 1]
        args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)]
        args += ["--cores", str(cores), "--memory", memory]
        args += ["--work-dir", str(work_dir), master_url]
        log = base_dir / f"worker-{n}.log"
        processes.append(
            _spark_class("org.apache.spark.deploy.worker.Worker", args, env, log, work_dir)
        )
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while _alive_workers(ui_url) < WORKERS:
        dead = [p for p in processes if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise RuntimeError(f"Spark standalone cluster did not start:\n{_tail(master_log)}")
        time.sleep(_POLL_S)
    return SparkStandalone(master_url, ui_url, tuple(worker_dirs), worker_python, base_dir)


def stop_active_session() -> None:
    """Stop this process's SparkContext, if one runs: a process holds one at a time (the
    ``spark`` fixture builds its ``local[2]`` session again when next asked)."""
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()


def wait_for_executors(session: Any, count: int) -> None:
    """Until ``count`` executors have registered with the driver (they start after the
    context does): every job after this one can run on all of them."""
    context = session.sparkContext._jsc.sc()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while context.getExecutorMemoryStatus().size() < count + 1:  # the driver counts too
        assert time.monotonic() < deadline, f"fewer than {count} executors registered"
        time.sleep(_POLL_S)


def start_driver_session(cluster: SparkStandalone, app_name: str) -> Any:
    """A SparkSession in this process (the driver, which has pykraft) whose tasks run on the
    cluster's executors, which do not: ``build_session`` ships pykraft, as for any non-local
    master. Any other context of this process is stopped first (one at a time per process; the
    cluster's cores go to one app at a time too). Its Python (``PYSPARK_PYTHON``, read once as
    the context starts) is the workers' pykraft-less venv by absolute path: the executors'
    Pythons and the driver-side planner of the Python data sources both run it. Returns once
    every worker's executor has registered; the caller stops the session."""
    from pykraft.export.session import build_session

    stop_active_session()
    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")}
    os.environ["PYSPARK_PYTHON"] = str(cluster.worker_python)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # for a JVM this context starts
    try:
        session = build_session(cluster.master_url, app_name, extra_conf=cluster.conf())
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        wait_for_executors(session, WORKERS)
    except BaseException:
        session.stop()
        raise
    return session


def standalone_cluster(
    tmp_path_factory: pytest.TempPathFactory, *, apps: int = 1
) -> Iterator[SparkStandalone]:
    """The body of a module-scoped fixture: the cluster, always stopped."""
    processes: list[subprocess.Popen[bytes]] = []
    try:
        yield start_cluster(tmp_path_factory.mktemp("spark-standalone"), processes, apps=apps)
    finally:
        stop_processes(processes)


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    """A master and two workers for the whole test module; always stopped."""
    yield from standalone_cluster(tmp_path_factory)
