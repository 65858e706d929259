"""The text output of the commands: numbers and tables a person reads, and strict JSON.

Each ``format_*`` function turns one command's result into the lines it prints; ``fmt`` and the
``*_text`` helpers write a value the same way in all of them.
"""

from __future__ import annotations

import json

import numpy as np

MAX_CLASS_ROWS = 10
"""The text output of ``simulate`` lists the speed classes when there are at most this many;
more (e.g. i.i.d. speeds, one class per server) are left to --per-server and --speed-bins."""


def print_json(value, indent: int | None = 2) -> None:
    """Strict JSON: numpy values become numbers and non-finite floats null."""
    from hetlb.results.base import finite_or_null, json_default

    print(json.dumps(finite_or_null(value), indent=indent, default=json_default, allow_nan=False))


def result_line(result) -> str:
    """One result's headline in a line (a replication, or a result of one or more)."""
    if hasattr(result, "mean_delay"):
        head = f"mean delay {result.mean_delay:.6g} slots"
    else:
        head = f"mean response time {result.mean_response_time:.6g}, blocking {result.blocking_probability:.3g}"
    return f"{head}, {result.events:,} events in {result.wall_seconds:.2f} s"


def fmt(value) -> str:
    """A value for the text output: numbers to 6 significant digits (44 for 43.99999999999999),
    a table {kind, ...} as "kind (key value, ...)", other tables and lists as comma lists."""
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, dict):
        rest = ", ".join(f"{key.replace('_', ' ')} {fmt(item)}" for key, item in value.items() if key != "kind")
        if "kind" in value:
            return f"{value['kind']} ({rest})" if rest else str(value["kind"])
        return rest
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ", ".join(fmt(item) for item in value) + "]"
    return str(value)


def policy_text(policy: dict) -> str:
    """``{"id": "pod", "d": 2}`` as "pod (d=2)", the NAME=VALUE of --set."""
    params = ", ".join(f"{key}={fmt(value)}" for key, value in policy.items() if key != "id")
    return f"{policy['id']} ({params})" if params else str(policy["id"])


def speed_classes_text(classes: list) -> str:
    """ "50x1, 50x0.5", or for many classes their range."""
    if len(classes) <= MAX_CLASS_ROWS:
        return ", ".join(f"{c['count']}x{c['speed']:.6g}" for c in classes)
    speeds = [c["speed"] for c in classes]
    return f"speeds {min(speeds):.4g} to {max(speeds):.4g}, {len(classes)} distinct"


def interval_text(summary: dict, key: str) -> str:
    """The 95% interval of ``key`` in ``summary``, to follow its value; nothing when it has no finite one."""
    ci = summary.get(key + "_ci")
    return f"  95% CI [{ci[0]:.5g}, {ci[1]:.5g}]" if ci is not None and np.all(np.isfinite(ci)) else ""


def caches_text(caches: dict, load_all_misses) -> str:
    """The prefix caches of a system's metadata: blocks a server, prompts, prefill work and law, and
    the offered load with every prefill a miss."""
    blocks = fmt(caches["cache_blocks"])
    text = (
        f"caches {blocks} blocks a server, prompts {caches['prompts']}, prefill work {fmt(caches['prefill_work'])} "
        f"a block ({caches['prefill_law']})"
    )
    return text if load_all_misses is None else f"{text}, load with every prefill a miss {load_all_misses:.4f}"


def servers_text(groups: list) -> str:
    """The multi-slot servers of a system's metadata: count x (speed, concurrency, curve)."""
    return "slots " + ", ".join(
        f"{group['count']}x(speed {group['speed']:g}, c {group['concurrency']}, {group['rate_curve']})"
        for group in groups
    )


