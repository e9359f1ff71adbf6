"""Measuring on a Dask pool: the test starts a scheduler and two workers (`python -m
tensorforge.autotune.pool`, what `tensorforge pool` runs) on 127.0.0.1, then checks that tuning
through DaskRunner measures what LocalRunner measures and ranks clearly separated configs the
same way, that killing a worker mid-run loses no record, that a segfault becomes a record and
the pool goes on, and that a missing scheduler or worker is a clear error, not a hang."""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")         # a dependency of distributed

import autotune_fault_templates  # noqa: E402,F401  (registers vector_add_faults.test)

from tensorforge import te  # noqa: E402
from tensorforge.autotune import tune  # noqa: E402
from tensorforge.autotune.measure import ErrorKind, LocalBuilder, LocalRunner, MeasureInput  # noqa: E402
from tensorforge.autotune.pool import DaskRunner, _default_worker_host, add_pool_commands  # noqa: E402
from tensorforge.autotune.records import load_records  # noqa: E402
from tensorforge.autotune.task import Task  # noqa: E402
from tensorforge.ops.schedules import workload_template  # noqa: E402

HERE = Path(__file__).resolve().parent
GEMM = Task.for_op("matmul", [((32, 48), "float32"), ((48, 64), "float32")])
FAULTS = Task.create("vector_add_faults.test", [((64,), "float32"), ((64,), "float32")])
MEASURE = {"number": 2, "repeat": 2, "num_threads": 1}


@workload_template("pool_work.test", reference=lambda a, b: a * b)
def pool_work(cfg, target, inputs):
    """c = a * b, computed as max over r < work of (a * b - r): the knob only changes the amount
    of work, by 64x from one value to the next, so timing noise cannot reorder the configs."""
    a, b = inputs
    n = int(a.shape[0].value)
    cfg.define_knob("work", [16, 1024, 65536], default=1024)
    r = te.reduce_axis((0, cfg["work"].val), name="r")
    c = te.compute((n,), lambda i: te.max(a[i] * b[i] - te.cast(r, "float32"), axis=r), name="c")
    return te.create_schedule(c.op), [c]


WORK = Task.create("pool_work.test", [((256,), "float32"), ((256,), "float32")])


# The pool: a scheduler and two workers, started and ended by the test ----------------------------

def _start(args, log: Path, env) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "tensorforge.autotune.pool", *args], stdout=out,
                                stderr=subprocess.STDOUT, env=env)


def _stop(proc: subprocess.Popen) -> None:
    """End `proc` (SIGTERM: a clean close) and any measuring process it left behind."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


class Pool:
    def __init__(self, directory: Path):
        self.directory = directory
        self.procs: dict[str, subprocess.Popen] = {}
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        self.env = {**os.environ, "PYTHONPATH": path}     # the workers import the test templates
        self.file = directory / "scheduler.json"
        self.address = ""

    def start(self, workers=("w0", "w1"), scheduler_args=()) -> None:
        self.procs["scheduler"] = _start(["scheduler", "--port", "0", "--scheduler-file", str(self.file),
                                          *scheduler_args], self.directory / "scheduler.log", self.env)
        for name in workers:
            self.procs[name] = _start(["worker", "--device", "cpu", "--scheduler-file", str(self.file),
                                       "--name", name], self.directory / f"{name}.log", self.env)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.file.exists() and not self.address:
                try:
                    self.address = json.loads(self.file.read_text())["address"]
                except (ValueError, KeyError):
                    pass
            if self.address and len(self.workers()) == len(workers):
                return
            if any(p.poll() is not None for p in self.procs.values()):
                break
            time.sleep(0.2)
        raise RuntimeError("the test pool did not start:\n" + self.logs())

    def client(self):
        return distributed.Client(self.address, timeout=10, set_as_default=False)

    def workers(self) -> dict[str, dict]:
        """{name: scheduler's info} of the registered workers."""
        with self.client() as client:
            return {w["name"]: w for w in client.scheduler_info(n_workers=-1)["workers"].values()}

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.directory.glob("*.log")))

    def close(self) -> None:
        for name in sorted(self.procs, key=lambda n: n == "scheduler"):     # workers first
            _stop(self.procs[name])


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    p = Pool(tmp_path_factory.mktemp("pool"))
    try:
        p.start()
        yield p
    finally:
        p.close()


