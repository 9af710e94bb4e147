"""Each node of a chaos cluster in its own network namespace, and the faults between them.

Layout: one Linux bridge in the test's (root) namespace holding ``S.254/24``, and per node a
namespace ``pkc<pid>-<node>`` whose ``eth0`` (one end of a veth pair, the other end on the
bridge) holds ``S.<n>/24``; the test process reaches every node through the bridge. Every node
namespace has an nftables table ``inet chaos`` whose ``input`` chain drops packets from the
sources a fault names (``tests/chaos/net_faults.py``), and ``tc tbf`` limits bandwidth on a
node's ``eth0``. Namespaces are made by the test and always deleted (``Network.destroy``, and at
creation those a killed earlier run left behind: their pid is gone).

The addresses come from 198.18.0.0/15, which RFC 2544 sets aside for benchmarking network
devices and RFC 6890 marks as not forwardable and not globally reachable: no real host uses it,
so a node's address can never be confused with, or routed to, a machine outside. The bridge has
no uplink, so nothing leaves this machine either way. The /24 is one no interface or route here
uses yet (another run on the same machine may hold one).

Needs root, ``ip`` (iproute2), ``tc`` and ``nft`` (``.ci/install-nftables.sh``):
``unavailable_reason()`` says what is missing, and the tests then skip saying so — no other
network-fault mechanism (such as a fault-injecting TCP proxy) runs in its place.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tests.chaos.harness import BROKER_IDS, ChaosCluster
from tests.chaos.net_faults import Drops, dropped_sources

RANGE = (198, 18)  # 198.18.0.0/15: 512 /24s
TEST_HOST = 254  # the root namespace's address on the bridge
CONTROLLER_IDS = (1, 2, 3)
NODE_NAMES = (*(f"c{i}" for i in CONTROLLER_IDS), *(f"b{i}" for i in BROKER_IDS))
PREFIX = "pkc"
BEARER_TOKEN = "chaos-netns-token"
NETWORKS = itertools.count()
CHAOS_TABLE = (
    "add table inet chaos\nadd chain inet chaos input { type filter hook input priority 0; }\n"
)
RELAY = Path(__file__).with_name("relay.py")
RELAY_PORT = 2999  # inside each namespace; the cluster's free ports are ephemeral ones
# Each new TCP connection a node opens to another node goes through its relay (relay.py); the
# relay's own connections (SO_MARK 1) pass.
RELAY_NAT = """add table ip chaos_nat
add chain ip chaos_nat output {{ type nat hook output priority -100; }}
add rule ip chaos_nat output meta mark {mark} return
add rule ip chaos_nat output ip daddr {subnet}.0/24 ip daddr != {own} meta l4proto tcp \
redirect to :{port}
"""


def run(*command: str, input_text: str | None = None) -> str:
    done = subprocess.run(command, input=input_text, capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def unavailable_reason() -> str | None:
    """Why network namespaces with nftables cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "not root (ip netns needs CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    for tool in ("ip", "tc", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` not found (nft: .ci/install-nftables.sh)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        run("ip", "netns", "add", probe)
        run("ip", "netns", "exec", probe, "nft", "-f", "-", input_text=CHAOS_TABLE)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        return f"cannot make a namespace with an nftables table: {error}"
    finally:
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            run("ip", "netns", "delete", probe)
    return None


def free_subnet(used_text: str, start: int) -> str:
    """The first ``198.18-19.X`` /24 from index ``start`` that ``used_text`` (``ip addr`` and
    ``ip route`` output) does not mention."""
    for step in range(512):
        index = (start + step) % 512
        subnet = f"{RANGE[0]}.{RANGE[1] + index // 256}.{index % 256}"
        if f"{subnet}." not in used_text:
            return subnet
    raise RuntimeError("every /24 of 198.18.0.0/15 is in use")