def format_result(result, speeds=None, per_server: bool = False) -> str:
    """A readable table of a SimulationResult: headline figures, the speed classes (when few),
    eta and xi_2 by speed bin (with --speed-bins) and, with ``per_server``, one row per server."""
    meta = result.metadata
    system = meta["system"]
    summary = result.summary
    buffer = "infinite" if system["buffer"] is None else system["buffer"]
    stopping = meta["stopping"]
    stop = f"{stopping['jobs']:,} jobs" if stopping["jobs"] else f"horizon {stopping['horizon']:g}"
    lines = [
        f"policy {policy_text(meta['policy'])}: {meta['policy_definition']}",
        f"servers {system['n_servers']} ({speed_classes_text(system['speed_classes'])}), "
        f"job types {system['n_types']}, load {system['load']:.4f}, buffer {buffer}, "
        f"sizes {fmt(system['job_sizes'])}",
        *([servers_text(system["servers"])] if "servers" in system else []),
        *([f"arrivals {system['arrivals']}"] if "arrivals" in system else []),
        *([caches_text(system["caches"], meta.get("load_all_misses"))] if "caches" in system else []),
        f"{result.replications} replication(s), {stop} after warm-up {stopping['warmup']:g}, seed {fmt(meta['seed'])}",
        "",
    ]
    for label, key in (
        ("mean response time", "mean_response_time"),
        ("mean waiting time", "mean_waiting_time"),
        ("P(wait)", "p_wait"),
        ("blocking probability", "blocking_probability"),
        ("mean number in system", "mean_number_in_system"),
        ("response time p50", "response_time_p50"),
        ("response time p95", "response_time_p95"),
        ("response time p99", "response_time_p99"),
    ):
        lines.append(f"  {label:<26}{summary[key]:>12.6g}{interval_text(summary, key)}")
    if "mean_ttft" in summary:
        for label, key in (
            ("mean time to first token", "mean_ttft"),
            ("time to first token p50", "ttft_p50"),
            ("time to first token p90", "ttft_p90"),
            ("time to first token p99", "ttft_p99"),
            ("cache hit ratio (blocks)", "cache_hit_ratio"),
            ("prefill saved per job", "mean_prefill_saved"),
        ):
            lines.append(f"  {label:<26}{summary[key]:>12.6g}{interval_text(summary, key)}")
    if "dispatchers" in meta:
        lines += ["", *dispatcher_lines(meta["dispatchers"], summary)]
    classes = summary["occupancy_by_class"]
    if len(classes) <= MAX_CLASS_ROWS:
        lines += ["", "  per speed class:   speed  servers  utilisation   s_1      s_2      s_3      C_m"]
        for c in classes:
            s = (c["s_m"] + [float("nan")] * 3)[:3]
            lines.append(
                f"  {'':<14}{c['speed']:>9.4g}{c['servers']:>9d}{c['utilisation']:>12.4f}"
                f"{s[0]:>9.4f}{s[1]:>9.4f}{s[2]:>9.4f}{c['C_m']:>9.4f}"
            )
    else:
        lines += [
            "",
            f"  {len(classes)} speed classes, not listed: --speed-bins K groups them, --per-server lists "
            "every server, --json has them all (occupancy_by_class)",
        ]
    profiles = [run.speed_profile for run in result.runs if run.speed_profile is not None]
    if profiles:
        lines += ["", *speed_bins_lines(profiles)]
    scaled = summary["halfin_whitt"]
    lines += ["", "  scaled as in 002:  " + "  ".join(f"{name} {value:.4g}" for name, value in scaled.items())]
    lines += [
        "",
        f"  events {summary['events']:,} in {summary['wall_seconds']:.2f} s "
        f"({summary['events_per_second'] / 1e6:.2f}M events/s); "
        f"Little's law gap {100 * summary['littles_law_gap']:.3f}%",
    ]
    if per_server:
        utilisation = np.mean([run.utilisation for run in result.runs], axis=0)
        queue = np.mean([run.mean_queue_length for run in result.runs], axis=0)
        lines += ["", *per_server_lines(speeds, queue, utilisation)]
    return "\n".join(lines)


def dispatcher_lines(dispatchers: dict, summary: dict) -> list:
    """The dispatchers' figures of a DispatchersResult: messages per job by kind, the estimates'
    error and age, the herd."""
    per_job = summary["messages_per_job"]
    kinds = ", ".join(f"{kind} {value:.4g}" for kind, value in per_job.items() if value and kind != "total")
    lines = [f"  {dispatchers['dispatchers']} dispatcher(s), updates {dispatchers['update_text']}"]
    lines.append(f"  {'messages per job':<26}{per_job['total']:>12.6g}  ({kinds or 'none'})")
    for label, key in (
        ("mean estimate error", "mean_estimate_error"),
        ("mean estimate bias", "mean_estimate_bias"),
        ("mean estimate age", "mean_estimate_age"),
        ("herd fraction", "herd_fraction"),
    ):
        lines.append(f"  {label:<26}{summary[key]:>12.6g}{interval_text(summary, key)}")
    lines.append(f"  {'':<26}(decisions onto another dispatcher's choice within {dispatchers['herd_window']:.4g})")
    return lines


