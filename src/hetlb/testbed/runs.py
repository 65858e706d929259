"""The testbed's runs: backends started once, then for each load and policy the dispatchers (or a
balancer of comparison) and the load generator, each run simulated twice beside it; the result
(:class:`Testbed`) with its table, JSON, CSV and plot."""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetlb.load.inference import InferenceLoadSpec, generate_inference_load
from hetlb.load.open_loop import LoadSpec, generate_load
from hetlb.processes import ChildProcess, hetlb_command, program_path, wait_listening
from hetlb.results.base import Result, versions
from hetlb.scenario import Scenario
from hetlb.simulation.dispatchers import default_herd_window
from hetlb.stats.intervals import positive_interval
from hetlb.testbed.balancer_pools import ROUTE_HEADER
from hetlb.testbed.commands import (
    backend_specs,
    job_size_arguments,
    listen_arguments,
    pick_arguments,
    serve_arguments,
)
from hetlb.testbed.peers import PEERS, PROGRAMS, ROUTERS, start_peer, start_routers
from hetlb.testbed.report import (
    live_interval_minus_overhead,
    mean_delay_ms,
    messages_per_request,
    row_line,
    run_label,
    unseen_delay_ms,
)
from hetlb.testbed.scenario import (
    AGREEMENT_MARGIN,
    CSV_COLUMNS,
    PREDICTION_QUANTILES,
    TestbedScenario,
)
from hetlb.wire.addresses import free_port_block, free_ports


