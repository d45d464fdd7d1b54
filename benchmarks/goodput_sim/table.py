"""The rows bench_goodput.py prints: every fleet x interruptions a day x policy, at the low, mid and high end of
the cost ranges."""

from __future__ import annotations

from benchmarks.goodput_sim import events
from benchmarks.goodput_sim.costs import costs_at
from benchmarks.goodput_sim.policies import POLICIES
from benchmarks.goodput_sim.profiles import Fleet
from benchmarks.goodput_sim.simulate import simulate

RATES = (0.5, 1.0, 2.0, 4.0)
TARGETS = {1.0: 0.97, 4.0: 0.92}  # the issue's: the last policy on the p4d fleet at the mid-range costs


def rows(fleet: Fleet, *, samples: int, rates: tuple[float, ...] = RATES,
         mix: events.Mix = events.DEFAULT_MIX) -> list[dict]:
    out = []
    costs = {end: costs_at(fleet, end) for end in ("low", "mid", "high")}
    for rate in rates:
        for policy in POLICIES:
            result = {end: simulate(c, policy, rate, samples=samples, mix=mix) for end, c in costs.items()}
            mid = result["mid"]
            out.append({
                "fleet": f"{fleet.instances} x {fleet.instance_type}", "interruptions_per_day": rate,
                "policy": policy.name, "goodput": round(mid["goodput"], 5),
                "goodput_low_costs": round(result["low"]["goodput"], 5),
                "goodput_high_costs": round(result["high"]["goodput"], 5),
                "lost_instance_hours": round(mid["lost_hours_per_instance"] * fleet.instances, 2),
                "wall_hours": round(mid["wall_hours"], 3),
                "provisioning_hours_unbilled": round(mid["provisioning_hours"], 3),
                "parts": {k: round(v, 5) for k, v in mid["parts"].items()},
            })
    return out


LEGEND = ("columns at mid costs, shares of billed time: replayed = steps run again + interrupted attempts' tails "
          "after their last step; restarts = image pull, downloads, start-up (the first start's included) and "
          "recovery in place; stalled = until a stall or a lost instance is detected; saves = the loop's blocking "
          "save time. lost inst-h = (billed - work) x instances. Provisioning is wall time, not billed.")


def markdown(table: list[dict]) -> list[str]:
    head = ("per day", "policy", "goodput (low / mid / high costs)", "lost inst-h", "replayed", "restarts",
            "stalled", "saves")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        p = r["parts"]
        restarts = p["downloading"] + p["startup"] + p["recovering"]
        out.append(f"| {r['interruptions_per_day']:g} | {r['policy']} | {r['goodput_low_costs']:.1%} / "
                   f"**{r['goodput']:.1%}** / {r['goodput_high_costs']:.1%} | {r['lost_instance_hours']:.1f} | "
                   f"{p['replayed']:.2%} | {restarts:.2%} | {p['stalled']:.2%} | {p['checkpointing']:.2%} |")
    return [*out, "", LEGEND]


def verdict(table: list[dict]) -> list[str]:
    """The issue's targets for the last policy at mid-range costs, met or not, with the figures."""
    last = POLICIES[-1].name
    lines = []
    for rate, target in TARGETS.items():
        (row,) = [r for r in table if r["interruptions_per_day"] == rate and r["policy"] == last]
        ok = "met" if row["goodput"] >= target else "NOT met"
        lines.append(f"{row['fleet']}, {rate:g} interruption(s)/day, last policy, mid costs: {row['goodput']:.1%} "
                     f"(target >= {target:.0%}: {ok}; {row['goodput_low_costs']:.1%} to "
                     f"{row['goodput_high_costs']:.1%} across the ranges)")
    return lines


def restart_ratio(fleet: Fleet) -> str:
    """What a new job's restart takes (wall: provisioning, image pull, downloads, start-up, restore) against a
    fast recovery in place (HyperPod's range), at each end of the ranges (the issue's fleet ratio, >= 5x)."""
    out = []
    for end in ("low", "mid", "high"):
        c = costs_at(fleet, end)
        new = (c.provisioning + c.image_pull + c.data_download + c.checkpoint_download + c.imports + c.pg_join
               + c.data_load + c.model_load + c.cache_load + c.restore)
        out.append(f"{end} {new:.0f} s vs {c.in_place:.0f} s = {new / c.in_place:.1f}x")
    return (f"{fleet.instances} x {fleet.instance_type}: a new job's restart vs a recovery in place (wall): "
            + "; ".join(out))