class Network:
    """The bridge and one namespace per node; ``create`` then always ``destroy``."""

    def __init__(self, names: Iterable[str] = NODE_NAMES) -> None:
        # pkc<pid><letter>: a second Network of the same process gets the next letter.
        self.tag = f"{PREFIX}{os.getpid()}{chr(ord('a') + next(NETWORKS) % 26)}"
        self.names = list(names)
        self.bridge = f"{self.tag}br"
        self.subnet = ""
        self.addresses: dict[str, str] = {}
        self.limited: set[str] = set()
        self.dropping: dict[str, list[str]] = {}  # node -> source addresses it drops
        self.dropped: Counter[str] = Counter()  # node -> packets its drop rules dropped, so far
        self.relays: dict[str, subprocess.Popen[str]] = {}
        self.delay_ms = 0

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    @property
    def test_address(self) -> str:
        return f"{self.subnet}.{TEST_HOST}"

    def create(self) -> None:
        remove_stale()
        used = run("ip", "-4", "-o", "addr") + run("ip", "-4", "route")
        self.subnet = free_subnet(used, os.getpid() % 512)
        self.addresses = {n: f"{self.subnet}.{i + 1}" for i, n in enumerate(self.names)}
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.test_address}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for index, name in enumerate(self.names):
            ns, host_end = self.namespace(name), f"{self.tag}h{index}"
            run("ip", "netns", "add", ns)
            # The node's end is made inside its namespace: nothing is left in ours to leak.
            run("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "link", "set", host_end, "master", self.bridge, "up")
            run("ip", "-n", ns, "addr", "add", f"{self.addresses[name]}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
            run("ip", "netns", "exec", ns, "nft", "-f", "-", input_text=CHAOS_TABLE)

    def start_relays(self) -> None:
        """A latency relay in every node namespace (``tests/chaos/relay.py``), with no delay
        until ``set_delay``; before the nodes' processes start, so it carries all their links."""
        for name in self.names:
            relay = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace(name), sys.executable, str(RELAY),
                 str(RELAY_PORT)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            self.relays[name] = relay
            assert relay.stdout is not None
            if relay.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the relay of {name} did not start")
            script = RELAY_NAT.format(
                mark=1, subnet=self.subnet, own=self.addresses[name], port=RELAY_PORT
            )
            run("ip", "netns", "exec", self.namespace(name), "nft", "-f", "-", input_text=script)

    def _ask_relay(self, name: str, command: str) -> str:
        relay = self.relays[name]
        assert relay.stdin is not None and relay.stdout is not None
        relay.stdin.write(command + "\n")
        relay.stdin.flush()
        return relay.stdout.readline().strip()

    def set_delay(self, delay_ms: int) -> None:
        """Every relay holds each chunk ``delay_ms`` (0: none) from now on."""
        for name in self.relays:
            answer = self._ask_relay(name, f"delay {delay_ms}")
            if answer != "ok":
                raise RuntimeError(f"the relay of {name} answered {answer!r}")
        self.delay_ms = delay_ms

    def relay_stats(self) -> dict[str, Counter[str]]:
        """Per node: connections relayed, bytes out and back, bytes delayed, connect failures."""
        return {n: Counter(json.loads(self._ask_relay(n, "stats"))) for n in self.relays}

    def stop_relays(self) -> None:
        """Close every relay's stdin (it exits), kill one that does not; never raises."""
        for relay in self.relays.values():
            with contextlib.suppress(OSError):
                if relay.stdin is not None:
                    relay.stdin.close()
        for relay in self.relays.values():
            try:
                relay.wait(5)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait(5)
        self.relays.clear()

    def destroy(self) -> None:
        """Stop the relays, delete every namespace (its veth pair goes with it) and the
        bridge; never raises."""
        self.stop_relays()
        for name in self.names:
            delete_namespace(self.namespace(name))
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            run("ip", "link", "delete", self.bridge)

    # ------------------------------------------------------------------ faults

    def apply(self, drops: Drops) -> None:
        """Make exactly ``drops`` hold (replacing the previous fault): one ``nft`` script per
        namespace whose sources change, all run at once (a flapping fault switches often). Each
        script first lists the chain it replaces, whose drop rule counts what it dropped."""
        scripts, sources_of = {}, {}
        for name in self.names:
            sources = [self.addresses[s] for s in dropped_sources(drops, name)]
            if self.dropping.get(name, []) == sources:
                continue
            script = "list chain inet chaos input\nflush chain inet chaos input\n"
            if sources:
                script += (
                    f"add rule inet chaos input ip saddr {{ {', '.join(sources)} }} counter drop\n"
                )
            scripts[name], sources_of[name] = script, sources
        running = [
            (name, subprocess.Popen(
                ["ip", "netns", "exec", self.namespace(name), "nft", "-f", "-"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            ))
            for name in scripts
        ]  # fmt: skip
        failures = []
        for name, process in running:
            listed, error = process.communicate(scripts[name], timeout=20)
            if process.returncode != 0:
                failures.append(f"{name}: {error.strip()}")
                continue
            self.dropping[name] = sources_of[name]
            self.dropped[name] += sum(int(n) for n in re.findall(r"counter packets (\d+)", listed))
        if failures:
            raise RuntimeError(f"nft failed in {failures}")

    def limit(self, name: str, rate: str) -> None:
        """A token bucket on ``name``'s outgoing link (``tc tbf``)."""
        run(
            "ip", "netns", "exec", self.namespace(name), "tc", "qdisc", "replace", "dev", "eth0",
            "root", "tbf", "rate", rate, "burst", "16kb", "latency", "500ms",
        )  # fmt: skip
        self.limited.add(name)

    def heal(self) -> None:
        self.apply(frozenset())
        if self.delay_ms:
            self.set_delay(0)
        for name in sorted(self.limited):
            run(
                "ip",
                "netns",
                "exec",
                self.namespace(name),
                "tc",
                "qdisc",
                "del",
                "dev",
                "eth0",
                "root",
            )
        self.limited.clear()


def remove_stale() -> None:
    """Namespaces and bridges an earlier run (a pid no longer alive) left behind."""
    namespaces = run("ip", "netns", "list").split()
    links = re.findall(r"^\d+: ([^:@]+)", run("ip", "-o", "link"), re.MULTILINE)
    for name in namespaces + links:
        # pkc<pid><letter>: -<node> a namespace, br the bridge, h<index> a veth's host end
        match = re.fullmatch(rf"{PREFIX}(\d+)[a-z](-.*|br|h\d+)", name)
        if match is None or os.path.exists(f"/proc/{match[1]}"):
            continue
        if name in namespaces:
            delete_namespace(name)
        else:
            with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
                run("ip", "link", "delete", name)


def delete_namespace(name: str) -> None:
    """Kill what still runs in namespace ``name`` (it would keep it alive), then delete it;
    never raises."""
    with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
        for pid in run("ip", "netns", "pids", name).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        run("ip", "netns", "delete", name)


def place(cluster: ChaosCluster, network: Network) -> None:
    """Run each of ``cluster``'s processes in its node's namespace, listening on its address:
    every ``127.0.0.1:<port>`` in the configuration files becomes the owner's address."""
    hosts: dict[int, str] = {}
    for controller in cluster.controllers.controllers:
        name = f"c{controller.node_id}"
        controller.host = network.addresses[name]
        controller.command_prefix = ["ip", "netns", "exec", network.namespace(name)]
        hosts |= dict.fromkeys((controller.raft_port, controller.http_port), controller.host)
    for broker in cluster.brokers:
        name = f"b{broker.node_id}"
        http_port = int(broker.http_url.rsplit(":", 1)[1])
        broker.host = network.addresses[name]
        broker.http_url = f"http://{broker.host}:{http_port}"
        broker.command_prefix = ["ip", "netns", "exec", network.namespace(name)]
        # Off loopback the broker's HTTP API wants a bearer token (DESIGN.md §3.6).
        broker.http_headers = {"Authorization": f"Bearer {BEARER_TOKEN}"}
        with broker.config_path.open("a") as config:
            config.write(f"http.bearer.token={BEARER_TOKEN}\n")
        hosts |= dict.fromkeys((broker.kafka_port, http_port), broker.host)
    paths = [c.config_path for c in cluster.controllers.controllers]
    paths += [b.config_path for b in cluster.brokers]
    for path in paths:
        text = re.sub(
            r"127\.0\.0\.1:(\d+)\b", lambda m: f"{hosts[int(m[1])]}:{m[1]}", path.read_text()
        )
        path.write_text(text)
