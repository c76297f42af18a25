"""faithgrpo.verifier: the causal semantics CALVER checks a trace against, apart from the tasks
that generate problems (importing it loads no dataset library).

===================  =====================================================================
where                what
===================  =====================================================================
``graphs/``          the graph type (``model``), edge text and paths (``edges``), graph criteria
                     (``criteria``, ``separation``, ``paths``, ``ate``), random graph families,
                     ATE strata
``query_kinds.py``   the query kinds: roles, graph kinds, answer type, predicate, enumeration
``query_predicates`` each kind's well-formedness check, validity predicate and enumeration
``queries.py``       the problem JSON (``load_problem``), query restatement and matching,
                     answer normalisation and grading (``grade_answer``), the problem ``MODES``
``answers.py``       bounded readers of answer values (sets, nodes, yes/no, cycles)
``strategy_methods`` the method names a STRATEGY slot may cite per query kind
``certificates/``    the DERIVATION claim grammar (``claims``), claim truth (``claim_checks``),
                     certification (``derivation``)
===================  =====================================================================

Imports run one way: ``graphs`` <- the query modules <- ``certificates``; nothing here imports
``faithgrpo.tasks`` (which produces problems and gold traces) or the rewards.
"""

from faithgrpo.verifier.graphs.edges import parse_graph
from faithgrpo.verifier.graphs.families import FAMILIES
from faithgrpo.verifier.graphs.model import CausalGraph, GraphParseError
from faithgrpo.verifier.queries import MODES, format_query, grade_answer, load_problem, normalize_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS, QueryKind

__all__ = [
    "FAMILIES",
    "MODES",
    "QUERY_KINDS",
    "CausalGraph",
    "GraphParseError",
    "QueryKind",
    "format_query",
    "grade_answer",
    "load_problem",
    "normalize_answer",
    "parse_graph",
]