def speed_bins_lines(profiles: list) -> list:
    """eta and xi_2 of 002 by speed bin, averaged over the replications."""
    first = profiles[0]
    edges = first["edges"]
    eta = np.mean([p["eta"] for p in profiles], axis=0)
    xi2 = np.mean([p["xi2"] for p in profiles], axis=0)
    lines = [
        "  by speed bin (002): eta = share of the idle server-time, TB = its speed-blind benchmark,",
        "  xi_2 = n^(-1/2) x mean number of servers holding 2 or more jobs",
        f"  {'speeds':>22}{'servers':>9}{'eta':>10}{'eta (TB)':>10}{'xi_2':>10}",
    ]
    for i in range(len(eta)):
        close = "]" if i == len(eta) - 1 else ")"
        span = f"[{edges[i]:.4g}, {edges[i + 1]:.4g}{close}"
        lines.append(f"  {span:>22}{first['servers'][i]:>9d}{eta[i]:>10.4f}{first['tb_eta'][i]:>10.4f}{xi2[i]:>10.4f}")
    return lines


def per_server_lines(speeds, queue, utilisation=None) -> list:
    """One row per server: its speed, utilisation (continuous model) and mean queue length."""
    head = f"  {'server':>8}{'speed':>10}" + (f"{'utilisation':>13}" if utilisation is not None else "")
    lines = ["  per server (averaged over the replications):", head + f"{'mean queue':>12}"]
    for s, mean_queue in enumerate(queue):
        row = f"  {s:>8d}{speeds[s]:>10.4g}" + (f"{utilisation[s]:>13.4f}" if utilisation is not None else "")
        lines.append(row + f"{mean_queue:>12.4f}")
    return lines


def format_slotted_result(result, speeds=None, per_server: bool = False) -> str:
    """A readable table of a SlottedResult."""
    meta, summary = result.metadata, result.summary
    system = dict(meta["system"])
    rate, load = system.pop("total_arrival_rate"), system.pop("load")
    classes, n_servers = system.pop("speed_classes"), system.pop("n_servers")
    system.pop("model", None)
    options = ", ".join(f"{key.removeprefix('n_').replace('_', ' ')} {fmt(value)}" for key, value in system.items())
    lines = [
        f"policy {policy_text(meta['policy'])}",
        f"  {meta['policy_definition']}",
        f"decides on: {meta['information']}",
        f"system: {n_servers} servers ({speed_classes_text(classes)}), arrival rate {rate:.6g} per slot, "
        f"load {load:.6g}",
        f"  {options}",
        f"{result.replications} replication(s), seed {fmt(meta['seed'])}",
        "",
    ]
    for label, key in (
        ("mean delay (slots)", "mean_delay"),
        ("mean number in system", "mean_number_in_system"),
        ("mean estimate error", "mean_estimate_error"),
        ("messages per arrival", "messages_per_arrival"),
        ("messages per decision", "messages_per_decision"),
    ):
        lines.append(f"  {label:<26}{summary[key]:>12.6g}{interval_text(summary, key)}")
    messages = ", ".join(
        f"{kind} {count:,}" if isinstance(count, (int, np.integer)) else f"{kind} {fmt(count)}"
        for kind, count in summary["messages"].items()
    )
    lines.append(f"  {'messages':<26}{messages}")
    if result.preference is not None:
        lines.append(
            f"  preference: tilted {fmt(summary['preference_tilted'])}, delta-tilted "
            f"{fmt(summary['preference_delta_tilted'])}, delta {summary['preference_delta_min']:.4g}"
        )
    lines.append(f"\n  {summary['slots_per_second']:,.0f} slots/s, {summary['events_per_second'] / 1e6:.2f}M events/s")
    if per_server:
        lines += ["", *per_server_lines(speeds, result.mean_queue_length)]
    return "\n".join(lines)


