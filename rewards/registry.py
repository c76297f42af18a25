"""Reward composition: reward names -> TRL reward callables (docs/rewards.md, "Composition").

Weights are not composed here: pass them to TRL as ``GRPOConfig(reward_weights=[...])``, in the
order of the names. Options are routed to a reward by prefix (``cros_num_scrambles=2`` goes to
CRoS as ``num_scrambles=2``), so one flat mapping from a YAML config configures every reward.
Gating is an option, not a fork: ``cros_gate="correct"`` scores CRoS only on completions whose
answer the outcome grader accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from faithgrpo.text import completion_text

REWARD_NAMES = ("outcome", "format", "trace_format", "cros", "calver", "calver_gated", "calver_certified")


def get_reward_funcs(names: str | Iterable[str], **options: Any) -> list[Callable[..., list[float | None]]]:
    """Build TRL reward functions by name.

    Args:
        names: reward names (a list, or one comma-separated string) from ``outcome``, ``format``,
            ``trace_format``, ``cros``, ``calver``, ``calver_gated``, ``calver_certified`` (the
            CALVER variants, :data:`~faithgrpo.rewards.calver.reward.VARIANTS`).
        **options: ``<name>_<option>=value`` routed to that reward:

            - ``outcome_strict`` (bool, default True): reasoning-gym partial credit below 1.0 -> 0.0.
            - ``cros_<arg>``: any :class:`~faithgrpo.rewards.cros.reward.CRoSReward` argument, e.g.
              ``cros_reference`` (path, hub id, ``"embedded"``, a model, or None to bind later),
              ``cros_tokenizer``, ``cros_num_scrambles``, ``cros_seed``, ``cros_max_length``,
              ``cros_batch_size``, ``cros_gate`` (``"none"``/``"correct"``; ``"correct"`` uses the
              outcome grader unless ``cros_is_correct`` is given), ``cros_undefined``,
              ``cros_num_generations``.
            - ``calver_<arg>``: keyword arguments of
              :func:`~faithgrpo.rewards.calver.reward.make_calver_reward` (e.g. ``calver_graph_check``);
              ``calver_gated_<arg>`` and ``calver_certified_<arg>`` configure those variants.

    Returns:
        Reward callables in the order of ``names``, each with ``__name__`` equal to its name (TRL
        logs ``rewards/<name>/mean``).

    Raises:
        ValueError: an unknown or repeated reward name, or an option for no requested reward.

    Example:
        >>> funcs = get_reward_funcs("outcome,format")
        >>> [f.__name__ for f in funcs]
        ['outcome', 'format']
    """
    requested = (
        [n.strip() for n in names.split(",")] if isinstance(names, str) else [str(n).strip() for n in names]
    )
    requested = [n for n in requested if n]
    if not requested:
        raise ValueError(f"No reward names given; choose from {', '.join(REWARD_NAMES)}.")
    unknown = [n for n in requested if n not in REWARD_NAMES]
    if unknown:
        raise ValueError(f"Unknown reward name(s) {unknown}; choose from {', '.join(REWARD_NAMES)}.")
    repeated = sorted({n for n in requested if requested.count(n) > 1})
    if repeated:
        raise ValueError(f"Reward name(s) {repeated} given twice; list each reward once and set its weight.")

    routed: dict[str, dict[str, Any]] = {name: {} for name in REWARD_NAMES}
    for key, value in options.items():
        name = next((n for n in sorted(REWARD_NAMES, key=len, reverse=True) if key.startswith(n + "_")), None)
        if name is None or name not in requested:
            raise ValueError(
                f"Option {key!r} does not belong to a requested reward ({', '.join(requested)}); "
                "options are named <reward>_<option>, e.g. cros_num_scrambles."
            )
        routed[name][key[len(name) + 1 :]] = value
    return [_BUILDERS[name](**routed[name]) for name in requested]


def is_answer_correct(prompt: Any, completion: Any, **row: Any) -> bool:
    """The outcome grader as a predicate (the default CRoS gate): does the answer earn 1.0?"""
    from faithgrpo.rewards.outcome import grade_row

    score, _, _ = grade_row(completion_text(completion), row)
    return score == 1.0


def _build_outcome(strict: bool = True):
    from faithgrpo.rewards.outcome import make_outcome_reward

    return make_outcome_reward(strict=strict)


def _build_format():
    from faithgrpo.rewards.format import format_reward

    return format_reward


def _build_trace_format():
    from faithgrpo.rewards.format import trace_format_reward

    return trace_format_reward


def _build_cros(**kwargs: Any):
    from faithgrpo.rewards.cros.reward import CRoSReward

    if kwargs.get("gate") == "correct" and kwargs.get("is_correct") is None:
        kwargs["is_correct"] = is_answer_correct
    return CRoSReward(**kwargs)


def _calver_builder(variant: str) -> Callable[..., Any]:
    def build(**kwargs: Any):
        from faithgrpo.rewards.calver import reward

        if "variant" in kwargs:
            raise ValueError(
                f"the CALVER variant is the reward's name ({', '.join(reward.VARIANTS.values())})"
            )
        if kwargs:
            return reward.make_calver_reward(variant=variant, **kwargs)
        defaults = {"sum": reward.calver_reward, "gated": reward.calver_gated_reward,
                    "certified": reward.calver_certified_reward}  # fmt: skip
        return defaults[variant]

    return build


_BUILDERS: dict[str, Callable[..., Any]] = {
    "outcome": _build_outcome,
    "format": _build_format,
    "trace_format": _build_trace_format,
    "cros": _build_cros,
    "calver": _calver_builder("sum"),
    "calver_gated": _calver_builder("gated"),
    "calver_certified": _calver_builder("certified"),
}