@dataclass(repr=False)
class Testbed(Result):
    """Runs a TestbedScenario; ``say`` receives one line per step (standard error in the command).
    After :meth:`run` it is the testbed's result: ``rows`` (testbed.csv, ``to_frame()``), ``details``
    and ``to_dict()`` (testbed.json), ``summary`` (the policies' order and how many runs agree)."""

    scenario: TestbedScenario
    out: Path
    say: Callable[[str], None] = print
    progress: bool = False
    rows: list = field(default_factory=list)
    details: list = field(default_factory=list)
    backend_urls: list = field(default_factory=list)
    simulations: dict = field(default_factory=dict)

    def run(self) -> list[dict]:
        testbed = self.scenario
        system = testbed.system_at(testbed.loads[0])
        peers = self.available_peers()
        for policy_id, why in testbed.live_only.items():
            self.say(f"hetlb testbed: note: {policy_id} runs live only, without a prediction: {why}")
        with contextlib.ExitStack() as stack:
            backends = self.start_backends(system, stack)
            for load in testbed.loads:
                for policy in testbed.policies:
                    for gateway in testbed.gateways:
                        self.run_hetlb(policy, load, backends, gateway)
                for peer in peers:
                    self.run_peer(peer, load, backends, stack)
        self.write()
        return self.rows

    def available_peers(self) -> list:
        peers = []
        for program in self.scenario.compare:
            if program_path(program) is None:
                self.say(f"hetlb testbed: note: {program} is not installed: its runs are skipped")
                continue
            peers += [peer for peer in PEERS.values() if peer.program == program]
        return peers

    def start_backends(self, system, stack: contextlib.ExitStack) -> list[str]:
        testbed = self.scenario
        if testbed.engine is not None:
            arguments = [
                "backend",
                *listen_arguments(system, testbed.type_names()),
                *testbed.engine.backend_arguments(),
            ]
        else:
            arguments = ["backend", *listen_arguments(system), "--mean-service-ms", repr(testbed.mean_service_ms)]
            arguments += job_size_arguments(system.job_sizes)
        arguments += ["--seed", str(testbed.seed)]
        child = ChildProcess("hetlb backend", hetlb_command(*arguments))
        stack.callback(child.stop)
        urls = [line.split()[0] for line in child.read_lines(system.n_servers)]
        self.backend_urls = urls
        self.say(f"hetlb testbed: {system.n_servers} backends listening ({urls[0]} ...)")
        return urls

    def load_spec(
        self, targets: list[str], system, route_header: bool = False, per_model: bool = False
    ) -> LoadSpec | InferenceLoadSpec:
        """The load of one run: ``hetlb loadgen``'s, or ``--openai``'s for engines (``route_header``:
        the model also in ROUTE_HEADER, for the balancers' pools; ``per_model``: target m serves
        model m, for the routers; the live herd with several dispatchers)."""
        testbed = self.scenario
        rate = system.total_arrival_rate / testbed.mean_service_ms * 1e3
        proportions = {name: float(r) for name, r in zip(testbed.type_names(), system.arrival_rate)}
        common = {
            "targets": tuple(targets),
            "rate": rate,
            "duration": testbed.duration,
            "warmup": testbed.warmup,
            "seed": testbed.seed,
            "arrivals": system.arrivals,
            "time_unit_ms": testbed.mean_service_ms,
        }
        if testbed.engine is None:
            return LoadSpec(job_types=proportions, **common)
        engine = testbed.engine
        several = len(targets) > 1 and not per_model
        return InferenceLoadSpec(
            models=proportions,
            prompt_tokens=engine.prompt_tokens,
            prompt_law=engine.prompt_law,
            output_tokens=engine.output_tokens,
            output_law=engine.output_law,
            model_header=ROUTE_HEADER if route_header else None,
            herd_window=default_herd_window(system) * testbed.mean_service_ms / 1e3 if several else None,
            target_per_model=per_model,
            **common,
        )

    def run_hetlb(self, policy: dict, load: float, backends: list[str], gateway: str = "hetlb") -> None:
        """One run of ``policy`` at ``load`` through ``gateway`` (GATEWAYS), live then simulated."""
        testbed = self.scenario
        system = testbed.system_at(load)
        names = testbed.type_names() if testbed.engine is not None else None
        specs = backend_specs(system, backends, names)
        with contextlib.ExitStack() as stack:
            if gateway == "envoy":
                targets, admins = self.start_envoy_gateways(policy, load, specs, stack)
            else:
                targets, admins = self.start_serve(policy, load, specs, stack)
            live = self.generate(self.load_spec(targets, system))
            status = [self.admin_status(admin) for admin in admins]
        unseen = unseen_delay_ms(status)
        snapshot_delay = mean_delay_ms(status, "scrape_delay")
        simulated = None
        if testbed.simulated(policy):
            simulated = self.simulate(testbed.scenario(policy, load, unseen, None, snapshot_delay))
            simulated["live_length_runs"] = self.predict(
                testbed.scenario(policy, load, unseen, testbed.live_length_run(load), snapshot_delay)
            )
        label = policy["id"] if "signals" not in policy else f"{policy['id']} ({policy['signals']})"
        if gateway == "envoy":
            label += " via Envoy+pick"
        self.record("hetlb", label, load, live, policy["id"] if simulated else "", simulated, status)

    def start_serve(self, policy: dict, load: float, specs: list[str], stack) -> tuple[list[str], list[int]]:
        """hetlb serve's M dispatchers for one run, stopped with ``stack``: their URLs and admin ports."""
        testbed = self.scenario
        listen = free_port_block(2 * testbed.dispatchers)  # M ports to listen on, then M admin ports
        admin = listen + testbed.dispatchers
        self.say(f"hetlb testbed: load {load:g}, hetlb serve --policy {policy['id']} ...")
        child = ChildProcess("hetlb serve", hetlb_command(*serve_arguments(policy, listen, admin, specs, testbed)))
        stack.callback(child.stop)
        for m in range(testbed.dispatchers):
            wait_listening("127.0.0.1", listen + m, child)
        dispatchers = range(testbed.dispatchers)
        return [f"http://127.0.0.1:{listen + m}" for m in dispatchers], [admin + m for m in dispatchers]

    def start_envoy_gateways(self, policy: dict, load: float, specs: list[str], stack) -> tuple[list[str], list[int]]:
        """M pairs of Envoy (one worker) and hetlb pick for one run, nothing shared between pairs,
        stopped with ``stack``: the Envoys' URLs and the pickers' admin ports."""
        from hetlb.gateway.envoy.bootstrap import envoy_command, picker_bootstrap
        from hetlb.wire.addresses import Address

        testbed = self.scenario
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hetlb-envoy-")))
        self.say(
            f"hetlb testbed: load {load:g}, {testbed.dispatchers} x (Envoy + hetlb pick --policy {policy['id']}) ..."
        )
        targets, admins = [], []
        for m in range(testbed.dispatchers):
            listen, grpc_port, admin = free_ports(3)
            picker = ChildProcess(
                f"hetlb pick {m}", hetlb_command(*pick_arguments(policy, grpc_port, admin, specs, testbed, m))
            )
            stack.callback(picker.stop)
            wait_listening("127.0.0.1", admin, picker)
            bootstrap = picker_bootstrap(
                Address("127.0.0.1", listen), [Address("127.0.0.1", grpc_port)], body=testbed.engine is not None
            )
            path = folder / f"envoy-{m}.json"
            path.write_text(json.dumps(bootstrap))
            envoy = ChildProcess(f"envoy {m}", envoy_command(str(path)))
            stack.callback(envoy.stop)
            wait_listening("127.0.0.1", listen, envoy)
            targets.append(f"http://127.0.0.1:{listen}")
            admins.append(admin)
        return targets, admins

    def run_peer(self, peer, load: float, backends: list[str], stack) -> None:
        testbed = self.scenario
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"hetlb-{peer.id}-")))
        (port,) = free_ports(1)
        system = testbed.system_at(load)
        self.say(f"hetlb testbed: load {load:g}, {peer.id} ...")
        pools = None
        if testbed.engine is not None:  # one pool per model, chosen by a header (hetlb.testbed.peers)
            pools = {name: system.graph.servers_of(k).tolist() for k, name in enumerate(testbed.type_names())}
        if peer.program in ROUTERS:  # a router per model, each request sent to its model's
            assert pools is not None
            ports = free_ports(2 * len(pools))
            urls = {name: [backends[s] for s in members] for name, members in pools.items()}
            children = start_routers(peer, ports, urls, folder)
            spec = self.load_spec([f"http://127.0.0.1:{p}" for p in ports[::2]], system, per_model=True)
        else:
            children = [start_peer(peer, port, list(zip(backends, system.speed.tolist())), folder, pools=pools)]
            spec = self.load_spec([f"http://127.0.0.1:{port}"], system, route_header=True)
        try:
            live = self.generate(spec)
        finally:
            for child in children:
                child.stop()
        # no registered policy is a balancer's rule (benchmarks/balancer_rules.py simulates them)
        self.record(peer.id, peer.method, load, live, "", None, [])

    def generate(self, spec: LoadSpec | InferenceLoadSpec) -> dict:
        """Run one load; of streamed completions, the end-to-end latency under the keys of a plain
        load's response time (its percentiles p50 and p99; the path is not subtracted: a stream's
        answer carries no sojourn), beside the TTFT, the tokens per second and the herd."""
        if isinstance(spec, InferenceLoadSpec):
            result = dict(generate_inference_load(spec, progress=self.progress))
            return result | {
                "mean_response_time": result["mean_e2e"],
                "mean_response_time_ci": result["mean_e2e_ci"],
                "mean_backend_sojourn": result["mean_e2e"],
                "mean_overhead": None,
                "response_time_p50": result["e2e_p50"],
                "response_time_p95": None,
                "response_time_p99": result["e2e_p99"],
            }
        return dict(generate_load(spec, progress=self.progress))

    @staticmethod
    def admin_status(port: int) -> dict | None:
        """A dispatcher's ``GET /status`` after its run (None if it does not answer)."""
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as response:
                return json.loads(response.read())
        except (OSError, ValueError):
            return None

    def simulate(self, scenario: Scenario) -> dict:
        """The simulation's summary, its mean response time's interval Cox's on the log scale over
        the replications' means (one run: its batch means), hetlb.stats.intervals.positive_interval:
        a t interval of a few heavy-tailed replications reaches below zero."""
        result = self.simulation(scenario)
        runs = result.runs
        means = [run.mean_response_time for run in runs] if len(runs) > 1 else runs[0].batch_response_means
        return dict(result.summary) | {"mean_response_time_ci": positive_interval(means)}

    def simulation(self, scenario: Scenario):
        """``scenario``'s simulation, run once (a policy run through two gateways is simulated once)."""
        key = id(scenario)  # the scenarios are kept by TestbedScenario.scenario, so their ids stay theirs
        if key not in self.simulations:
            self.simulations[key] = scenario.simulate()
        return self.simulations[key]

    def predict(self, scenario: Scenario) -> dict:
        """The mean and the prediction interval (PREDICTION_QUANTILES) of the mean response times of
        ``scenario``'s replications, in time units."""
        means = np.array([run.mean_response_time for run in self.simulation(scenario).runs])
        low, high = np.quantile(means, PREDICTION_QUANTILES)
        return {"mean": float(means.mean()), "low": float(low), "high": float(high), "runs": len(means)}

    def record(self, balancer, policy, load, live, sim_policy, simulated, status) -> None:
        unit = self.scenario.mean_service_ms
        live = {key: math.nan if value is None else value for key, value in live.items()}  # not computed: nan
        live["mean_response_time_ci"] = [math.nan if v is None else v for v in live["mean_response_time_ci"]]
        row = {
            "balancer": balancer,
            "policy": policy,
            "load": load,
            "rate_per_s": live["offered_rate"],
            "requests": live["requests"],
            "live_mean_ms": live["mean_response_time"],
            "live_ci_low_ms": live["mean_response_time_ci"][0],
            "live_ci_high_ms": live["mean_response_time_ci"][1],
            "overhead_ms": live["mean_overhead"],
            "live_minus_overhead_ms": live["mean_backend_sojourn"],
            "live_p50_ms": live["response_time_p50"],
            "live_p95_ms": live["response_time_p95"],
            "live_p99_ms": live["response_time_p99"],
            "live_blocking": live["blocking_probability"],
            "live_herd_fraction": live.get("herd_fraction", math.nan),
            "errors": live["errors"],
            "messages_per_request": messages_per_request(status),
            "forward_delay_ms": mean_delay_ms(status, "forward_delay") or math.nan,
            "answer_lag_ms": mean_delay_ms(status, "answer_lag") or math.nan,
            "sim_policy": sim_policy,
        }
        if "mean_ttft" in live:
            ttft_low, ttft_high = [math.nan if v is None else v for v in live["mean_ttft_ci"]]
            row |= {
                "live_ttft_mean_ms": live["mean_ttft"],
                "live_ttft_ci_low_ms": ttft_low,
                "live_ttft_ci_high_ms": ttft_high,
                "live_ttft_p50_ms": live["ttft_p50"],
                "live_ttft_p99_ms": live["ttft_p99"],
                "tokens_per_s": live["output_tokens_per_s"],
            }
        if simulated is not None:
            low, high = simulated["mean_response_time_ci"]
            row |= {
                "sim_mean_ms": simulated["mean_response_time"] * unit,
                "sim_ci_low_ms": low * unit,
                "sim_ci_high_ms": high * unit,
                "sim_p99_ms": simulated["response_time_p99"] * unit,
                "sim_blocking": simulated["blocking_probability"],
            }
            if "messages_per_job" in simulated:  # as live: probes and polls, a request and an answer each
                kinds = simulated["messages_per_job"]
                row["sim_messages_per_request"] = kinds["push"] + kinds["probe"] + 2 * kinds["snapshot"]
                row["sim_herd_fraction"] = simulated["herd_fraction"]
            prediction = simulated["live_length_runs"]
            row |= {f"sim_run_{key}_ms": prediction[key] * unit for key in ("mean", "low", "high")}
            corrected = row["live_minus_overhead_ms"]
            if balancer == "hetlb":
                row["agrees"] = (
                    (1 - AGREEMENT_MARGIN) * row["sim_run_low_ms"]
                    <= corrected
                    <= (1 + AGREEMENT_MARGIN) * row["sim_run_high_ms"]
                )
        self.rows.append(row)
        self.details.append({"row": row, "live": live, "simulated": simulated, "dispatchers": status})
        self.say("hetlb testbed: " + row_line(row))

    def order_agreement(self) -> dict:
        """Per load: the policies ranked by live mean (minus overhead) and by the mean of the
        simulated runs of the live run's length; ``same`` whether the two orders are one, and
        ``same_where_determined`` whether they agree on every pair whose prediction intervals are
        apart (``overlapping`` lists the others: in runs of this length they come in either order)."""
        orders = {}
        for load in self.scenario.loads:
            rows = [r for r in self.rows if r["balancer"] == "hetlb" and r["load"] == load and "sim_run_mean_ms" in r]
            live = [r["policy"] for r in sorted(rows, key=lambda r: r["live_minus_overhead_ms"])]
            simulated = [r["policy"] for r in sorted(rows, key=lambda r: r["sim_run_mean_ms"])]
            overlapping, determined_same = [], True
            for a, b in itertools.combinations(rows, 2):
                if a["sim_run_low_ms"] <= b["sim_run_high_ms"] and b["sim_run_low_ms"] <= a["sim_run_high_ms"]:
                    overlapping.append([a["policy"], b["policy"]])
                else:
                    lower, higher = (a, b) if a["sim_run_high_ms"] < b["sim_run_low_ms"] else (b, a)
                    determined_same &= lower["live_minus_overhead_ms"] < higher["live_minus_overhead_ms"]
            orders[f"{load:g}"] = {
                "live": live,
                "simulated": simulated,
                "same": live == simulated,
                "same_where_determined": determined_same,
                "overlapping": overlapping,
            }
        return orders

    @property
    def metadata(self) -> dict:
        """The [testbed] settings, the simulator's [system] and [run] tables, and the versions."""
        bed = self.scenario
        names = (
            "mean_service_ms",
            "loads",
            "policies",
            "warmup",
            "duration",
            "dispatchers",
            "signals",
            "compare",
            "gateways",
        )
        settings = {name: getattr(bed, name) for name in (*names, "seed", "prediction_runs")}
        if bed.engine is not None:
            settings |= {"engine": "openai", **bed.engine.to_dict()}
        return {"testbed": settings, "system": bed.system, "run": bed.run, "versions": versions()}

    def against_peers(self) -> dict:
        """Per load: each hetlb policy's mean (end-to-end latency, or response time) over that of the
        best rule of each balancer program (its least live mean at that load), with the best rule."""
        comparison = {}
        for load in self.scenario.loads:
            rows = [r for r in self.rows if r["load"] == load]
            best = {}
            for program in PROGRAMS:
                runs = [r for r in rows if r["balancer"] != "hetlb" and PEERS[r["balancer"]].program == program]
                if runs:
                    best[program] = min(runs, key=lambda r: r["live_mean_ms"])
            if best:
                comparison[f"{load:g}"] = {
                    "best": {program: row["balancer"] for program, row in best.items()},
                    "ratio": {
                        r["policy"]: {program: r["live_mean_ms"] / row["live_mean_ms"] for program, row in best.items()}
                        for r in rows
                        if r["balancer"] == "hetlb"
                    },
                }
        return comparison

    @property
    def summary(self) -> dict:
        """The time unit, the agreement margin, the policies' order at each load
        (:meth:`order_agreement`), how many hetlb runs were held to a prediction and agree, and the
        policies against the balancers' best rules (:meth:`against_peers`)."""
        compared = [row["agrees"] for row in self.rows if "agrees" in row]
        return {
            "mean_service_ms": self.scenario.mean_service_ms,
            "agreement_margin": AGREEMENT_MARGIN,
            "order": self.order_agreement(),
            "against_peers": self.against_peers(),
            "compared": len(compared),
            "agreeing": sum(compared),
            "all_agree": all(compared),
        }

    def to_dict(self) -> dict:
        """testbed.json: the summary, every run's row with its live and simulated figures and its
        dispatchers' /status, and the metadata."""
        return {**self.summary, "runs": self.details, "metadata": self.metadata}

    def to_frame(self):
        """testbed.csv as a DataFrame: one row per run (CSV_COLUMNS)."""
        import pandas as pd

        return pd.DataFrame.from_records(self.rows, columns=CSV_COLUMNS)

    def headline(self) -> tuple:
        return "agreeing with the simulation", self.summary["agreeing"], None

    def describe(self) -> str:
        bed = self.scenario
        return f"{len(bed.policies)} policies, {len(bed.compare)} balancers, {len(bed.loads)} loads"

    def extent(self) -> str:
        return f"{self.summary['compared']} of {len(self.rows)} runs compared"

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        with (self.out / "testbed.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, CSV_COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows)
        (self.out / "testbed.json").write_text(self.to_json() + "\n")
        self.plot(self.out / "testbed.png")

    def plot(self, path: Path | None = None):
        """The matplotlib Figure of testbed.png (written to ``path`` when given; None when there is
        no run): the means against the load, live and simulated, on one y scale; with one load,
        each run's live mean with its interval and each prediction interval, by run."""
        from hetlb.plots.figures import plot_intervals, plot_panels

        loads = self.scenario.loads
        measure = "mean end-to-end latency (ms)" if self.scenario.engine is not None else "mean response time (ms)"
        if len(loads) == 1 and self.rows:
            live_rows = [
                (run_label(r), r["live_minus_overhead_ms"], *live_interval_minus_overhead(r)) for r in self.rows
            ]
            predicted = [
                (run_label(r), r["sim_run_mean_ms"], r["sim_run_low_ms"], r["sim_run_high_ms"])
                for r in self.rows
                if "sim_run_mean_ms" in r
            ]
            by_run: list[dict] = [
                {"title": f"live, load {loads[0]:g} (minus the path where known)", "ylabel": measure, "rows": live_rows}
            ]
            if predicted:
                title = "simulated runs of the live run's length (95% of the runs)"
                by_run.append({"title": title, "ylabel": measure, "rows": predicted})
            return plot_intervals(by_run, path)
        live: dict = {}
        simulated: dict = {}
        peers: dict = {}

        def series(target: dict, label: str, rows: list, mean: str, low: str, high: str) -> None:
            by_load = {r["load"]: r for r in rows}
            pick = [by_load.get(load, {}) for load in loads]
            target[label] = tuple([r.get(key, math.nan) for r in pick] for key in (mean, low, high))

        for name in dict.fromkeys((r["balancer"], r["policy"]) for r in self.rows):
            rows = [r for r in self.rows if (r["balancer"], r["policy"]) == name]
            label = name[1] if name[0] == "hetlb" else name[0]
            if name[0] == "hetlb":
                shift = [(r, r["live_mean_ms"] - r["live_minus_overhead_ms"]) for r in rows]
                adjusted = [{**r, "low": r["live_ci_low_ms"] - d, "high": r["live_ci_high_ms"] - d} for r, d in shift]
                series(live, label, adjusted, "live_minus_overhead_ms", "low", "high")
                if any("sim_run_mean_ms" in r for r in rows):
                    series(simulated, label, rows, "sim_run_mean_ms", "sim_run_low_ms", "sim_run_high_ms")
            series(peers, label, rows, "live_mean_ms", "live_ci_low_ms", "live_ci_high_ms")
        panels = []
        engine = self.scenario.engine is not None
        common = {"xlabel": "system.load", "ylabel": measure}
        if live:
            title = "hetlb serve, live (streams' end to end)" if engine else "hetlb serve, live minus path overhead"
            panels.append({"x": loads, "series": live, "title": title, **common})
        if simulated:
            title, band = "simulated runs of the live run's length", "shaded: 95% of the runs"
            panels.append({"x": loads, "series": simulated, "title": title, "band_label": band, **common})
        if any(r["balancer"] != "hetlb" for r in self.rows):
            panels.append({"x": loads, "series": peers, "title": "measured at the client, every balancer", **common})
        return plot_panels(panels, path, sharey=True) if panels else None