def format_meanfield(values: dict) -> str:
    """The text output of ``hetlb meanfield``: the limit's figures, per class, and the simulation
    beside them with --compare."""
    limit = values.get("limit", values)
    simulation = values.get("simulation")
    lines = [
        f"mean-field limit N -> infinity of {limit['policy']} {fmt(limit['parameters']) if limit['parameters'] else ''}".rstrip()
        + f": load {limit['load']:.6g}, lambda {limit['arrival_rate_per_server']:.6g} per server, "
        + f"buffer {limit['buffer'] if limit['buffer'] is not None else 'infinite'}",
        f"  {limit['description']}",
    ]
    if not limit["stable"]:
        lines.append("  unstable: some queues grow without bound in the limit (mean response time infinite)")
        return "\n".join(lines)
    rows = [
        ("mean response time", "mean_response_time"),
        ("mean waiting time", "mean_waiting_time"),
        ("P(wait)", "p_wait"),
        ("blocking probability", "blocking_probability"),
    ]
    header = f"  {'':<24}{'limit':>12}"
    if simulation:
        header += f"{'N = ' + str(simulation['n_servers']):>14}  95% CI"
    lines.append(header)
    for label, key in rows:
        line = f"  {label:<24}{limit[key]:>12.6g}"
        if simulation:
            line += f"{simulation[key]:>14.6g}"
            if key == "mean_response_time":
                low, high = simulation["mean_response_time_ci"]
                line += f"  [{low:.6g}, {high:.6g}], gap {values['gap']['mean_response_time']:+.2%}"
        lines.append(line)
    width = 24 if simulation else 10
    slots = "concurrency" in limit["classes"][0]  # servers of several slots: their concurrency and curve
    used = "utilised" if slots else "busy"
    lines.append(
        f"  {'class speed':>12}{'fraction':>10}"
        + (f"{'slots':>11}  {'rate curve':<22}" if slots else "")
        + f"{used:>{width}}{'job share':>11}  s_{{m,i}} for i = 1, 2, ..."
    )
    for m, row in enumerate(limit["classes"]):
        occupancy = ", ".join(f"{x:.4g}" for x in row["s_m"][:8]) + (", ..." if len(row["s_m"]) > 8 else "")
        busy = f"{row['utilisation']:.4g}"
        if simulation and simulation["utilisation"] is not None:
            busy += f" (sim {simulation['utilisation'][m]:.4g})"
        server = f"{row['concurrency']!s:>11}  {row['rate_curve']:<22}" if slots else ""
        lines.append(
            f"  {row['speed']:>12.6g}{row['fraction']:>10.4g}{server}{busy:>{width}}{row['job_share']:>11.4g}  {occupancy}"
        )
    lines.append(f"  the N-server system approaches the limit at rate {limit['finite_n_error']}")
    return "\n".join(lines)


def format_placement(values: dict) -> str:
    """The text output of ``hetlb place``: the best graph, its verification, the least graph of
    each family against the Fig. 3 formula."""
    reference = values["reference"]
    lines = [
        f"placement of {reference['n_ports']} job types on {reference['n_servers']} servers: mean response time "
        f"within {values['tolerance']:.1%} of C*/lambda = {values['lower_bound']:.6g}",
        f"  Fig. 3 formula of 000: port degree {reference['fig3_port_degree']:.1f}, "
        f"{reference['fig3_edges']:.0f} edges",
        f"  {'family':<10}{'parameter':>11}{'edges':>11}{'edges/Fig.3':>12}{'mean deg':>10}{'max deg':>9}"
        f"{'T / bound (95% CI)':>28}",
    ]
    for name, best in values["best_by_family"].items():
        if best is None:
            lines.append(f"  {name:<10}{'none passed':>11}")
            continue
        low, high = best["ratio_ci"]
        lines.append(
            f"  {name:<10}{best['parameter']:>11.4g}{best['edges']:>11}{best['edges'] / reference['fig3_edges']:>12.3f}"
            f"{best['mean_port_degree']:>10.1f}{best['max_port_degree']:>9}"
            f"{best['ratio_to_bound']:>12.4f} [{low:.4f}, {high:.4f}]"
        )
    for attempt in values["verifications"]:
        low, high = attempt["ratio_ci"]
        lines.append(
            f"re-simulated with fresh seeds: {attempt['family']} {attempt['parameter']:.4g} ({attempt['edges']} edges): "
            f"T / bound {attempt['ratio_to_bound']:.4f} [{low:.4f}, {high:.4f}] -> {attempt['verdict']}"
        )
    if values["verification"] is not None:
        lines.append(f"best: {values['best']['family']} ({values['best']['edges']} edges)")
        if "graph_file" in values:
            lines.append(f"graph written to {values['graph_file']} (hetlb simulate --graph explicit:file=...)")
    else:
        lines.append("no graph met the tolerance")
    lines += [f"note: {note}" for note in values["notes"]]
    if not values["search_complete"]:
        lines.append("the search stopped at its time budget; run the same command again to resume from the store")
    return "\n".join(lines)


