"""Verify a built lab before measuring on it: its routes and its link rates.

* :func:`check_routes` asks every node's kernel (``ip route get``) for every
  destination, compares each answer with the plan, and walks every ordered pair hop by
  hop: the walk must fix coordinates in dimension order and take exactly
  ``Torus.distance`` hops;
* :func:`check_rates` measures MB/s per TCP flow (:func:`~swing_mpi.lab.agent.blast`)
  for one port alone, all ports of node 0 at once, a multi-hop pair, and every port of
  every node at once (the load of a neighbour exchange);
* :class:`CheckResult` holds both, judges them (:attr:`CheckResult.ok`) and prints a table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .agent import blast
from .plan import Command, LabPlan
from .system import Log, quiet, run_parallel

__all__ = ["RateResult", "CheckResult", "check_routes", "rate_tests", "check_rates"]

_ROUTE_GET_RE = re.compile(r"^(?P<dst>\d+\.\d+\.\d+\.\d+)\s+(?:via\s+(?P<via>\S+)\s+)?dev\s+(?P<dev>\S+)")


@dataclass
class RateResult:
    """One link-rate test: MB/s received on each flow against the configured rate."""

    name: str
    description: str
    flows: list[tuple[int, int]]
    mb_per_s: list[float]
    rate_mb_per_s: float

    @property
    def mean(self) -> float:
        """Mean MB/s over the flows."""
        return sum(self.mb_per_s) / len(self.mb_per_s) if self.mb_per_s else 0.0

    @property
    def min(self) -> float:
        """Slowest flow, MB/s."""
        return min(self.mb_per_s) if self.mb_per_s else 0.0

    @property
    def max(self) -> float:
        """Fastest flow, MB/s."""
        return max(self.mb_per_s) if self.mb_per_s else 0.0

    @property
    def fraction(self) -> float:
        """Mean per-flow rate as a fraction of the configured link rate."""
        return self.mean / self.rate_mb_per_s


@dataclass
class CheckResult:
    """What a lab check found (routes, and rates when they were measured)."""

    pairs_checked: int
    route_errors: list[str] = field(default_factory=list)
    max_hops: int = 0
    rates: list[RateResult] = field(default_factory=list)
    min_fraction: float = 0.5

    @property
    def routes_ok(self) -> bool:
        """Whether every route is minimal and in dimension order."""
        return not self.route_errors

    @property
    def ok(self) -> bool:
        """Routes all right, and every test's rate at least ``min_fraction`` of the link rate.

        Tests of a few flows are judged by their slowest flow; the test of every
        link at once by its mean: with 64 TCP flows on two cores, single flows
        are starved for moments by CPU scheduling (seen at ~1.6 MB/s next to
        ~5 MB/s ones), which says nothing about the links.
        """

        def good(r: RateResult) -> bool:
            got = r.mean if len(r.flows) > 8 else r.min
            return bool(r.mb_per_s) and got >= self.min_fraction * r.rate_mb_per_s

        return self.routes_ok and all(good(r) for r in self.rates)

    def table(self) -> str:
        """Return a readable report."""
        lines = [
            f"routes: {self.pairs_checked} ordered pairs walked hop by hop with `ip route get`: "
            + ("all minimal dimension-order" if self.routes_ok else f"{len(self.route_errors)} WRONG")
            + f" (longest {self.max_hops} hops)"
        ]
        lines += [f"  ! {e}" for e in self.route_errors[:10]]
        if self.rates:
            rate = self.rates[0].rate_mb_per_s
            lines.append(f"link rates (configured {rate:.3g} MB/s per direction):")
            lines.append(f"  {'test':<6} {'flows':>5} {'mean MB/s':>10} {'min':>7} {'max':>7} {'% of R':>7}  what")
            for r in self.rates:
                lines.append(
                    f"  {r.name:<6} {len(r.flows):>5} {r.mean:>10.3f} {r.min:>7.3f} {r.max:>7.3f} "
                    f"{100 * r.fraction:>6.1f}%  {r.description}"
                )
            busy = [r for r in self.rates if r.name == "all" and r.mb_per_s]
            if busy and busy[0].fraction < 0.8:
                total = sum(busy[0].mb_per_s)
                fits = 0.9 * total / len(busy[0].flows) * 8
                lines.append(
                    f"  every link busy: {total:.0f} MB/s through this machine in all, {100 * busy[0].fraction:.0f}% "
                    f"of R per link: the CPUs, not the links, limit; about {fits:.0f} Mbit/s per link would fit"
                )
        lines.append("check: " + ("OK" if self.ok else "FAILED"))
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """Return the result as plain JSON-able data."""
        return {
            "ok": self.ok,
            "pairs_checked": self.pairs_checked,
            "route_errors": list(self.route_errors),
            "max_hops": self.max_hops,
            "rates": [
                {
                    "name": r.name,
                    "description": r.description,
                    "flows": [list(f) for f in r.flows],
                    "mb_per_s": r.mb_per_s,
                    "mean": r.mean,
                    "fraction": r.fraction,
                    "rate_mb_per_s": r.rate_mb_per_s,
                }
                for r in self.rates
            ],
        }


def check_routes(plan: LabPlan) -> CheckResult:
    """Compare every node's kernel routes with ``plan`` and walk every ordered pair (the lab must be built)."""
    torus = plan.torus
    n = plan.size
    addr_to_rank = {a: r for r, a in enumerate(plan.addresses)}
    addr_to_rank.update((plan.router_address(r), r) for r in range(n))
    cmds = [
        Command(
            ("ip", "-n", plan.router_namespace(r), "-batch", "-"),
            "".join(f"route get {plan.address(d)}\n" for d in range(n) if d != r),
        )
        for r in range(n)
    ]
    nexthop: dict[tuple[int, int], int] = {}
    errors: list[str] = []
    for r, out in enumerate(run_parallel(cmds)):
        for line in out.stdout.splitlines():
            m = _ROUTE_GET_RE.match(line)
            if not m:
                continue
            d = addr_to_rank.get(m["dst"])
            if d is None:
                continue
            via = addr_to_rank.get(m["via"] or m["dst"])
            want = plan.route(r, d)
            if via != want.via or m["dev"] != want.port.name:
                errors.append(
                    f"node {r} -> {d}: kernel says via {m['via']} dev {m['dev']}, "
                    f"plan says via {want.via_addr} dev {want.port.name}"
                )
            if via is not None:
                nexthop[(r, d)] = via
    max_hops = 0
    pairs = 0
    for s in range(n):
        for d in range(n):
            if s == d:
                continue
            pairs += 1
            cur, hops, dims_seen = s, 0, -1
            while cur != d and hops <= n:
                nxt = nexthop.get((cur, d))
                if nxt is None:
                    errors.append(f"node {cur} has no route to {d}")
                    break
                k = next(i for i, (a, b) in enumerate(zip(torus.coords(cur), torus.coords(nxt))) if a != b)
                if k < dims_seen:
                    errors.append(f"{s} -> {d}: not in dimension order at {cur} -> {nxt}")
                dims_seen = k
                cur, hops = nxt, hops + 1
            else:
                if hops != torus.distance(s, d):
                    errors.append(f"{s} -> {d}: {hops} hops, torus distance {torus.distance(s, d)}")
            max_hops = max(max_hops, hops)
    return CheckResult(pairs_checked=pairs, route_errors=errors, max_hops=max_hops)