# The checks --------------------------------------------------------------------------------------

def _tune(task, trials, tuner, runner, builder, path):
    result = tune(task, trials=trials, records=str(path), tuner=tuner, seed=3, builder=builder, runner=runner,
                  batch_size=8, log=False)[task]
    return result, load_records(path)


def test_the_pool_measures_what_the_local_runner_measures(pool, tmp_path):
    with LocalBuilder(n_parallel=2) as builder, LocalRunner(**MEASURE, min_repeat_ms=10) as local, \
            DaskRunner(pool.address, **MEASURE, min_repeat_ms=10) as remote:
        assert len(remote.workers()) == 2
        outcomes = {}
        for name, runner in (("local", local), ("pool", remote)):
            outcomes[name, "gemm"] = _tune(GEMM, 4, "random", runner, builder, tmp_path / f"gemm_{name}.jsonl")
            outcomes[name, "work"] = _tune(WORK, 3, "grid", runner, builder, tmp_path / f"work_{name}.jsonl")
    for task in ("gemm", "work"):
        (_, local_records), (pool_result, pool_records) = outcomes["local", task], outcomes["pool", task]
        assert len(pool_records) == len({r.key for r in pool_records}) == pool_result.trials
        assert {r.key for r in pool_records} == {r.key for r in local_records}     # same seed, same configs
        for r in pool_records:
            assert r.ok and len(r.costs) == 2 and all(c > 0 for c in r.costs), (r.config, r.error, r.message)
        assert pool_result.cost == min(r.cost for r in pool_records)
    # the work knob separates the configs by 64x: both runners rank them the same way
    ranking = {name: [r.config["work"] for r in sorted(outcomes[name, "work"][1], key=lambda r: min(r.costs))]
               for name in ("local", "pool")}
    assert ranking["local"] == ranking["pool"] == [16, 1024, 65536]
    assert outcomes["pool", "work"][0].config["work"].val == 16


def _executing(dask_worker) -> list[str]:
    """(Run on each worker by Client.run) the keys of the tasks it is executing now."""
    return [str(ts.key) for ts in dask_worker.state.executing]


def _kill_worker_running(pool: Pool, key_part: str, stop: threading.Event) -> tuple[str, str]:
    """SIGKILL the worker process that is executing the task whose key contains `key_part`
    (a worker dying mid-run); returns its name and address."""
    with pool.client() as client:
        while not stop.is_set():
            for address, keys in client.run(_executing).items():
                if any(key_part in k for k in keys):
                    name = client.scheduler_info(n_workers=-1)["workers"][address]["name"]
                    proc = pool.procs[name]
                    children = psutil.Process(proc.pid).children(recursive=True)
                    proc.kill()
                    proc.wait(10)
                    for child in children:          # its measuring process, maybe spinning in the hang
                        child.kill()
                    return name, address
            time.sleep(0.05)
    return "", ""


def _run_killing(pool: Pool, work, key_part: str):
    """work() in a thread while the worker that executes the task `key_part` is killed;
    returns work's value and the killed worker's (name, address)."""
    outcome, stop = {}, threading.Event()

    def run():
        try:
            outcome["value"] = work()
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            outcome["error"] = err
        finally:
            stop.set()

    thread = threading.Thread(target=run)
    thread.start()
    killed = _kill_worker_running(pool, key_part, stop)
    thread.join(120)
    assert not thread.is_alive() and "error" not in outcome, (outcome.get("error"), pool.logs())
    assert killed[0], "the hanging candidate never reached a worker"
    return outcome["value"], killed


def _config(**values):
    return next(c for c in FAULTS.config_space if c.to_json() == values)


