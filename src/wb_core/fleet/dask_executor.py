"""The Dask distributed executor: each Dask worker is one host of the fleet.

The coordinator (this process) connects as a Dask client. A job is pinned to one worker
(`workers=[address]`, no other worker allowed), so the coordinator alone decides where a group
runs and retries it; points stream back through Dask's event log (`log_event` on the host,
`subscribe_topic` here) while the group runs, and the job's result carries them all again.

When the connection to the scheduler drops, Dask's client reconnects by itself (for
`connect_timeout` seconds) and cancels the futures it had; `interrupted` tells the coordinator
which futures were lost that way (their groups are queued again), and the event subscription is
renewed once the client is back.
"""

from __future__ import annotations

import asyncio
import queue
import time
import uuid

from wb_core.errors import ConfigError, WorkbenchError, setting
from wb_core.fleet.hosts import Host

PROBE_TIMEOUT_S = 30.0  # a worker that does not say who it is within this is left out of the study
HANDSHAKE_TIMEOUT_S = 5.0  # a scheduler sends its handshake at once: silence this long is another server
MAX_HANDSHAKE_BYTES = 1 << 16  # a scheduler's handshake is a few dozen bytes


class NotAScheduler(Exception):
    """The address answered, but not with a Dask scheduler's handshake (why: in words)."""


def check_scheduler(address: str, connect_timeout: float, timeout: float = HANDSHAKE_TIMEOUT_S) -> None:
    """Connect to `address` (within `connect_timeout` s) and read the handshake a Dask scheduler sends
    as soon as it accepts a connection, within `timeout` s more; raise NotAScheduler when what answers is something else
    (an HTTP server, the dashboard), OSError when nothing answers, ValueError for an address that is
    not HOST:PORT.

    Dask's client writes first and reads the reply as a frame length: an HTTP server's "HTTP/1.0 400"
    read that way asks for exabytes (a MemoryError) after a long wait. Only TCP addresses are checked
    here; a TLS one's handshake comes after the TLS layer's, which Dask's client checks itself.
    """
    import socket
    import struct

    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, loc = parse_address(address)
    if scheme != "tcp":
        return
    host, port = parse_host_port(loc)
    with socket.create_connection((host, port), timeout=connect_timeout) as conn:
        deadline = time.monotonic() + timeout

        def read(n: int) -> bytes:
            got = b""
            while len(got) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NotAScheduler(f"it sent {'nothing' if not got else 'too little'} within {timeout:g} s")
                conn.settimeout(left)
                try:
                    chunk = conn.recv(n - len(got))
                except TimeoutError:
                    continue
                if not chunk:
                    raise NotAScheduler("it closed the connection without a word")
                got += chunk
            return got

        (total,) = struct.unpack("Q", read(8))  # Dask's frames: their total length first (native order, as Dask)
        if not 16 <= total <= MAX_HANDSHAKE_BYTES:
            raise NotAScheduler("what it sent is not Dask's handshake")
        body = read(total)
        # The frames' count and lengths, then the handshake: a msgpack map naming the peer's Python and pickle protocol.
        (count,) = struct.unpack_from("Q", body)
        if not 1 <= count <= 64 or b"pickle-protocol" not in body[8 * (count + 1):]:
            raise NotAScheduler("what it sent is not Dask's handshake")


def _connect(client_class, address: str, timeout: float):
    """A Dask client connected to `address`. A client whose connection failed is closed at once: left
    to the garbage collector, it would wait 30 s at exit and print a traceback while closing."""

    class Closing(client_class):
        def start(self, **kwargs):
            try:
                return super().start(**kwargs)
            except BaseException:
                try:
                    self.close(timeout=2)
                except Exception:  # closing what never opened: the connection's own error is the one to tell
                    pass
                raise

    return Closing(address, timeout=timeout, set_as_default=False)


def _probe(dask_worker=None) -> dict:
    """Runs on each worker: the host's identity and hardware."""
    from wb_core.fleet.hosts import describe_this_host

    name = None
    if dask_worker is not None and dask_worker.name is not None and str(dask_worker.name) != dask_worker.address:
        name = str(dask_worker.name)
    info = describe_this_host(name)
    from wb_core.version import __version__

    info["version"] = __version__
    info["nthreads"] = getattr(getattr(dask_worker, "state", None), "nthreads", None)
    return info