def counted(n: int, noun: str) -> str:
    """ "1 server", "1,024 servers"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def format_graph(values: dict) -> str:
    """The graph report as text: the construction, the load it carries, the Assumption 2 search."""
    construction, routable = values["construction"], values["routable"]
    stats = construction["statistics"]
    seed = f", seed {construction['seed']}" if construction.get("seed") is not None else ""
    lines = [
        f"graph {construction['construction']}{seed}: {counted(stats['n_types'], 'job type')}, "
        f"{counted(stats['n_servers'], 'server')}, {counted(stats['edges'], 'edge')}",
        f"  servers per job type  {fmt(stats['port_degree'])}",
        f"  job types per server  {fmt(stats['server_degree'])}",
    ]
    if stats["ports_without_server"] or stats["servers_without_port"]:
        lines.append(
            f"  job types without a server {stats['ports_without_server']}, "
            f"servers without a job type {stats['servers_without_port']}"
        )
    bottleneck = routable["bottleneck"]
    verdict = "carries" if routable["can_carry_offered_load"] else "cannot carry"
    lines += [
        "",
        f"capacity: the graph {verdict} the offered load {routable['offered_load_fraction']:.4g} of the total speed; "
        f"it carries up to {routable['max_load_fraction']:.6g} with this mix of job types",
        f"  bottleneck ({bottleneck['kind']}): {counted(bottleneck['ports'], 'job type')} on "
        f"{counted(bottleneck['servers'], 'server')}, "
        f"arrival rate {bottleneck['arrival_rate']:.6g} against speed {bottleneck['capacity']:.6g}",
    ]
    search = values.get("assumption2")
    if search is not None:
        verdict = "holds for every subset tried" if search["holds_for_subsets_tried"] else "fails"
        lines += [
            "",
            f"Assumption 2 of 000 (epsilon {search['epsilon']:.4g}, b {search['b']}, K {search['K']}): {verdict}",
        ]
        for group in search["groups"]:
            head = (
                f"  condition {group['condition']} (servers of {group['servers']}, {group['candidate_servers']} "
                f"candidates, subsets of {group['min_subset_size']})"
            )
            if group["vacuous"]:
                lines.append(f"{head}: vacuous, no subset that large")
                continue
            lines.append(
                f"{head}: worst D_I found {group['worst_D_found']:.6g} against the threshold "
                f"{group['threshold']:.4g} ({'holds' if group['holds_for_subsets_tried'] else 'fails'}; "
                f"{group['subsets_evaluated']:,} subsets, {group['found_by']})"
            )
        lines.append(f"  {search['note']}")
    return "\n".join(lines)


def format_exact(values: dict) -> str:
    """The text output of ``hetlb exact``: a line per figure of the exact solution."""
    lines = []
    width = max(24, max(len(key) + 2 for key in values))
    for key, value in values.items():
        shown = (
            ", ".join(f"{v:.6g}" for v in value)
            if isinstance(value, list)
            else (f"{value:.8g}" if isinstance(value, float) else value)
        )
        lines.append(f"{key:<{width}}{shown}")
    return "\n".join(lines)


def format_bound(values: dict) -> str:
    """The text output of ``hetlb bound``: C* and the bound C*/lambda (Proposition 1 of 000, or its
    extension to multi-slot servers, docs/reference/model.md)."""
    source = "its extension to multi-slot servers" if values.get("multi_slot") else "Proposition 1 of paper 000"
    text = (
        f"load {values['load']:.6g}: K = {values['K']}, C* = {values['c_star']:.6g}, "
        f"mean response time >= C*/lambda = {values['lower_bound']:.6g}  ({source})"
    )
    caches = values.get("caches")
    if caches is not None:
        text += (
            f"\ncaches: any policy carries at most lambda = {caches['rate_all_hits']:.6g} (load "
            f"{caches['load_all_hits']:.6g}), every reusable prefix a hit (work {caches['least_work']:.6g} a job); "
            f"with no hit {caches['rate_no_hits']:.6g} (load {caches['load_no_hits']:.6g}, work {caches['most_work']:.6g})"
        )
    return text


def format_policies(specs) -> str:
    """The text output of ``hetlb policies``: each registry entry's id and definition, then its
    source, models and parameters."""
    lines = []
    for spec in specs:
        params = ", ".join(f"{name}={default} ({text})" for name, (default, text, _) in spec.parameters.items())
        lines.append(f"{spec.id:<16}{spec.definition}")
        lines.append(
            f"{'':<16}source: {spec.reference}; models: {', '.join(spec.models)}"
            + (f"; parameters: {params}" if params else "")
        )
    return "\n".join(lines)


SWEEP_COLUMNS = (
    "replications",
    "mean_response_time",
    "mean_response_time_ci_low",
    "mean_response_time_ci_high",
    "blocking_probability",
    "speed_lower_bound",
    "mean_delay",
    "mean_delay_ci_low",
    "mean_delay_ci_high",
    "messages_per_arrival",
)
"""The summary columns ``hetlb sweep`` prints after the axes, those of the sweep's model (the
continuous model's first, then the slotted model's: a sweep over system.model has both)."""


def format_sweep(result, store: str, out: str) -> str:
    """The text output of ``hetlb sweep``: the summary's axes and SWEEP_COLUMNS, and what was
    computed and reused."""
    summary = result.summary
    axes = [c for c in summary.columns if "." in c]
    shown = summary[axes + [c for c in SWEEP_COLUMNS if c in summary.columns]]
    return (
        shown.to_string(index=False, float_format=lambda v: f"{v:.5g}")
        + f"\n\n{result.computed} runs computed, {result.reused} reused from {store}, "
        f"{result.wall_seconds:.1f} s; tables in {out}"
    )


def format_sweeps(sweeps: list) -> str:
    """The text output of ``hetlb store`` without a name: a line per sweep of the store."""
    from hetlb.experiments.store import resume_note

    return "".join(
        f"{entry['name']:<32}{entry['finished']:>8} of {entry['runs']} runs finished{resume_note(entry)}\n"
        for entry in sweeps
    )


def format_claims(report: dict, name: str, out: str) -> str:
    """The text output of ``hetlb reproduce``: each claim's status (with its cause and evidence
    when it has one), then where the outputs of reproduction ``name`` went."""
    lines = []
    for claim in report["claims"]:
        status = "FAILS" if claim["status"] == "fails" else claim["status"]
        lines.append(f"{status:<9} {claim['id']:<10}{claim['statement']}")
        if claim["cause"]:
            lines.append(f"{'':<20}cause: {claim['cause']}\n{'':<20}evidence: {claim['evidence']}")
    lines += ["", f"{report['title']}: {report['wall_seconds']:.0f} s; points.csv, {name}.png and claims.json in {out}"]
    return "\n".join(lines)


def format_tuning(values: dict, system, jobs: int, seed: int) -> str:
    """The text output of ``hetlb tune``: the grid of (p_fast, p_slow) with the best point marked."""
    best = (values["p_fast"], values["p_slow"])
    lines = [
        f"jsq-df-ds on {system.n_servers} servers at load {system.load:.4g}: "
        f"{len(values['table'])} grid points, {jobs:,} jobs each, common random numbers (seed {seed})",
        f"  {'p_fast':>8}{'p_slow':>8}{'mean T':>12}{'blocking':>12}",
    ]
    for row in values["table"]:
        mark = "  <- best" if (row["p_fast"], row["p_slow"]) == best else ""
        lines.append(
            f"  {row['p_fast']:>8.3g}{row['p_slow']:>8.3g}{row['mean_response_time']:>12.5g}"
            f"{row['blocking_probability']:>12.3g}{mark}"
        )
    lines.append("  (evaluate the best point on fresh seeds before reporting it: its tuning run is biased low)")
    return "\n".join(lines)


def format_diffusion(values: dict) -> str:
    """The text output of ``hetlb diffusion``: the stationary means of the limit, with their
    standard errors over the paths."""
    lines = [
        f"diffusion limit of {values['policy']} (002), c = {values['excess_capacity']:g}: stationary means over "
        f"{values['paths']} paths, step {values['step']:.3g}, burn-in {values['burn_in']:.3g}, "
        f"horizon {values['horizon']:.3g}"
    ]
    for name, value in values["stationary"].items():
        lines.append(f"  {name:<20}{value['mean']:>10.4f}  +- {value['standard_error']:.4f} (standard error)")
    return "\n".join(lines)