def test_a_dead_worker_loses_no_record_and_a_segfault_is_a_record(pool, tmp_path):
    path = tmp_path / "faults.jsonl"
    hang = _config(fault="hang", tile=[64, 1])
    with LocalBuilder(n_parallel=2, timeout=10.0) as builder, \
            DaskRunner(pool.address, **MEASURE, timeout=2.0) as runner:
        # grid order: configs 0-4 are tile 64 x 1 with fault none, segfault, hang, wrong, build_error;
        # the worker running the hang dies and the scheduler runs it again on the other worker
        result, (killed, _) = _run_killing(pool, lambda: tune(FAULTS, trials=5, records=str(path), tuner="grid",
                                                              builder=builder, runner=runner, batch_size=8,
                                                              log=False)[FAULTS], f"-c{hang.index}-")
        records = load_records(path)
        assert len(records) == 5 == result.trials == len({r.key for r in records})
        kinds = {r.config["fault"]: r.error for r in records}
        assert kinds == {"none": None, "segfault": ErrorKind.CRASH, "hang": ErrorKind.TIMEOUT,
                         "wrong": ErrorKind.WRONG, "build_error": ErrorKind.BUILD}
        assert "signal" in next(r for r in records if r.config["fault"] == "segfault").message
        # one worker is left; it survives a segfaulting candidate and measures the next one
        assert sorted(pool.workers()) == sorted({"w0", "w1"} - {killed})
        picks = [_config(fault="segfault", tile=[32, 2]), _config(fault="none", tile=[32, 2])]
        results = runner.run(builder.build([MeasureInput(FAULTS, c) for c in picks]))
        assert [r.error for r in results] == [ErrorKind.CRASH, None] and results[1].ok
        assert len(pool.workers()) == 1


@pytest.mark.slow
def test_a_candidate_whose_workers_die_is_resubmitted_then_recorded_as_a_crash(tmp_path):
    """With allowed-failures 0 the scheduler gives up on a task when its first worker dies
    (KilledWorker): the runner submits it again `retries` times, then records a crash."""
    pool = Pool(tmp_path)
    try:
        pool.start(("w0", "w1", "w2"), ["--allowed-failures", "0"])
        hang = _config(fault="hang", tile=[64, 1])
        with LocalBuilder(n_parallel=1) as builder:
            builds = builder.build([MeasureInput(FAULTS, hang)])
            with DaskRunner(pool.address, **MEASURE, timeout=2.0, retries=1) as runner:
                (again,), _ = _run_killing(pool, lambda: runner.run(builds), f"-c{hang.index}-0-")
            assert again.error == ErrorKind.TIMEOUT     # measured by the second submission
            with DaskRunner(pool.address, **MEASURE, timeout=2.0, retries=0) as runner:
                (lost,), (_, address) = _run_killing(pool, lambda: runner.run(builds), f"-c{hang.index}-0-")
            assert lost.error == ErrorKind.CRASH and address in lost.message, lost.message
            assert len(pool.workers()) == 1
    finally:
        pool.close()


def test_a_missing_scheduler_or_worker_is_a_clear_error(pool):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]            # free, and nothing listens on it
    with pytest.raises(ConnectionError, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
        DaskRunner(f"tcp://127.0.0.1:{port}", connect_timeout=1.0)
    with LocalBuilder(n_parallel=1) as builder, DaskRunner(pool.address, device="tpu", worker_wait=1.0) as runner:
        assert runner.workers() == []
        builds = builder.build([MeasureInput(GEMM, GEMM.config_space.default_config())])
        with pytest.raises(RuntimeError, match="no Dask worker offers the resource 'tpu'.*--device tpu"):
            runner.run(builds)


def test_pool_command_line():
    parser = argparse.ArgumentParser()
    add_pool_commands(parser.add_subparsers(dest="command"))
    opts = parser.parse_args(["pool", "worker", "--scheduler", "tcp://127.0.0.1:8786"])
    assert (opts.device, opts.nthreads, opts.host, opts.pool_command) == ("cpu", 1, None, "worker")
    opts = parser.parse_args(["pool", "scheduler", "--port", "0"])
    assert (opts.host, opts.port) == ("127.0.0.1", 0)
    with pytest.raises(SystemExit):
        parser.parse_args(["pool", "worker"])            # which scheduler?
    assert _default_worker_host("tcp://127.0.0.1:8786") == "127.0.0.1"
    with pytest.raises(SystemExit, match="give --host"):
        _default_worker_host("tcp://10.1.2.3:8786")
    with pytest.raises(ValueError, match="LocalRunner needs"):
        DaskRunner("tcp://127.0.0.1:8786", repeat=0)       # checked before connecting