def _run_job_on_worker(job: dict, topic: str, shipped=None) -> dict:
    """Runs on a worker: one group, each point logged to `topic` as it arrives."""
    from distributed import get_worker

    from wb_core.fleet.host_task import run_job

    worker = get_worker()

    def emit(msg: dict):
        try:
            worker.log_event(topic, {**msg, "sent_at": time.time()})  # the coordinator logs the delay
        except TypeError:
            pass  # not serialisable as an event: the job's result still carries it

    return run_job(job, emit, shipped)


class DaskExecutor:
    """Runs worker groups on the workers of a Dask cluster at `address` (e.g. tcp://10.0.0.5:8786).

    `hosts`: worker names (or WB_HOST_LABEL labels) to use; None = every worker.
    `ship_model`: send the model's files to the hosts instead of relying on a shared path.
    """

    def __init__(self, address: str, hosts: list[str] | str | None = None, ship_model: bool = False,
                 connect_timeout: float = 15):
        try:
            from distributed import Client
        except ImportError:
            raise WorkbenchError("Running on a cluster needs Dask distributed: "
                                 "pip install 'cpu-inference-workbench[fleet]'.") from None
        from wb_core.parsing import parse_hosts

        hosts = parse_hosts(hosts)  # an empty list is refused, not read as every host
        self.address = address
        self.wanted = list(hosts) if hosts else None
        self.ship_model = ship_model
        try:
            check_scheduler(address, connect_timeout, min(connect_timeout, HANDSHAKE_TIMEOUT_S))
            self.client = _connect(Client, address, connect_timeout)
        except NotAScheduler as why:
            raise ConfigError(f"The address {address} answers, but not as a Dask scheduler ({why}); give the "
                              f"scheduler's own address ({setting('cluster', 'Cluster')}: tcp://HOST:8786 as `dask "
                              f"scheduler` prints it), not that of its dashboard or another server.") from None
        except (OSError, TimeoutError):
            raise WorkbenchError(f"Cannot reach the Dask scheduler at {address} within {connect_timeout:g} s: start "
                                 f"`dask scheduler` there, or check the address (tcp://HOST:PORT).") from None
        except ValueError as e:  # an address Dask cannot parse
            raise ConfigError(f"'{address}' is not a Dask scheduler address (tcp://HOST:PORT): {e}.") from None
        except Exception as e:  # a transport's own failure (a TLS address without TLS settings, a websocket refused)
            from wb_core.model_inputs import first_line

            raise ConfigError(f"Cannot connect to a Dask scheduler at {address}: {first_line(e)}; give the "
                              f"scheduler's own address ({setting('cluster', 'Cluster')}: tcp://HOST:8786 as `dask "
                              f"scheduler` prints it), with Dask's TLS settings for a tls:// one.") from None
        self.connect_timeout = connect_timeout
        self._down_since: float | None = None  # when asking the scheduler first failed (None: it answers)
        self._live: set[str] | None = None  # the workers it named last
        self.run_id = uuid.uuid4().hex[:8]
        self.topic = f"wb-points-{self.run_id}"
        self._points: queue.Queue = queue.Queue()
        self._shipped: dict[str, object] = {}
        self.notes: list[str] = []  # what `hosts()` found worth telling (hosts that did not answer)
        self._cancelled: set[str] = set()  # keys of the futures this coordinator cancelled itself
        self._subscribe()

    # ---- the executor protocol used by wb_core.fleet.sweep ----
    def hosts(self) -> list[Host]:
        """Probe every worker (hardware.detect() runs on the host) and keep the wanted ones."""
        from wb_core.version import __version__

        try:
            answers, silent = self._probe_all()
        except Exception as e:  # e.g. a host without the workbench installed
            raise WorkbenchError(f"Could not ask the hosts of {self.address} who they are ({type(e).__name__}: {e}); "
                                 f"is the same workbench version installed on every host?") from None
        found = []
        for address, info in sorted(answers.items()):
            found.append(Host(id=address, name=info["name"], fingerprint=info["fingerprint"],
                              detected_fingerprint=info["detected_fingerprint"], hardware=info["hardware"],
                              machine=info.get("machine", ""), nthreads=info.get("nthreads")))
        names = [h.name for h in found]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"Several workers of the cluster at {self.address} call themselves {', '.join(dupes)}; "
                              f"start each with its own name (`dask worker --name`, or WB_HOST_LABEL).")
        self.notes = [f"Host(s) {', '.join(silent)} of the cluster at {self.address} did not answer within "
                      f"{PROBE_TIMEOUT_S:g} s and were left out of this study."] if silent else []
        if self.wanted:
            silent_names = {s.split(" (")[0] for s in silent}
            unknown = [n for n in self.wanted if n not in names and n not in silent_names]
            if unknown:
                raise ConfigError(f"No host named {', '.join(unknown)} in the cluster at {self.address}; "
                                  f"its hosts are {', '.join(names) or 'none'}.")
            found = [h for h in found if h.name in self.wanted]
        # Only the hosts this study uses must run this version; nothing is measured before this check.
        odd = sorted(f"{h.name} ({answers[h.id].get('version')})" for h in found
                     if answers[h.id].get("version") != __version__)
        if odd:
            raise WorkbenchError(f"Hosts of the cluster at {self.address} run another version of the workbench than "
                                 f"this one ({__version__}): {', '.join(odd)}; install the same version everywhere, "
                                 f"or leave them out with {setting('hosts', 'Hosts')}.")
        return sorted(found, key=lambda h: h.name)

    def _probe_all(self) -> tuple[dict, list[str]]:
        """Ask every worker who it is, each within PROBE_TIMEOUT_S: {address: answer}, and the
        workers that did not answer (a hung host must not stop the study from starting)."""
        names = {a: w.get("name", a) for a, w in self.client.scheduler_info()["workers"].items()}

        async def one(address):
            try:
                got = await asyncio.wait_for(self.client._run(_probe, workers=[address]), PROBE_TIMEOUT_S)
            except TimeoutError:
                return address, None
            return address, got.get(address)

        async def every():
            return await asyncio.gather(*(one(a) for a in names))

        answers, silent = {}, []
        for address, info in self.client.sync(every):
            if info is None:
                silent.append(f"{names[address]} ({address})")
            else:
                answers[address] = info
        return answers, sorted(silent)

    def _subscribe(self) -> None:
        self._comm = self.client.scheduler_comm
        self.client.subscribe_topic(self.topic, lambda event: self._points.put(event[1]))

    def live_hosts(self) -> set[str]:
        """Ids (addresses) of the workers the scheduler knows now."""
        try:
            workers = set(self.client.ncores())  # addresses only: cheap with a thousand workers
        except Exception as e:
            # A connection that broke a moment ago: the client reconnects on its own for
            # `connect_timeout` seconds; until then the hosts are taken as they were.
            now = time.monotonic()
            self._down_since = self._down_since or now
            if now - self._down_since < self.connect_timeout + 5 and self._live is not None:
                return set(self._live)
            raise WorkbenchError(f"Lost the Dask scheduler at {self.address} ({type(e).__name__}: {e}); every "
                                 f"point received so far is stored, and rerunning resumes.") from None
        self._down_since, self._live = None, workers
        if self.client.scheduler_comm is not self._comm and self.client.status == "running":
            self._subscribe()  # a new connection: the scheduler forgot the old one's subscription
        return workers

    def interrupted(self, future) -> bool:
        """True for a future Dask cancelled because its connection to the scheduler dropped."""
        return future.status == "cancelled" and future.key not in self._cancelled

    def submit(self, host: Host, job: dict):
        shipped = self._ship(job["path"]) if self.ship_model else None
        return self.client.submit(_run_job_on_worker, job, self.topic, shipped, workers=[host.id],
                                  allow_other_workers=False, pure=False, key=f"wb-group-{job['id']}")

    def points(self) -> queue.Queue:
        """Point messages streamed by the hosts."""
        return self._points

    def cancel(self, future) -> None:
        self._cancelled.add(future.key)
        try:
            future.cancel(force=True)
        except Exception:  # the scheduler may already have forgotten it
            pass

    def close(self) -> None:
        try:
            self.client.unsubscribe_topic(self.topic)
        except Exception:
            pass
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _ship(self, path: str):
        if path not in self._shipped:
            from wb_core.fleet.shipping import pack

            self._shipped[path] = self.client.scatter(pack(path), broadcast=True, hash=False)
        return self._shipped[path]