def rate_tests(plan: LabPlan) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """Return the rate tests of :func:`check_rates` as ``(name, description, flows)``."""
    t = plan.torus
    ports0 = plan.ports(0)
    nb = [plan.neighbor(p) for p in ports0]
    far = max(range(t.size), key=lambda r: (t.distance(0, r), -r))
    tests: list[tuple[str, str, list[tuple[int, int]]]] = [
        ("one", f"node 0 -> {nb[0]} over {ports0[0].name} alone", [(0, nb[0])]),
    ]
    if len(ports0) > 1:
        tests.append(("node", f"node 0 -> all {len(ports0)} neighbours at once", [(0, b) for b in nb]))
    if t.distance(0, far) > 1:
        tests.append(("far", f"node 0 -> {far}, {t.distance(0, far)} hops", [(0, far)]))
    all_flows = [(p.node, plan.neighbor(p)) for r in range(t.size) for p in plan.ports(r)]
    tests.append(("all", f"every node -> every neighbour at once ({len(all_flows)} flows)", all_flows))
    return tests


def check_rates(plan: LabPlan, seconds: float, *, log: Log = quiet) -> list[RateResult]:
    """Measure every test of :func:`rate_tests` for ``seconds`` each (the lab must be built and have links)."""
    rate = plan.rate_bytes_per_s / 1e6
    out = []
    for name, desc, flows in rate_tests(plan):
        log(f"lab: rate test {name!r}: {desc}")
        out.append(RateResult(name, desc, flows, blast(plan, flows, seconds), rate))
    return out
