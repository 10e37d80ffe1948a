"""delay: packets from the other nodes reach each target ``delay_ms`` late, give or take
``jitter_ms`` (uniform), and so out of order where the jitter exceeds the gap between them.
This kernel has no netem: an iptables NFQUEUE rule hands each packet to a small program in
the target's container (``HOLD``, over nfnetlink_queue), which holds it and lets it through
when its time comes. ``--queue-bypass``: should the program be gone, packets pass at once.

Only what the target receives is delayed (its INPUT chain), so a request to it and the
answer from it together take ``delay_ms`` more, as a slow link in one direction does.
"""
from __future__ import annotations

from ..faults import chain_script, flush_script
from ..package import LEADER_FIRST, HeldFault, number

CHAIN = "ck-delay"
QUEUE = 7
MARK = "ck-delay-hold"  # on the holding program's command line, to find and stop it

# The holding program: binds NFQUEUE ``queue`` over a netlink socket (the nfnetlink_queue
# protocol of linux/netfilter/nfnetlink_queue.h), copies packet metadata only, and sends
# each packet's NF_ACCEPT verdict when its delay is up.
HOLD = r"""
import heapq, os, random, select, socket, struct, sys, time
queue, delay, jitter = int(sys.argv[1]), float(sys.argv[2]) / 1000, float(sys.argv[3]) / 1000
NETLINK_NETFILTER, SUBSYS_QUEUE = 12, 3
MSG_PACKET, MSG_VERDICT, MSG_CONFIG = 0, 1, 2
REQUEST, ACK = 1, 4
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
s.bind((0, 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
seq = 0

def attr(kind, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, kind) + payload + b"\0" * (-n % 4)

def send(msg_type, attrs, flags=REQUEST):
    global seq
    seq += 1
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue) + b"".join(attrs)
    s.send(struct.pack("=IHHII", 16 + len(body), (SUBSYS_QUEUE << 8) | msg_type, flags, seq, 0) + body)

def acked(what):
    data = s.recv(1 << 16)
    kind = struct.unpack_from("=H", data, 4)[0]
    if kind == 2 and struct.unpack_from("=i", data, 16)[0] != 0:  # NLMSG_ERROR
        sys.exit(f"nfnetlink_queue {what}: error {-struct.unpack_from('=i', data, 16)[0]}")

send(MSG_CONFIG, [attr(1, struct.pack("!BBH", 1, 0, 0))], REQUEST | ACK)  # CMD BIND
acked(f"bind queue {queue}")
send(MSG_CONFIG, [attr(2, struct.pack("!IB", 0, 1))], REQUEST | ACK)  # PARAMS: metadata only
acked("copy mode")
print("bound", flush=True)
held = []
while True:
    wait = max(0.0, held[0][0] - time.monotonic()) if held else 1.0
    if select.select([s], [], [], wait)[0]:
        data = s.recv(1 << 16)
        pos = 0
        while pos + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, pos)
            if length < 16:
                break
            if kind == (SUBSYS_QUEUE << 8) | MSG_PACKET:
                a = pos + 20
                while a + 4 <= pos + length:
                    alen, akind = struct.unpack_from("=HH", data, a)
                    if alen < 4:
                        break
                    if akind & 0x7fff == 1:  # PACKET_HDR
                        pid = struct.unpack_from("!I", data, a + 4)[0]
                        due = time.monotonic() + max(0.0, random.uniform(delay - jitter, delay + jitter))
                        heapq.heappush(held, (due, pid))
                    a += (alen + 3) & ~3
            pos += (length + 3) & ~3
    now = time.monotonic()
    while held and held[0][0] <= now:
        _, pid = heapq.heappop(held)
        send(MSG_VERDICT, [attr(2, struct.pack("!II", 1, pid))], REQUEST)  # NF_ACCEPT
"""


def hold_script(delay_ms: float, jitter_ms: float) -> list[str]:
    """Start the holding program in the background; returns once it has bound the queue."""
    return ["sh", "-ec",
            f"cat > /tmp/{MARK}.py <<'EOF'\n{HOLD}\nEOF\n"
            f"nohup python3 /tmp/{MARK}.py {QUEUE} {delay_ms:g} {jitter_ms:g} "
            f"> /tmp/{MARK}.log 2>&1 &\n"
            f"for i in $(seq 100); do grep -q bound /tmp/{MARK}.log && exit 0; sleep 0.05; done\n"
            f"cat /tmp/{MARK}.log; exit 1"]


def queue_script(sources: list[str]) -> list[str]:
    """Hand every packet from ``sources`` to the holding program."""
    return chain_script(CHAIN, [f"-s {a} -j NFQUEUE --queue-num {QUEUE} --queue-bypass"
                                for a in sources])


def stop_script() -> list[str]:
    return ["sh", "-c", f"{' '.join(flush_script(CHAIN)[2:])}; "
                        f"pkill -f /tmp/{MARK}.py 2>/dev/null; true"]


class Delay(HeldFault):
    name = "delay"
    options = {"delay_ms": number(1, 60_000, "1 .. 60000 ms"),
               "jitter_ms": number(0, 60_000, "0 .. 60000 ms")}
    defaults = {"delay_ms": 100, "jitter_ms": 50}
    opens = ("start-delay",)
    closes = ("stop-delay",)
    colour = "#e45756"
    target_weights = LEADER_FIRST

    lifted = "delay lifted on"

    def plan(self, ctx, step, opts, targets):
        delay, jitter = opts["delay_ms"], opts["jitter_ms"]
        value = {"target": step.spec, "nodes": targets, "delay_ms": delay, "jitter_ms": jitter,
                 "mechanism": "iptables NFQUEUE and a holding program (no netem here)"}
        return value, targets, f"delay {step.spec} {targets} {delay:g}±{jitter:g} ms (NFQUEUE)"

    async def put(self, ctx, holders, opts, value):
        address = {n.node_id: n.address for n in ctx.backend.nodes}
        await ctx.exec_all(holders, lambda n: hold_script(opts["delay_ms"], opts["jitter_ms"]),
                           check=True)
        await ctx.exec_all(holders, lambda n: queue_script(
            [a for i, a in sorted(address.items()) if i != n]), check=True)

    def release(self, ctx, node):
        return stop_script()

    def sim_act(self, sim, step, opts, rng, targets):
        sim.inbound(targets, delay_ms=int(opts["delay_ms"]), jitter_ms=int(opts["jitter_ms"]))
        return (f"delay {step.spec} {targets} {opts['delay_ms']}+-{opts['jitter_ms']} ms",
                lambda: sim.clear_inbound(targets))


PACKAGE = Delay
