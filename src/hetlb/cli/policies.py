"""hetlb policies: the registered policies, and their conformance check."""

from __future__ import annotations

from hetlb.cli.flags import add_output_flags, add_plugin_flag, load_plugin_flags
from hetlb.cli.text import format_policies, print_json


def add_flags(parser) -> None:
    """The flags of ``hetlb policies``."""
    parser.add_argument(
        "--check",
        nargs="*",
        metavar="ID",
        help="run the conformance check (hetlb.check_policy) of these policies, or of all; exit 1 if one fails",
    )
    add_plugin_flag(parser)
    add_output_flags(parser)


def run(args) -> int:
    """Print the registered policies (text or --json), or with --check their conformance check."""
    from hetlb.policies import POLICIES

    load_plugin_flags(args)
    if args.check is not None:
        return check_policies(args, args.check or list(POLICIES))
    if args.json:
        print_json([describe_policy(spec) for spec in POLICIES.values()])
        return 0
    print(format_policies(POLICIES.values()))
    return 0


def describe_policy(spec) -> dict:
    """A registry entry as JSON: every field but the exact rule, which is said by whether it exists."""
    from hetlb.policies.registry import describe_kind

    return {
        "id": spec.id,
        "definition": spec.definition,
        "reference": spec.reference,
        "models": list(spec.models),
        "parameters": {
            name: {"default": default, "description": text, "rule": describe_kind(rule)}
            for name, (default, text, rule) in spec.parameters.items()
        },
        "ranks_whole_set": spec.ranks_whole_set,
        "integer_keys": spec.integer_keys,
        "idle_order": spec.idle_order,
        "on_local_estimates": spec.on_local_estimates,
        "decides_on_estimates": spec.decides_on_estimates,
        "decides_on_load": spec.decides_on_load,
        "led_alias": spec.led_alias,
        "own_selection_key": spec.selection_key is not None,
        "exact_solver": spec.exact_rule is not None,
        "tie_break": spec.tie_break,
        "diffusion_limit": spec.diffusion_limit,
        "mean_field_rule": None if spec.mean_field is None else spec.mean_field.rule,
        "slotted_information": spec.slotted_information,
    }


def check_policies(args, policy_ids: list) -> int:
    """``hetlb policies --check``: the conformance check of each policy; exit 1 if one fails."""
    from hetlb.conformance import check_policy

    reports = [check_policy(policy_id) for policy_id in policy_ids]
    if args.json:
        print_json(
            [
                {
                    "policy": report.policy,
                    "passed": report.passed,
                    "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in report.checks],
                }
                for report in reports
            ]
        )
    else:
        print("\n".join(report.summary for report in reports))
    return 0 if all(report.passed for report in reports) else 1
