"""Multiple-choice questions for the hint protocol (`faithgrpo.eval.metrics.hints`): the question type and its builders.

`build_multiple_choice` makes 4 options A–D from one correct answer and distractors (seeded shuffle);
`causal_multiple_choice` and `reasoning_gym_multiple_choice` draw the distractors from a causal
problem's invalid answers or a reasoning-gym entry.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LETTERS",
    "VISUAL_MARKER",
    "MultipleChoice",
    "build_multiple_choice",
    "causal_multiple_choice",
    "option_key",
    "reasoning_gym_multiple_choice",
    "seeded_random",
]

LETTERS = "ABCDEFGHIJ"
VISUAL_MARKER = "■"


@dataclass(frozen=True)
class MultipleChoice:
    """A multiple-choice question: option texts in display order and the correct letter.

    Attributes:
        question: the question text (without options).
        options: option texts, labelled ``A``, ``B``, … in this order.
        correct: letter of the one correct option.
        id: an identifier carried into pairs and reports.
    """

    question: str
    options: tuple[str, ...]
    correct: str
    id: str = ""

    def __post_init__(self) -> None:
        if not 2 <= len(self.options) <= len(LETTERS):
            raise ValueError(
                f"a multiple-choice question needs 2..{len(LETTERS)} options, got {len(self.options)}"
            )
        if self.correct not in self.letters:
            raise ValueError(f"correct letter {self.correct!r} is not one of {self.letters}")

    @property
    def n_options(self) -> int:
        return len(self.options)

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]

    @property
    def wrong_letters(self) -> str:
        return "".join(letter for letter in self.letters if letter != self.correct)

    def option(self, letter: str) -> str:
        return self.options[self.letters.index(letter)]

    def render(self, marked: str | None = None) -> str:
        """The question followed by ``(A) …`` option lines; ``marked`` prefixes one option with ■."""
        lines = [self.question.rstrip(), ""]
        for letter, text in zip(self.letters, self.options):
            prefix = f"{VISUAL_MARKER} " if letter == marked else ""
            lines.append(f"{prefix}({letter}) {text}")
        return "\n".join(lines)


def seeded_random(seed: int, *salt: Any) -> random.Random:
    """A `random.Random` seeded from ``seed`` and any salt, stable across processes."""
    digest = hashlib.sha256(repr((int(seed), *map(str, salt))).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "little"))


def option_key(text: str) -> str:
    """An option text with whitespace collapsed and case folded (how options are compared)."""
    return " ".join(str(text).split()).casefold()


def build_multiple_choice(
    question: str,
    correct_answer: str,
    invalid_answers: Iterable[str],
    *,
    n_options: int = 4,
    seed: int = 0,
    id: str = "",
) -> MultipleChoice:
    """Build a multiple-choice question with one correct option and ``n_options − 1`` distractors.

    Distractors are drawn (seeded) from ``invalid_answers`` after removing duplicates and anything
    equal to the correct answer up to case and whitespace; the options are then shuffled. The seed
    is mixed with the question text, so one global seed still varies the correct position.

    Args:
        question (`str`): the question text.
        correct_answer (`str`): the correct option text.
        invalid_answers (`Iterable[str]`): pool of wrong answers.
        n_options (`int`, *optional*, defaults to 4): options per question.
        seed (`int`, *optional*, defaults to 0): seed of the draw and shuffle.
        id (`str`, *optional*): identifier carried along.

    Returns:
        `MultipleChoice`.

    Raises:
        ValueError: the pool holds fewer than ``n_options − 1`` distinct wrong answers.

    Example:
        >>> mc = build_multiple_choice("2 + 2?", "4", ["3", "5", "22", "4"], seed=0)
        >>> mc.option(mc.correct), sorted(mc.options)
        ('4', ['22', '3', '4', '5'])
    """
    if not 2 <= n_options <= len(LETTERS):
        raise ValueError(f"n_options must be in 2..{len(LETTERS)}, got {n_options}")
    seen = {option_key(correct_answer)}
    pool = []
    for answer in invalid_answers:
        key = option_key(answer)
        if key and key not in seen:
            seen.add(key)
            pool.append(str(answer))
    if len(pool) < n_options - 1:
        raise ValueError(
            f"need {n_options - 1} distinct wrong answers for a {n_options}-option question, got "
            f"{len(pool)}: supply a larger pool of invalid answers or lower n_options"
        )
    rng = seeded_random(seed, "mc", question, correct_answer)
    options = [str(correct_answer), *rng.sample(pool, n_options - 1)]
    rng.shuffle(options)
    correct = LETTERS[options.index(str(correct_answer))]
    return MultipleChoice(question, tuple(options), correct, id)


def causal_multiple_choice(
    problem: Mapping | str,
    *,
    question: str | None = None,
    n_options: int = 4,
    seed: int = 0,
    max_candidates: int = 512,
    id: str = "",
) -> MultipleChoice:
    """A multiple-choice version of a causal problem: one valid answer, invalid distractors.

    The correct option is the first valid answer in the query kind's deterministic enumeration.
    Distractors are candidate answers of the same shape (node sets of size 0–3, single nodes, node
    cycles) that the graph predicate rejects, so exactly one option is valid even for
    find-one-valid queries with several valid answers.

    Args:
        problem: the problem dict or JSON string.
        question (`str`, *optional*): question text; defaults to ``problem["text"]``.
        n_options, seed, id: see `build_multiple_choice`.
        max_candidates (`int`, *optional*, defaults to 512): bound on the candidates tried.

    Raises:
        ValueError: yes/no kinds (only two distinct answers exist), no valid answer, or too few
            invalid candidates.
    """
    from faithgrpo.verifier.queries import load_problem
    from faithgrpo.verifier.query_kinds import QUERY_KINDS

    graph, query, cpts = load_problem(problem)
    problem_dict = problem if isinstance(problem, Mapping) else None
    kind = QUERY_KINDS[query["kind"]]
    if kind.answer_type in ("yes_no", "ate"):
        raise ValueError(
            f"{kind.name} has yes/no answers, too few for a {n_options}-option question; "
            "use set-, node- or cycle-valued query kinds"
        )
    valid = kind.valid_answers(graph, query, limit=1, cpts=cpts)
    if not valid:
        raise ValueError(f"problem has no valid answer for {kind.name}; it cannot be made multiple-choice")
    correct = kind.format_answer(valid[0])
    rng = seeded_random(seed, "causal-candidates", correct, query.get("kind"))
    # Plausible distractors first: sets that avoid the query's own nodes (a set containing the
    # treatment is wrong at a glance); the query nodes only join when those run out.
    roles = set()
    for role in kind.roles:
        value = query.get(role)
        roles.update([value] if isinstance(value, str) else list(value or []))
    others = [v for v in graph.nodes if v not in roles]
    invalid: list[str] = []
    for nodes in (others, list(graph.nodes)):
        for value in _candidates(kind.answer_type, nodes, rng)[:max_candidates]:
            if not kind.is_valid(graph, query, value, cpts):
                invalid.append(kind.format_answer(value))
        if len(set(invalid)) >= n_options - 1:
            break
    text = question if question is not None else str((problem_dict or {}).get("text", ""))
    if not text:
        from faithgrpo.verifier.queries import format_query

        text = f"Graph: {graph.edge_text()}\nQuery: {format_query(query)}"
    return build_multiple_choice(text, correct, invalid, n_options=n_options, seed=seed, id=id)


def _candidates(answer_type: str, nodes: list[str], rng: random.Random) -> list[Any]:
    """Candidate answers of one shape, deterministic given ``rng``: small node sets, nodes, node cycles."""
    out: list[Any] = []
    if answer_type == "set":
        out = [frozenset(), *(frozenset({v}) for v in nodes)]
        for size in (2, 3):
            out += [frozenset(rng.sample(nodes, size)) for _ in range(64) if len(nodes) >= size]
    elif answer_type == "node":
        out = list(nodes)
    elif answer_type == "cycle":
        for size in (2, 3, 4):
            out += [tuple(rng.sample(nodes, size)) for _ in range(64) if len(nodes) >= size]
    return out


def reasoning_gym_multiple_choice(
    entries: Sequence[Mapping],
    index: int,
    *,
    n_options: int = 4,
    seed: int = 0,
    score_answer: Callable[[str, Mapping], float] | None = None,
) -> MultipleChoice:
    """A multiple-choice version of reasoning-gym entry ``entries[index]``.

    Distractors are the answers of the *other* entries of the same dataset that the task's own
    ``score_answer`` rejects (score < 1) for this entry.

    Args:
        entries: reasoning-gym entries (``question``, ``answer``, ``metadata.source_dataset``).
        index: which entry to turn into a question.
        n_options, seed: see `build_multiple_choice`.
        score_answer: override of the task's scorer (defaults to reasoning-gym's for the dataset).

    Raises:
        ValueError: too few distinct rejected answers among the other entries.
    """
    entry = entries[index]
    if score_answer is None:
        import reasoning_gym

        source = (entry.get("metadata") or {}).get("source_dataset")
        if not isinstance(source, str):
            raise ValueError("entry['metadata']['source_dataset'] must name the reasoning-gym task")
        score_answer = reasoning_gym.get_score_answer_fn(source)
    correct = str(entry["answer"])
    pool = []
    for j, other in enumerate(entries):
        candidate = str(other.get("answer", ""))
        if j == index or option_key(candidate) == option_key(correct):
            continue
        if float(score_answer(candidate, entry)) < 1.0:
            pool.append(candidate)
    return build_multiple_choice(
        str(entry["question"]), correct, pool, n_options=n_options, seed=seed, id=str(index)
    )
